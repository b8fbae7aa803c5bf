//! Structured outputs: the response format a client asked for, how an answer is read from the
//! model's text, and a JSON Schema validator for the subset structured outputs use (`type`,
//! `properties`, `required`, `additionalProperties`, `items`, `prefixItems`, `enum`, `const`,
//! `anyOf`/`oneOf`/`allOf`, local `$ref`s into `$defs`, length, size and range bounds).
//! Keywords outside it (`format`, `pattern`, …) are not checked.

use serde_json::{Map, Value};

use crate::neutral::OutputFormat;

impl OutputFormat {
    /// The answer in `text`, checked: the JSON value (the model's text without white space
    /// around it or a Markdown fence), or what is wrong with it.
    pub(crate) fn check(&self, text: &str) -> Result<String, String> {
        let json = unfence(text);
        let value: Value = serde_json::from_str(json).map_err(|err| {
            format!("the answer is not valid JSON ({err}); write only the JSON value, nothing before or after it")
        })?;
        match &self.schema {
            None if !value.is_object() => Err("the answer must be a JSON object".into()),
            None => Ok(json.to_owned()),
            Some(schema) => {
                let mut errors = Vec::new();
                Validator { root: schema, strict: self.strict, errors: &mut errors }
                    .check(schema, &value, "$", 0);
                if errors.is_empty() {
                    Ok(json.to_owned())
                } else {
                    errors.truncate(8);
                    Err(errors.join("; "))
                }
            }
        }
    }
}

/// What in `value` breaks `schema`: one line each (`$.city: expected string, got object`).
/// Unknown keys are not reported here (see `chat::arguments`).
pub(crate) fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    Validator { root: schema, strict: false, errors: &mut errors }.check(schema, value, "$", 0);
    errors
}

/// The text inside a Markdown code fence, if the whole text is one; else the text trimmed.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return trimmed };
    let Some(body) = rest.strip_suffix("```") else { return trimmed };
    // Drop the fence's label line (`json`).
    match body.split_once('\n') {
        Some((label, inner)) if !label.trim().contains(['{', '[']) => inner.trim(),
        _ => body.trim(),
    }
}

/// How deep `$ref`s may nest before the validator stops following them.
const MAX_DEPTH: usize = 64;

struct Validator<'a, 'e> {
    root: &'a Value,
    strict: bool,
    errors: &'e mut Vec<String>,
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, wanted: &str) -> bool {
    match wanted {
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        other => type_name(value) == other,
    }
}

impl Validator<'_, '_> {
    /// Whether `value` matches `schema`, without recording errors.
    fn matches(&mut self, schema: &Value, value: &Value, depth: usize) -> bool {
        let mut errors = Vec::new();
        Validator { root: self.root, strict: self.strict, errors: &mut errors }
            .check(schema, value, "$", depth);
        errors.is_empty()
    }

