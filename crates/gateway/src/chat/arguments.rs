//! A call's arguments checked against its tool's JSON Schema, before the call may reach the
//! client: required keys, types (after the parser's coercion), `enum`, `const`, nested
//! objects and arrays (`schema::violations`), keys the schema does not declare, and values
//! that are a piece of the schema rather than a value (a small model that copies
//! `{"type": "string"}` or a parameter's description into the arguments). A call that
//! packs several values into parameters that take one is split into one call each
//! ([`fan_out`]).

use serde_json::{Map, Value};

use crate::chat::schema;
use crate::chat::types::ToolSpec;

/// At most this many faults are reported for one call.
const MAX_FAULTS: usize = 8;

/// JSON Schema's type names.
const TYPE_NAMES: &[&str] = &["string", "integer", "number", "boolean", "object", "array", "null"];

/// Keys of a schema object: an object made of these and a `type` is a schema, not a value.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "description",
    "enum",
    "items",
    "properties",
    "required",
    "default",
    "format",
    "title",
    "minimum",
    "maximum",
    "examples",
    "additionalProperties",
];

/// What is wrong with `arguments` (a JSON object's text) for `tool`; empty when nothing is.
/// Keys the schema does not declare are faults for every tool that lists its properties
/// (for a strict one they are never let through; for another, only asked about again).
pub(crate) fn faults(tool: &ToolSpec, arguments: &str) -> Vec<String> {
    let Some(schema) = tool.parameters.as_ref() else {
        return Vec::new();
    };
    let value: Value = match serde_json::from_str(arguments) {
        Ok(value) => value,
        Err(err) => return vec![format!("the arguments are not JSON ({err})")],
    };
    let mut out: Vec<String> = schema::violations(schema, &value)
        .into_iter()
        .map(|line| line.strip_prefix("$.").or(line.strip_prefix("$")).unwrap_or(&line).to_owned())
        .map(|line| {
            line.strip_prefix(": ").map(|rest| format!("the arguments: {rest}")).unwrap_or(line)
        })
        .collect();
    walk(schema, &value, "", &mut out, 0);
    out.dedup();
    out.truncate(MAX_FAULTS);
    out
}

/// How a fault about a piece of the schema written as a value ends.
const NOT_A_VALUE: &str = "not a value: write the value itself";

/// Whether `arguments` recite the tool's schema instead of giving values: the whole object
/// is the schema (`{"type": "object", "properties": …}`, where the tool declares no such
/// parameters), or a value is a piece of it (`{"city": {"type": "string"}}`).
pub(crate) fn recite_schema(tool: &ToolSpec, arguments: &str) -> bool {
    let Some(schema) = tool.parameters.as_ref() else {
        return false;
    };
    let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(arguments) else {
        return false;
    };
    let declared = |key: &str| {
        schema.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(key))
    };
    let whole = ["type", "properties"].iter().all(|key| value.get(key).is_some() && !declared(key));
    let mut out = Vec::new();
    walk(schema, &value, "", &mut out, 0);
    whole || out.iter().any(|fault| fault.ends_with(NOT_A_VALUE))
}

/// Whether a value is a JSON Schema object (`{"type": "string", "description": …}`).
fn looks_like_schema(value: &Map<String, Value>) -> bool {
    let typed = value.get("type").and_then(Value::as_str).is_some_and(|t| TYPE_NAMES.contains(&t));
    typed && value.keys().all(|key| SCHEMA_KEYS.contains(&key.as_str()))
}

