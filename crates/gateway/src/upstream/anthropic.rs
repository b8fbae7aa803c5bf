//! The Anthropic Messages wire of an upstream: the neutral request as a Messages body, and
//! reply events into `UpstreamEvent`s.

use serde_json::Value;

use crate::neutral::{Image, Usage};
use crate::upstream::{
    FinishReason, Role, Unreadable, UpstreamEvent, UpstreamRequest, shape_of, text_field,
};

/// The request as a streaming Anthropic Messages body: the system text apart, roles
/// alternating (consecutive turns of one role are joined).
pub(crate) fn body(request: &UpstreamRequest) -> Value {
    // (role, text, images), consecutive turns of one role joined.
    let mut joined: Vec<(&str, String, Vec<&Image>)> = Vec::new();
    for turn in &request.turns {
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        match joined.last_mut() {
            Some((last, text, images)) if *last == role => {
                text.push_str("\n\n");
                text.push_str(&turn.text);
                images.extend(&turn.images);
            }
            _ => joined.push((role, turn.text.clone(), turn.images.iter().collect())),
        }
    }
    let messages: Vec<Value> = joined
        .into_iter()
        .map(|(role, text, images)| {
            if images.is_empty() {
                return serde_json::json!({"role": role, "content": text});
            }
            let text =
                (!text.is_empty()).then(|| serde_json::json!({"type": "text", "text": text}));
            let blocks = text.into_iter().chain(images.into_iter().map(image_block));
            serde_json::json!({"role": role, "content": blocks.collect::<Vec<_>>()})
        })
        .collect();
    let max_tokens = request.sampling.max_tokens.as_ref().and_then(|n| n.as_u64()).unwrap_or(4096);
    let mut out = serde_json::json!({"model": request.model, "max_tokens": max_tokens, "messages": messages, "stream": true});
    if !request.system.is_empty() {
        out["system"] = Value::String(request.system.clone());
    }
    // Anthropic caches a prompt only up to a block marked for it: the system text (the tool
    // contract, the same every turn) and the end of the conversation so far, whose prefix
    // the next turn repeats.
    if request.cache_breakpoints {
        let ephemeral = serde_json::json!({"type": "ephemeral"});
        if !request.system.is_empty() {
            out["system"] = serde_json::json!([{"type": "text", "text": request.system,
                "cache_control": ephemeral}]);
        }
        if let Some(last) = out["messages"].as_array_mut().and_then(|m| m.last_mut()) {
            if let Some(text) = last["content"].as_str().map(str::to_owned) {
                last["content"] = serde_json::json!([{"type": "text", "text": text}]);
            }
            if let Some(block) = last["content"].as_array_mut().and_then(|b| b.last_mut()) {
                block["cache_control"] = ephemeral;
            }
        }
    }
    // Anthropic takes these three of the sampling options; the others have no counterpart.
    let sampling = &request.sampling;
    for (key, value) in [
        ("temperature", &sampling.temperature),
        ("top_p", &sampling.top_p),
        ("top_k", &sampling.top_k),
    ] {
        if let Some(n) = value {
            out[key] = Value::Number(n.clone());
        }
    }
    if !sampling.stop.is_empty() {
        out["stop_sequences"] = serde_json::json!(sampling.stop);
    }
    // A JSON schema is Anthropic's `output_config.format`; a bare `json_object` has no
    // counterpart there and stays in the prompt alone.
    if let Some(schema) = request.response_format.as_ref().and_then(|f| f.schema.as_ref()) {
        out["output_config"] =
            serde_json::json!({"format": {"type": "json_schema", "schema": schema}});
    }
    out
}

/// An image as a Messages `image` block: a `data:` URL as a `base64` source, any other as a
/// `url` source.
fn image_block(image: &Image) -> Value {
    let source = match image.data() {
        Some((media_type, data)) => {
            serde_json::json!({"type": "base64", "media_type": media_type, "data": data})
        }
        None => serde_json::json!({"type": "url", "url": image.url}),
    };
    serde_json::json!({"type": "image", "source": source})
}

