//! Value typing: a parameter's raw text becomes a JSON value, by an explicit type flag,
//! by the tool's schema, or by what the text looks like.

use crate::WarningCode;
use crate::engine::call::CallState;
use crate::engine::call::kept_as_string_message;
use crate::json::canon::{Canonical, canonical_json};
use crate::json::reader::{Frame as JsonFrame, Reader, Sink};
use crate::tools::ParamType;

/// What a format's template writes around a parameter's value, which is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Padding {
    /// Nothing: the value is exactly the text between the tags.
    None,
    /// A line break after the start tag and one before the end tag (Qwen3-Coder's
    /// `<parameter=KEY>\nVALUE\n</parameter>`).
    Newlines,
}

/// Writes one parameter's raw text as a JSON value; `string` is an explicit type
/// flag that overrides the schema (`Some(true)`: the text as it is).
pub(crate) fn write_typed_value(
    call: &mut CallState,
    key: &str,
    raw: &str,
    string: Option<bool>,
    padding: Padding,
) {
    let raw = match padding {
        Padding::None => raw,
        Padding::Newlines => {
            let text = raw.strip_prefix('\n').unwrap_or(raw);
            text.strip_suffix('\n').unwrap_or(text)
        }
    };
    match string {
        None => write_param_value(call, key, raw),
        Some(true) => write_value(call, key, raw, ParamType::String),
        Some(false) => write_value(call, key, raw, ParamType::Any),
    }
}

/// Writes one parameter's raw text as a JSON value into the call's arguments. `null`
/// for a parameter whose schema allows it is JSON `null`, whatever its other type.
pub(crate) fn write_param_value(call: &mut CallState, key: &str, raw: &str) {
    let tool = call.args.tool();
    let declared = tool.map(|tool| tool.param_type(key)).unwrap_or(ParamType::Any);
    let nullable = tool.is_some_and(|tool| tool.param_nullable(key));
    let declared = if nullable && raw.trim() == "null" { ParamType::Any } else { declared };
    write_value(call, key, raw, declared);
}

/// Writes `raw` as a string when `declared` is a string, else as the JSON it holds.
fn write_value(call: &mut CallState, key: &str, raw: &str, declared: ParamType) {
    let args = &mut call.args;
    if !args.started() {
        args.open(JsonFrame::Object, 0);
    } else if args.canon.depth() == 0 {
        // The arguments object is already closed (a JSON body came first).
        call.extra_notes.push((
            WarningCode::InvalidArguments,
            format!("parameter `{key}` came after the arguments object and was not used: {raw:?}"),
        ));
        return;
    }
    call.args_seen = true;
    let text = raw;
    // MiniCPM5 wraps values in CDATA.
    let text = match text.trim().strip_prefix("<![CDATA[").and_then(|t| t.strip_suffix("]]>")) {
        Some(inner) => inner,
        None => text,
    };
    args.key(key);
    let trimmed = text.trim();
    if declared != ParamType::String {
        let structured = trimmed.starts_with('{') || trimmed.starts_with('[');
        if structured {
            let max_depth = args.max_depth();
            match canonical_json(trimmed, max_depth) {
                Canonical::Json(json) => {
                    let mut reader = Reader::new(max_depth);
                    let _ = reader.feed(&json, 0, args);
                    return;
                }
                Canonical::TooDeep => {
                    let message = kept_as_string_message(key, max_depth);
                    call.extra_notes.push((WarningCode::LimitReached, message));
                }
                Canonical::Not => {}
            }
        }
        let literal = is_json_literal(trimmed);
        if literal {
            args.scalar(trimmed);
            return;
        }
    }
    args.str_start();
    args.str_part(text, false);
    args.str_end();
}

/// A namespaced-markup value made of elements (MiniMax-M3's nested parameters,
/// `]<]minimax[>[<max>3]<]minimax[>[</max>…`) as JSON: elements become keys of an object,
/// an element named again makes an array, text is typed by what it looks like.
/// `None` when the value is not all elements. `array`: the parameter is an array, so one
/// element repeated (`<item>a</item><item>b</item>`) is the array itself.
pub(crate) fn elements_json(raw: &str, token: &str, array: bool) -> Option<String> {
    let text = raw.replace(token, "");
    let trimmed = text.trim();
    if !trimmed.starts_with('<') {
        return None;
    }
    let mut out = String::new();
    let (entries, rest) = elements(trimmed, 0)?;
    if !rest.trim().is_empty() {
        return None;
    }
    match entries.as_slice() {
        [(_, values)] if array => write_array(&mut out, values),
        _ => write_object(&mut out, &entries),
    }
    Some(out)
}

/// One level of elements: each name with its values in order, and the text after them.
type Entries<'a> = Vec<(&'a str, Vec<Node<'a>>)>;

enum Node<'a> {
    Text(&'a str),
    Object(Entries<'a>),
}

/// The deepest nesting read (deeper values are left as text).
const MAX_ELEMENT_DEPTH: usize = 32;

fn elements(mut text: &str, depth: usize) -> Option<(Entries<'_>, &str)> {
    if depth > MAX_ELEMENT_DEPTH {
        return None;
    }
    let mut entries: Entries<'_> = Vec::new();
    loop {
        text = text.trim_start();
        let Some(after) = text.strip_prefix('<') else { break };
        if after.starts_with('/') {
            break;
        }
        let end = after.find('>')?;
        let name = after.get(..end)?;
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '/' || c == '<') {
            return None;
        }
        let body = after.get(end + 1..)?;
        let close = format!("</{name}>");
        let node = if body.trim_start().starts_with('<') && !body.trim_start().starts_with("</") {
            let (inner, rest) = elements(body, depth + 1)?;
            let rest = rest.trim_start().strip_prefix(close.as_str())?;
            text = rest;
            Node::Object(inner)
        } else {
            let at = body.find(close.as_str())?;
            text = body.get(at + close.len()..)?;
            Node::Text(body.get(..at)?)
        };
        match entries.iter_mut().find(|(known, _)| *known == name) {
            Some((_, values)) => values.push(node),
            None => entries.push((name, vec![node])),
        }
    }
    if entries.is_empty() { None } else { Some((entries, text)) }
}

fn write_object(out: &mut String, entries: &Entries<'_>) {
    out.push('{');
    for (idx, (name, values)) in entries.iter().enumerate() {
        if idx > 0 {
            out.push(',');
        }
        crate::json::canon::write_str(out, name, false);
        out.push(':');
        match values.as_slice() {
            [one] => write_node(out, one),
            many => write_array(out, many),
        }
    }
    out.push('}');
}

fn write_array(out: &mut String, values: &[Node<'_>]) {
    out.push('[');
    for (idx, value) in values.iter().enumerate() {
        if idx > 0 {
            out.push(',');
        }
        write_node(out, value);
    }
    out.push(']');
}

/// `true`, `false`, `null` or a JSON number: written as it is, not as a string.
fn is_json_literal(text: &str) -> bool {
    matches!(text, "true" | "false" | "null") || crate::json::scalar::is_json_number(text)
}

fn write_node(out: &mut String, node: &Node<'_>) {
    match node {
        Node::Object(entries) => write_object(out, entries),
        Node::Text(text) => {
            let trimmed = text.trim();
            let literal = is_json_literal(trimmed);
            if literal {
                out.push_str(trimmed);
            } else {
                crate::json::canon::write_str(out, text, false);
            }
        }
    }
}
