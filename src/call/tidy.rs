//! Arguments made to say what the question says, after decoding: a small model adds optional
//! arguments nobody asked for (`"location": "Work"`, `"device": "phone"`) and rewrites the
//! strings it was given (`"Dentist Appointment"` for "Dentist appointment"), and leaves out
//! choices the question makes ("vegan recipes" with no `diet`). Five rules, each reported:
//!
//! 1. An optional argument equal to the definition's `default` is left out: the function
//!    applies it anyway, and the call says only what was asked.
//! 2. An optional string, number or object argument whose value the question does not contain
//!    is left out: it was made up (an object, when any string or number in it was: a whole
//!    shipping address where the question gives none). (Enums and booleans are kept: their
//!    values are choices the question implies, not text it contains.)
//! 3. A string argument equal to a string the question quotes, up to case, spacing and
//!    punctuation at its ends, becomes exactly the quoted text.
//! 4. An optional enum parameter the call leaves out, exactly one of whose values (other than
//!    its default, of three letters or more) the question names as whole words, and which no
//!    other argument already holds, is given that value.
//! 5. (Before the others.) A one-word string argument (free text: no enum, pattern or format) that the question
//!    does not contain, but whose near copy it does as a name (`"Lisboa"` where the question
//!    says "Lisbon": same first three letters, at most two edits), becomes the question's word.
//!
//! Required arguments are never removed, so a call stays valid against its definition.
//!
//! A small model also closes a call before the optional arguments the question does give
//! ("open now", "at least 7.5", "on 2024-11-02"). [`fill_candidates`] names the left-out
//! parameters the question may hold a value for; the caller decodes the call again with those
//! required, and [`fill_in`] takes from that call only the values the question holds and no
//! other argument already has: a number it writes, a string in its words, `true` for a flag
//! whose name it says.

use serde_json::{Map, Value};

use super::{score::values_match, Call, Function};

/// The strings in `question` between matching quotes (`"…"`, `'…'`, `“…”`).
fn quoted(question: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('"', '"'), ('“', '”'), ('\'', '\'')] {
        let mut rest = question;
        while let Some(a) = rest.find(open) {
            // An apostrophe inside a word (`I'm`) opens nothing.
            if open == '\'' && rest[..a].chars().last().is_some_and(char::is_alphanumeric) {
                rest = &rest[a + 1..];
                continue;
            }
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            let inner = &after[..b];
            if !inner.trim().is_empty() {
                out.push(inner.to_string());
            }
            rest = &after[b + close.len_utf8()..];
        }
    }
    out
}

/// Lower case, letters and digits only, single spaces.
fn loose(s: &str) -> String {
    s.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the question contains `value`: a string's words in order, a number's digits (as
/// written, with or without thousands separators), every element of an array, every member of
/// an object (`schema`'s, whose enum and const members are choices, not text: they pass).
fn grounded(
    value: &Value,
    schema: Option<&Value>,
    question_words: &str,
    question_numbers: &[f64],
) -> bool {
    let member = |k: &str| {
        schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(k))
    };
    let choice =
        |s: Option<&Value>| s.is_some_and(|s| s.get("enum").is_some() || s.get("const").is_some());
    match value {
        Value::Object(m) => m.iter().all(|(k, v)| {
            choice(member(k)) || grounded(v, member(k), question_words, question_numbers)
        }),
        Value::String(s) => {
            let w = loose(s);
            !w.is_empty() && format!(" {question_words} ").contains(&format!(" {w} "))
        }
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|x| question_numbers.iter().any(|q| (q - x).abs() < 1e-9)),
        Value::Array(items) => items.iter().all(|v| {
            let item = schema.and_then(|s| s.get("items"));
            choice(item) || grounded(v, item, question_words, question_numbers)
        }),
        _ => true,
    }
}

/// The numbers written in `text` (`1,250` is 1250; `4.9%` is 4.9).
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let digit_next = chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || ((c == '.' || c == ',') && !cur.is_empty() && digit_next) {
            if c != ',' {
                cur.push(c);
            }
        } else if !cur.is_empty() {
            out.extend(cur.parse::<f64>().ok());
            cur.clear();
        }
    }
    out.extend(cur.parse::<f64>().ok());
    out
}

