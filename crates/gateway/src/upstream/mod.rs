//! The upstream: what the pipeline asks of it (`Upstream`), the neutral request it sends,
//! and the events it reads back. `client` is the HTTP implementation; `openai` and
//! `anthropic` write and read the two wires; `reply` reads a reply with every check.

use serde_json::Value;

pub(crate) mod anthropic;
pub(crate) mod anthropic_tools;
pub(crate) mod client;
pub(crate) mod constrain;
pub(crate) mod direct;
pub(crate) mod odds;
pub(crate) mod openai;
pub(crate) mod reply;
pub(crate) mod sse_decode;
pub(crate) mod wire;

pub(crate) use crate::neutral::{
    CallDelta, FinishReason, Role, Upstream, UpstreamEvent, UpstreamRequest, UpstreamStream,
};

/// Why an event that carries (or may carry) model output cannot be read: the field and its
/// shape, for the error that ends the reply. Such an event is never skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable(pub(crate) String);

/// What a JSON value is, for messages: "a number", "an array", …
pub(crate) fn shape_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The text of an optional string field: `None` when it is absent or null, an error when it
/// is anything but a string.
pub(crate) fn text_field(
    value: Option<&Value>,
    at: impl FnOnce() -> String,
) -> Result<Option<&str>, Unreadable> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(Unreadable(format!("{} is {}, not a string", at(), shape_of(other)))),
    }
}
