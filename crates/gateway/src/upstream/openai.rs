//! The OpenAI Chat Completions wire of an upstream: the neutral request as a streaming Chat
//! Completions body, and reply events into `UpstreamEvent`s.

use serde_json::{Value, json};

use crate::neutral::{ChatRequest, Image, Message, OutputFormat, Sampling, ToolChoice, Usage};
use crate::upstream::constrain::Dialect;
use crate::upstream::{
    CallDelta, FinishReason, Role, Unreadable, UpstreamEvent, UpstreamRequest, shape_of, text_field,
};

/// The request as a streaming Chat Completions body (no `tools`), with its grammar in the
/// upstream's dialect when it has one.
pub(crate) fn body(
    request: &UpstreamRequest,
    grammar: Option<Dialect>,
    prefill: Option<Dialect>,
) -> Value {
    let mut messages = Vec::with_capacity(request.turns.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for turn in &request.turns {
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": content(&turn.text, &turn.images)}));
    }
    let prefill = request.prefill.as_deref().zip(prefill);
    if let Some((text, _)) = prefill {
        messages.push(json!({"role": "assistant", "content": text}));
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    write_sampling(&request.sampling, &mut body);
    write_cache_key(request.cache_key.as_deref(), &mut body);
    if let Some(format) = &request.response_format {
        body.insert("response_format".into(), response_format(format));
    }
    if let (Some(grammar), Some(dialect)) = (&request.grammar, grammar) {
        dialect.insert(&mut body, grammar);
    }
    if let Some((_, dialect)) = prefill {
        dialect.continue_final(&mut body);
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

/// The client's prompt-cache key, under Chat Completions' name.
fn write_cache_key(key: Option<&str>, body: &mut serde_json::Map<String, Value>) {
    if let Some(key) = key {
        body.insert("prompt_cache_key".into(), Value::String(key.to_owned()));
    }
}

/// A message's `content`: its text, or with images and files, a text part and an
/// `image_url` or `file` part each (a file by URL, which Chat Completions cannot carry, is
/// named in a text part).
fn content(text: &str, images: &[Image]) -> Value {
    if images.is_empty() {
        return json!(text);
    }
    let text = (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    let parts = images.iter().map(|image| match &image.file {
        None => json!({"type": "image_url", "image_url": {"url": image.url}}),
        Some(name) if image.data().is_some() => {
            let mut file = json!({"file_data": image.url});
            if !name.is_empty() {
                file["filename"] = json!(name);
            }
            json!({"type": "file", "file": file})
        }
        Some(_) => json!({"type": "text", "text": format!("[file: {}]", image.url)}),
    });
    Value::Array(text.into_iter().chain(parts).collect())
}

/// A format as OpenAI's `response_format`.
pub(crate) fn response_format(output: &OutputFormat) -> Value {
    match &output.schema {
        Some(schema) => json!({"type": "json_schema", "json_schema": {
            "name": output.name, "schema": schema, "strict": output.strict}}),
        None => json!({"type": "json_object"}),
    }
}

/// A request of any family as a streaming Chat Completions body with its tools declared
/// natively (native and auto modes on Messages and Responses): the conversation with its
/// calls as `tool_calls` and their results as `tool` messages, the tools, the tool choice,
/// the sampling options and the answer's format.
pub(crate) fn native_body(req: &ChatRequest, model: &str) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len());
    // Images of tool results: a `tool` message holds text only, so they follow the results
    // in a user message of their own.
    let mut result_images: Vec<Image> = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        if !matches!(message, Message::ToolResult { .. }) && !result_images.is_empty() {
            let images = std::mem::take(&mut result_images);
            messages.push(json!({"role": "user", "content": content("", &images)}));
        }
        messages.push(match message {
            Message::System(text) => json!({"role": "system", "content": text}),
            Message::User(text) => {
                let images: Vec<Image> = req.images_of(i).cloned().collect();
                json!({"role": "user", "content": content(text, &images)})
            }
            Message::Assistant { text, calls } if calls.is_empty() => {
                json!({"role": "assistant", "content": text})
            }
            Message::Assistant { text, calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|call| {
                        json!({"id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments}})
                    })
                    .collect();
                let content = if text.is_empty() { Value::Null } else { json!(text) };
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
            // Chat Completions has no error flag on a result: an error says so in its text.
            Message::ToolResult { call_id, content, is_error, .. } => {
                result_images.extend(req.images_of(i).cloned());
                let content = if *is_error { format!("Error: {content}") } else { content.clone() };
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        });
    }
    if !result_images.is_empty() {
        messages.push(json!({"role": "user", "content": content("", &result_images)}));
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|tool| {
                let mut function = serde_json::Map::new();
                function.insert("name".into(), json!(tool.name));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), json!(description));
                }
                let parameters = tool
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                function.insert("parameters".into(), parameters);
                if tool.strict {
                    function.insert("strict".into(), Value::Bool(true));
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &req.tool_choice {
            ToolChoice::None => json!("none"),
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), choice);
        if !req.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    write_sampling(&req.sampling, &mut body);
    write_cache_key(req.cache_key.as_deref(), &mut body);
    if let Some(output) = &req.output {
        body.insert("response_format".into(), response_format(output));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

/// A relayed Chat Completions body continued from `prefix` (`chat::continuation`): the
/// assistant message to continue appended, streamed (so that it can be left once its first
/// call ended), at most `max_tokens`, no log probabilities.
pub(crate) fn continued(body: &Value, prefix: &str, dialect: Dialect, max_tokens: u64) -> Value {
    let mut body = body.clone();
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        messages.push(json!({"role": "assistant", "content": prefix}));
    }
    if let Some(object) = body.as_object_mut() {
        for key in ["logprobs", "top_logprobs", "n", "max_completion_tokens"] {
            object.remove(key);
        }
        object.insert("max_tokens".into(), json!(max_tokens));
        object.insert("stream".into(), Value::Bool(true));
        object.insert("stream_options".into(), json!({"include_usage": true}));
        dialect.continue_final(object);
    }
    body
}

/// A relayed Chat Completions body without its tools, for a plain answer.
pub(crate) fn without_tools(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(object) = body.as_object_mut() {
        for key in ["tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"] {
            object.remove(key);
        }
    }
    body
}

fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        prompt_tokens: usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        cached_tokens: usage
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    })
}

/// Events of one streamed chunk (`delta`) or of a whole completion (`message`).
///
/// Every field that carries model output must have its documented shape, or the event is
/// `Unreadable` (never skipped): the content (a string, or an array of text parts), the
/// reasoning (`reasoning_content`, else `reasoning`), a refusal (read as text), and the
/// finish reason. Native `tool_calls` are unreadable too: the emulated request declared no
/// tools, so such a call could not be passed on. What carries no output is left alone: a
/// chunk without `choices` or with none (usage), a role-only delta, unknown fields.
fn events_of(value: &Value, part: &str, native: bool) -> Result<Vec<UpstreamEvent>, Unreadable> {
    let Some(object) = value.as_object() else {
        return Err(Unreadable(format!("the event is {}, not an object", shape_of(value))));
    };
    let mut events = Vec::new();
    match object.get("choices") {
        None | Some(Value::Null) => {}
        Some(Value::Array(choices)) => {
            for (i, choice) in choices.iter().enumerate() {
                choice_events(choice, i, part, native, &mut events)?;
            }
        }
        Some(other) => {
            return Err(Unreadable(format!("`choices` is {}, not an array", shape_of(other))));
        }
    }
    if let Some(usage) = usage_of(value) {
        events.push(UpstreamEvent::Usage(usage));
    }
    Ok(events)
}

fn choice_events(
    choice: &Value,
    i: usize,
    part: &str,
    native: bool,
    events: &mut Vec<UpstreamEvent>,
) -> Result<(), Unreadable> {
    let Some(choice) = choice.as_object() else {
        return Err(Unreadable(format!("`choices[{i}]` is {}, not an object", shape_of(choice))));
    };
    match choice.get("index") {
        None | Some(Value::Null) => {}
        Some(index) if index.as_u64() == Some(0) => {}
        Some(index) => {
            let index = match index.as_u64() {
                Some(n) => n.to_string(),
                None => shape_of(index).to_owned(),
            };
            return Err(Unreadable(format!(
                "`choices[{i}]` has index {index}; the gateway asked for one choice"
            )));
        }
    }
    match choice.get(part) {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            let at = |key: &'static str| move || format!("`choices[{i}].{part}.{key}`");
            let reasoning =
                match text_field(fields.get("reasoning_content"), at("reasoning_content"))? {
                    Some(text) => Some(text),
                    None => text_field(fields.get("reasoning"), at("reasoning"))?,
                };
            if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                events.push(UpstreamEvent::Reasoning(text.to_owned()));
            }
            match fields.get("content") {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => push_text(events, text),
                Some(Value::Array(pieces)) => {
                    for (j, piece) in pieces.iter().enumerate() {
                        let text = (piece.get("type").and_then(Value::as_str) == Some("text"))
                            .then(|| piece.get("text").and_then(Value::as_str))
                            .flatten()
                            .ok_or_else(|| {
                                Unreadable(format!(
                                    "`choices[{i}].{part}.content[{j}]` is not a text part"
                                ))
                            })?;
                        push_text(events, text);
                    }
                }
                Some(other) => {
                    return Err(Unreadable(format!(
                        "`choices[{i}].{part}.content` is {}, not a string",
                        shape_of(other)
                    )));
                }
            }
            if let Some(text) = text_field(fields.get("refusal"), at("refusal"))? {
                push_text(events, text);
            }
            for key in ["tool_calls", "function_call"] {
                match fields.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(calls)) if calls.is_empty() => {}
                    Some(calls) if native => {
                        call_events(calls, &format!("choices[{i}].{part}.{key}"), events)?
                    }
                    Some(_) => {
                        return Err(Unreadable(format!(
                            "`choices[{i}].{part}.{key}` holds native tool calls, which the emulated request did not declare tools for"
                        )));
                    }
                }
            }
        }
        Some(other) => {
            return Err(Unreadable(format!(
                "`choices[{i}].{part}` is {}, not an object",
                shape_of(other)
            )));
        }
    }
    let at = || format!("`choices[{i}].finish_reason`");
    if let Some(reason) = text_field(choice.get("finish_reason"), at)? {
        events.push(UpstreamEvent::Finish(FinishReason::from_wire(reason)));
    }
    Ok(())
}