/// The names `function`'s parameters list as `required`.
fn required_names(function: &Function) -> Vec<&str> {
    function
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Words that say nothing of what a flag is for (`include_hidden`, `unread_only`): a flag's
/// name is said by a question that says its other words.
const FLAG_FILLER: &[&str] = &[
    "include", "includes", "only", "is", "has", "show", "use", "enable", "enabled", "allow",
    "with", "should", "do", "flag",
];

/// The words of an identifier (`include_hidden`, `openNow`, `Unit Price`, `userID`), in lower
/// case: split at anything not a letter or digit, and before a capital that follows a small
/// letter (so a run of capitals, `ID`, stays one word).
pub fn identifier_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        let breaks = !c.is_alphanumeric() || (c.is_uppercase() && prev_lower);
        if breaks && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase();
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The words of a parameter's name ([`identifier_words`]) without [`FLAG_FILLER`].
fn name_words(name: &str) -> Vec<String> {
    let mut words = identifier_words(name);
    words.retain(|w| !FLAG_FILLER.contains(&w.as_str()));
    words
}

/// Whether the question says every word of `name` ([`name_words`]): as a word, or, for a word
/// of four letters or more, as the start of a word at most three letters longer (`cancel` in
/// "cancelled").
fn names_said(name: &str, question_words: &str) -> bool {
    let words = name_words(name);
    !words.is_empty()
        && words
            .iter()
            .all(|n| question_words.split(' ').any(|w| same_word(w, n)))
}

/// Number words a question may give a count in ("two seats", "a dozen eggs").
const NUMBER_WORDS: &[(&str, f64)] = &[
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("dozen", 12.0),
    ("fifteen", 15.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("fifty", 50.0),
    ("hundred", 100.0),
];

/// The numbers `text` gives as numbers, not as parts of a date, a time or a code: words
/// written in digits alone (`7.5`, `1,250`, `$200`, `45%`) or as a number word ("two"), each
/// with the word after it ("stars" in "four stars"), in lower case. `2024-11-02`, `09:00` and
/// `P-7781` give none.
fn free_numbers(text: &str) -> Vec<(f64, Option<String>)> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let t = token
            .trim_start_matches(['$', '€', '£', '(', '"', '\''])
            .trim_end_matches(['.', ',', '?', '!', ';', ')', '%', '"', '\'', ':']);
        let n = if t.chars().next().is_some_and(|c| c.is_ascii_digit())
            && t.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        {
            t.replace(',', "").parse::<f64>().ok()
        } else {
            NUMBER_WORDS
                .iter()
                .find(|(w, _)| t.eq_ignore_ascii_case(w))
                .map(|&(_, n)| n)
        };
        let next = tokens
            .get(i + 1)
            .map(|w| loose(w))
            .and_then(|w| w.split(' ').next().map(str::to_string))
            .filter(|w| !w.is_empty());
        out.extend(n.map(|n| (n, next)));
    }
    out
}

/// Every property name in `schema`, nested objects' included.
fn property_names(schema: &Value, out: &mut Vec<String>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            out.push(k.clone());
            property_names(v, out);
        }
    }
    if let Some(items) = schema.get("items") {
        property_names(items, out);
    }
}

/// Whether `word` is one of `name`'s words ([`name_words`]), or starts one of four letters or
/// more and is at most three letters longer (`stars` for `min_stars`).
fn word_names(word: &str, name: &str) -> bool {
    name_words(name).iter().any(|n| same_word(word, n))
}

/// Whether `word` is the name word `n`, or, when `n` has four letters or more, starts with it
/// and is at most three letters longer (`cancelled` for `cancel`, `stars` for `star`).
fn same_word(word: &str, n: &str) -> bool {
    word == n || (n.len() >= 4 && word.starts_with(n) && word.len() <= n.len() + 3)
}