fn at(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// Unknown keys and schema pieces, under the schema's `properties`.
fn walk(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>, depth: usize) {
    if depth > 32 || out.len() >= MAX_FAULTS {
        return;
    }
    let (Some(properties), Value::Object(object)) =
        (schema.get("properties").and_then(Value::as_object), value)
    else {
        if let (Some(items), Value::Array(values)) = (schema.get("items"), value) {
            for (i, item) in values.iter().enumerate() {
                walk(items, item, &format!("{path}[{i}]"), out, depth + 1);
            }
        }
        return;
    };
    let open =
        matches!(schema.get("additionalProperties"), Some(Value::Object(_) | Value::Bool(true)));
    for (key, item) in object {
        let Some(property) = properties.get(key) else {
            if !open {
                let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
                known.sort_unstable();
                out.push(format!(
                    "\"{}\" is not a parameter of this tool (its parameters are: {})",
                    at(path, key),
                    known.join(", ")
                ));
            }
            continue;
        };
        let expects_schema = property
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key("type"));
        if expects_schema {
            // A parameter whose values are schemas: what looks like one is its value.
            continue;
        }
        match item {
            Value::Object(inner) if looks_like_schema(inner) => {
                out.push(format!(
                    "{} holds a piece of the schema ({item}), {NOT_A_VALUE}",
                    at(path, key)
                ));
                continue;
            }
            Value::String(text) => {
                let declared_type = property.get("type").and_then(Value::as_str);
                let description =
                    property.get("description").and_then(Value::as_str).map(str::trim);
                let copied = declared_type.is_some_and(|t| t == text && t != "null")
                    || description.is_some_and(|d| !d.is_empty() && d == text.trim());
                let allowed = property
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.contains(item));
                if copied && !allowed {
                    out.push(format!(
                        "{} is \"{text}\", which the schema describes the parameter with, {NOT_A_VALUE}",
                        at(path, key)
                    ));
                    continue;
                }
            }
            _ => {}
        }
        walk(property, item, &at(path, key), out, depth + 1);
    }
}

/// The most calls one packed call is split into.
const MAX_FAN_OUT: usize = 16;

/// The types of a parameter that takes one value.
const SCALAR_TYPES: &[&str] = &["string", "integer", "number", "boolean"];

/// A call that packs several values into parameters that each take one, as a small model
/// writes "the weather in Paris and Rome" (`{"city": ["Paris", "Rome"]}`), split into one
/// call per value: the arguments of each, in order. Lists of one value go to every call;
/// the others must be as long as each other (the first value with the first, and so on).
/// `None` when the call packs nothing, when the lists cannot be paired (different lengths,
/// more than [`MAX_FAN_OUT`], values that are not scalars), and for a string parameter
/// described as a list (`comma-separated`), which wants the values joined, not split.
pub(crate) fn fan_out(tool: &ToolSpec, arguments: &str) -> Option<Vec<String>> {
    // Most calls hold no list at all: they are not parsed again here.
    if !arguments.contains('[') {
        return None;
    }
    let properties = tool.parameters.as_ref()?.get("properties")?.as_object()?;
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(arguments) else {
        return None;
    };
    let mut length = 1;
    // The keys whose lists are split, each with its parameter's type.
    let mut packed: Vec<(&str, &str)> = Vec::new();
    for (key, value) in &object {
        let Value::Array(values) = value else { continue };
        let Some(property) = properties.get(key) else { continue };
        let Some(kind) = property.get("type").and_then(Value::as_str) else { continue };
        if !SCALAR_TYPES.contains(&kind) {
            continue;
        }
        let description = property.get("description").and_then(Value::as_str).unwrap_or("");
        let description = description.to_lowercase();
        if ["list", "comma", "separated"].iter().any(|word| description.contains(word))
            || values.iter().any(|v| v.is_array() || v.is_object())
        {
            return None;
        }
        match values.len() {
            0 => return None,
            1 => {}
            n if length == 1 && n <= MAX_FAN_OUT => length = n,
            n if n == length => {}
            _ => return None,
        }
        packed.push((key, kind));
    }
    if length == 1 {
        return None;
    }
    let piece = |i: usize| {
        let mut one = Map::new();
        for (key, value) in &object {
            let value = match (value, packed.iter().find(|(k, _)| k == key)) {
                (Value::Array(values), Some((_, kind))) => {
                    values.get(i).or(values.first()).map(|v| as_type(v, kind))
                }
                _ => Some(value.clone()),
            };
            one.insert(key.clone(), value.unwrap_or(Value::Null));
        }
        Value::Object(one).to_string()
    };
    Some((0..length).map(piece).collect())
}