/// Native calls: `tool_calls` (an array of `{index, id, function: {name, arguments}}`
/// pieces) or the legacy `function_call` (one `{name, arguments}`).
fn call_events(calls: &Value, at: &str, events: &mut Vec<UpstreamEvent>) -> Result<(), Unreadable> {
    let one = |call: &Value, position: usize, function: Option<&Value>| {
        let Some(function) = function.filter(|f| f.is_object()) else {
            return Err(Unreadable(format!("`{at}[{position}]` has no `function` object")));
        };
        let index = match call.get("index") {
            None | Some(Value::Null) => position,
            Some(index) => {
                index.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                    Unreadable(format!(
                        "`{at}[{position}].index` is {}, not a number",
                        shape_of(index)
                    ))
                })?
            }
        };
        let field = |value: Option<&Value>, key: &str| {
            text_field(value, || format!("`{at}[{position}].{key}`")).map(|t| t.map(str::to_owned))
        };
        Ok(UpstreamEvent::Call(CallDelta {
            index,
            id: field(call.get("id"), "id")?,
            name: field(function.get("name"), "function.name")?,
            arguments: field(function.get("arguments"), "function.arguments")?.unwrap_or_default(),
        }))
    };
    match calls {
        Value::Array(items) => {
            for (position, call) in items.iter().enumerate() {
                events.push(one(call, position, call.get("function"))?);
            }
        }
        Value::Object(_) => events.push(one(&Value::Null, 0, Some(calls))?),
        other => return Err(Unreadable(format!("`{at}` is {}", shape_of(other)))),
    }
    Ok(())
}