/// The question's tokens that hold digits and are not plain numbers (`2024-11-02`, `09:00`,
/// `DL405`), with their ends' punctuation off.
fn coded_tokens(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()).to_string())
        .filter(|t| {
            t.chars().any(|c| c.is_ascii_digit())
                && !t
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        })
        .collect()
}

/// The numbers and the strings (as [`loose`] words) that the arguments `args` hold, nested
/// values included.
fn used_values(args: &Map<String, Value>) -> (Vec<f64>, Vec<String>) {
    fn walk(v: &Value, nums: &mut Vec<f64>, strs: &mut Vec<String>) {
        match v {
            Value::Number(n) => nums.extend(n.as_f64()),
            Value::String(s) => strs.push(loose(s)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, nums, strs)),
            Value::Object(m) => m.values().for_each(|x| walk(x, nums, strs)),
            _ => {}
        }
    }
    let (mut nums, mut strs) = (Vec::new(), Vec::new());
    args.values().for_each(|v| walk(v, &mut nums, &mut strs));
    (nums, strs)
}

/// The kind of value a parameter's schema takes, for [`fill_candidates`]: `boolean`,
/// `number` (numbers and integers), `string` (strings, and arrays of strings or numbers), or
/// `None` for the others (objects, enums, consts, unions), which are not filled in.
fn fill_kind(schema: &Value) -> Option<&'static str> {
    let m = schema.as_object()?;
    if m.contains_key("enum") || m.contains_key("const") {
        return None;
    }
    match m.get("type")?.as_str()? {
        "boolean" => Some("boolean"),
        "number" | "integer" => Some("number"),
        "string" => Some("string"),
        "array" => match m
            .get("items")
            .and_then(|i| i.get("type"))
            .and_then(Value::as_str)
        {
            Some("string" | "number" | "integer") => Some("string"),
            _ => None,
        },
        _ => None,
    }
}

