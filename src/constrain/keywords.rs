//! A check llguidance does not make: every keyword in a schema must be a JSON Schema keyword.
//!
//! The JSON Schema specification says unknown keywords are ignored, and llguidance follows
//! it, so a typo such as `maxLenght` would silently leave a string unbounded. For constrained
//! decoding that is a fallback to weaker constraints than the author wrote, so cairn rejects
//! unknown keywords, naming the keyword and where it is. Extensions spelled `x-...` pass.
//! Keywords JSON Schema knows but llguidance does not implement (`not`, `uniqueItems`) are left
//! to llguidance, which names them.

use serde_json::Value;

/// Every keyword of JSON Schema drafts 4 to 2020-12.
pub(crate) const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "prefixItems",
    "items",
    "additionalItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
];

/// Keywords whose value is one schema.
pub(crate) const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalItems",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// Keywords whose value is an array of schemas.
pub(crate) const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// Keywords whose value maps names to schemas.
pub(crate) const SCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// The first unknown keyword in `schema`, with its JSON pointer (`/properties/name`).
pub fn first_unknown(schema: &Value) -> Option<(String, String)> {
    let obj = schema.as_object()?;
    for (key, value) in obj {
        let at = |sub: &str| format!("/{}{sub}", escape(key));
        if !KNOWN.contains(&key.as_str()) && !key.starts_with("x-") {
            return Some((key.clone(), String::new()));
        }
        let found = if ONE_SCHEMA.contains(&key.as_str()) && value.is_object() {
            first_unknown(value).map(|(k, p)| (k, at(&p)))
        } else if SCHEMA_LIST.contains(&key.as_str()) && value.is_array() {
            value
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .find_map(|(i, v)| first_unknown(v).map(|(k, p)| (k, at(&format!("/{i}{p}")))))
        } else if SCHEMA_MAP.contains(&key.as_str()) {
            value
                .as_object()
                .into_iter()
                .flatten()
                .find_map(|(name, v)| {
                    first_unknown(v).map(|(k, p)| (k, at(&format!("/{}{p}", escape(name)))))
                })
        } else {
            None
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typo_deep_inside_is_found_with_its_path() {
        let s = json!({"anyOf": [{"type": "object", "properties": {"name": {"type": "string", "maxLenght": 3}}}]});
        assert_eq!(
            first_unknown(&s),
            Some(("maxLenght".into(), "/anyOf/0/properties/name".into()))
        );
    }

    #[test]
    fn property_names_enum_values_and_extensions_are_not_keywords() {
        let s = json!({"type": "object", "properties": {"frobnicate": {"enum": [{"weird": 1}]}},
                       "x-guidance": {"whitespace_flexible": false}, "default": {"odd": 2}});
        assert_eq!(first_unknown(&s), None);
    }
}
