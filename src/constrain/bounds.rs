//! Length bounds cairn adds to the schemas it builds (agent steps, function calls) before they
//! are compiled, so no literal can run on to the token limit: a small model that falls into
//! repetition (`1 + 1 + 1 ...`, `500000000…`, `0.0000…`) must reach the end of the value.
//!
//! - Strings without a bound of their own get a `maxLength` ([`bound_strings`]).
//! - Numbers and integers get a magnitude of at most [`MAX_INTEGER_DIGITS`] digits (added as
//!   `minimum`/`maximum` where the schema has none) and numbers at most
//!   [`MAX_FRACTION_DIGITS`] decimals (`multipleOf`, where it has none); a bounded range is
//!   written without exponent, so `1e999999…` cannot start ([`bound_numbers`]).
//!
//! - Arrays without a bound of their own get at most [`MAX_ARRAY_ITEMS`] items
//!   ([`bound_arrays`]): the 0.5B preset, asked to add one song to a playlist, listed made-up
//!   titles until the token limit cut the call.
//!
//! - Objects that list their `properties` get no others ([`close_objects`]): a key the
//!   definition does not name is one the model made up (`"dryRun"` copied from another
//!   tool's arguments).
//!
//! - Strings whose description gives their format in the usual letters (`YYYY-MM-DD`,
//!   `HH:MM`, `YYYY-MM`, ...) and whose schema says nothing of it get that format as a
//!   `pattern` ([`patterns_from_descriptions`]): the 0.5B preset wrote `"2:15:00"` for a time
//!   described as "HH:MM" and `"01-2025"` for a month described as "YYYY-MM".
//!
//! The bounds are for decoding only: a decoded value is checked against the definition as its
//! author wrote it.

use serde_json::{json, Map, Value};

/// The most digits before the decimal point of a number the grammar lets the model write
/// (`999999999999999`): larger than any count, price or id a question gives, and exact in a
/// double.
pub const MAX_INTEGER_DIGITS: u32 = 15;

/// The most digits after the decimal point.
pub const MAX_FRACTION_DIGITS: i32 = 10;