/// The optional parameters of `function` that `call` leaves out and the question may hold a
/// value for: a flag (`open_now`, default not `true`) whose name the question says; a number
/// where the question gives a number no argument holds; a string (or list) where the question
/// says the parameter's name, or quotes a text or writes a date, time or code that no argument
/// holds. Empty for most calls, so most are decoded once.
pub fn fill_candidates(call: &Call, function: &Function, question: &str) -> Vec<String> {
    let Some(args) = call.arguments.as_object() else {
        return Vec::new();
    };
    let Some(props) = function
        .parameters
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let required = required_names(function);
    let words = loose(question);
    let (used_nums, used_strs) = used_values(args);
    let free_number = free_numbers(question)
        .iter()
        .any(|(q, _)| !used_nums.iter().any(|u| (u - q).abs() < 1e-9));
    let free_text = quoted(question)
        .into_iter()
        .chain(coded_tokens(question))
        .any(|t| !used_strs.iter().any(|u| u.contains(&loose(&t))));
    props
        .iter()
        .filter(|(k, s)| {
            if required.contains(&k.as_str()) || args.contains_key(k.as_str()) {
                return false;
            }
            match fill_kind(s) {
                Some("boolean") => {
                    s.get("default") != Some(&Value::Bool(true)) && names_said(k, &words)
                }
                Some("number") => free_number,
                Some(_) => free_text || names_said(k, &words),
                None => false,
            }
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Takes into `call` from `forced` (the same call decoded again with `candidates` required)
/// the values of `candidates` that the question holds and no other argument has (see
/// [`fill_candidates`]); returns what was added, one line each.
pub fn fill_in(
    call: &mut Call,
    forced: &Call,
    function: &Function,
    question: &str,
    candidates: &[String],
) -> Vec<String> {
    let mut notes = Vec::new();
    let (Some(args), Some(got)) = (call.arguments.as_object_mut(), forced.arguments.as_object())
    else {
        return notes;
    };
    let props = function
        .parameters
        .get("properties")
        .and_then(Value::as_object);
    let words = loose(question);
    let mut names = Vec::new();
    property_names(&function.parameters, &mut names);
    let given = free_numbers(question);
    for k in candidates {
        // A number followed by a word naming another parameter ("four stars", `min_stars`)
        // is that parameter's, not this one's.
        let numbers: Vec<f64> = given
            .iter()
            .filter(|(_, next)| {
                next.as_deref().is_none_or(|w| {
                    word_names(w, k) || !names.iter().any(|n| n != k && word_names(w, n))
                })
            })
            .map(|(n, _)| *n)
            .collect();
        let (Some(v), Some(schema)) = (got.get(k), props.and_then(|p| p.get(k))) else {
            continue;
        };
        if schema.get("default").is_some_and(|d| values_match(d, v)) {
            continue;
        }
        let (used_nums, used_strs) = used_values(args);
        let new_string = |s: &str| {
            let w = loose(s);
            !w.is_empty()
                && format!(" {words} ").contains(&format!(" {w} "))
                && !used_strs.contains(&w)
        };
        let new_number = |x: f64| {
            numbers.iter().any(|q| (q - x).abs() < 1e-9)
                && !used_nums.iter().any(|u| (u - x).abs() < 1e-9)
        };
        let held = match v {
            Value::Bool(b) => *b && names_said(k, &words),
            Value::Number(n) => n.as_f64().is_some_and(new_number),
            Value::String(s) => new_string(s),
            Value::Array(items) => {
                !items.is_empty()
                    && items.iter().all(|x| match x {
                        Value::String(s) => new_string(s),
                        Value::Number(n) => n.as_f64().is_some_and(new_number),
                        _ => false,
                    })
            }
            _ => false,
        };
        if held {
            notes.push(format!("`{k}`: {v}, which the question gives"));
            args.insert(k.clone(), v.clone());
        }
    }
    notes
}

/// Applies the five rules to `call` of `function` asked by `question`; returns what was
/// changed, one line each.
pub fn tidy(call: &mut Call, function: &Function, question: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(args) = call.arguments.as_object_mut() else {
        return notes;
    };
    let props = function
        .parameters
        .get("properties")
        .and_then(Value::as_object);
    let required = required_names(function);
    let words = loose(question);
    let mut numbers = numbers_in(question);
    numbers.extend(free_numbers(question).into_iter().map(|(n, _)| n));
    let schema_of = |k: &str| props.and_then(|p| p.get(k)).and_then(Value::as_object);
    let mut keep = Map::new();
    for (k, mut v) in std::mem::take(args) {
        let free = schema_of(&k).is_none_or(|m| {
            !["enum", "const", "pattern", "format"]
                .iter()
                .any(|x| m.contains_key(*x))
        });
        if let Value::String(s) = &v {
            if free && !grounded(&v, None, &words, &numbers) {
                if let Some(w) = near_name(s, question) {
                    notes.push(format!(
                        "`{k}`: the question's own word \"{w}\" for \"{s}\""
                    ));
                    v = Value::String(w);
                }
            }
        }
        let optional = !required.contains(&k.as_str());
        let schema = schema_of(&k);
        let schema_v = props.and_then(|p| p.get(&k));
        if optional {
            if let Some(d) = schema.and_then(|s| s.get("default")) {
                if values_match(d, &v) {
                    notes.push(format!("`{k}`: left out, it is the default ({v})"));
                    continue;
                }
            }
            let choice = schema.is_some_and(|s| s.contains_key("enum") || s.contains_key("const"));
            let checkable = matches!(v, Value::String(_) | Value::Number(_) | Value::Object(_))
                || v.as_array()
                    .is_some_and(|a| a.iter().all(|x| x.is_string() || x.is_number()));
            if !choice && checkable && !grounded(&v, schema_v, &words, &numbers) {
                notes.push(format!("`{k}`: left out, the question does not say {v}"));
                continue;
            }
        }
        keep.insert(k, v);
    }
    let quotes = quoted(question);
    for (k, v) in keep.iter_mut() {
        if let Value::String(s) = v {
            if let Some(q) = quotes.iter().find(|q| loose(q) == loose(s) && *q != s) {
                notes.push(format!(
                    "`{k}`: the question's own text \"{q}\" for \"{s}\""
                ));
                *s = q.clone();
            }
        }
    }
    if let Some(props) = props {
        for (k, schema) in props {
            if required.contains(&k.as_str()) || keep.contains_key(k) {
                continue;
            }
            if let Some(v) = named_choice(schema, &words, &keep) {
                notes.push(format!("`{k}`: {v}, which the question names"));
                keep.insert(k.clone(), v);
            }
        }
    }
    *args = keep;
    notes
}

/// The number of single-character edits between `a` and `b`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Rule 5: the name in `question` that the one-word `value` is a near copy of: a capitalised
/// word of four letters or more with the same first three letters, at most two edits away
/// (`Lisbon` for `Lisboa`), when exactly one word of the question is.
fn near_name(value: &str, question: &str) -> Option<String> {
    let v = value.trim().to_lowercase();
    if v.chars().count() < 4 || !v.chars().all(char::is_alphabetic) {
        return None;
    }
    let mut found: Option<String> = None;
    for word in question.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        let capital = word.chars().next().is_some_and(char::is_uppercase);
        let same_start = w.chars().take(3).eq(v.chars().take(3));
        if capital && w.chars().count() >= 4 && same_start && w != v && edit_distance(&w, &v) <= 2 {
            if found.as_deref().is_some_and(|f| f != word) {
                return None;
            }
            found = Some(word.to_string());
        }
    }
    found
}

/// Rule 4: the one value of `schema`'s string `enum` (not its default, three letters or more)
/// that the question's `words` name and no argument in `given` holds; `None` when there is
/// no such value or more than one.
fn named_choice(schema: &Value, words: &str, given: &Map<String, Value>) -> Option<Value> {
    let default = schema.get("default");
    let named: Vec<&Value> = schema
        .get("enum")?
        .as_array()?
        .iter()
        .filter(|v| {
            let Some(s) = v.as_str() else { return false };
            let w = loose(s);
            w.len() >= 3
                && Some(*v) != default
                && format!(" {words} ").contains(&format!(" {w} "))
                && !given.values().any(|g| values_match(g, v))
        })
        .collect();
    match named[..] {
        [one] => Some(one.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event() -> Function {
        Function {
            name: "create_event".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {
                "title": {"type": "string"},
                "minutes": {"type": "integer", "default": 60},
                "location": {"type": "string"},
                "attendees": {"type": "array", "items": {"type": "string"}},
                "private": {"type": "boolean"},
                "kind": {"type": "string", "enum": ["work", "personal"]}},
                "required": ["title"]}),
        }
    }

    fn tidied(args: Value, question: &str) -> (Value, Vec<String>) {
        let mut c = Call {
            name: "create_event".into(),
            arguments: args,
        };
        let notes = tidy(&mut c, &event(), question);
        (c.arguments, notes)
    }

    #[test]
    fn a_choice_the_question_names_is_filled_in_when_left_out() {
        // "personal" is the one value of `kind` the question names.
        let (a, notes) = tidied(json!({"title": "Dentist"}), "Add Dentist, a personal event");
        assert_eq!(a, json!({"title": "Dentist", "kind": "personal"}));
        assert_eq!(
            notes,
            vec!["`kind`: \"personal\", which the question names"]
        );
        // Not when it names both values, none, or only as part of a word.
        for q in [
            "Add Dentist, work or personal",
            "Add Dentist",
            "Add Dentist after homework",
        ] {
            let (a, notes) = tidied(json!({"title": "Dentist"}), q);
            assert_eq!(a, json!({"title": "Dentist"}), "{q}");
            assert!(notes.is_empty(), "{q}: {notes:?}");
        }
        // Not when an argument already holds the value (the title "Work" is not a kind).
        let (a, _) = tidied(json!({"title": "Work"}), "Add Work");
        assert_eq!(a, json!({"title": "Work"}));
    }

    #[test]
    fn a_default_is_not_written_into_the_call() {
        let (a, notes) = tidied(json!({"title": "Sync", "minutes": 60}), "Add Sync");
        assert_eq!(a, json!({"title": "Sync"}));
        assert_eq!(notes.len(), 1, "{notes:?}");
        let (a, _) = tidied(
            json!({"title": "Sync", "minutes": 90}),
            "Add Sync, 90 minutes",
        );
        assert_eq!(a, json!({"title": "Sync", "minutes": 90}));
    }

    #[test]
    fn optional_values_the_question_does_not_say_are_left_out() {
        let q = "Put lunch with Priya and Sam in the calendar at the Blue Cafe for 1,250 minutes";
        let (a, _) = tidied(
            json!({"title": "lunch", "location": "Work", "attendees": ["priya@example.com"],
                   "private": true, "kind": "personal"}),
            q,
        );
        // Made-up text goes; choices (enum, boolean) stay; the required title stays.
        assert_eq!(
            a,
            json!({"title": "lunch", "private": true, "kind": "personal"})
        );
        let (a, _) = tidied(
            json!({"title": "x", "location": "blue  café", "attendees": ["Priya", "sam"],
                   "minutes": 1250}),
            q,
        );
        assert_eq!(a["attendees"], json!(["Priya", "sam"]));
        assert_eq!(a["minutes"], 1250);
        // `café` is not `Cafe`: not the question's words.
        assert!(a.get("location").is_none(), "{a}");
        // A required argument is never removed, grounded or not.
        let (a, _) = tidied(json!({"title": "Made up"}), "Add an event");
        assert_eq!(a, json!({"title": "Made up"}));
    }

    #[test]
    fn a_quoted_string_is_copied_exactly() {
        let (a, notes) = tidied(
            json!({"title": "dentist  appointment."}),
            "Schedule \"Dentist appointment\" for Monday, I'm free then",
        );
        assert_eq!(a["title"], "Dentist appointment");
        assert!(notes[0].contains("question's own text"), "{notes:?}");
        let (a, _) = tidied(json!({"title": "Lunch"}), "Schedule 'Team lunch' on Friday");
        assert_eq!(a["title"], "Lunch", "a different string is not replaced");
        assert_eq!(quoted("it's 'a' and “b” and \"c\""), ["c", "b", "a"]);
        assert_eq!(
            numbers_in("1,250 at 4.9%, 2024-05-14"),
            [1250.0, 4.9, 2024.0, 5.0, 14.0]
        );
    }

    fn places() -> Function {
        Function {
            name: "find_places".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {
                "location": {"type": "string"},
                "open_now": {"type": "boolean"},
                "include_hidden": {"type": "boolean", "default": true},
                "radius_meters": {"type": "integer"},
                "guests": {"type": "integer"},
                "date": {"type": "string"},
                "kind": {"type": "string", "enum": ["cafe", "pharmacy"]},
                "filters": {"type": "object", "properties": {"min_stars": {"type": "integer"}}}},
                "required": ["location"]}),
        }
    }

    fn call_of(args: Value) -> Call {
        Call {
            name: "find_places".into(),
            arguments: args,
        }
    }

    #[test]
    fn left_out_parameters_the_question_gives_are_candidates_to_fill() {
        let f = places();
        let c = call_of(json!({"location": "Union Square"}));
        // The flag's name is said; a number no argument holds; a date no argument holds.
        let q = "Places open now within 500 meters of Union Square on 2024-11-02";
        let got = fill_candidates(&c, &f, q);
        assert_eq!(got, ["open_now", "radius_meters", "guests", "date"]);
        // Nothing more in the question: nothing to fill, so no second decoding.
        assert!(fill_candidates(&c, &f, "Places near Union Square").is_empty());
        // A number an argument already holds is not free; a flag whose default is true, an
        // enum (rule 4's) and an object are never candidates.
        let c = call_of(json!({"location": "Union Square", "radius_meters": 500}));
        let got = fill_candidates(&c, &f, "hidden places within 500 meters of Union Square");
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn only_values_the_question_holds_are_filled_in() {
        let f = places();
        let q = "Four stars or better, open now, for two guests within 500 meters of Union Square";
        let candidates: Vec<String> = ["open_now", "radius_meters", "guests", "date"]
            .map(String::from)
            .to_vec();
        let mut c = call_of(json!({"location": "Union Square"}));
        let forced = call_of(json!({"location": "Union Square", "open_now": true,
            "radius_meters": 500, "guests": 2, "date": "2024-01-01"}));
        let notes = fill_in(&mut c, &forced, &f, q, &candidates);
        assert_eq!(
            c.arguments,
            json!({"location": "Union Square", "open_now": true, "radius_meters": 500, "guests": 2})
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
        // Made-up values stay out: `false` for a flag, a date the question does not write, a
        // number it does not give, and "four" before "stars" (another parameter's word) for
        // guests.
        let mut c = call_of(json!({"location": "Union Square"}));
        let forced = call_of(json!({"location": "Union Square", "open_now": false,
            "radius_meters": 1000, "guests": 4, "date": "2024-01-01"}));
        assert!(fill_in(&mut c, &forced, &f, q, &candidates).is_empty());
        assert_eq!(c.arguments, json!({"location": "Union Square"}));
        // A value another argument already holds is not given twice.
        let mut c = call_of(json!({"location": "Union Square", "radius_meters": 500}));
        let forced = call_of(json!({"location": "Union Square", "guests": 500}));
        assert!(fill_in(&mut c, &forced, &f, q, &["guests".to_string()]).is_empty());
    }

    #[test]
    fn a_count_in_words_is_a_number_the_question_gives() {
        let (a, _) = tidied(
            json!({"title": "Trip", "minutes": 2}),
            "Add Trip, two minutes long",
        );
        assert_eq!(a["minutes"], 2, "rule 2 keeps a number written in words");
        assert_eq!(
            free_numbers("two seats at $1,200.50, on 2024-11-02 at 09:00 for P-7781")
                .into_iter()
                .map(|(n, w)| (n, w.unwrap_or_default()))
                .collect::<Vec<_>>(),
            [(2.0, "seats".to_string()), (1200.5, "on".to_string())]
        );
        assert_eq!(name_words("include_hidden"), ["hidden"]);
        assert_eq!(name_words("openNow"), ["open", "now"]);
        assert_eq!(identifier_words("userID"), ["user", "id"]);
        assert_eq!(
            identifier_words("price_per_night"),
            ["price", "per", "night"]
        );
        assert_eq!(identifier_words("Unit Price"), ["unit", "price"]);
    }

    #[test]
    fn a_made_up_object_is_left_out_and_one_the_question_gives_kept() {
        let f = places();
        let tidy_of = |args: Value, q: &str| {
            let mut c = call_of(args);
            let notes = tidy(&mut c, &f, q);
            (c.arguments, notes)
        };
        let (a, notes) = tidy_of(
            json!({"location": "Kyoto", "filters": {"min_stars": 5}}),
            "Places in Kyoto",
        );
        assert_eq!(a, json!({"location": "Kyoto"}));
        assert!(notes[0].contains("does not say"), "{notes:?}");
        let (a, _) = tidy_of(
            json!({"location": "Kyoto", "filters": {"min_stars": 4}}),
            "Places in Kyoto, four stars or better",
        );
        assert_eq!(a["filters"], json!({"min_stars": 4}));
    }

    #[test]
    fn a_name_written_nearly_as_the_question_writes_it_is_copied() {
        // Before rule 2: the optional `location` is corrected, not left out as made up.
        let (a, notes) = tidied(
            json!({"title": "Trip", "location": "Lisboa"}),
            "Add Trip in Lisbon",
        );
        assert_eq!(a["location"], "Lisbon");
        assert_eq!(notes.len(), 1, "{notes:?}");
        let (a, notes) = tidied(json!({"title": "Lisboa"}), "Add Lisbon to my calendar");
        assert_eq!(a["title"], "Lisbon");
        assert!(notes[0].contains("own word"), "{notes:?}");
        // Not a word of another start, not a small word, not when two words are near.
        for (value, q) in [
            ("Oporto", "Add Porto"),
            ("Rom", "Add Rome"),
            ("Paris", "Add Parisa and Pariss"),
        ] {
            let (a, _) = tidied(json!({"title": value}), q);
            assert_eq!(a["title"], value, "{q}");
        }
        assert_eq!(edit_distance("lisboa", "lisbon"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
