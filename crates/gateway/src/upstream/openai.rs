//! The OpenAI Chat Completions wire of an upstream: reply events into `UpstreamEvent`s.

use serde_json::Value;

use crate::chat::Usage;
use crate::upstream::client::UpstreamEvent;

fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        prompt_tokens: usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    })
}

/// Events of one streamed chunk (`delta`) or of a whole completion (`message`).
fn events_of(value: &Value, part: &str) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    if let Some(choice) = value.get("choices").and_then(Value::as_array).and_then(|c| c.first()) {
        if let Some(text) = choice.get(part).and_then(|p| p.get("content")).and_then(Value::as_str)
        {
            if !text.is_empty() {
                events.push(UpstreamEvent::Text(text.to_owned()));
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            events.push(UpstreamEvent::Finish(reason.to_owned()));
        }
    }
    if let Some(usage) = usage_of(value) {
        events.push(UpstreamEvent::Usage(usage));
    }
    events
}

/// Events of one streamed chunk.
pub(crate) fn chunk_events(value: &Value) -> Vec<UpstreamEvent> {
    events_of(value, "delta")
}

/// Events of a whole completion.
pub(crate) fn completion_events(value: &Value) -> Vec<UpstreamEvent> {
    events_of(value, "message")
}