    fn fail(&mut self, path: &str, message: String) {
        self.errors.push(format!("{path}: {message}"));
    }

    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn check(&mut self, schema: &Value, value: &Value, path: &str, depth: usize) {
        let Value::Object(schema) = schema else {
            if schema == &Value::Bool(false) {
                self.fail(path, "no value is allowed here".into());
            }
            return;
        };
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => self.check(&target.clone(), value, path, depth + 1),
                None => {
                    self.fail(path, format!("the schema's $ref {reference} cannot be resolved"))
                }
            }
        }
        match schema.get("type") {
            Some(Value::String(wanted)) if !has_type(value, wanted) => {
                return self.fail(path, format!("expected {wanted}, got {}", type_name(value)));
            }
            Some(Value::Array(types))
                if !types.iter().filter_map(Value::as_str).any(|t| has_type(value, t)) =>
            {
                let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                return self.fail(
                    path,
                    format!("expected {}, got {}", names.join(" or "), type_name(value)),
                );
            }
            _ => {}
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            if !options.contains(value) {
                self.fail(path, format!("{value} is not one of {}", Value::Array(options.clone())));
            }
        }
        if let Some(expected) = schema.get("const") {
            if expected != value {
                self.fail(path, format!("expected {expected}, got {value}"));
            }
        }
        for (key, all) in [("anyOf", false), ("oneOf", false), ("allOf", true)] {
            if let Some(Value::Array(options)) = schema.get(key) {
                let passing = options.iter().filter(|o| self.matches(o, value, depth + 1)).count();
                let ok = if all {
                    passing == options.len()
                } else if key == "oneOf" {
                    passing == 1
                } else {
                    passing > 0
                };
                if !ok {
                    self.fail(path, format!("does not match {key} of the schema"));
                }
            }
        }
        match value {
            Value::Object(object) => self.check_object(schema, object, path, depth),
            Value::Array(items) => self.check_array(schema, items, path, depth),
            Value::String(text) => {
                let n = text.chars().count() as u64;
                if schema.get("minLength").and_then(Value::as_u64).is_some_and(|min| n < min) {
                    self.fail(path, format!("a string of {n} characters is too short"));
                }
                if schema.get("maxLength").and_then(Value::as_u64).is_some_and(|max| n > max) {
                    self.fail(path, format!("a string of {n} characters is too long"));
                }
            }
            Value::Number(number) => {
                let n = number.as_f64().unwrap_or(0.0);
                let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
                let broken = [
                    (bound("minimum").is_some_and(|b| n < b), "minimum"),
                    (bound("maximum").is_some_and(|b| n > b), "maximum"),
                    (bound("exclusiveMinimum").is_some_and(|b| n <= b), "exclusiveMinimum"),
                    (bound("exclusiveMaximum").is_some_and(|b| n >= b), "exclusiveMaximum"),
                ];
                for (out, key) in broken {
                    if out {
                        self.fail(path, format!("{n} is outside the {key} of {}", schema[key]));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(
        &mut self,
        schema: &Map<String, Value>,
        object: &serde_json::Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(key) = key.as_str() {
                if !object.contains_key(key) {
                    self.fail(path, format!("the required key \"{key}\" is missing"));
                }
            }
        }
        for (key, item) in object {
            let item_path = format!("{path}.{key}");
            match properties.and_then(|p| p.get(key)) {
                Some(property) => self.check(property, item, &item_path, depth + 1),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) if self.strict => {
                        self.fail(path, format!("the key \"{key}\" is not allowed"));
                    }
                    Some(extra @ Value::Object(_)) => {
                        self.check(extra, item, &item_path, depth + 1)
                    }
                    _ => {}
                },
            }
        }
        self.count(schema, ["minProperties", "maxProperties"], object.len(), "keys", path);
    }

    /// `n` held against the schema's bounds (`[min, max]` keys), a fault for each broken.
    fn count(
        &mut self,
        schema: &Map<String, Value>,
        [min, max]: [&str; 2],
        n: usize,
        what: &str,
        path: &str,
    ) {
        let n = n as u64;
        let limit = |key: &str| schema.get(key).and_then(Value::as_u64);
        if limit(min).is_some_and(|min| n < min) {
            self.fail(path, format!("{n} {what} are too few"));
        }
        if limit(max).is_some_and(|max| n > max) {
            self.fail(path, format!("{n} {what} are too many"));
        }
    }

    fn check_array(
        &mut self,
        schema: &Map<String, Value>,
        items: &[Value],
        path: &str,
        depth: usize,
    ) {
        let prefix = schema.get("prefixItems").and_then(Value::as_array);
        let n_prefix = prefix.map_or(0, Vec::len);
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            match prefix.and_then(|p| p.get(i)) {
                Some(item_schema) => self.check(item_schema, item, &item_path, depth + 1),
                None if i >= n_prefix => {
                    if let Some(item_schema) = schema.get("items") {
                        self.check(item_schema, item, &item_path, depth + 1);
                    }
                }
                None => {}
            }
        }
        self.count(schema, ["minItems", "maxItems"], items.len(), "items", path);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn format(schema: Value, strict: bool) -> OutputFormat {
        OutputFormat { name: "answer".into(), schema: Some(schema), strict }
    }

    #[test]
    fn answers_are_read_without_fences_and_checked() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"}, "temp": {"type": "integer", "minimum": -90},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "unit": {"enum": ["C", "F"]}, "note": {"type": ["string", "null"]},
            "where": {"$ref": "#/$defs/place"}},
            "required": ["city", "temp"], "additionalProperties": false,
            "$defs": {"place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}}});
        let strict = format(schema.clone(), true);
        let good = "```json\n{\"city\": \"Paris\", \"temp\": 18, \"unit\": \"C\", \"note\": null, \"where\": {\"lat\": 48.8}}\n```";
        assert_eq!(
            strict.check(good).unwrap(),
            "{\"city\": \"Paris\", \"temp\": 18, \"unit\": \"C\", \"note\": null, \"where\": {\"lat\": 48.8}}"
        );
        let bad = r#"{"city": 3, "temp": -100, "tags": ["a", "b", 4], "unit": "K", "extra": 1, "where": {}}"#;
        let err = strict.check(bad).unwrap_err();
        for part in [
            "$.city: expected string",
            "$.temp: -100 is outside the minimum",
            "$.tags[2]: expected string",
            "$.unit:",
            "\"extra\" is not allowed",
        ] {
            assert!(err.contains(part), "{part} missing from {err}");
        }
        assert!(
            format(schema.clone(), false)
                .check(r#"{"city": "P", "temp": 1, "extra": true}"#)
                .is_ok(),
            "not strict: extra keys pass"
        );
        assert!(strict.check(r#"{"city": "P"}"#).unwrap_err().contains("\"temp\" is missing"));
        assert!(strict.check("Sure! Here it is.").unwrap_err().contains("not valid JSON"));
        let any_object = OutputFormat { name: "x".into(), schema: None, strict: false };
        assert!(any_object.check("[1]").is_err() && any_object.check(" {\"a\": 1} ").is_ok());
    }

    #[test]
    fn any_of_one_of_and_tuples() {
        let schema = json!({"anyOf": [{"type": "string"}, {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x"]}]});
        let f = format(schema, true);
        assert!(f.check("\"s\"").is_ok() && f.check("{\"x\": 1}").is_ok());
        assert!(f.check("{\"x\": 2}").is_err());
        let tuple = format(
            json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2}),
            true,
        );
        assert!(
            tuple.check("[1, \"a\"]").is_ok()
                && tuple.check("[\"a\", 1]").is_err()
                && tuple.check("[1]").is_err()
        );
    }
}