/// Whether every repetition in the regular expression `p` is counted (`{n,m}`, `?`): no `*`,
/// `+` or `{n,}` outside a character class or an escape. Such a pattern bounds the length of
/// what it matches.
pub fn pattern_is_bounded(p: &str) -> bool {
    let c: Vec<char> = p.chars().collect();
    let mut i = 0;
    let mut class = false;
    while i < c.len() {
        match c[i] {
            '\\' => i += 1,
            '[' if !class => class = true,
            ']' if class => class = false,
            '*' | '+' if !class => return false,
            '{' if !class => {
                if let Some(k) = c[i..].iter().position(|&x| x == '}') {
                    if c[i + k - 1] == ',' {
                        return false;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// Adds `maxLength: max` to every string schema in `schema` (properties, items, `anyOf`
/// branches, ...) that has no `maxLength`, `enum` or `const` of its own, nor a `pattern`
/// whose every repetition is counted ([`pattern_is_bounded`]: `^a+$` gets the bound, the
/// sql and calculator patterns do not need it).
pub fn bound_strings(schema: &mut Value, max: u64) {
    match schema {
        Value::Object(m) => {
            let is_string = m.get("type").and_then(Value::as_str) == Some("string");
            let bounded = ["maxLength", "enum", "const"]
                .iter()
                .any(|k| m.contains_key(*k))
                || m.get("pattern")
                    .and_then(Value::as_str)
                    .is_some_and(pattern_is_bounded);
            if is_string && !bounded {
                m.insert("maxLength".into(), json!(max));
            }
            for (k, v) in m.iter_mut() {
                // Values of these keywords are data, not schemas.
                if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    bound_strings(v, max);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| bound_strings(v, max)),
        _ => {}
    }
}

/// The most items of an array the grammar lets the model write where the schema sets no
/// `maxItems`: more than a question lists, few enough to end well before the token limit.
pub const MAX_ARRAY_ITEMS: u64 = 32;

/// Adds `maxItems: max` to every array schema in `schema` (wherever it is nested) that has no
/// `maxItems` of its own.
pub fn bound_arrays(schema: &mut Value, max: u64) {
    match schema {
        Value::Object(m) => {
            let is_array = match m.get("type") {
                Some(Value::String(t)) => t == "array",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
                _ => m.contains_key("items"),
            };
            if is_array && !m.contains_key("maxItems") {
                m.insert("maxItems".into(), json!(max));
            }
            for (k, v) in m.iter_mut() {
                if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    bound_arrays(v, max);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| bound_arrays(v, max)),
        _ => {}
    }
}

/// Adds `additionalProperties: false` to every object schema in `schema` that lists
/// `properties` and says nothing of others. An object without `properties` (free-form, such
/// as `{"type": "object"}`) stays open.
pub fn close_objects(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            let listed = m.get("properties").is_some_and(Value::is_object);
            if listed && !m.contains_key("additionalProperties") {
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (k, v) in m.iter_mut() {
                if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    close_objects(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// Whether a schema object is for numbers: `type` `number`/`integer` or a list holding one.
fn number_type(m: &Map<String, Value>) -> Option<&'static str> {
    let is = |t: &str| match t {
        "number" => Some("number"),
        "integer" => Some("integer"),
        _ => None,
    };
    match m.get("type")? {
        Value::String(t) => is(t),
        // `["number", "integer"]` is bounded as a number (the looser of the two).
        Value::Array(ts) => {
            let found: Vec<&str> = ts.iter().filter_map(|t| t.as_str().and_then(is)).collect();
            if found.contains(&"number") {
                Some("number")
            } else {
                found.first().copied()
            }
        }
        _ => None,
    }
}

/// Adds to every number and integer schema in `schema` (properties, items, `anyOf` branches,
/// ...) the bounds it lacks: `minimum`/`maximum` at ±(10^[`MAX_INTEGER_DIGITS`] − 1) where it
/// has no lower/upper bound of its own, and for numbers `multipleOf: 1e-`[`MAX_FRACTION_DIGITS`]
/// where it has no `multipleOf`. A schema with `enum` or `const` is left as it is.
pub fn bound_numbers(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if let Some(kind) = number_type(m) {
                if !m.contains_key("enum") && !m.contains_key("const") {
                    let cap = 10f64.powi(MAX_INTEGER_DIGITS as i32) - 1.0;
                    let low = m.get("minimum").or(m.get("exclusiveMinimum"));
                    let high = m.get("maximum").or(m.get("exclusiveMaximum"));
                    // Draft 4 writes `exclusiveMinimum: true` beside `minimum`: only a number
                    // is a bound.
                    let has_low = low.is_some_and(Value::is_number);
                    let has_high = high.is_some_and(Value::is_number);
                    let low_v = low.and_then(Value::as_f64);
                    let high_v = high.and_then(Value::as_f64);
                    if !has_low && high_v.is_none_or(|h| h >= -cap) {
                        m.insert("minimum".into(), json!(-cap));
                    }
                    if !has_high && low_v.is_none_or(|l| l <= cap) {
                        m.insert("maximum".into(), json!(cap));
                    }
                    if kind == "number" && !m.contains_key("multipleOf") {
                        m.insert("multipleOf".into(), json!(10f64.powi(-MAX_FRACTION_DIGITS)));
                    }
                }
            }
            for (k, v) in m.iter_mut() {
                // Values of these keywords are data, not schemas.
                if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    bound_numbers(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(bound_numbers),
        _ => {}
    }
}

/// The formats [`patterns_from_descriptions`] reads in a description, longest first (a
/// description naming `YYYY-MM-DD` names no `YYYY-MM`), each with the pattern it stands for.
const DESCRIBED_FORMATS: &[(&str, &str)] = &[
    ("YYYY-MM-DDTHH:MM:SS", "{date}T{time}:{sec}"),
    ("YYYY-MM-DD HH:MM:SS", "{date} {time}:{sec}"),
    ("YYYY-MM-DDTHH:MM", "{date}T{time}"),
    ("YYYY-MM-DD HH:MM", "{date} {time}"),
    ("YYYY-MM-DD", "{date}"),
    ("MM/DD/YYYY", "{mm}/{dd}/[0-9]{4}"),
    ("DD/MM/YYYY", "{dd}/{mm}/[0-9]{4}"),
    ("YYYY-MM", "[0-9]{4}-{mm}"),
    ("HH:MM:SS", "{time}:{sec}"),
    ("HH:MM", "{time}"),
];

/// The pattern of a format named in `description`, where it names exactly one of
/// [`DESCRIBED_FORMATS`] (as a whole token, in capitals or small letters) and offers no
/// alternative (` or `): "Date in YYYY-MM-DD format" gives the date pattern; "YYYY-MM-DD or
/// 'today'" gives none.
pub fn described_pattern(description: &str) -> Option<String> {
    let upper = description.to_uppercase();
    if upper.contains(" OR ") {
        return None;
    }
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '/');
    let mut found: Option<&str> = None;
    let mut prev: Option<char> = None;
    let mut skip_to = 0;
    for (i, c) in upper.char_indices() {
        let starts_token = prev.is_none_or(|p| !is_token_char(p));
        prev = Some(c);
        if i < skip_to || !starts_token {
            continue;
        }
        let tail = &upper[i..];
        // A format ends the token, or is followed by the end of a sentence.
        let ends = |f: &str| {
            let mut after = tail[f.len()..].chars();
            match after.next() {
                None => true,
                Some(c) if !is_token_char(c) => true,
                Some('-' | ':' | '/') => after.next().is_none_or(|c| !is_token_char(c)),
                Some(_) => false,
            }
        };
        if let Some((f, p)) = DESCRIBED_FORMATS
            .iter()
            .find(|(f, _)| tail.starts_with(f) && ends(f))
        {
            if found.is_some_and(|g| g != *p) {
                return None;
            }
            found = Some(p);
            skip_to = i + f.len();
        }
    }
    let p = found?
        .replace("{date}", "[0-9]{4}-{mm}-{dd}")
        .replace("{time}", "([01][0-9]|2[0-3]):[0-5][0-9]")
        .replace("{sec}", "[0-5][0-9]")
        .replace("{mm}", "(0[1-9]|1[0-2])")
        .replace("{dd}", "(0[1-9]|[12][0-9]|3[01])");
    Some(format!("^{p}$"))
}

/// Adds to every string schema in `schema` that has no `pattern`, `format`, `enum` or `const`
/// the pattern of the format its `description` names ([`described_pattern`]). The model
/// then writes `"14:15"` where the definition asks for `HH:MM`, not `"2:15 pm"`.
pub fn patterns_from_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            let is_string = m.get("type").and_then(Value::as_str) == Some("string");
            let free = !["pattern", "format", "enum", "const"]
                .iter()
                .any(|k| m.contains_key(*k));
            if is_string && free {
                if let Some(p) = m
                    .get("description")
                    .and_then(Value::as_str)
                    .and_then(described_pattern)
                {
                    m.insert("pattern".into(), Value::String(p));
                }
            }
            for (k, v) in m.iter_mut() {
                if !matches!(
                    k.as_str(),
                    "enum" | "const" | "default" | "examples" | "description"
                ) {
                    patterns_from_descriptions(v);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(patterns_from_descriptions),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_the_description_names_becomes_the_pattern() {
        let date = described_pattern("Date in YYYY-MM-DD format.").unwrap();
        let re = regex::Regex::new(&date).unwrap();
        assert!(re.is_match("2025-03-03"));
        for bad in ["2025-3-3", "03/03/2025", "2025-13-01", "today"] {
            assert!(!re.is_match(bad), "{bad}");
        }
        let time =
            regex::Regex::new(&described_pattern("Start time, HH:MM (24-hour)").unwrap()).unwrap();
        assert!(time.is_match("14:15") && !time.is_match("2:15:00") && !time.is_match("2:15 PM"));
        let month = regex::Regex::new(&described_pattern("Month as YYYY-MM").unwrap()).unwrap();
        assert!(month.is_match("2025-01") && !month.is_match("01-2025"));
        assert!(
            regex::Regex::new(&described_pattern("when (yyyy-mm-dd hh:mm)").unwrap())
                .unwrap()
                .is_match("2025-01-31 09:05")
        );
        // No pattern where the description offers another form, names two, or none.
        for d in [
            "Date as YYYY-MM-DD or 'today'",
            "From YYYY-MM-DD, shown as MM/DD/YYYY",
            "City name",
            "Number of YYYYs",
            "HH:MMM",
        ] {
            assert_eq!(described_pattern(d), None, "{d}");
        }
        // The same format twice is one format.
        assert!(described_pattern("YYYY-MM-DD (e.g. 2025-01-31 is YYYY-MM-DD)").is_some());
    }

    #[test]
    fn only_free_strings_get_the_described_pattern() {
        let mut s = json!({"type": "object", "properties": {
            "date": {"type": "string", "description": "YYYY-MM-DD"},
            "fixed": {"type": "string", "description": "YYYY-MM-DD", "pattern": "^x$"},
            "kind": {"type": "string", "description": "HH:MM", "enum": ["a"]},
            "n": {"type": "integer", "description": "HH:MM"},
            "list": {"type": "array", "items": {"type": "string", "description": "HH:MM"}}}});
        patterns_from_descriptions(&mut s);
        let p = &s["properties"];
        assert!(p["date"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with("^[0-9]{4}-"));
        assert_eq!(p["fixed"]["pattern"], "^x$");
        assert!(p["kind"].get("pattern").is_none() && p["n"].get("pattern").is_none());
        assert!(p["list"]["items"]["pattern"].is_string());
    }
}