/// Events of one Anthropic stream event.
///
/// Content comes in `content_block_start` and `content_block_delta`; a block or delta of a
/// type that may carry model output but is not read here (a tool use the emulated request
/// did not ask for, a type this gateway does not know) or a field of the wrong shape makes
/// the event `Unreadable`. Blocks and deltas without model text are left alone
/// (`redacted_thinking`, `signature_delta`, `citations_delta`), and so are event types this
/// gateway does not know: Anthropic's versioning policy says new event types may be added
/// and are to be ignored, while content only ever comes in the events above.
pub(crate) fn stream_event(
    value: &Value,
    start: &mut Usage,
) -> Result<Vec<UpstreamEvent>, Unreadable> {
    let mut events = Vec::new();
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(Unreadable(format!(
            "the event is {} without a `type`",
            if value.is_object() { "an object" } else { shape_of(value) }
        )));
    };
    match kind {
        "message_start" => {
            *start = value.pointer("/message/usage").map(usage_of).unwrap_or_default();
            content_events(value.pointer("/message/content"), "message.content", &mut events)?;
        }
        "content_block_start" => {
            let block = value.get("content_block").unwrap_or(&Value::Null);
            block_events(block, "content_block", &mut events)?;
        }
        "content_block_delta" => {
            let delta = value.get("delta").unwrap_or(&Value::Null);
            delta_events(delta, &mut events)?;
        }
        "message_delta" => {
            let at = || "`delta.stop_reason`".to_owned();
            if let Some(reason) = text_field(value.pointer("/delta/stop_reason"), at)? {
                events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
            }
            let output = value.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0);
            events.push(UpstreamEvent::Usage(Usage { completion_tokens: output, ..*start }));
        }
        // No content: the end of a block or of the message, a keep-alive.
        "content_block_stop" | "message_stop" | "ping" => {}
        // Event types added after this gateway was written (Anthropic's versioning policy
        // allows them): ignored, and the log says which.
        other => tracing::debug!(
            event = other,
            "an upstream event type this gateway does not know was ignored"
        ),
    }
    Ok(events)
}

/// The events of a `content` array (absent or null: none).
fn content_events(
    content: Option<&Value>,
    at: &str,
    events: &mut Vec<UpstreamEvent>,
) -> Result<(), Unreadable> {
    match content {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                block_events(block, &format!("{at}[{i}]"), events)?;
            }
            Ok(())
        }
        Some(other) => Err(Unreadable(format!("`{at}` is {}, not an array", shape_of(other)))),
    }
}

/// The events of one content block (whole, or as `content_block_start` opens it).
fn block_events(
    block: &Value,
    at: &str,
    events: &mut Vec<UpstreamEvent>,
) -> Result<(), Unreadable> {
    let field = |key: &str| {
        let at = format!("`{at}.{key}`");
        text_field(block.get(key), move || at)
    };
    match block.get("type").and_then(Value::as_str) {
        Some("text") => push(events, field("text")?, UpstreamEvent::Text),
        Some("thinking") => push(events, field("thinking")?, UpstreamEvent::Reasoning),
        // Encrypted reasoning: nothing a client can read.
        Some("redacted_thinking") => {}
        Some(kind @ ("tool_use" | "server_tool_use")) => {
            return Err(Unreadable(format!(
                "`{at}` is a {kind} block, which the emulated request did not declare tools for"
            )));
        }
        Some(kind) => {
            let kind = short(kind);
            return Err(Unreadable(format!("`{at}` is a block of an unknown type `{kind}`")));
        }
        None => return Err(Unreadable(format!("`{at}` has no `type`"))),
    }
    Ok(())
}

