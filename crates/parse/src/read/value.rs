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
        let literal = matches!(trimmed, "true" | "false" | "null")
            || crate::json::scalar::is_json_number(trimmed);
        if literal {
            args.scalar(trimmed);
            return;
        }
    }
    args.str_start();
    args.str_part(text, false);
    args.str_end();
}
