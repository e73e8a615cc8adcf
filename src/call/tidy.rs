//! Arguments made to say what the question says, after decoding: a small model adds optional
//! arguments nobody asked for (`"location": "Work"`, `"device": "phone"`) and rewrites the
//! strings it was given (`"Dentist Appointment"` for "Dentist appointment"), and leaves out
//! choices the question makes ("vegan recipes" with no `diet`). Four rules, each reported:
//!
//! 1. An optional argument equal to the definition's `default` is left out: the function
//!    applies it anyway, and the call says only what was asked.
//! 2. An optional string or number argument whose value the question does not contain is left
//!    out: it was made up. (Enums and booleans are kept: their values are choices the question
//!    implies, not text it contains.)
//! 3. A string argument equal to a string the question quotes, up to case, spacing and
//!    punctuation at its ends, becomes exactly the quoted text.
//! 4. An optional enum parameter the call leaves out, exactly one of whose values (other than
//!    its default, of three letters or more) the question names as whole words, and which no
//!    other argument already holds, is given that value.
//!
//! Required arguments are never removed, so a call stays valid against its definition.

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
/// written, with or without thousands separators), every element of an array.
fn grounded(value: &Value, question_words: &str, question_numbers: &[f64]) -> bool {
    match value {
        Value::String(s) => {
            let w = loose(s);
            !w.is_empty() && format!(" {question_words} ").contains(&format!(" {w} "))
        }
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|x| question_numbers.iter().any(|q| (q - x).abs() < 1e-9)),
        Value::Array(items) => items
            .iter()
            .all(|v| grounded(v, question_words, question_numbers)),
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

/// Applies the three rules to `call` of `function` asked by `question`; returns what was
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
    let required: Vec<&str> = function
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let words = loose(question);
    let numbers = numbers_in(question);
    let schema_of = |k: &str| props.and_then(|p| p.get(k)).and_then(Value::as_object);
    let mut keep = Map::new();
    for (k, v) in std::mem::take(args) {
        let optional = !required.contains(&k.as_str());
        let schema = schema_of(&k);
        if optional {
            if let Some(d) = schema.and_then(|s| s.get("default")) {
                if values_match(d, &v) {
                    notes.push(format!("`{k}`: left out, it is the default ({v})"));
                    continue;
                }
            }
            let choice = schema.is_some_and(|s| s.contains_key("enum") || s.contains_key("const"));
            let checkable = matches!(v, Value::String(_) | Value::Number(_))
                || v.as_array()
                    .is_some_and(|a| a.iter().all(|x| x.is_string() || x.is_number()));
            if !choice && checkable && !grounded(&v, &words, &numbers) {
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
}
