//! A small JSON Schema checker and validator covering the keywords tool arguments use.
//!
//! [`check_schema`] says whether a schema (from a built-in tool or a user's manifest) is one
//! cairn understands: a known `type`, well-formed `properties`, `required`, `enum`, bounds and
//! `items`, and no unknown keywords (a misspelt `propertes` would otherwise silently allow
//! anything). [`validate`] checks a value against such a schema and returns every mismatch
//! with the path to it (`args.top_k: expected an integer, got "five"`).
//!
//! Supported: `type` (one name or a list), `properties`, `required`, `additionalProperties`
//! (bool or schema), `enum`, `const`, `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `minLength`, `maxLength`, `pattern` (a regular expression the whole
//! string must match where it is anchored, anywhere in it where it is not, as JSON Schema
//! says), `items`, `minItems`, `maxItems`, `anyOf`; annotations (`description`, `title`, `default`, `examples`, `format`,
//! `$schema`, `$comment`) are accepted and ignored.

use std::fmt;

use serde_json::{Map, Value};

const TYPES: &[&str] = &[
    "object", "array", "string", "integer", "number", "boolean", "null",
];
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "minItems",
    "maxItems",
    "anyOf",
];
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "format",
    "$schema",
    "$comment",
];

/// The regular expression of a `pattern`, compiled once per process (the pattern cairn builds
/// for the sql tool holds every table and column name).
fn compiled(rx: &str) -> Result<std::sync::Arc<regex::Regex>, String> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<regex::Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(re) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(rx) {
        return Ok(re.clone());
    }
    let build = |rx: &str| regex::RegexBuilder::new(rx).size_limit(64 << 20).build();
    // A pattern whose counted repetitions of large groups compile too big (the sql tool's:
    // every name, up to 80 times) is checked with those counts dropped: the words and their
    // order are checked, the count bounds only the length, which `maxLength` or the
    // decoding grammar bound anyway.
    let re = match build(rx) {
        Ok(re) => re,
        Err(regex::Error::CompiledTooBig(_)) => {
            static COUNTED: OnceLock<regex::Regex> = OnceLock::new();
            let counted = COUNTED
                .get_or_init(|| regex::Regex::new(r"\)\{(\d+),\d+\}").expect("a valid regex"));
            let loose = counted.replace_all(rx, |c: &regex::Captures| {
                if &c[1] == "0" { ")*" } else { ")+" }.to_string()
            });
            build(&loose).map_err(|e| e.to_string())?
        }
        Err(e) => return Err(e.to_string()),
    };
    let re = Arc::new(re);
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= 64 {
        map.clear();
    }
    map.insert(rx.to_string(), re.clone());
    Ok(re)
}

/// Why a schema is not one cairn can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at `{path}`: {message}")]
pub struct SchemaError {
    /// Where in the schema, e.g. `properties.city.type`.
    pub path: String,
    /// What is wrong and what would be valid.
    pub message: String,
}

