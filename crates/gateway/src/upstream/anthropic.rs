//! The Anthropic Messages wire of an upstream: the rendered chat as a Messages request, and
//! reply events into `UpstreamEvent`s.

use serde_json::Value;

use crate::chat::Usage;
use crate::upstream::client::UpstreamEvent;

/// The rendered chat as an Anthropic Messages request: system text apart, roles alternating.
pub(crate) fn request(body: &Value) -> Value {
    let mut system = String::new();
    let mut messages: Vec<Value> = Vec::new();
    for message in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = message.get("content").and_then(Value::as_str).unwrap_or_default();
        if role == "system" {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(content);
            continue;
        }
        let role = if role == "assistant" { "assistant" } else { "user" };
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                let merged =
                    format!("{}\n\n{content}", last["content"].as_str().unwrap_or_default());
                last["content"] = Value::String(merged);
            }
            _ => messages.push(serde_json::json!({"role": role, "content": content})),
        }
    }
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(4096);
    let mut out = serde_json::json!({"model": body["model"], "max_tokens": max_tokens, "messages": messages, "stream": true});
    if !system.is_empty() {
        out["system"] = Value::String(system);
    }
    for key in ["temperature", "top_p", "top_k"] {
        if let Some(value) = body.get(key) {
            out[key] = value.clone();
        }
    }
    match body.get("stop") {
        Some(Value::String(stop)) => out["stop_sequences"] = serde_json::json!([stop]),
        Some(stops @ Value::Array(_)) => out["stop_sequences"] = stops.clone(),
        _ => {}
    }
    out
}

fn finish(reason: &str) -> String {
    if reason == "max_tokens" { "length".into() } else { "stop".into() }
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
        }
        Some("message_delta") => {
            if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                events.push(UpstreamEvent::Finish(finish(reason)));
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
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            events.push(UpstreamEvent::Text(text.to_owned()));
        }
    }
    if let Some(reason) = value.get("stop_reason").and_then(Value::as_str) {
        events.push(UpstreamEvent::Finish(finish(reason)));
    }
    if let Some(usage) = value.get("usage") {
        events.push(UpstreamEvent::Usage(Usage {
            prompt_tokens: usage.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            completion_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        }));
    }
    events
}