/// A value out of a packed list, as the parameter's type takes it: the parser coerces the
/// values it reads to their schema, but the members of a list where one value goes have no
/// schema of their own (`"days": ["2", "3"]` for an integer: 2 and 3).
fn as_type(value: &Value, kind: &str) -> Value {
    let coerced = match (kind, value) {
        ("integer", Value::String(text)) => text.trim().parse::<i64>().ok().map(Value::from),
        ("number", Value::String(text)) => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ("boolean", Value::String(text)) => match text.trim().to_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(number)) => Some(Value::String(number.to_string())),
        _ => None,
    };
    coerced.unwrap_or_else(|| value.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(parameters: Value, strict: bool) -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: None,
            parameters: Some(parameters),
            strict,
        }
    }

    fn weather() -> ToolSpec {
        tool(
            json!({"type": "object", "properties": {
                "city": {"type": "string", "description": "The city name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            }, "required": ["city"]}),
            false,
        )
    }

    #[test]
    fn right_arguments_have_no_faults() {
        let args = r#"{"city":"Paris","unit":"celsius","days":2,"where":{"lat":1.5},"tags":["a"]}"#;
        assert_eq!(faults(&weather(), args), Vec::<String>::new());
        assert_eq!(
            faults(&tool(json!({"type": "object"}), true), r#"{"x":1}"#),
            Vec::<String>::new()
        );
        let no_schema =
            ToolSpec { name: "f".into(), description: None, parameters: None, strict: false };
        assert_eq!(faults(&no_schema, r#"{"x":1}"#), Vec::<String>::new());
    }

    #[test]
    fn each_kind_of_fault_is_named_with_its_place() {
        let cases = [
            (r#"{}"#, "the arguments: the required key \"city\" is missing"),
            (r#"{"city":7}"#, "city: expected string, got integer"),
            (
                r#"{"city":"Paris","unit":"kelvin"}"#,
                "unit: \"kelvin\" is not one of [\"celsius\",\"fahrenheit\"]",
            ),
            (r#"{"city":"Paris","where":{}}"#, "where: the required key \"lat\" is missing"),
            (r#"{"city":"Paris","tags":[1]}"#, "tags[0]: expected string, got integer"),
            (
                r#"{"city":"Paris","city2":"Oslo"}"#,
                "\"city2\" is not a parameter of this tool (its parameters are: city, days, tags, unit, where)",
            ),
        ];
        for (args, fault) in cases {
            assert_eq!(faults(&weather(), args), vec![fault.to_owned()], "{args}");
        }
    }

    #[test]
    fn a_piece_of_the_schema_is_no_value() {
        let found = faults(&weather(), r#"{"city":{"type":"string"}}"#);
        assert!(
            found.iter().any(|f| f.starts_with("city holds a piece of the schema")),
            "{found:?}"
        );
        let found = faults(&weather(), r#"{"city":"string"}"#);
        assert!(
            found.iter().any(|f| f.contains("which the schema describes the parameter with")),
            "{found:?}"
        );
        let found = faults(&weather(), r#"{"city":"The city name"}"#);
        assert_eq!(found.len(), 1, "{found:?}");
        // An enum that allows the word is a value.
        let open = tool(
            json!({"type": "object", "properties": {"kind": {"type": "string", "enum": ["string", "number"]}}}),
            false,
        );
        assert_eq!(faults(&open, r#"{"kind":"string"}"#), Vec::<String>::new());
        // A parameter whose values are schemas takes one.
        let meta = tool(
            json!({"type": "object", "properties": {"schema": {"type": "object", "properties": {"type": {"type": "string"}}}}}),
            false,
        );
        assert_eq!(faults(&meta, r#"{"schema":{"type":"string"}}"#), Vec::<String>::new());
    }

    #[test]
    fn open_objects_take_any_key() {
        let open = tool(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true}),
            true,
        );
        assert_eq!(faults(&open, r#"{"a":"x","b":1}"#), Vec::<String>::new());
    }

    #[test]
    fn issue_24_a_call_packing_several_values_is_split_into_one_call_each() {
        let split = |args: &str| fan_out(&weather(), args);
        assert_eq!(
            split(r#"{"city":["Paris","Rome"],"days":[2,3],"unit":["celsius"],"tags":["a","b"]}"#),
            Some(vec![
                r#"{"city":"Paris","days":2,"unit":"celsius","tags":["a","b"]}"#.to_owned(),
                r#"{"city":"Rome","days":3,"unit":"celsius","tags":["a","b"]}"#.to_owned(),
            ])
        );
        // Nothing packed, lists that do not pair, lists of lists: as written.
        for args in [
            r#"{"city":"Paris","tags":["a","b"]}"#,
            r#"{"city":["Paris"]}"#,
            r#"{"city":["Paris","Rome"],"days":[1,2,3]}"#,
            r#"{"city":[["Paris"],["Rome"]]}"#,
            r#"{"city":[]}"#,
            "[1]",
        ] {
            assert_eq!(split(args), None, "{args}");
        }
        let joined = tool(
            json!({"type": "object", "properties": {"items": {"type": "string", "description": "Comma-separated names"}}}),
            false,
        );
        assert_eq!(fan_out(&joined, r#"{"items":["a","b"]}"#), None);
    }

    /// BFCL's `irrelevance_0` (emulated): the model recited the tool's schema as the
    /// arguments, twice; such a reply is no call.
    #[test]
    fn issue_24_a_schema_recited_as_arguments_is_told_apart() {
        let recited = [
            r#"{"type":"object","properties":{"city":{"type":"string","description":"The city name"}},"required":["city"]}"#,
            r#"{"city":{"type":"string"}}"#,
            r#"{"city":"The city name"}"#,
            r#"{"city":"Paris","where":{"type":"object","properties":{"lat":{"type":"number"}}}}"#,
        ];
        for args in recited {
            assert!(recite_schema(&weather(), args), "{args}");
        }
        for args in [r#"{"city":"Paris","unit":"celsius"}"#, r#"{"city":"Paris","type":"x"}"#, "[]"]
        {
            assert!(!recite_schema(&weather(), args), "{args}");
        }
        let typed = tool(
            json!({"type": "object", "properties": {"type": {"type": "string"}, "properties": {"type": "object"}}}),
            false,
        );
        assert!(!recite_schema(&typed, r#"{"type":"house","properties":{"rooms":3}}"#));
    }

    /// BFCL's `parallel_0` (emulated): `"duration": ["20", "15"]` for an integer parameter
    /// went out as two calls with `"duration": "20"` and `"15"`, strings the client's schema
    /// does not take.
    #[test]
    fn issue_24_split_values_take_their_parameter_type() {
        let typed = tool(
            json!({"type": "object", "properties": {
                "artist": {"type": "string"},
                "duration": {"type": "integer"},
                "rate": {"type": "number"},
                "loud": {"type": "boolean"}
            }}),
            false,
        );
        assert_eq!(
            fan_out(
                &typed,
                r#"{"artist":["Taylor Swift",5],"duration":["20"," 15 "],"rate":["0.5","x"],"loud":["TRUE","false"]}"#
            ),
            Some(vec![
                r#"{"artist":"Taylor Swift","duration":20,"rate":0.5,"loud":true}"#.to_owned(),
                r#"{"artist":"5","duration":15,"rate":"x","loud":false}"#.to_owned(),
            ])
        );
    }
}
