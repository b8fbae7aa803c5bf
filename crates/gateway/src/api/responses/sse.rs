//! `ChatEvent`s as a Responses API reply: output items (reasoning, a
//! message, function and custom tool calls), the streamed event grammar with its sequence
//! numbers, and the final `Response` object. One `Builder` drives both: a stream writes its
//! events, a non-streaming request keeps only the final object.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Value, json};

use crate::api::responses::error;
use crate::api::responses::raw_input::RawInput;
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
    Reasoning {
        id: String,
        text: String,
    },
    Message {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        flat: String,
        arguments: String,
        /// What kind of call it is.
        kind: ToolKind,
        /// A custom tool's raw input, decoded as it arrives.
        raw: RawInput,
    },
}

/// How an item ends: `completed`, or `incomplete` when the token limit or a failure cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    InProgress,
    Completed,
    Incomplete,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete => "incomplete",
        }
    }
}

/// Builds a response from the pipeline's events.
pub(crate) struct Builder {
    shape: Shape,
    /// Whether events are written (a stream); without, only the final object is built.
    streaming: bool,
    /// Events written and not taken yet.
    frames: Vec<Bytes>,
    sequence: u64,
    started: bool,
    /// Finished items, in order.
    output: Vec<Value>,
    open: Open,
    /// Set once the response is finished (completed, incomplete or failed).
    done: Option<Value>,
}

