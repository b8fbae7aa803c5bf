use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::ToolSet;

/// A writer for the tool `f` whose parameters are `schema`.
fn writer(schema: Value, max_depth: usize) -> ArgsWriter {
    let tools = json!([{"name": "f", "parameters": schema}]);
    let set = Arc::new(ToolSet::from_json(&tools).unwrap());
    let mut writer = ArgsWriter::new(max_depth);
    writer.set_tool(ToolSet::resolve_shared(&set, "f").unwrap());
    writer
}

/// Writes `args` (JSON text) fed in pieces of `chunk` bytes: the finished arguments and
/// the warnings' messages. Checks that what was written so far only ever grew.
fn write_chunked(
    schema: Value,
    args: &str,
    chunk: usize,
    max_depth: usize,
) -> (String, Vec<String>) {
    let mut writer = writer(schema, max_depth);
    let mut reader = Reader::new(max_depth);
    let mut seen = String::new();
    let mut at = 0;
    while at < args.len() {
        let mut end = (at + chunk).min(args.len());
        while !args.is_char_boundary(end) {
            end += 1;
        }
        let _ = reader.feed(&args[at..end], at, &mut writer);
        assert!(writer.canon.out.starts_with(&seen), "{:?} after {seen:?}", writer.canon.out);
        seen.clone_from(&writer.canon.out);
        at = end;
    }
    let _ = reader.finish(args.len(), &mut writer);
    let out = writer.finish().to_owned();
    assert!(out.starts_with(&seen), "{out:?} after {seen:?}");
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
    let notes = writer
        .notes
        .iter()
        .map(|note| match note {
            ArgsNote::Coerced { path, to, how, more, .. } => {
                format!("{path}: {how:?} to {} (+{more})", to.as_str())
            }
            ArgsNote::KeptAsString { path, max_depth } => format!("{path}: kept ({max_depth})"),
            other => format!("{other:?}"),
        })
        .collect();
    (out, notes)
}

/// Like [`write_chunked`], checking that every chunking gives the same.
fn write(schema: &Value, args: &str) -> (String, Vec<String>) {
    let whole = write_chunked(schema.clone(), args, args.len().max(1), 128);
    for chunk in [1, 2, 3, 7] {
        assert_eq!(write_chunked(schema.clone(), args, chunk, 128), whole, "chunks of {chunk}");
    }
    whole
}

#[test]
fn whole_numbers_in_an_array_of_numbers_get_a_fraction() {
    let schema = json!({"type": "object", "properties": {
        "numbers": {"type": "array", "items": {"type": "number"}}}});
    let (out, notes) = write(&schema, r#"{"numbers": [12, 15, 18, -3, 1e5, 2.50, 0.5, "7"]}"#);
    assert_eq!(out, r#"{"numbers":[12.0,15.0,18.0,-3.0,1e5,2.50,0.5,7.0]}"#);
    assert_eq!(
        notes,
        ["numbers[0]: Fraction to number (+3)", "numbers[7]: FromString to number (+0)"]
    );
}

#[test]
fn fields_of_objects_in_an_array_follow_their_schema() {
    let schema = json!({"type": "object", "properties": {"conditions": {"type": "array", "items": {
        "type": "object", "properties": {
            "field": {"type": "string"}, "operation": {"type": "string"},
            "value": {"type": "string"}, "limit": {"type": "integer"},
            "strict": {"type": "boolean"}, "weight": {"type": "number"}}}}}});
    let args = r#"{"conditions": [
        {"field": "age", "operation": ">", "value": 25, "limit": "10", "strict": "true", "weight": 2},
        {"field": "name", "value": true, "limit": 5.0, "strict": false, "weight": "0.5", "x": 1}]}"#;
    let (out, notes) = write(&schema, args);
    assert_eq!(
        out,
        concat!(
            r#"{"conditions":[{"field":"age","operation":">","value":"25","limit":10,"strict":true,"weight":2.0},"#,
            r#"{"field":"name","value":"true","limit":5,"strict":false,"weight":0.5,"x":1}]}"#
        )
    );
    assert_eq!(
        notes,
        [
            "conditions[0].value: ToString to string (+1)",
            "conditions[0].limit: FromString to integer (+0)",
            "conditions[0].strict: FromString to boolean (+0)",
            "conditions[0].weight: Fraction to number (+0)",
            "conditions[1].limit: Whole to integer (+0)",
            "conditions[1].weight: FromString to number (+0)",
        ]
    );
}

