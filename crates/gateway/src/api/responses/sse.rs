//! `ChatEvent`s as a Responses API reply (protocols.md §4B, §4C): output items (reasoning, a
//! message, function and custom tool calls), the streamed event grammar with its sequence
//! numbers, and the final `Response` object. One `Builder` drives both: a stream writes its
//! events, a non-streaming request keeps only the final object.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::api::responses::wire::{Echo, ToolKind, ToolOrigin};
use crate::chat::{ChatEvent, Finish, Outcome, Usage};
use crate::error::ApiError;

/// `prefix` and 48 hex digits, the shape of Responses ids.
pub(crate) fn response_id(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + 48);
    id.push_str(prefix);
    id.extend(
        std::iter::repeat_with(|| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
            .take(48),
    );
    id
}

pub(crate) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// What the response object says about the request.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub(crate) id: String,
    pub(crate) created_at: u64,
    pub(crate) model: String,
    pub(crate) echo: Echo,
    /// Flat tool name → the tool it stands for.
    pub(crate) tools: BTreeMap<String, ToolOrigin>,
    /// The estimate of the prompt's tokens, used when the upstream reports none.
    pub(crate) input_tokens: u64,
}

/// The item being written.
#[derive(Debug)]
enum Open {
    None,
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
    Call { id: String, call_id: String, flat: String, arguments: String },
}

/// Builds a response from the pipeline's events.
pub(crate) struct Builder {
    shape: Shape,
    sequence: u64,
    started: bool,
    /// Finished items, in order.
    output: Vec<Value>,
    open: Open,
    /// Set once the response is finished (completed, incomplete or failed).
    done: Option<Value>,
}

