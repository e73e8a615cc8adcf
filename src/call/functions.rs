//! Function definitions as users bring them: OpenAI's tools format or bare objects, read and
//! normalised into schemas the constraint engine compiles, with every change reported.

use serde_json::{json, Map, Value};

use crate::constrain::keywords::{KNOWN, ONE_SCHEMA, SCHEMA_LIST, SCHEMA_MAP};

/// One function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Its name (what the model writes in a call).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments, normalised.
    pub parameters: Value,
}

impl Function {
    /// The definition in OpenAI's tools format, as chat templates expect it.
    pub fn to_openai(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }})
    }
}

/// A definition that cannot be used, naming the function (or its place) and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct FunctionError {
    /// Where the definitions came from (a file name, `stdin`, `line 3`).
    pub origin: String,
    /// What is wrong, with the function's name or index.
    pub message: String,
}

/// Loose type names seen in real-world definitions, and the JSON Schema type they mean.
const TYPE_ALIASES: &[(&str, &str)] = &[
    ("dict", "object"),
    ("map", "object"),
    ("float", "number"),
    ("double", "number"),
    ("int", "integer"),
    ("long", "integer"),
    ("tuple", "array"),
    ("list", "array"),
    ("str", "string"),
    ("bool", "boolean"),
];

/// Reads definitions from JSON text: an array of `{"type": "function", "function": {...}}`
/// objects or of bare `{"name", "description", "parameters"}` objects (one object alone is
/// accepted too). Returns the functions and the normalisations made, one line each.
pub fn parse_functions(
    text: &str,
    origin: &str,
) -> Result<(Vec<Function>, Vec<String>), FunctionError> {
    let err = |message: String| FunctionError {
        origin: origin.to_string(),
        message,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| {
        err(format!(
            "not valid JSON ({e}); expected an array of function definitions"
        ))
    })?;
    from_value(&v, origin)
}

/// Like [`parse_functions`], from a parsed value.
pub fn from_value(v: &Value, origin: &str) -> Result<(Vec<Function>, Vec<String>), FunctionError> {
    let err = |message: String| FunctionError {
        origin: origin.to_string(),
        message,
    };
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Object(_) => vec![v],
        _ => {
            return Err(err(
                "expected an array of function definitions ({\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}})".into(),
            ))
        }
    };
    if items.is_empty() {
        return Err(err(
            "the list of functions is empty; define at least one".into()
        ));
    }
    let mut functions: Vec<Function> = Vec::new();
    let mut notes = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let def = match item.get("function") {
            Some(f)
                if item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("function")
                    == "function" =>
            {
                f
            }
            Some(_) => {
                return Err(err(format!(
                    "function {i}: `type` is {}, but only \"function\" tools are supported",
                    item["type"]
                )))
            }
            None => item,
        };
        let Some(obj) = def.as_object() else {
            return Err(err(format!("function {i} is not an object")));
        };
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| err(format!("function {i} has no `name` string")))?
            .to_string();
        let valid = name.len() <= 64
            && !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        if !valid {
            return Err(err(format!(
                "function {i}: the name `{name}` is not valid: use 1-64 letters, digits, `_`, `-` or `.`"
            )));
        }
        if functions.iter().any(|f| f.name == name) {
            return Err(err(format!(
                "two functions are named `{name}`; names must be unique"
            )));
        }
        let description = obj
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut parameters = match obj.get("parameters") {
            None | Some(Value::Null) => {
                notes.push(format!(
                    "{name}: no `parameters`: the function takes no arguments"
                ));
                json!({"type": "object", "properties": {}})
            }
            Some(p) if p.is_object() => p.clone(),
            Some(p) => {
                return Err(err(format!(
                    "function `{name}`: `parameters` must be a JSON Schema object, found {p}"
                )))
            }
        };
        normalise(&mut parameters, &format!("{name}: parameters"), &mut notes);
        if parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(err(format!(
                "function `{name}`: `parameters` must describe an object (\"type\": \"object\"), found type {}",
                parameters.get("type").cloned().unwrap_or(Value::Null)
            )));
        }
        functions.push(Function {
            name,
            description,
            parameters,
        });
    }
    Ok((functions, notes))
}

