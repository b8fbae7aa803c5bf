//! The OpenAI Chat Completions wire of an upstream: the neutral request as a streaming Chat
//! Completions body, and reply events into `UpstreamEvent`s.

use serde_json::{Value, json};

use crate::chat::Usage;
use crate::upstream::{FinishReason, Role, UpstreamEvent, UpstreamRequest};

/// The request as a streaming Chat Completions body (no `tools`).
pub(crate) fn body(request: &UpstreamRequest) -> Value {
    let mut messages = Vec::with_capacity(request.turns.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for turn in &request.turns {
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": turn.text}));
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    for (key, value) in &request.sampling {
        body.insert(key.clone(), value.clone());
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if let Some(format) = &request.response_format {
        body.insert("response_format".into(), format.clone());
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

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
        let reasoning = choice.get(part).and_then(|p| {
            p.get("reasoning_content").or_else(|| p.get("reasoning")).and_then(Value::as_str)
        });
        if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
            events.push(UpstreamEvent::Reasoning(text.to_owned()));
        }
        if let Some(text) = choice.get(part).and_then(|p| p.get("content")).and_then(Value::as_str)
        {
            if !text.is_empty() {
                events.push(UpstreamEvent::Text(text.to_owned()));
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
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