fn event(kind: &str, mut data: Value, sequence: &mut u64) -> Bytes {
    data["type"] = json!(kind);
    data["sequence_number"] = json!(*sequence);
    *sequence += 1;
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

fn usage(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

impl Builder {
    pub(crate) fn new(shape: Shape) -> Builder {
        Builder {
            shape,
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: Open::None,
            done: None,
        }
    }

    /// The response object in a given state.
    fn response(&self, status: &str, usage: Value, output: &[Value]) -> Value {
        let echo = &self.shape.echo;
        json!({
            "id": self.shape.id,
            "object": "response",
            "created_at": self.shape.created_at,
            "status": status,
            "background": false,
            "completed_at": if status == "in_progress" { Value::Null } else { json!(now()) },
            "error": null,
            "incomplete_details": null,
            "instructions": echo.instructions,
            "max_output_tokens": echo.max_output_tokens,
            "max_tool_calls": null,
            "model": self.shape.model,
            "output": output,
            "parallel_tool_calls": echo.parallel_tool_calls,
            "previous_response_id": null,
            "reasoning": echo.reasoning,
            "service_tier": "default",
            "store": echo.store,
            "temperature": echo.temperature,
            "text": echo.text,
            "tool_choice": echo.tool_choice,
            "tools": echo.tools,
            "top_p": echo.top_p,
            "truncation": "disabled",
            "usage": usage,
            "user": echo.user,
            "metadata": echo.metadata,
        })
    }

    fn emit(&mut self, kind: &str, data: Value, out: &mut Vec<Bytes>) {
        out.push(event(kind, data, &mut self.sequence));
    }

    /// `response.created` and `response.in_progress`, once.
    pub(crate) fn start(&mut self, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response("in_progress", Value::Null, &[]);
        self.emit("response.created", json!({"response": response}), out);
        self.emit("response.in_progress", json!({"response": response}), out);
    }

    fn index(&self) -> usize {
        self.output.len()
    }

    /// Ends the open item: its `done` events, and it joins the output.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        let index = self.index();
        match std::mem::replace(&mut self.open, Open::None) {
            Open::None => {}
            Open::Reasoning { id, text } => {
                self.emit(
                    "response.reasoning_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
                    out,
                );
                let item = json!({"id": id, "type": "reasoning", "status": "completed", "summary": [],
                    "content": [{"type": "reasoning_text", "text": text}]});
                self.emit(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                    out,
                );
                self.output.push(item);
            }
            Open::Message { id, text } => {
                self.emit("response.output_text.done", json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}), out);
                let part =
                    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                self.emit(
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                    out,
                );
                let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant", "content": [part]});
                self.emit(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                    out,
                );
                self.output.push(item);
            }
            Open::Call { id, call_id, flat, arguments } => {
                let origin = self.origin(&flat);
                let item = match origin.kind {
                    ToolKind::Function => {
                        let arguments =
                            if arguments.is_empty() { "{}".to_owned() } else { arguments };
                        self.emit("response.function_call_arguments.done", json!({"item_id": id, "output_index": index, "name": origin.name, "arguments": arguments}), out);
                        call_item(
                            &id,
                            "function_call",
                            &call_id,
                            &origin,
                            "arguments",
                            &arguments,
                            "completed",
                        )
                    }
                    ToolKind::Custom => {
                        let input = custom_input(&arguments);
                        self.emit(
                            "response.custom_tool_call_input.delta",
                            json!({"item_id": id, "output_index": index, "delta": input}),
                            out,
                        );
                        self.emit(
                            "response.custom_tool_call_input.done",
                            json!({"item_id": id, "output_index": index, "input": input}),
                            out,
                        );
                        call_item(
                            &id,
                            "custom_tool_call",
                            &call_id,
                            &origin,
                            "input",
                            &input,
                            "completed",
                        )
                    }
                };
                self.emit(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                    out,
                );
                self.output.push(item);
            }
        }
    }

    fn origin(&self, flat: &str) -> ToolOrigin {
        self.shape.tools.get(flat).cloned().unwrap_or_else(|| ToolOrigin {
            kind: ToolKind::Function,
            namespace: None,
            name: flat.to_owned(),
        })
    }

    /// Writes one pipeline event.
    pub(crate) fn push(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        self.start(out);
        let index = self.index();
        match event {
            ChatEvent::Reasoning(text) => {
                if !matches!(self.open, Open::Reasoning { .. }) {
                    self.close(out);
                    let id = response_id("rs_");
                    let item = json!({"id": id, "type": "reasoning", "status": "in_progress", "summary": [], "content": []});
                    self.emit(
                        "response.output_item.added",
                        json!({"output_index": self.index(), "item": item}),
                        out,
                    );
                    self.open = Open::Reasoning { id, text: String::new() };
                }
                let index = self.index();
                if let Open::Reasoning { id, text: all } = &mut self.open {
                    all.push_str(text);
                    let data = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text});
                    out.push(self::event(
                        "response.reasoning_text.delta",
                        data,
                        &mut self.sequence,
                    ));
                }
            }
            ChatEvent::Text(text) => {
                if !matches!(self.open, Open::Message { .. }) {
                    self.close(out);
                    let index = self.index();
                    let id = response_id("msg_");
                    let item = json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
                    self.emit(
                        "response.output_item.added",
                        json!({"output_index": index, "item": item}),
                        out,
                    );
                    let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
                    self.emit("response.content_part.added", json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}), out);
                    self.open = Open::Message { id, text: String::new() };
                }
                let index = self.index();
                if let Open::Message { id, text: all } = &mut self.open {
                    all.push_str(text);
                    let data = json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []});
                    out.push(self::event("response.output_text.delta", data, &mut self.sequence));
                }
            }
            ChatEvent::CallStart { id: call_id, name, .. } => {
                self.close(out);
                let index = self.index();
                let origin = self.origin(name);
                let (kind, prefix, field) = match origin.kind {
                    ToolKind::Function => ("function_call", "fc_", "arguments"),
                    ToolKind::Custom => ("custom_tool_call", "ctc_", "input"),
                };
                let id = response_id(prefix);
                let item = call_item(&id, kind, call_id, &origin, field, "", "in_progress");
                self.emit(
                    "response.output_item.added",
                    json!({"output_index": index, "item": item}),
                    out,
                );
                self.open = Open::Call {
                    id,
                    call_id: call_id.clone(),
                    flat: name.clone(),
                    arguments: String::new(),
                };
            }
            ChatEvent::CallArgs { json: fragment, .. } => {
                let custom = match &self.open {
                    Open::Call { flat, .. } => self.origin(flat).kind == ToolKind::Custom,
                    _ => false,
                };
                if let Open::Call { id, arguments, .. } = &mut self.open {
                    arguments.push_str(fragment);
                    // A function call's arguments stream as the model writes them; a custom
                    // call's raw input is known whole only at its end.
                    if !custom {
                        let data = json!({"item_id": id, "output_index": index, "delta": fragment});
                        out.push(self::event(
                            "response.function_call_arguments.delta",
                            data,
                            &mut self.sequence,
                        ));
                    }
                }
            }
            ChatEvent::CallEnd { .. } => self.close(out),
            ChatEvent::Done(outcome) => {
                self.close(out);
                let (status, kind) = match outcome.finish {
                    Finish::Length => ("incomplete", "response.incomplete"),
                    Finish::Stop | Finish::ToolCalls { .. } => ("completed", "response.completed"),
                };
                let mut usage_seen = outcome.usage;
                if usage_seen.prompt_tokens == 0 {
                    usage_seen.prompt_tokens = self.shape.input_tokens;
                }
                let mut response = self.response(status, usage(usage_seen), &self.output);
                if outcome.finish == Finish::Length {
                    response["incomplete_details"] = json!({"reason": "max_output_tokens"});
                }
                self.emit(kind, json!({"response": response}), out);
                self.done = Some(response);
            }
        }
    }

    /// A failure after streaming began: `response.failed` with the error's code.
    pub(crate) fn failed(&mut self, err: &ApiError) -> Bytes {
        let mut response = self.response("failed", Value::Null, &self.output);
        response["error"] = json!({"code": error_code(err), "message": error_message(err)});
        event("response.failed", json!({"response": response}), &mut self.sequence)
    }

    /// The finished response object (for a non-streaming request).
    pub(crate) fn finish(mut self) -> Value {
        match self.done.take() {
            Some(response) => response,
            None => {
                let mut ignored = Vec::new();
                self.push(
                    &ChatEvent::Done(Outcome { finish: Finish::Stop, usage: Usage::default() }),
                    &mut ignored,
                );
                self.done.unwrap_or(Value::Null)
            }
        }
    }
}