/// The events of a `content_block_delta`'s delta.
fn delta_events(delta: &Value, events: &mut Vec<UpstreamEvent>) -> Result<(), Unreadable> {
    let field = |key: &'static str| text_field(delta.get(key), move || format!("`delta.{key}`"));
    match delta.get("type").and_then(Value::as_str) {
        Some("text_delta") => push(events, field("text")?, UpstreamEvent::Text),
        Some("thinking_delta") => push(events, field("thinking")?, UpstreamEvent::Reasoning),
        // The signature of a thinking block, and a citation's source: no model text.
        Some("signature_delta" | "citations_delta") => {}
        Some("input_json_delta") => {
            return Err(Unreadable(
                "`delta` is a tool use's input, which the emulated request did not declare tools for"
                    .into(),
            ));
        }
        Some(kind) => {
            let kind = short(kind);
            return Err(Unreadable(format!("`delta` is of an unknown type `{kind}`")));
        }
        // Without a type (some compatible servers): the text or thinking it carries.
        None => {
            let (text, thinking) = (field("text")?, field("thinking")?);
            if text.is_none() && thinking.is_none() {
                return Err(Unreadable("`delta` has no `type`, text or thinking".into()));
            }
            push(events, thinking, UpstreamEvent::Reasoning);
            push(events, text, UpstreamEvent::Text);
        }
    }
    Ok(())
}

/// A type name the upstream wrote, short enough for a message: at most 40 characters.
fn short(kind: &str) -> String {
    match kind.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", kind.get(..end).unwrap_or_default()),
        None => kind.to_owned(),
    }
}

fn push(
    events: &mut Vec<UpstreamEvent>,
    text: Option<&str>,
    event: impl FnOnce(String) -> UpstreamEvent,
) {
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        events.push(event(text.to_owned()));
    }
}

/// Events of a whole (non-streamed) Anthropic message, read as strictly as a stream.
pub(crate) fn message_events(value: &Value) -> Result<Vec<UpstreamEvent>, Unreadable> {
    let mut events = Vec::new();
    content_events(value.get("content"), "content", &mut events)?;
    let at = || "`stop_reason`".to_owned();
    if let Some(reason) = text_field(value.get("stop_reason"), at)? {
        events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
    }
    if let Some(usage) = value.get("usage") {
        events.push(UpstreamEvent::Usage(usage_of(usage)));
    }
    Ok(events)
}

/// A Messages `usage` object: its prompt is the uncached input plus what was read from and
/// written to the cache.
fn usage_of(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("cache_read_input_tokens");
    Usage {
        prompt_tokens: count("input_tokens") + cached + count("cache_creation_input_tokens"),
        completion_tokens: count("output_tokens"),
        cached_tokens: cached,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn delta(delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": 0, "delta": delta})
    }

    #[test]
    fn issue_14_output_in_an_unreadable_shape_is_an_error() {
        let mut tokens = Usage::default();
        for bad in [
            json!("just a string"),
            json!({"index": 0}),
            delta(json!({"type": "text_delta", "text": 7})),
            delta(json!({"type": "thinking_delta", "thinking": {"t": "x"}})),
            delta(json!({"type": "input_json_delta", "partial_json": "{}"})),
            delta(json!({"type": "text_delta_v2", "text": "Hi"})),
            delta(json!({"note": "no type"})),
            delta(json!("Hi")),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": 5}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "video"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": 1}}),
            json!({"type": "message_start", "message": {"content": "Hi"}}),
        ] {
            assert!(stream_event(&bad, &mut tokens).is_err(), "{bad}");
        }
    }

    #[test]
    fn issue_14_events_without_output_are_read_as_nothing() {
        let mut tokens = Usage::default();
        for empty in [
            json!({"type": "ping"}),
            json!({"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 3}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "…"}}),
            json!({"type": "content_block_stop", "index": 0}),
            delta(json!({"type": "signature_delta", "signature": "abc"})),
            delta(json!({"type": "citations_delta", "citation": {"cited_text": "x"}})),
            json!({"type": "message_stop"}),
            json!({"type": "a_future_event", "delta": {"text": "?"}}),
        ] {
            assert_eq!(stream_event(&empty, &mut tokens), Ok(Vec::new()), "{empty}");
        }
        assert_eq!(tokens.prompt_tokens, 3);
        let start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}});
        assert_eq!(stream_event(&start, &mut tokens), Ok(vec![UpstreamEvent::Text("Hi".into())]));
        let long = delta(json!({"type": "x".repeat(10_000)}));
        let Err(Unreadable(message)) = stream_event(&long, &mut tokens) else { panic!() };
        assert!(message.len() < 100, "{message}");
        let untyped = delta(json!({"text": "yo"}));
        assert_eq!(stream_event(&untyped, &mut tokens), Ok(vec![UpstreamEvent::Text("yo".into())]));
    }
}