#[test]
fn top_level_values_get_the_same_coercions() {
    let schema = json!({"properties": {
        "n": {"type": "number"}, "i": {"type": "integer"}, "either": {"type": ["integer", "number"]},
        "s": {"type": "string"}}});
    let (out, notes) = write(&schema, r#"{"n": 3, "i": 5.00, "either": 4, "s": 1.5, "n2": 3}"#);
    assert_eq!(out, r#"{"n":3.0,"i":5,"either":4,"s":"1.5","n2":3}"#);
    assert_eq!(
        notes,
        ["n: Fraction to number (+0)", "i: Whole to integer (+0)", "s: ToString to string (+0)"]
    );
    // Not whole, or not a number: left as written.
    let (out, notes) = write(&schema, r#"{"i": 5.5, "n": null, "s": null, "i2": "x"}"#);
    assert_eq!(out, r#"{"i":5.5,"n":null,"s":null,"i2":"x"}"#);
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn a_string_holding_json_is_converted_and_its_values_coerced() {
    let schema = json!({"properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}},
                                         "id": {"type": "string"}}}}}});
    let (out, notes) = write(&schema, r#"{"rows": [{"xs": "[1, 2.5]", "id": 7}, "{\"id\": 8}"]}"#);
    assert_eq!(out, r#"{"rows":[{"xs":[1.0,2.5],"id":"7"},{"id":"8"}]}"#);
    assert_eq!(
        notes,
        [
            "rows[0].xs: FromString to array (+0)",
            "rows[0].xs[0]: Fraction to number (+0)",
            "rows[0].id: ToString to string (+1)",
            "rows[1]: FromString to object (+0)",
        ]
    );
}

#[test]
fn refs_any_of_with_null_and_additional_properties_are_followed() {
    let schema = json!({
        "properties": {
            "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
            "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "label": {"type": "string"}}}}});
    let (out, _) = write(
        &schema,
        r#"{"point": {"x": 1, "label": 2}, "scores": {"a": "3", "b": 4.0}, "pair": [1, 2, 3]}"#,
    );
    assert_eq!(out, r#"{"point":{"x":1.0,"label":"2"},"scores":{"a":3,"b":4},"pair":["1",2.0,3]}"#);
    let (out, notes) = write(&schema, r#"{"point": null}"#);
    assert_eq!(out, r#"{"point":null}"#);
    assert!(notes.is_empty());
}

#[test]
fn values_the_schema_does_not_describe_are_left_alone() {
    let schema = json!({"properties": {
        "mixed": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "remote": {"$ref": "https://example.com/x.json"},
        "free": {"type": "object"},
        "list": {"type": "array"}}});
    let args = r#"{"mixed": [1, "2"], "remote": {"a": 1}, "free": {"a": [1, "2"]}, "list": [1, "2", true], "other": 3}"#;
    let (out, notes) = write(&schema, args);
    assert_eq!(
        out,
        r#"{"mixed":[1,"2"],"remote":{"a":1},"free":{"a":[1,"2"]},"list":[1,"2",true],"other":3}"#
    );
    assert!(notes.is_empty(), "{notes:?}");
    // A tool without a schema coerces nothing.
    let (out, notes) = write(&Value::Null, r#"{"a": [1, "2"]}"#);
    assert_eq!((out.as_str(), notes.len()), (r#"{"a":[1,"2"]}"#, 0));
}

#[test]
fn a_string_cut_off_is_converted_at_the_end() {
    let schema = json!({"properties": {"xs": {"type": "array", "items": {"type": "integer"}}}});
    let (out, notes) = write(&schema, r#"{"xs": [1, "42"#);
    assert_eq!(out, r#"{"xs":[1,42]}"#);
    assert_eq!(notes, ["xs[1]: FromString to integer (+0)"]);
}

#[test]
fn a_held_string_nests_no_deeper_than_max_depth() {
    let schema = json!({"properties": {"xs": {"type": "array", "items": {"type": "array"}}}});
    // The string sits at depth 2; with max_depth 4 its JSON may nest 3 deep.
    let (out, notes) = write_chunked(schema.clone(), r#"{"xs": ["[[[1]]]"]}"#, 3, 4);
    assert_eq!((out.as_str(), notes.len()), (r#"{"xs":[[[[1]]]]}"#, 1));
    let (out, notes) = write_chunked(schema, r#"{"xs": ["[[[[1]]]]"]}"#, 3, 4);
    assert_eq!(out, r#"{"xs":["[[[[1]]]]"]}"#);
    assert_eq!(notes, ["xs[0]: kept (4)"]);
}

#[test]
fn the_tool_named_after_the_arguments_began_coerces_the_top_level_only() {
    let tools = json!([{"name": "f", "parameters": {"properties": {
        "n": {"type": "number"}, "xs": {"type": "array", "items": {"type": "number"}}}}}]);
    let set = Arc::new(ToolSet::from_json(&tools).unwrap());
    let mut writer = ArgsWriter::new(128);
    let mut reader = Reader::new(128);
    let _ = reader.feed(r#"{"xs": [1, "#, 0, &mut writer);
    writer.set_tool(ToolSet::resolve_shared(&set, "f").unwrap());
    let _ = reader.feed(r#"2], "n": 3}"#, 0, &mut writer);
    let _ = reader.finish(0, &mut writer);
    assert_eq!(writer.finish(), r#"{"xs":[1,2],"n":3.0}"#);
}

#[test]
fn repeats_after_notes_were_taken_out_are_still_counted() {
    let schema = json!({"properties": {"xs": {"type": "array", "items": {"type": "number"}}}});
    let mut writer = writer(schema, 128);
    let mut reader = Reader::new(128);
    let _ = reader.feed(r#"{"xs": [1, 'a', 2, 3]}"#, 0, &mut writer);
    writer.notes.retain(|note| !matches!(note, ArgsNote::Repaired(_)));
    let _ = reader.finish(0, &mut writer);
    assert!(
        matches!(writer.notes.as_slice(), [ArgsNote::Coerced { more: 2, .. }]),
        "{:?}",
        writer.notes
    );
}

#[test]
fn the_same_tool_named_again_keeps_the_place() {
    let schema = json!({"properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"n": {"type": "number"}}}}}});
    let tools = json!([{"name": "f", "parameters": schema}]);
    let set = Arc::new(ToolSet::from_json(&tools).unwrap());
    let mut writer = ArgsWriter::new(128);
    writer.set_tool(ToolSet::resolve_shared(&set, "f").unwrap());
    let mut reader = Reader::new(128);
    let _ = reader.feed(r#"{"rows": [{"n": 1}, {"#, 0, &mut writer);
    writer.set_tool(ToolSet::resolve_shared(&set, "f").unwrap());
    let _ = reader.feed(r#""n": 2}]}"#, 0, &mut writer);
    let _ = reader.finish(0, &mut writer);
    assert_eq!(writer.finish(), r#"{"rows":[{"n":1.0},{"n":2.0}]}"#);
}