/// A call item in the shape its kind has.
fn call_item(
    id: &str,
    kind: &str,
    call_id: &str,
    origin: &ToolOrigin,
    field: &str,
    value: &str,
    status: &str,
) -> Value {
    let mut item =
        json!({"id": id, "type": kind, "status": status, "call_id": call_id, "name": origin.name});
    item[field] = json!(value);
    if let Some(namespace) = &origin.namespace {
        item["namespace"] = json!(namespace);
    }
    item
}

/// A custom tool's raw input from the JSON arguments the model wrote: its `input` string
/// (or the one string argument it gave), else the arguments as they are.
fn custom_input(arguments: &str) -> String {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(arguments) else {
        return arguments.to_owned();
    };
    if let Some(Value::String(input)) = object.get("input") {
        return input.clone();
    }
    let strings: Vec<&str> = object.values().filter_map(Value::as_str).collect();
    match strings.as_slice() {
        [one] if object.len() == 1 => (*one).to_owned(),
        _ => arguments.to_owned(),
    }
}

/// The `error.code` clients read from a failed response.
fn error_code(err: &ApiError) -> &'static str {
    match err {
        ApiError::ContextOverflow { .. } => "context_length_exceeded",
        ApiError::UpstreamRateLimited { .. } => "rate_limit_exceeded",
        ApiError::UpstreamOverloaded { .. } => "server_is_overloaded",
        ApiError::ToolCallMissing { .. } => "tool_call_missing",
        ApiError::OutputInvalid { .. } => "output_invalid",
        _ => "server_error",
    }
}

/// The message, with the delay Codex reads from a rate limit ("try again in Ns").
fn error_message(err: &ApiError) -> String {
    match err {
        ApiError::UpstreamRateLimited { retry_after, .. } => {
            let seconds =
                retry_after.as_deref().and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(1.0);
            format!("Rate limit reached for the upstream model. Please try again in {seconds}s.")
        }
        other => other.message(),
    }
}

/// Writes a Responses stream.
pub(crate) struct Encoder {
    pub(crate) builder: Builder,
}