fn push_text(events: &mut Vec<UpstreamEvent>, text: &str) {
    if !text.is_empty() {
        events.push(UpstreamEvent::Text(text.to_owned()));
    }
}

/// Events of one streamed chunk.
pub(crate) fn chunk_events(value: &Value) -> Result<Vec<UpstreamEvent>, Unreadable> {
    events_of(value, "delta", false)
}

/// Events of one streamed chunk of a reply to a request with native `tools`: its calls too.
pub(crate) fn native_chunk_events(value: &Value) -> Result<Vec<UpstreamEvent>, Unreadable> {
    events_of(value, "delta", true)
}

/// Events of a whole completion of a reply to a request with native `tools`.
pub(crate) fn native_completion_events(value: &Value) -> Result<Vec<UpstreamEvent>, Unreadable> {
    events_of(value, "message", true)
}

/// Events of a whole completion.
pub(crate) fn completion_events(value: &Value) -> Result<Vec<UpstreamEvent>, Unreadable> {
    events_of(value, "message", false)
}

/// The bytes of model output in one relayed chunk (passthrough): content, reasoning, refusal
/// and call arguments, as the client will read them. Counted against
/// `upstream.max_reply_bytes`; an unusual shape counts what it has.
pub(crate) fn output_bytes(value: &Value) -> usize {
    fn text_len(value: Option<&Value>) -> usize {
        match value {
            Some(Value::String(text)) => text.len(),
            Some(Value::Array(pieces)) => pieces.iter().map(|p| text_len(p.get("text"))).sum(),
            _ => 0,
        }
    }
    let choices = value.get("choices").and_then(Value::as_array).map(Vec::as_slice);
    choices
        .unwrap_or_default()
        .iter()
        .filter_map(|choice| choice.get("delta").or_else(|| choice.get("message")))
        .map(|fields| {
            let calls = fields.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice);
            let call_args: usize = calls
                .unwrap_or_default()
                .iter()
                .map(|call| text_len(call.pointer("/function/arguments")))
                .sum();
            ["content", "reasoning_content", "reasoning", "refusal"]
                .iter()
                .map(|key| text_len(fields.get(*key)))
                .sum::<usize>()
                + call_args
                + text_len(fields.pointer("/function_call/arguments"))
        })
        .sum()
}