fn usage(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

impl Builder {
    /// A builder for a stream (`streaming`) or for one final object.
    pub(crate) fn new(shape: Shape, streaming: bool) -> Builder {
        Builder {
            shape,
            streaming,
            frames: Vec::new(),
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: Open::None,
            done: None,
        }
    }

    /// Moves the events written so far to `out`.
    pub(crate) fn take_frames(&mut self, out: &mut Vec<Bytes>) {
        out.append(&mut self.frames);
    }

    /// The response object in a given state.
    fn response(&self, status: &str, usage: Value) -> Value {
        let echo = &self.shape.echo;
        // The tier asked for while the response is under way; the tier that served it after.
        let service_tier = match (status, echo.service_tier.as_deref()) {
            ("in_progress", tier) => tier.unwrap_or("auto"),
            (_, None | Some("auto")) => "default",
            (_, Some(tier)) => tier,
        };
        json!({
            "id": self.shape.id,
            "object": "response",
            "created_at": self.shape.created_at,
            "status": status,
            "background": false,
            "completed_at": if status == "completed" { json!(now()) } else { Value::Null },
            "error": null,
            "incomplete_details": null,
            "instructions": echo.instructions,
            "max_output_tokens": echo.max_output_tokens,
            "max_tool_calls": echo.max_tool_calls,
            "model": self.shape.model,
            "output": if status == "in_progress" { &[] } else { self.output.as_slice() },
            "parallel_tool_calls": echo.parallel_tool_calls,
            "previous_response_id": echo.previous_response_id,
            "conversation": echo.conversation,
            "reasoning": echo.reasoning,
            "service_tier": service_tier,
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

    /// Writes one event (in a stream; otherwise only its sequence number is spent).
    fn emit(&mut self, kind: &str, mut data: Value) {
        if self.streaming {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(self.sequence);
            self.frames.push(Bytes::from(format!("event: {kind}\ndata: {data}\n\n")));
        }
        self.sequence += 1;
    }

    /// `response.created` and `response.in_progress`, once.
    pub(crate) fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response("in_progress", Value::Null);
        self.emit("response.created", json!({"response": response}));
        self.emit("response.in_progress", json!({"response": response}));
    }

    fn index(&self) -> usize {
        self.output.len()
    }

    /// Adds `text` to the open reasoning or message, and writes its delta event `kind`.
    fn add_text(&mut self, kind: &str, text: &str) {
        let (index, message) = (self.index(), matches!(self.open, Open::Message { .. }));
        let (Open::Reasoning { id, text: all } | Open::Message { id, text: all }) = &mut self.open
        else {
            return;
        };
        all.push_str(text);
        // The event is built only for a stream (see `emit`).
        let data = self.streaming.then(|| {
            let mut data =
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text});
            if message {
                data["logprobs"] = json!([]);
            }
            data
        });
        self.emit(kind, data.unwrap_or_default());
    }

    /// Ends the open item and adds `item(id)`, its id new and beginning with `prefix`; the id.
    fn add_item(&mut self, prefix: &str, item: impl FnOnce(&str) -> Value) -> String {
        self.close(Status::Completed);
        let id = response_id(prefix);
        let data = json!({"output_index": self.index(), "item": item(&id)});
        self.emit("response.output_item.added", data);
        id
    }

    /// Ends the open item with `status`: its `done` events, and it joins the output.
    fn close(&mut self, status: Status) {
        let index = self.index();
        let item = match std::mem::replace(&mut self.open, Open::None) {
            Open::None => return,
            Open::Reasoning { id, text } => {
                let data =
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text});
                self.emit("response.reasoning_text.done", data);
                json!({"id": id, "type": "reasoning", "status": status.as_str(), "summary": [],
                    "content": [{"type": "reasoning_text", "text": text}]})
            }
            Open::Message { id, text } => {
                let data = json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []});
                self.emit("response.output_text.done", data);
                let part =
                    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                let data =
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
                self.emit("response.content_part.done", data);
                json!({"id": id, "type": "message", "status": status.as_str(), "role": "assistant", "content": [part]})
            }
            Open::Call { id, call_id, flat, arguments, kind, raw } => {
                let origin = self.origin(&flat);
                match kind {
                    ToolKind::Function => {
                        // Deltas join to the final arguments, also when the model gave none.
                        let arguments = if arguments.is_empty() {
                            let delta =
                                json!({"item_id": id, "output_index": index, "delta": "{}"});
                            self.emit("response.function_call_arguments.delta", delta);
                            "{}".to_owned()
                        } else {
                            arguments
                        };
                        let data = json!({"item_id": id, "output_index": index, "name": origin.name, "arguments": arguments});
                        self.emit("response.function_call_arguments.done", data);
                        call_item(&id, &call_id, &origin, json!(arguments), status)
                    }
                    ToolKind::Custom => {
                        // The input streamed as it was decoded; arguments that did not begin
                        // with an `input` string are read whole now and sent as one delta.
                        let input = match raw.decoded() {
                            Some(input) => input.to_owned(),
                            None => {
                                let input = custom_input(&arguments);
                                if !input.is_empty() {
                                    let delta = json!({"item_id": id, "output_index": index, "delta": input});
                                    self.emit("response.custom_tool_call_input.delta", delta);
                                }
                                input
                            }
                        };
                        let data = json!({"item_id": id, "output_index": index, "input": input});
                        self.emit("response.custom_tool_call_input.done", data);
                        call_item(&id, &call_id, &origin, json!(input), status)
                    }
                    // Its arguments are an object, not a string, and have no events of their own.
                    ToolKind::ToolSearch => {
                        let arguments = match serde_json::from_str::<Value>(&arguments) {
                            Ok(object @ Value::Object(_)) => object,
                            _ => json!({}),
                        };
                        call_item(&id, &call_id, &origin, arguments, status)
                    }
                }
            }
        };
        self.emit("response.output_item.done", json!({"output_index": index, "item": item}));
        self.output.push(item);
    }

    fn origin(&self, flat: &str) -> ToolOrigin {
        self.shape.tools.get(flat).cloned().unwrap_or_else(|| ToolOrigin {
            kind: ToolKind::Function,
            namespace: None,
            name: flat.to_owned(),
        })
    }

    /// Writes one pipeline event.
    pub(crate) fn push(&mut self, event: &ChatEvent) {
        self.start();
        match event {
            ChatEvent::Reasoning(text) => {
                if !matches!(self.open, Open::Reasoning { .. }) {
                    let id = self.add_item("rs_", |id| json!({"id": id, "type": "reasoning", "status": "in_progress", "summary": [], "content": []}));
                    self.open = Open::Reasoning { id, text: String::new() };
                }
                self.add_text("response.reasoning_text.delta", text);
            }
            ChatEvent::Text(text) => {
                if !matches!(self.open, Open::Message { .. }) {
                    let id = self.add_item("msg_", |id| json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}));
                    let index = self.index();
                    let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
                    let data = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
                    self.emit("response.content_part.added", data);
                    self.open = Open::Message { id, text: String::new() };
                }
                self.add_text("response.output_text.delta", text);
            }
            ChatEvent::CallStart { id: call_id, name, .. } => {
                let origin = self.origin(name);
                let (prefix, empty) = match origin.kind {
                    ToolKind::Function => ("fc_", json!("")),
                    ToolKind::Custom => ("ctc_", json!("")),
                    ToolKind::ToolSearch => ("tsc_", json!({})),
                };
                let id = self.add_item(prefix, |id| {
                    call_item(id, call_id, &origin, empty, Status::InProgress)
                });
                self.open = Open::Call {
                    id,
                    call_id: call_id.clone(),
                    flat: name.clone(),
                    arguments: String::new(),
                    kind: origin.kind,
                    raw: RawInput::default(),
                };
            }
            ChatEvent::CallArgs { json: fragment, .. } => {
                let index = self.index();
                let Open::Call { id, arguments, kind, raw, .. } = &mut self.open else { return };
                arguments.push_str(fragment);
                // A function call's arguments stream as the model writes them; a custom
                // call's raw input as it is decoded from them.
                let (kind, delta) = match kind {
                    ToolKind::Function if !self.streaming => ("", String::new()),
                    ToolKind::Function => {
                        ("response.function_call_arguments.delta", fragment.clone())
                    }
                    ToolKind::Custom => {
                        ("response.custom_tool_call_input.delta", raw.feed(arguments))
                    }
                    ToolKind::ToolSearch => return,
                };
                if !delta.is_empty() {
                    let data = json!({"item_id": id, "output_index": index, "delta": delta});
                    self.emit(kind, data);
                }
            }
            ChatEvent::CallEnd { complete: true, .. } => self.close(Status::Completed),
            // Cut off inside its arguments: the item is incomplete, not a call to run.
            ChatEvent::CallEnd { complete: false, .. } => self.close(Status::Incomplete),
            ChatEvent::Done(outcome) => {
                let (status, kind) = match outcome.finish {
                    Finish::Length => (Status::Incomplete, "response.incomplete"),
                    Finish::Stop | Finish::ToolCalls { .. } => {
                        (Status::Completed, "response.completed")
                    }
                };
                self.close(status);
                let mut usage_seen = outcome.usage;
                if usage_seen.prompt_tokens == 0 {
                    usage_seen.prompt_tokens = self.shape.input_tokens;
                }
                let mut response = self.response(status.as_str(), usage(usage_seen));
                if outcome.finish == Finish::Length {
                    response["incomplete_details"] = json!({"reason": "max_output_tokens"});
                }
                self.emit(kind, json!({"response": response}));
                self.done = Some(response);
            }
        }
    }

    /// A failure: the open item ends `incomplete`, then `response.failed` with the error's
    /// code and message (and the items so far in its output).
    pub(crate) fn fail(&mut self, err: &ApiError) {
        self.start();
        self.close(Status::Incomplete);
        let mut response = self.response("failed", Value::Null);
        response["error"] = json!({"code": error::code(err), "message": error::message(err)});
        self.emit("response.failed", json!({"response": response}));
        self.done = Some(response);
    }

    /// The finished response object (for a non-streaming request).
    pub(crate) fn finish(mut self) -> Value {
        if self.done.is_none() {
            let (usage, retried) = (Usage::default(), Usage::default());
            self.push(&ChatEvent::Done(Outcome { finish: Finish::Stop, usage, retried }));
        }
        self.done.unwrap_or(Value::Null)
    }
}