impl crate::api::StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        self.builder.push(event, out);
    }

    fn error(&mut self, err: &ApiError) -> Bytes {
        let mut out = Vec::new();
        self.builder.start(&mut out);
        out.push(self.builder.failed(err));
        Bytes::from(out.concat())
    }

    fn keepalive(&self) -> Bytes {
        Bytes::from_static(b": keepalive\n\n")
    }

    /// A stream whose head goes out before its first event starts with `response.created`.
    fn open(&mut self, out: &mut Vec<Bytes>) {
        self.builder.start(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(tools: &[(&str, ToolKind, Option<&str>, &str)]) -> Shape {
        Shape {
            id: "resp_1".into(),
            created_at: 1,
            model: "m".into(),
            echo: Echo::default(),
            tools: tools
                .iter()
                .map(|(flat, kind, ns, name)| {
                    (
                        (*flat).to_owned(),
                        ToolOrigin {
                            kind: *kind,
                            namespace: ns.map(str::to_owned),
                            name: (*name).to_owned(),
                        },
                    )
                })
                .collect(),
            input_tokens: 10,
        }
    }

    fn events(out: &[Bytes]) -> Vec<Value> {
        out.iter()
            .flat_map(|b| {
                String::from_utf8(b.to_vec())
                    .unwrap()
                    .split("\n\n")
                    .filter(|f| !f.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .map(|frame| serde_json::from_str(frame.split("data: ").nth(1).unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn text_then_calls_follow_the_grammar_with_sequence_numbers() {
        let mut builder = Builder::new(shape(&[
            ("apply_patch", ToolKind::Custom, None, "apply_patch"),
            ("ns__go", ToolKind::Function, Some("ns"), "go"),
        ]));
        let mut out = Vec::new();
        for event in [
            ChatEvent::Reasoning("Think.".into()),
            ChatEvent::Text("Hi.".into()),
            ChatEvent::CallStart { index: 0, id: "call_a".into(), name: "apply_patch".into() },
            ChatEvent::CallArgs { index: 0, json: "{\"input\":\"*** Begin Patch\\n".into() },
            ChatEvent::CallArgs { index: 0, json: "*** End Patch\"}".into() },
            ChatEvent::CallEnd { index: 0 },
            ChatEvent::CallStart { index: 1, id: "call_b".into(), name: "ns__go".into() },
            ChatEvent::CallArgs { index: 1, json: "{\"x\":1}".into() },
            ChatEvent::CallEnd { index: 1 },
            ChatEvent::Done(Outcome {
                finish: Finish::ToolCalls { forced: false },
                usage: Usage { prompt_tokens: 0, completion_tokens: 5 },
            }),
        ] {
            builder.push(&event, &mut out);
        }
        let events = events(&out);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types.first(), Some(&"response.created"));
        assert_eq!(types.last(), Some(&"response.completed"));
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence_number"], i as u64);
        }
        let done = &events.last().unwrap()["response"];
        let output = done["output"].as_array().unwrap();
        let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["reasoning", "message", "custom_tool_call", "function_call"]);
        assert_eq!(output[2]["input"], "*** Begin Patch\n*** End Patch");
        assert_eq!(
            (output[3]["name"].as_str(), output[3]["namespace"].as_str()),
            (Some("go"), Some("ns"))
        );
        assert_eq!(output[3]["arguments"], "{\"x\":1}");
        assert_eq!(done["usage"]["input_tokens"], 10);
        assert_eq!(done["usage"]["total_tokens"], 15);
        assert!(types.contains(&"response.custom_tool_call_input.done"));
        assert_eq!(
            types.iter().filter(|t| **t == "response.function_call_arguments.delta").count(),
            1
        );
    }

    #[test]
    fn a_token_limit_is_an_incomplete_response() {
        let mut builder = Builder::new(shape(&[]));
        let mut out = Vec::new();
        builder.push(&ChatEvent::Text("Hel".into()), &mut out);
        builder.push(
            &ChatEvent::Done(Outcome { finish: Finish::Length, usage: Usage::default() }),
            &mut out,
        );
        let response = builder.finish();
        assert_eq!(response["status"], "incomplete");
        assert_eq!(response["incomplete_details"]["reason"], "max_output_tokens");
    }

    #[test]
    fn custom_input_takes_the_input_argument_or_the_one_string() {
        assert_eq!(custom_input(r#"{"input":"a\nb"}"#), "a\nb");
        assert_eq!(custom_input(r#"{"patch":"x"}"#), "x");
        assert_eq!(custom_input(r#"{"a":"x","b":"y"}"#), r#"{"a":"x","b":"y"}"#);
        assert_eq!(custom_input("not json"), "not json");
    }
}