/// A value that does not match its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// Where in the value, e.g. `args.top_k`.
    pub path: String,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Checks that `schema` is an object schema built from the supported keywords.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    check_node(schema, "")?;
    let top_type = schema.get("type").and_then(Value::as_str);
    if top_type != Some("object") {
        return Err(SchemaError {
            path: "type".into(),
            message: format!(
                "the arguments schema must have \"type\": \"object\", found {}",
                schema
                    .get("type")
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "no type".into())
            ),
        });
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn check_node(schema: &Value, path: &str) -> Result<(), SchemaError> {
    let err = |p: String, m: String| {
        Err(SchemaError {
            path: p,
            message: m,
        })
    };
    let obj = match schema {
        Value::Object(o) => o,
        Value::Bool(_) => return Ok(()),
        other => {
            return err(
                if path.is_empty() {
                    "(root)".into()
                } else {
                    path.into()
                },
                format!("a schema must be an object or a boolean, found {other}"),
            )
        }
    };
    for (key, v) in obj {
        let p = join(path, key);
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) if !a.is_empty() => a.iter().collect(),
                    Value::String(_) => vec![v],
                    _ => {
                        return err(
                            p,
                            format!(
                                "`type` must be a type name or a non-empty list of them, found {v}"
                            ),
                        )
                    }
                };
                for n in names {
                    match n.as_str() {
                        Some(s) if TYPES.contains(&s) => {}
                        _ => {
                            return err(
                                p,
                                format!("unknown type {n}; valid types: {}", TYPES.join(", ")),
                            )
                        }
                    }
                }
            }
            "properties" => {
                let Value::Object(props) = v else {
                    return err(
                        p,
                        format!("`properties` must be an object of schemas, found {v}"),
                    );
                };
                for (name, sub) in props {
                    check_node(sub, &join(&p, name))?;
                }
            }
            "required" => {
                let ok = v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
                if !ok {
                    return err(
                        p,
                        format!("`required` must be a list of property names, found {v}"),
                    );
                }
            }
            "additionalProperties" | "items" => check_node(v, &p)?,
            "anyOf" => {
                let Some(list) = v.as_array().filter(|a| !a.is_empty()) else {
                    return err(
                        p,
                        format!("`anyOf` must be a non-empty list of schemas, found {v}"),
                    );
                };
                for (i, sub) in list.iter().enumerate() {
                    check_node(sub, &format!("{p}[{i}]"))?;
                }
            }
            "enum" => {
                if v.as_array().is_none_or(|a| a.is_empty()) {
                    return err(
                        p,
                        format!("`enum` must be a non-empty list of values, found {v}"),
                    );
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if !v.is_number() {
                    return err(p, format!("`{key}` must be a number, found {v}"));
                }
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                if !v.is_u64() {
                    return err(p, format!("`{key}` must be a whole number ≥ 0, found {v}"));
                }
            }
            "pattern" => {
                let Some(rx) = v.as_str() else {
                    return err(p, format!("`pattern` must be a string, found {v}"));
                };
                // Parsed, not compiled: the patterns cairn builds for its own tools are too
                // large to compile cheaply, and are only ever used to decode.
                if let Err(e) = regex_syntax::Parser::new().parse(rx) {
                    return err(p, format!("`pattern` is not a regular expression: {e}"));
                }
            }
            "const" => {}
            k if ANNOTATIONS.contains(&k) => {}
            k => {
                return err(
                    p,
                    format!(
                        "unsupported keyword `{k}`; supported: {}",
                        KEYWORDS.join(", ")
                    ),
                )
            }
        }
    }
    if let (Some(Value::Array(req)), props) = (obj.get("required"), obj.get("properties")) {
        let props = props.and_then(Value::as_object);
        for r in req.iter().filter_map(Value::as_str) {
            if !props.is_some_and(|m| m.contains_key(r)) {
                return err(
                    join(path, "required"),
                    format!("`{r}` is required but not among the properties"),
                );
            }
        }
    }
    Ok(())
}

