//! Constrained decoding: a GBNF grammar of the reply the tool contract asks for, built from the
//! tools' JSON Schemas, for upstreams that can hold their sampling to a grammar (llama.cpp's
//! `grammar`, vLLM's `structured_outputs.grammar`, SGLang's `ebnf`).
//!
//! - `tool_choice: "required"` or a named tool: the reply is one or more calls (one when
//!   parallel calls are off), to the named tool when there is one. A forced choice cannot fail.
//! - A call is `{"name": …, "arguments": {…}}` in a `<tool_call>` block, bare, or in a
//!   Markdown fence, or a list of such objects: the forms small models write whatever the
//!   contract says (`call_format` `tool_call` or `json`); for `llama` the key is
//!   `parameters`, and for `mistral` a list may follow `[TOOL_CALLS]`. `xml` and
//!   `qwen3_coder` have no grammar.
//! - Words may follow the calls; they begin like prose, not like another call. (A model held
//!   to calls alone goes on with calls it did not mean to make.)
//! - A reasoning block (`<think>…</think>`) may come first.
//! - `auto` has no grammar. llama.cpp's chat endpoint takes no lazy grammar from a request,
//!   and a whole-reply grammar of "calls, or prose that does not begin like a call" was
//!   measured (Qwen2.5-Coder-0.5B): no better on BFCL's call categories, and worse where no
//!   tool fits: a model that reached for a tool that does not exist (which the gateway turns
//!   into a plain answer) was made to call a declared one instead.
//!
//! Inside a call the name is one of the tools' and the arguments follow that tool's schema:
//! declared properties only (unless `additionalProperties` allows more), the required ones
//! always, in the schema's order; types, `enum` and `const` as declared. What the subset does
//! not cover (`$ref` cycles, `allOf` of several, `patternProperties`, …) is any JSON value
//! there. Too large a schema gives no grammar at all.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use crate::chat::types::{ToolChoice, ToolSpec};
use crate::config::CallFormat;

type Map = serde_json::Map<String, Value>;

/// The most rules a grammar may have; a larger one is not sent.
const MAX_RULES: usize = 4000;

/// How deep schemas are followed; deeper parts are any JSON value.
const MAX_DEPTH: usize = 12;

/// The grammar for a reply that must call one of these tools, or `None` when no call is forced
/// (no tools, `tool_choice` `auto` or `none`), for a call format without a grammar, a named
/// tool that is not declared, or a grammar that would be too large.
pub(crate) fn for_calls(
    tools: &[ToolSpec],
    choice: &ToolChoice,
    parallel: bool,
    format: CallFormat,
) -> Option<String> {
    if tools.is_empty()
        || matches!(choice, ToolChoice::None | ToolChoice::Auto)
        || matches!(format, CallFormat::Xml | CallFormat::Qwen3Coder)
    {
        return None;
    }
    let chosen: Vec<&ToolSpec> = match choice {
        ToolChoice::Named(name) => tools.iter().filter(|t| &t.name == name).collect(),
        _ => tools.iter().collect(),
    };
    if chosen.is_empty() {
        return None;
    }
    let mut g = Builder::default();
    let mut alternatives = Vec::with_capacity(chosen.len());
    let arguments_key = if format == CallFormat::Llama {
        "\"\\\"parameters\\\"\""
    } else {
        "\"\\\"arguments\\\"\""
    };
    for tool in chosen {
        let args = match &tool.parameters {
            Some(schema) => g.schema(schema, schema, 0),
            None => g.any_object(),
        };
        let name = literal(&json_string(&tool.name));
        alternatives.push(format!(
            "\"{{\" ws \"\\\"name\\\"\" ws \":\" ws {name} ws \",\" ws {arguments_key} ws \":\" ws {args} ws \"}}\""
        ));
    }
    let object = g.rule(&alternatives.join(" | "));
    // A call in any form the parser reads that small models write: the contract's
    // `<tool_call>` block, a bare object, or a fenced one; a list of them when parallel calls
    // are allowed. Held to the contract's one form, a model that meant to write another turns
    // to prose instead.
    let list = if parallel {
        g.rule(&format!("\"[\" ws {object} ( ws \",\" ws {object} )* ws \"]\""))
    } else {
        g.rule(&format!("\"[\" ws {object} ws \"]\""))
    };
    let bare = if format == CallFormat::Mistral {
        g.rule(&format!("{object} | \"[TOOL_CALLS]\"? ws {list}"))
    } else {
        g.rule(&format!("{object} | {list}"))
    };
    let block = g.rule(&format!(
        "\"<tool_call>\" ws {object} ws \"</tool_call>\" | {bare} | \"```\" \"json\"? ws {bare} ws \"```\""
    ));
    let calls = if parallel { g.rule(&format!("{block} ( ws {block} )*")) } else { block };
    // Words after the calls may follow, beginning like prose, not like another call.
    let text = g.rule("[^<{[`\\x00-\\x20] .*");
    let body = format!("{calls} ( ws {text} )? ws");
    let think = g.rule("\"<think>\" ([^<] | \"<\" [^/])* \"</think>\"");
    if g.rules.len() > MAX_RULES {
        tracing::debug!(rules = g.rules.len(), "the tools' grammar is too large; not sent");
        return None;
    }
    let mut out = format!("root ::= ({think})? ws ({body})\n");
    out.push_str(COMMON);
    for (name, rule) in &g.rules {
        let _ = writeln!(out, "{name} ::= {rule}");
    }
    Some(out)
}

