//! The Anthropic Messages wire of an upstream: the neutral request as a Messages body, and
//! reply events into `UpstreamEvent`s.

use serde_json::Value;

use crate::neutral::{Image, Sampling, Usage};
use crate::upstream::{
    CallDelta, FinishReason, Role, Unreadable, UpstreamEvent, UpstreamRequest, shape_of, text_field,
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
    if request.cache_breakpoints {
        mark_cache(&mut out);
    }
    write_sampling(&request.sampling, &mut out);
    // A JSON schema is Anthropic's `output_config.format`; a bare `json_object` has no
    // counterpart there and stays in the prompt alone.
    if let Some(schema) = request.response_format.as_ref().and_then(|f| f.schema.as_ref()) {
        out["output_config"] =
            serde_json::json!({"format": {"type": "json_schema", "schema": schema}});
    }
    out
}

/// Anthropic caches a prompt only up to a block marked for it: the system text (the tool
/// contract, the same every turn) and the end of the conversation so far, whose prefix the
/// next turn repeats, are marked.
pub(crate) fn mark_cache(out: &mut Value) {
    let ephemeral = serde_json::json!({"type": "ephemeral"});
    if let Some(system) = out.get("system").and_then(Value::as_str).map(str::to_owned) {
        out["system"] =
            serde_json::json!([{"type": "text", "text": system, "cache_control": ephemeral}]);
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

/// The sampling options Anthropic takes (`temperature`, `top_p`, `top_k`, stop sequences);
/// the others have no counterpart there.
pub(crate) fn write_sampling(sampling: &Sampling, out: &mut Value) {
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
}

/// An image as a Messages `image` block, a file as a `document` block: a `data:` URL as a
/// `base64` source, any other as a `url` source.
pub(crate) fn image_block(image: &Image) -> Value {
    let source = match image.data() {
        Some((media_type, data)) => {
            serde_json::json!({"type": "base64", "media_type": media_type, "data": data})
        }
        None => serde_json::json!({"type": "url", "url": image.url}),
    };
    match &image.file {
        None => serde_json::json!({"type": "image", "source": source}),
        Some(name) => {
            let mut block = serde_json::json!({"type": "document", "source": source});
            if !name.is_empty() {
                block["title"] = Value::String(name.clone());
            }
            block
        }
    }
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
///
/// With `calls` (a request that declared tools natively), `tool_use` blocks are calls: their
/// start gives the call's id and name, their `input_json_delta`s its arguments.
pub(crate) fn stream_event(
    value: &Value,
    start: &mut Usage,
    calls: Option<&mut NativeCalls>,
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
            let content = value.pointer("/message/content");
            content_events(content, "message.content", calls, &mut events)?;
        }
        "content_block_start" => {
            let block = value.get("content_block").unwrap_or(&Value::Null);
            let index = value.get("index").and_then(Value::as_u64);
            let native = calls.map(|calls| (calls, index, false));
            block_events(block, "content_block", native, &mut events)?;
        }
        "content_block_delta" => {
            let delta = value.get("delta").unwrap_or(&Value::Null);
            let index = value.get("index").and_then(Value::as_u64);
            delta_events(delta, calls.map(|calls| (calls, index)), &mut events)?;
        }
        // A call whose input never came (a tool without parameters) has `{}`.
        "content_block_stop" => {
            let index = value.get("index").and_then(Value::as_u64);
            if let (Some(calls), Some(index)) = (calls, index) {
                if let Some(at) = calls.position(index).filter(|&at| !calls.had_input[at]) {
                    calls.had_input[at] = true;
                    events.push(UpstreamEvent::Call(CallDelta {
                        index: at,
                        id: None,
                        name: None,
                        arguments: "{}".into(),
                    }));
                }
            }
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
        "message_stop" | "ping" => {}
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
    mut calls: Option<&mut NativeCalls>,
    events: &mut Vec<UpstreamEvent>,
) -> Result<(), Unreadable> {
    match content {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (i, block) in blocks.iter().enumerate() {
                let native = calls.as_deref_mut().map(|calls| (calls, Some(i as u64), true));
                block_events(block, &format!("{at}[{i}]"), native, events)?;
            }
            Ok(())
        }
        Some(other) => Err(Unreadable(format!("`{at}` is {}, not an array", shape_of(other)))),
    }
}

/// The events of one content block (whole, or as `content_block_start` opens it). `native`:
/// the calls read so far, the block's index, and whether the block is whole (its `input`
/// then is the call's arguments; at a start it is `{}`, the arguments following as deltas).
fn block_events(
    block: &Value,
    at: &str,
    native: Option<(&mut NativeCalls, Option<u64>, bool)>,
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
        Some("tool_use") if native.is_some() => {
            if let Some((calls, index, whole)) = native {
                events.push(UpstreamEvent::Call(calls.open(block, at, index, whole)?));
            }
        }
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

/// The events of a `content_block_delta`'s delta; `native`: the calls read so far and the
/// block's index.
fn delta_events(
    delta: &Value,
    native: Option<(&mut NativeCalls, Option<u64>)>,
    events: &mut Vec<UpstreamEvent>,
) -> Result<(), Unreadable> {
    let field = |key: &'static str| text_field(delta.get(key), move || format!("`delta.{key}`"));
    match delta.get("type").and_then(Value::as_str) {
        Some("text_delta") => push(events, field("text")?, UpstreamEvent::Text),
        Some("thinking_delta") => push(events, field("thinking")?, UpstreamEvent::Reasoning),
        // The signature of a thinking block, and a citation's source: no model text.
        Some("signature_delta" | "citations_delta") => {}
        Some("input_json_delta") if native.is_some() => {
            let Some(partial) = field("partial_json")? else {
                return Err(Unreadable("`delta.partial_json` is missing".into()));
            };
            let Some((calls, Some(index))) = native else {
                return Err(Unreadable("a tool use's input without an `index`".into()));
            };
            let Some(at) = calls.position(index) else {
                return Err(Unreadable(format!(
                    "a tool use's input for block {index}, which is no tool use"
                )));
            };
            if !partial.is_empty() {
                calls.had_input[at] = true;
                events.push(UpstreamEvent::Call(CallDelta {
                    index: at,
                    id: None,
                    name: None,
                    arguments: partial.to_owned(),
                }));
            }
        }
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

/// The bytes of model output in one Messages event or message: text, thinking and tool
/// input, as the client will read them.
pub(crate) fn output_bytes(value: &Value) -> usize {
    fn of(part: &Value) -> usize {
        ["text", "thinking", "partial_json"]
            .iter()
            .filter_map(|key| part.get(key).and_then(Value::as_str))
            .map(str::len)
            .sum::<usize>()
            + part.get("input").map_or(0, |input| input.to_string().len().saturating_sub(2))
    }
    let parts = ["delta", "content_block"].iter().filter_map(|key| value.get(key));
    let content = value.get("content").and_then(Value::as_array).map(Vec::as_slice);
    parts.chain(content.unwrap_or_default()).map(of).sum()
}

/// The `tool_use` blocks of a reply to a request that declared tools natively, in order:
/// a block's place here is its call's index.
#[derive(Debug, Default)]
pub(crate) struct NativeCalls {
    /// Each call's block index in the message.
    blocks: Vec<u64>,
    /// Whether each call's input came (else it gets `{}` when its block stops).
    had_input: Vec<bool>,
}

impl NativeCalls {
    fn position(&self, index: u64) -> Option<usize> {
        self.blocks.iter().position(|&block| block == index)
    }

    /// A `tool_use` block opens call: its id, its name and, in a whole block, its input.
    fn open(
        &mut self,
        block: &Value,
        at: &str,
        index: Option<u64>,
        whole: bool,
    ) -> Result<CallDelta, Unreadable> {
        let field = |key: &str| {
            let at = format!("`{at}.{key}`");
            text_field(block.get(key), move || at)
        };
        let Some(name) = field("name")?.filter(|name| !name.is_empty()) else {
            return Err(Unreadable(format!("`{at}` is a tool use without a name")));
        };
        let id = field("id")?.map(str::to_owned);
        let input = match block.get("input") {
            None | Some(Value::Null) => None,
            Some(Value::Object(fields)) if fields.is_empty() && !whole => None,
            Some(object @ Value::Object(_)) => Some(object.to_string()),
            Some(other) => {
                return Err(Unreadable(format!(
                    "`{at}.input` is {}, not an object",
                    shape_of(other)
                )));
            }
        };
        let index = index.unwrap_or(self.blocks.len() as u64);
        self.blocks.push(index);
        self.had_input.push(input.is_some() || whole);
        Ok(CallDelta {
            index: self.blocks.len() - 1,
            id,
            name: Some(name.to_owned()),
            arguments: input.unwrap_or_else(|| if whole { "{}".into() } else { String::new() }),
        })
    }
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

/// Events of a whole (non-streamed) Anthropic message, read as strictly as a stream; with
/// `calls`, its `tool_use` blocks are calls.
pub(crate) fn message_events(
    value: &Value,
    calls: Option<&mut NativeCalls>,
) -> Result<Vec<UpstreamEvent>, Unreadable> {
    let mut events = Vec::new();
    content_events(value.get("content"), "content", calls, &mut events)?;
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
            assert!(stream_event(&bad, &mut tokens, None).is_err(), "{bad}");
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
            assert_eq!(stream_event(&empty, &mut tokens, None), Ok(Vec::new()), "{empty}");
        }
        assert_eq!(tokens.prompt_tokens, 3);
        let start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}});
        assert_eq!(
            stream_event(&start, &mut tokens, None),
            Ok(vec![UpstreamEvent::Text("Hi".into())])
        );
        let long = delta(json!({"type": "x".repeat(10_000)}));
        let Err(Unreadable(message)) = stream_event(&long, &mut tokens, None) else { panic!() };
        assert!(message.len() < 100, "{message}");
        let untyped = delta(json!({"text": "yo"}));
        assert_eq!(
            stream_event(&untyped, &mut tokens, None),
            Ok(vec![UpstreamEvent::Text("yo".into())])
        );
    }
    #[test]
    fn issue_25_native_tool_use_blocks_are_calls() {
        let mut tokens = Usage::default();
        let mut calls = NativeCalls::default();
        let start = |index: u64, name: &str| {
            json!({"type": "content_block_start", "index": index, "content_block":
                {"type": "tool_use", "id": format!("toolu_{index}"), "name": name, "input": {}}})
        };
        let input = |index: u64, piece: &str| {
            delta(json!({"type": "input_json_delta", "partial_json": piece}))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("index".into(), json!(index));
                    Value::Object(o)
                })
                .unwrap()
        };
        let mut read = |value: Value| stream_event(&value, &mut tokens, Some(&mut calls)).unwrap();
        let call = |index, id: Option<&str>, name: Option<&str>, arguments: &str| {
            UpstreamEvent::Call(CallDelta {
                index,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                arguments: arguments.into(),
            })
        };
        assert_eq!(
            read(start(1, "get_weather")),
            vec![call(0, Some("toolu_1"), Some("get_weather"), "")]
        );
        assert_eq!(read(input(1, "{\"city\":")), vec![call(0, None, None, "{\"city\":")]);
        assert_eq!(read(input(1, "\"Paris\"}")), vec![call(0, None, None, "\"Paris\"}")]);
        assert_eq!(read(json!({"type": "content_block_stop", "index": 1})), vec![]);
        // A tool without parameters: its input never comes, and is `{}`.
        assert_eq!(read(start(2, "now")), vec![call(1, Some("toolu_2"), Some("now"), "")]);
        assert_eq!(
            read(json!({"type": "content_block_stop", "index": 2})),
            vec![call(1, None, None, "{}")]
        );
        // Input for a block that is no tool use, or a nameless tool use, cannot be read.
        assert!(stream_event(&input(7, "{}"), &mut tokens, Some(&mut calls)).is_err());
        let nameless = json!({"type": "content_block_start", "index": 3, "content_block":
            {"type": "tool_use", "id": "t", "input": {}}});
        assert!(stream_event(&nameless, &mut tokens, Some(&mut calls)).is_err());
        // A whole message: each tool use with its input.
        let message = json!({"content": [{"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_9", "name": "now", "input": {}}],
            "stop_reason": "tool_use"});
        let events = message_events(&message, Some(&mut NativeCalls::default())).unwrap();
        assert_eq!(events[0], UpstreamEvent::Text("Checking.".into()));
        assert_eq!(events[1], call(0, Some("toolu_9"), Some("now"), "{}"));
        assert!(message_events(&message, None).is_err(), "not asked natively: unreadable");
        assert_eq!(output_bytes(&input(1, "abc")), 3);
    }
}