/// The sampling options under their Chat Completions names (which llama.cpp and vLLM take
/// too, with `top_k`, `min_p` and `repeat_penalty`).
fn write_sampling(sampling: &Sampling, body: &mut serde_json::Map<String, Value>) {
    for (key, value) in sampling.numbers() {
        if let Some(n) = value {
            body.insert(key.into(), Value::Number(n.clone()));
        }
    }
    if let Some(bias) = &sampling.logit_bias {
        body.insert("logit_bias".into(), Value::Object(bias.clone()));
    }
    if !sampling.stop.is_empty() {
        body.insert("stop".into(), json!(sampling.stop));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    #[test]
    fn issue_14_output_in_an_unreadable_shape_is_an_error() {
        for bad in [
            json!("just a string"),
            json!({"choices": 5}),
            json!({"choices": [5]}),
            json!({"choices": [{"delta": "Hi"}]}),
            chunk(json!({"content": 7})),
            chunk(json!({"content": {"text": "Hi"}})),
            chunk(json!({"content": [{"type": "image_url"}]})),
            chunk(json!({"reasoning_content": ["a"]})),
            chunk(json!({"refusal": 1})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"name": "f"}}]})),
            json!({"choices": [{"index": 1, "delta": {"content": "Hi"}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": 3}]}),
        ] {
            assert!(chunk_events(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn issue_14_events_without_output_are_read_as_nothing() {
        for empty in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": null, "usage": null}),
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"role": "assistant", "content": null, "tool_calls": []})),
            chunk(Value::Null),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": null, "logprobs": null}]}),
        ] {
            assert_eq!(chunk_events(&empty), Ok(Vec::new()), "{empty}");
        }
        let events = chunk_events(&chunk(json!({"content": [{"type": "text", "text": "Hi"}], "reasoning": "r", "refusal": "No."}))).unwrap();
        assert_eq!(
            events,
            [
                UpstreamEvent::Reasoning("r".into()),
                UpstreamEvent::Text("Hi".into()),
                UpstreamEvent::Text("No.".into())
            ]
        );
    }

    #[test]
    fn issue_14_relayed_output_is_counted() {
        let value = json!({"choices": [{"delta": {"content": "abc", "reasoning_content": "de",
            "tool_calls": [{"function": {"arguments": "{}"}}]}}]});
        assert_eq!(output_bytes(&value), 7);
        assert_eq!(output_bytes(&json!({"choices": 5})), 0);
    }
}