/// The rules every grammar has: white space (bounded: a model held back from what it meant
/// to write would otherwise fill the reply with it) and any JSON value.
const COMMON: &str = r#"ws ::= ( " " | "\n"{1,2} [ \t]{0,20} )?
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
integer ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
number ::= integer ( "." [0-9]{1,17} )? ( [eE] [-+]? [0-9]{1,3} )?
boolean ::= "true" | "false"
null ::= "null"
"#;

/// Collects the rules of one grammar, each body once.
#[derive(Default)]
struct Builder {
    rules: Vec<(String, String)>,
    by_body: HashMap<String, String>,
}

impl Builder {
    /// The name of a rule with this body (an existing one with the same body, or a new one).
    fn rule(&mut self, body: &str) -> String {
        if let Some(name) = self.by_body.get(body) {
            return name.clone();
        }
        let name = format!("r{}", self.rules.len());
        self.rules.push((name.clone(), body.to_owned()));
        self.by_body.insert(body.to_owned(), name.clone());
        name
    }

    fn any_object(&mut self) -> String {
        "object".into()
    }

    /// The rule (or expression) for a value that fits `schema`.
    fn schema(&mut self, root: &Value, schema: &Value, depth: usize) -> String {
        if depth > MAX_DEPTH || self.rules.len() > MAX_RULES {
            return "value".into();
        }
        let Some(map) = schema.as_object() else {
            // `true`, or anything that is not a schema object: any value.
            return "value".into();
        };
        if let Some(target) = map.get("$ref").and_then(Value::as_str) {
            return match resolve(root, target) {
                Some(next) => self.schema(root, next, depth + 1),
                None => "value".into(),
            };
        }
        if let Some(value) = map.get("const") {
            return self.rule(&literal(&value.to_string()));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            if values.is_empty() {
                return "value".into();
            }
            let alternatives: Vec<String> =
                values.iter().map(|v| literal(&v.to_string())).collect();
            return self.rule(&alternatives.join(" | "));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = map.get(key) {
                if options.is_empty() {
                    return "value".into();
                }
                let alternatives: Vec<String> =
                    options.iter().map(|o| self.schema(root, o, depth + 1)).collect();
                return self.rule(&alternatives.join(" | "));
            }
        }
        if let Some(Value::Array(all)) = map.get("allOf") {
            return match all.as_slice() {
                [only] => self.schema(root, only, depth + 1),
                _ => "value".into(),
            };
        }
        let nullable = map.get("nullable").and_then(Value::as_bool) == Some(true);
        let types: Vec<&str> = match map.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ if map.contains_key("properties") => vec!["object"],
            _ if map.contains_key("items") => vec!["array"],
            _ => return "value".into(),
        };
        let mut alternatives = Vec::new();
        for kind in types {
            let expr = match kind {
                "string" => "string".to_owned(),
                "integer" => "integer".to_owned(),
                "number" => "number".to_owned(),
                "boolean" => "boolean".to_owned(),
                "null" => "null".to_owned(),
                "object" => self.object(root, map, depth),
                "array" => self.array(root, map, depth),
                _ => "value".to_owned(),
            };
            if !alternatives.contains(&expr) {
                alternatives.push(expr);
            }
        }
        if nullable && !alternatives.iter().any(|a| a == "null") {
            alternatives.push("null".into());
        }
        match alternatives.as_slice() {
            [] => "value".into(),
            [one] => one.clone(),
            _ => self.rule(&alternatives.join(" | ")),
        }
    }

    /// An object: the declared properties in order, the required ones always; more keys only
    /// when `additionalProperties` allows them.
    fn object(&mut self, root: &Value, map: &Map, depth: usize) -> String {
        let extra = match map.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(Value::Object(schema)) if !schema.is_empty() => {
                Some(self.schema(root, &Value::Object(schema.clone()), depth + 1))
            }
            Some(Value::Object(_) | Value::Bool(true)) => Some("value".to_owned()),
            // Absent: with declared properties, only those (a call's arguments are what the
            // tool declares); without any, any object.
            _ => None,
        };
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) if !properties.is_empty() => properties,
            _ => {
                return match (map.get("additionalProperties"), extra) {
                    (Some(Value::Bool(false)), _) => self.rule("\"{\" ws \"}\""),
                    (_, Some(value)) if value != "value" => {
                        let pair = format!("string ws \":\" ws {value}");
                        self.rule(&format!(
                            "\"{{\" ws ( {pair} ( ws \",\" ws {pair} )* )? ws \"}}\""
                        ))
                    }
                    _ => "object".into(),
                };
            }
        };
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        // Each property as `"key" ws ":" ws value`, required first (in the schema's order).
        let mut must = Vec::new();
        let mut may = Vec::new();
        for (key, schema) in properties {
            let value = self.schema(root, schema, depth + 1);
            let pair = format!("{} ws \":\" ws {value}", literal(&json_string(key)));
            if required.contains(&key.as_str()) {
                must.push(pair);
            } else {
                may.push(pair);
            }
        }
        if let Some(value) = &extra {
            may.push(format!(
                "string ws \":\" ws {value} ( ws \",\" ws string ws \":\" ws {value} )*"
            ));
        }
        // The optional ones, each at most once and in order: rest(i) is what may follow once
        // the optional properties before i were decided.
        let mut rest = String::from("\"\"");
        let mut rests = Vec::with_capacity(may.len());
        for pair in may.iter().rev() {
            rest = self.rule(&format!("( ws \",\" ws {pair} )? {rest}"));
            rests.push(rest.clone());
        }
        rests.reverse();
        let inner = if must.is_empty() {
            // The first present optional property has no comma before it.
            let firsts: Vec<String> = may
                .iter()
                .enumerate()
                .map(|(i, pair)| match rests.get(i + 1) {
                    Some(next) => format!("{pair} {next}"),
                    None => pair.clone(),
                })
                .collect();
            if firsts.is_empty() { String::new() } else { format!("( {} )?", firsts.join(" | ")) }
        } else {
            let tail = rests.first().cloned().unwrap_or_default();
            format!("{} {tail}", must.join(" ws \",\" ws "))
        };
        self.rule(&format!("\"{{\" ws {inner} ws \"}}\""))
    }

    /// An array of items that fit `items` (any value without it); at least one item when
    /// `minItems` asks for it.
    fn array(&mut self, root: &Value, map: &Map, depth: usize) -> String {
        let item = match map.get("items") {
            Some(items @ Value::Object(_)) => self.schema(root, items, depth + 1),
            _ => "value".to_owned(),
        };
        let at_least_one = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) >= 1;
        let list = format!("{item} ( ws \",\" ws {item} )*");
        if at_least_one {
            self.rule(&format!("\"[\" ws {list} ws \"]\""))
        } else {
            self.rule(&format!("\"[\" ws ( {list} )? ws \"]\""))
        }
    }
}

/// A local `$ref` (`#/$defs/Name`, `#/definitions/Name`, `#`) in `root`.
fn resolve<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    root.pointer(pointer)
}

/// A string as JSON text (with its quotes).
fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Text as a GBNF string literal: quotes and backslashes escaped, and every character outside
/// printable ASCII written as a code point.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[path = "grammar_tests.rs"]
mod tests;