/// Checks `value` against `schema`; every mismatch comes back with its path (rooted at `args`).
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    validate_node(schema, value, "args", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn validate_node(schema: &Value, value: &Value, path: &str, errors: &mut Vec<ValidationError>) {
    let mut push = |m: String| {
        errors.push(ValidationError {
            path: path.to_string(),
            message: m,
        })
    };
    let obj: &Map<String, Value> = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            push("no value is allowed here".into());
            return;
        }
        Value::Object(o) => o,
        _ => return,
    };
    if let Some(t) = obj.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !names.is_empty() && !names.iter().any(|n| has_type(value, n)) {
            let want: Vec<String> = names
                .iter()
                .map(|n| match *n {
                    "integer" | "object" | "array" => format!("an {n}"),
                    "null" => "null".into(),
                    n => format!("a {n}"),
                })
                .collect();
            push(format!(
                "expected {}, got {} ({})",
                want.join(" or "),
                type_name(value),
                short(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = obj.get("enum") {
        if !options.contains(value) {
            let list: Vec<String> = options.iter().map(short).collect();
            push(format!(
                "{} is not one of {}",
                short(value),
                list.join(", ")
            ));
        }
    }
    if let Some(c) = obj.get("const") {
        if c != value {
            push(format!("expected {}, got {}", short(c), short(value)));
        }
    }
    if let Some(x) = value.as_f64() {
        let bound = |k: &str| obj.get(k).and_then(Value::as_f64);
        if let Some(m) = bound("minimum").filter(|m| x < *m) {
            push(format!("{x} is less than the minimum {m}"));
        }
        if let Some(m) = bound("maximum").filter(|m| x > *m) {
            push(format!("{x} is more than the maximum {m}"));
        }
        if let Some(m) = bound("exclusiveMinimum").filter(|m| x <= *m) {
            push(format!("{x} must be more than {m}"));
        }
        if let Some(m) = bound("exclusiveMaximum").filter(|m| x >= *m) {
            push(format!("{x} must be less than {m}"));
        }
    }
    if let Some(s) = value.as_str() {
        let n = s.chars().count() as u64;
        if let Some(m) = obj
            .get("minLength")
            .and_then(Value::as_u64)
            .filter(|m| n < *m)
        {
            push(format!(
                "the string has {n} characters, fewer than the minimum {m}"
            ));
        }
        if let Some(m) = obj
            .get("maxLength")
            .and_then(Value::as_u64)
            .filter(|m| n > *m)
        {
            push(format!(
                "the string has {n} characters, more than the maximum {m}"
            ));
        }
    }
    if let (Some(s), Some(rx)) = (value.as_str(), obj.get("pattern").and_then(Value::as_str)) {
        let shown: String = rx.chars().take(80).collect();
        let more = if rx.chars().count() > 80 { "…" } else { "" };
        match compiled(rx) {
            Ok(re) if re.is_match(s) => {}
            Ok(_) => push(format!(
                "the string does not match the pattern {shown}{more}"
            )),
            Err(e) => push(format!(
                "the pattern {shown}{more} cannot be checked here: {e}"
            )),
        }
    }
    if let Some(items) = value.as_array() {
        let n = items.len() as u64;
        if let Some(m) = obj
            .get("minItems")
            .and_then(Value::as_u64)
            .filter(|m| n < *m)
        {
            push(format!(
                "the list has {n} items, fewer than the minimum {m}"
            ));
        }
        if let Some(m) = obj
            .get("maxItems")
            .and_then(Value::as_u64)
            .filter(|m| n > *m)
        {
            push(format!("the list has {n} items, more than the maximum {m}"));
        }
        if let Some(item_schema) = obj.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate_node(item_schema, item, &format!("{path}[{i}]"), errors);
            }
        }
    }
    if let Some(map) = value.as_object() {
        let props = obj.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(req)) = obj.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    errors.push(ValidationError {
                        path: path.to_string(),
                        message: format!("the required property `{r}` is missing"),
                    });
                }
            }
        }
        for (k, v) in map {
            let sub_path = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate_node(s, v, &sub_path, errors),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = props
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        errors.push(ValidationError {
                            path: sub_path,
                            message: format!(
                                "unknown property `{k}` (allowed: {})",
                                known.join(", ")
                            ),
                        });
                    }
                    Some(s @ Value::Object(_)) => validate_node(s, v, &sub_path, errors),
                    _ => {}
                },
            }
        }
    }
    if let Some(Value::Array(options)) = obj.get("anyOf") {
        let matched = options.iter().any(|s| {
            let mut e = Vec::new();
            validate_node(s, value, path, &mut e);
            e.is_empty()
        });
        if !matched {
            errors.push(ValidationError {
                path: path.to_string(),
                message: format!("{} matches none of the allowed shapes", short(value)),
            });
        }
    }
}
