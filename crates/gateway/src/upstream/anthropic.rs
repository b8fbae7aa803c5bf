//! The Anthropic Messages wire of an upstream: the neutral request as a Messages body, and
//! reply events into `UpstreamEvent`s.

use serde_json::Value;

use crate::chat::Usage;
use crate::upstream::{FinishReason, Role, UpstreamEvent, UpstreamRequest};

/// The request as a streaming Anthropic Messages body: the system text apart, roles
/// alternating (consecutive turns of one role are joined).
pub(crate) fn body(request: &UpstreamRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for turn in &request.turns {
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                let merged =
                    format!("{}\n\n{}", last["content"].as_str().unwrap_or_default(), turn.text);
                last["content"] = Value::String(merged);
            }
            _ => messages.push(serde_json::json!({"role": role, "content": turn.text})),
        }
    }
    let max_tokens = request.sampling.get("max_tokens").and_then(Value::as_u64).unwrap_or(4096);
    let mut out = serde_json::json!({"model": request.model, "max_tokens": max_tokens, "messages": messages, "stream": true});
    if !request.system.is_empty() {
        out["system"] = Value::String(request.system.clone());
    }
    for key in ["temperature", "top_p", "top_k"] {
        if let Some(value) = request.sampling.get(key) {
            out[key] = value.clone();
        }
    }
    if !request.stop.is_empty() {
        out["stop_sequences"] = serde_json::json!(request.stop);
    }
    // A JSON schema is Anthropic's `output_config.format`; a bare `json_object` has no
    // counterpart there and stays in the prompt alone.
    if let Some(schema) = request
        .response_format
        .as_ref()
        .filter(|format| format["type"] == "json_schema")
        .and_then(|format| format.pointer("/json_schema/schema"))
    {
        out["output_config"] =
            serde_json::json!({"format": {"type": "json_schema", "schema": schema}});
    }
    out
}

/// Events of one Anthropic stream event.
pub(crate) fn stream_event(value: &Value, input_tokens: &mut u64) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    match value.get("type").and_then(Value::as_str) {
        Some("message_start") => {
            *input_tokens =
                value.pointer("/message/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0);
        }
        Some("content_block_delta") => {
            if let Some(text) = value.pointer("/delta/text").and_then(Value::as_str) {
                if !text.is_empty() {
                    events.push(UpstreamEvent::Text(text.to_owned()));
                }
            }
            if let Some(text) = value.pointer("/delta/thinking").and_then(Value::as_str) {
                if !text.is_empty() {
                    events.push(UpstreamEvent::Reasoning(text.to_owned()));
                }
            }
        }
        Some("message_delta") => {
            if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
            }
            let output = value.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0);
            events.push(UpstreamEvent::Usage(Usage {
                prompt_tokens: *input_tokens,
                completion_tokens: output,
            }));
        }
        _ => {}
    }
    events
}

/// Events of a whole (non-streamed) Anthropic message.
pub(crate) fn message_events(value: &Value) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    for block in value.get("content").and_then(Value::as_array).into_iter().flatten() {
        if let Some(text) = block.get("thinking").and_then(Value::as_str) {
            events.push(UpstreamEvent::Reasoning(text.to_owned()));
        }
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            events.push(UpstreamEvent::Text(text.to_owned()));
        }
    }
    if let Some(reason) = value.get("stop_reason").and_then(Value::as_str) {
        events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
    }
    if let Some(usage) = value.get("usage") {
        events.push(UpstreamEvent::Usage(Usage {
            prompt_tokens: usage.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            completion_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        }));
    }
    events
}