/// A call item in the shape its kind has: a function call's `arguments` (a string), a
/// custom call's `input`, or a tool search's `arguments` (an object) is `value`.
fn call_item(id: &str, call_id: &str, origin: &ToolOrigin, value: Value, status: Status) -> Value {
    let mut item = match origin.kind {
        ToolKind::Function => {
            json!({"type": "function_call", "name": origin.name, "arguments": value})
        }
        ToolKind::Custom => {
            json!({"type": "custom_tool_call", "name": origin.name, "input": value})
        }
        ToolKind::ToolSearch => {
            json!({"type": "tool_search_call", "execution": "client", "arguments": value})
        }
    };
    item["id"] = json!(id);
    item["status"] = json!(status.as_str());
    item["call_id"] = json!(call_id);
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

/// Writes a Responses stream.
pub(crate) struct Encoder {
    pub(crate) builder: Builder,
    /// How the finished response is kept: before its last event goes out, so a client that
    /// refers to it at once finds it.
    pub(crate) keep: Option<crate::api::responses::stored::Keep>,
}

impl crate::api::StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        self.builder.push(event);
        if let Some(done) = &self.builder.done {
            if let Some(keep) = self.keep.take() {
                keep.put(done);
            }
        }
        self.builder.take_frames(out);
    }

    fn error(&mut self, err: &ApiError) -> Bytes {
        self.builder.fail(err);
        let mut out = Vec::new();
        self.builder.take_frames(&mut out);
        Bytes::from(out.concat())
    }

    fn keepalive(&self) -> Bytes {
        Bytes::from_static(b": keepalive\n\n")
    }

    /// A stream whose head goes out before its first event starts with `response.created`.
    fn open(&mut self, out: &mut Vec<Bytes>) {
        self.builder.start();
        self.builder.take_frames(out);
    }

    /// A context overflow and a rate limit are `response.failed` events even before the
    /// first event: Codex reads their codes there (a context error; a retry after the delay
    /// in "try again in Ns"), while an HTTP 429 ends its turn and an HTTP 400 is shown raw.
    fn in_band_before_start(&self, err: &ApiError) -> bool {
        matches!(err, ApiError::ContextOverflow { .. } | ApiError::UpstreamRateLimited { .. })
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

    /// Streams `events` through a builder; returns every event written, parsed.
    fn stream(builder: &mut Builder, events: &[ChatEvent]) -> Vec<Value> {
        let mut out = Vec::new();
        for event in events {
            builder.push(event);
        }
        builder.take_frames(&mut out);
        parse(&out)
    }

    fn parse(out: &[Bytes]) -> Vec<Value> {
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

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    fn done(finish: Finish) -> ChatEvent {
        let usage = Usage { prompt_tokens: 0, completion_tokens: 5, cached_tokens: 0 };
        ChatEvent::Done(Outcome { finish, usage, retried: Usage::default() })
    }

    #[test]
    fn text_then_calls_follow_the_grammar_with_sequence_numbers() {
        let mut builder = Builder::new(
            shape(&[
                ("apply_patch", ToolKind::Custom, None, "apply_patch"),
                ("ns__go", ToolKind::Function, Some("ns"), "go"),
            ]),
            true,
        );
        let patch = ["{\"input\":\"*** Begin Patch\\n", "*** End Patch\"}"];
        let events: Vec<ChatEvent> =
            [ChatEvent::Reasoning("Think.".into()), ChatEvent::Text("Hi.".into())]
                .into_iter()
                .chain(ChatEvent::call(0, "call_a", "apply_patch", &patch))
                .chain(ChatEvent::call(1, "call_b", "ns__go", &["{\"x\":1}"]))
                .chain([done(Finish::ToolCalls { forced: false })])
                .collect();
        let events = stream(&mut builder, &events);
        let types = types(&events);
        assert_eq!(types.first(), Some(&"response.created"));
        assert_eq!(types.last(), Some(&"response.completed"));
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence_number"], i as u64);
        }
        let done = &events.last().unwrap()["response"];
        assert_eq!(done["service_tier"], "default");
        assert_eq!(events[0]["response"]["service_tier"], "auto");
        assert!(events[0]["response"]["completed_at"].is_null());
        assert!(done["completed_at"].is_u64());
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
        let input_deltas: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "response.custom_tool_call_input.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(input_deltas, ["*** Begin Patch\n", "*** End Patch"]);
        assert_eq!(
            types.iter().filter(|t| **t == "response.function_call_arguments.delta").count(),
            1
        );
    }

    #[test]
    fn a_long_custom_input_streams_in_pieces_that_join_to_its_input() {
        let patch: String =
            (0..40).map(|i| format!("+line {i} with \"quotes\" and a tab\t\n")).collect();
        let arguments = json!({"input": patch}).to_string();
        let mut events = vec![ChatEvent::CallStart {
            index: 0,
            id: "call_a".into(),
            name: "apply_patch".into(),
        }];
        let chars: Vec<char> = arguments.chars().collect();
        events.extend(
            chars.chunks(5).map(|c| ChatEvent::CallArgs { index: 0, json: c.iter().collect() }),
        );
        events.extend([
            ChatEvent::CallEnd { index: 0, complete: true },
            done(Finish::ToolCalls { forced: false }),
        ]);
        let mut builder =
            Builder::new(shape(&[("apply_patch", ToolKind::Custom, None, "apply_patch")]), true);
        let events = stream(&mut builder, &events);
        let deltas = deltas(&events, "response.custom_tool_call_input.delta");
        let deltas: Vec<&str> = deltas.iter().map(|d| d.as_str().unwrap()).collect();
        assert!(deltas.len() > 10, "{}", deltas.len());
        let input_done =
            events.iter().find(|e| e["type"] == "response.custom_tool_call_input.done").unwrap();
        assert_eq!(deltas.concat(), input_done["input"].as_str().unwrap());
        assert_eq!(input_done["input"], patch.as_str());
    }

    /// The `delta` of each event of type `kind`.
    fn deltas<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
        events.iter().filter(|e| e["type"] == kind).map(|e| &e["delta"]).collect()
    }

    #[test]
    fn a_custom_call_without_an_input_string_gets_one_delta_at_its_end() {
        let mut builder =
            Builder::new(shape(&[("apply_patch", ToolKind::Custom, None, "apply_patch")]), true);
        let events = stream(
            &mut builder,
            &[
                ChatEvent::CallStart { index: 0, id: "call_a".into(), name: "apply_patch".into() },
                ChatEvent::CallArgs { index: 0, json: "{\"patch\":\"x y\"}".into() },
                ChatEvent::CallEnd { index: 0, complete: true },
            ],
        );
        assert_eq!(deltas(&events, "response.custom_tool_call_input.delta"), [&json!("x y")]);
    }

    #[test]
    fn a_call_without_arguments_gets_one_empty_object_delta() {
        let mut builder = Builder::new(shape(&[]), true);
        let events = stream(
            &mut builder,
            &[
                ChatEvent::CallStart { index: 0, id: "call_a".into(), name: "now".into() },
                ChatEvent::CallEnd { index: 0, complete: true },
            ],
        );
        assert_eq!(deltas(&events, "response.function_call_arguments.delta"), [&json!("{}")]);
        let done =
            events.iter().find(|e| e["type"] == "response.function_call_arguments.done").unwrap();
        assert_eq!(done["arguments"], "{}");
    }

    #[test]
    fn a_token_limit_leaves_the_message_incomplete() {
        let mut builder = Builder::new(shape(&[]), true);
        let events = stream(&mut builder, &[ChatEvent::Text("Hel".into()), done(Finish::Length)]);
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.incomplete");
        assert!(last["response"]["completed_at"].is_null());
        let item_done = events.iter().find(|e| e["type"] == "response.output_item.done").unwrap();
        assert_eq!(item_done["item"]["status"], "incomplete");
        let response = builder.finish();
        assert_eq!(response["status"], "incomplete");
        assert_eq!(response["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(response["output"][0]["status"], "incomplete");
    }

    #[test]
    fn issue_17_a_call_cut_off_in_its_arguments_is_an_incomplete_item() {
        let mut builder = Builder::new(shape(&[("go", ToolKind::Function, None, "go")]), true);
        let events = stream(
            &mut builder,
            &[
                ChatEvent::CallStart { index: 0, id: "call_a".into(), name: "go".into() },
                ChatEvent::CallArgs { index: 0, json: "{\"x\":\"ab\"}".into() },
                ChatEvent::CallEnd { index: 0, complete: false },
                done(Finish::Length),
            ],
        );
        let item_done = events.iter().find(|e| e["type"] == "response.output_item.done").unwrap();
        assert_eq!(item_done["item"]["status"], "incomplete");
        assert_eq!(events.last().unwrap()["type"], "response.incomplete");
    }

    #[test]
    fn a_failure_closes_the_open_item_as_incomplete_before_response_failed() {
        let mut builder = Builder::new(shape(&[]), true);
        let mut events = stream(&mut builder, &[ChatEvent::Text("Paris is".into())]);
        let mut out = Vec::new();
        builder.fail(&ApiError::Upstream {
            fault: crate::error::UpstreamFault::BrokeOff,
            message: "broke".into(),
            detail: String::new(),
        });
        builder.take_frames(&mut out);
        events.extend(parse(&out));
        let types = types(&events);
        let n = types.len();
        assert_eq!(
            types[n - 4..],
            [
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.failed"
            ]
        );
        assert_eq!(events[n - 2]["item"]["status"], "incomplete");
        let failed = &events[n - 1]["response"];
        assert_eq!(failed["status"], "failed");
        assert!(failed["completed_at"].is_null());
        assert_eq!(failed["error"]["code"], "server_error");
        assert_eq!(failed["output"][0]["content"][0]["text"], "Paris is");
        assert_eq!(failed["output"][0]["status"], "incomplete");
    }

    #[test]
    fn a_whole_response_writes_no_events() {
        let mut builder = Builder::new(shape(&[]), false);
        let events = stream(&mut builder, &[ChatEvent::Text("Hi.".into()), done(Finish::Stop)]);
        assert!(events.is_empty());
        let response = builder.finish();
        assert_eq!(response["output"][0]["content"][0]["text"], "Hi.");
        assert_eq!(response["status"], "completed");
    }

    #[test]
    fn custom_input_takes_the_input_argument_or_the_one_string() {
        assert_eq!(custom_input(r#"{"input":"a\nb"}"#), "a\nb");
        assert_eq!(custom_input(r#"{"patch":"x"}"#), "x");
        assert_eq!(custom_input(r#"{"a":"x","b":"y"}"#), r#"{"a":"x","b":"y"}"#);
        assert_eq!(custom_input("not json"), "not json");
    }
}