/// Normalises a loosely written schema in place, adding one line to `notes` per change:
/// Python type names (`dict`, `float`, `tuple`, ...) become JSON Schema types, a missing
/// `type` is inferred from `properties` (object) or `items` (array), unknown keywords are
/// dropped, and objects with `properties` get `additionalProperties: false` unless they say
/// otherwise, so the model cannot add arguments nobody defined.
pub fn normalise(schema: &mut Value, at: &str, notes: &mut Vec<String>) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    // Types.
    match obj.get_mut("type") {
        Some(Value::String(t)) => {
            if let Some((_, to)) = TYPE_ALIASES.iter().find(|(from, _)| *from == t.as_str()) {
                notes.push(format!("{at}: type \"{t}\" read as \"{to}\""));
                *t = to.to_string();
            }
        }
        Some(Value::Array(ts)) => {
            for t in ts.iter_mut() {
                if let Some(s) = t.as_str() {
                    if let Some((_, to)) = TYPE_ALIASES.iter().find(|(from, _)| *from == s) {
                        notes.push(format!("{at}: type \"{s}\" read as \"{to}\""));
                        *t = Value::String(to.to_string());
                    }
                }
            }
        }
        _ => {
            if obj.contains_key("properties") {
                notes.push(format!("{at}: no type, but properties: read as an object"));
                obj.insert("type".into(), json!("object"));
            } else if obj.contains_key("items") {
                notes.push(format!("{at}: no type, but items: read as an array"));
                obj.insert("type".into(), json!("array"));
            }
        }
    }
    // Unknown keywords.
    let unknown: Vec<String> = obj
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()) && !k.starts_with("x-"))
        .cloned()
        .collect();
    for k in unknown {
        notes.push(format!("{at}: unknown keyword `{k}` ignored"));
        obj.remove(&k);
    }
    if obj.get("type").and_then(Value::as_str) == Some("object")
        && obj.contains_key("properties")
        && !obj.contains_key("additionalProperties")
    {
        obj.insert("additionalProperties".into(), json!(false));
    }
    // Subschemas.
    let keys: Vec<String> = obj.keys().cloned().collect();
    for k in keys {
        let Some(v) = obj.get_mut(&k) else { continue };
        if ONE_SCHEMA.contains(&k.as_str()) && v.is_object() {
            normalise(v, &format!("{at}.{k}"), notes);
        } else if SCHEMA_LIST.contains(&k.as_str()) {
            if let Value::Array(items) = v {
                for (i, s) in items.iter_mut().enumerate() {
                    normalise(s, &format!("{at}.{k}[{i}]"), notes);
                }
            }
        } else if SCHEMA_MAP.contains(&k.as_str()) {
            if let Value::Object(m) = v {
                normalise_map(m, &format!("{at}.{k}"), notes);
            }
        }
    }
}

fn normalise_map(m: &mut Map<String, Value>, at: &str, notes: &mut Vec<String>) {
    for (name, s) in m.iter_mut() {
        normalise(s, &format!("{at}.{name}"), notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(v: Value) -> (Value, Vec<String>) {
        let mut v = v;
        let mut notes = Vec::new();
        normalise(&mut v, "f: parameters", &mut notes);
        (v, notes)
    }

    #[test]
    fn python_type_names_become_json_schema_types() {
        for (from, to) in [
            ("dict", "object"),
            ("float", "number"),
            ("tuple", "array"),
            ("int", "integer"),
            ("str", "string"),
            ("bool", "boolean"),
            ("list", "array"),
        ] {
            let (v, notes) = norm(json!({"type": from}));
            assert_eq!(v["type"], to);
            assert_eq!(
                notes,
                vec![format!("f: parameters: type \"{from}\" read as \"{to}\"")]
            );
        }
    }

    #[test]
    fn a_missing_type_is_inferred_and_nested_schemas_are_normalised() {
        let (v, notes) = norm(json!({
            "properties": {"when": {"type": "float"}, "tags": {"items": {"type": "str"}}},
            "required": ["when"]
        }));
        assert_eq!(v["type"], "object");
        assert_eq!(v["additionalProperties"], false);
        assert_eq!(v["properties"]["when"]["type"], "number");
        assert_eq!(v["properties"]["tags"]["type"], "array");
        assert_eq!(v["properties"]["tags"]["items"]["type"], "string");
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(notes[0].contains("read as an object"));
    }

    #[test]
    fn unknown_keywords_are_dropped_with_a_note_and_property_names_are_kept() {
        let (v, notes) = norm(json!({"type": "object", "properties": {
            "optional": {"type": "string", "optional": true}}}));
        assert!(v["properties"].get("optional").is_some());
        assert!(v["properties"]["optional"].get("optional").is_none());
        assert_eq!(
            notes,
            vec!["f: parameters.properties.optional: unknown keyword `optional` ignored"]
        );
    }

    #[test]
    fn both_formats_are_read_and_bad_definitions_name_the_function() {
        let openai = r#"[{"type": "function", "function": {"name": "a", "description": "A.", "parameters": {"type": "object", "properties": {"x": {"type": "int"}}, "required": ["x"]}}},
                         {"name": "b", "parameters": {"type": "dict", "properties": {}}}]"#;
        let (fs, notes) = parse_functions(openai, "f.json").unwrap();
        assert_eq!(fs.len(), 2);
        assert_eq!(fs[0].parameters["properties"]["x"]["type"], "integer");
        assert_eq!(fs[1].parameters["type"], "object");
        assert_eq!(notes.len(), 2, "{notes:?}");
        let e = parse_functions(r#"[{"name": "a b"}]"#, "f.json").unwrap_err();
        assert!(e.to_string().contains("`a b` is not valid"), "{e}");
        let e = parse_functions(r#"[{"name": "a"}, {"name": "a"}]"#, "f.json").unwrap_err();
        assert!(e.to_string().contains("two functions are named `a`"), "{e}");
        let e = parse_functions("[]", "f.json").unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        let e = parse_functions(
            r#"[{"name": "s", "parameters": {"type": "string"}}]"#,
            "f.json",
        )
        .unwrap_err();
        assert!(e.to_string().contains("function `s`"), "{e}");
    }
}
