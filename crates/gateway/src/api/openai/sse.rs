//! Encodes `ChatEvent`s as Chat Completions chunks, and folds them into
//! one completion for non-streaming requests.

use bytes::Bytes;

use std::collections::{HashMap, HashSet};

use crate::api::openai::wire::{
    Choice, Chunk, ChunkChoice, Completion, CustomDelta, Delta, FunctionDelta, ResponseMessage,
    ToolCallDelta, WireCustom, WireFunction, WireToolCall, to_wire_usage,
};
use crate::api::responses::raw_input::RawInput;
use crate::chat::{ChatEvent, Finish, Outcome};

/// The finish reason for an outcome.
pub(crate) fn finish_reason(finish: Finish, legacy: bool) -> &'static str {
    match finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCalls { .. } if legacy => "function_call",
        Finish::ToolCalls { forced: true } => "stop",
        Finish::ToolCalls { forced: false } => "tool_calls",
    }
}

/// Writes the chunks of one streamed completion.
pub(crate) struct Encoder {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    legacy: bool,
    /// The role chunk has gone out.
    started: bool,
    /// The custom tools, and each custom call's arguments so far with their raw input's
    /// reader, by index.
    custom: HashSet<String>,
    inputs: HashMap<usize, (String, RawInput)>,
}

impl Encoder {
    pub(crate) fn new(
        id: String,
        created: u64,
        model: String,
        include_usage: bool,
        legacy: bool,
    ) -> Encoder {
        Encoder {
            id,
            created,
            model,
            include_usage,
            legacy,
            started: false,
            custom: HashSet::new(),
            inputs: HashMap::new(),
        }
    }

    /// Calls to these tools are custom calls, their input streamed as raw text.
    pub(crate) fn custom_tools(mut self, custom: HashSet<String>) -> Encoder {
        self.custom = custom;
        self
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<&'static str>) -> Bytes {
        let chunk = Chunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: vec![ChunkChoice { index: 0, delta, logprobs: None, finish_reason }],
            usage: self.include_usage.then_some(None),
        };
        frame(&chunk)
    }

    fn start(&mut self, text_first: bool, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let delta = if text_first {
            Delta {
                role: Some("assistant"),
                content: Some(Some(String::new())),
                refusal: Some(None),
                ..Delta::default()
            }
        } else {
            Delta { role: Some("assistant"), content: Some(None), ..Delta::default() }
        };
        out.push(self.chunk(delta, None));
    }

    pub(crate) fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        match event {
            ChatEvent::Reasoning(text) => {
                self.start(true, out);
                let delta = Delta { reasoning_content: Some(text.clone()), ..Delta::default() };
                out.push(self.chunk(delta, None));
            }
            ChatEvent::Text(text) => {
                self.start(true, out);
                out.push(
                    self.chunk(
                        Delta { content: Some(Some(text.clone())), ..Delta::default() },
                        None,
                    ),
                );
            }
            ChatEvent::CallStart { index, id, name } if self.custom.contains(name) => {
                self.start(false, out);
                self.inputs.insert(*index, (String::new(), RawInput::default()));
                // No `type`: the chunk schema (and the OpenAI SDK's chunk types, which
                // validate it) knows only `function`; the `custom` object says what it is.
                let call = ToolCallDelta {
                    index: *index,
                    id: Some(id.clone()),
                    kind: None,
                    function: None,
                    custom: Some(CustomDelta { name: Some(name.clone()), input: String::new() }),
                };
                out.push(self.chunk(Delta { tool_calls: vec![call], ..Delta::default() }, None));
            }
            ChatEvent::CallArgs { index, json } if self.inputs.contains_key(index) => {
                let Some((arguments, raw)) = self.inputs.get_mut(index) else { return };
                arguments.push_str(json);
                let input = raw.feed(arguments);
                if !input.is_empty() {
                    let call = ToolCallDelta {
                        index: *index,
                        id: None,
                        kind: None,
                        function: None,
                        custom: Some(CustomDelta { name: None, input }),
                    };
                    let delta = Delta { tool_calls: vec![call], ..Delta::default() };
                    out.push(self.chunk(delta, None));
                }
            }
            ChatEvent::CallEnd { index, .. } if self.inputs.contains_key(index) => {
                // Arguments whose input could not be read as it came: the whole input now.
                let Some((arguments, raw)) = self.inputs.remove(index) else { return };
                if raw.decoded().is_none() {
                    let call = ToolCallDelta {
                        index: *index,
                        id: None,
                        kind: None,
                        function: None,
                        custom: Some(CustomDelta { name: None, input: custom_input(&arguments) }),
                    };
                    out.push(
                        self.chunk(Delta { tool_calls: vec![call], ..Delta::default() }, None),
                    );
                }
            }
            ChatEvent::CallStart { index, id, name } => {
                self.start(false, out);
                let delta = if self.legacy {
                    Delta {
                        function_call: Some(FunctionDelta {
                            name: Some(name.clone()),
                            arguments: String::new(),
                        }),
                        ..Delta::default()
                    }
                } else {
                    Delta {
                        tool_calls: vec![ToolCallDelta {
                            index: *index,
                            id: Some(id.clone()),
                            kind: Some("function"),
                            function: Some(FunctionDelta {
                                name: Some(name.clone()),
                                arguments: String::new(),
                            }),
                            custom: None,
                        }],
                        ..Delta::default()
                    }
                };
                out.push(self.chunk(delta, None));
            }
            ChatEvent::CallArgs { index, json } => {
                let function = FunctionDelta { name: None, arguments: json.clone() };
                let delta = if self.legacy {
                    Delta { function_call: Some(function), ..Delta::default() }
                } else {
                    Delta {
                        tool_calls: vec![ToolCallDelta {
                            index: *index,
                            id: None,
                            kind: None,
                            function: Some(function),
                            custom: None,
                        }],
                        ..Delta::default()
                    }
                };
                out.push(self.chunk(delta, None));
            }
            ChatEvent::CallEnd { .. } => {}
            ChatEvent::Done(outcome) => {
                self.start(true, out);
                out.push(
                    self.chunk(Delta::default(), Some(finish_reason(outcome.finish, self.legacy))),
                );
                if self.include_usage {
                    let chunk = Chunk {
                        id: &self.id,
                        object: "chat.completion.chunk",
                        created: self.created,
                        model: &self.model,
                        choices: Vec::new(),
                        usage: Some(Some(to_wire_usage(outcome.usage))),
                    };
                    out.push(frame(&chunk));
                }
                out.push(Bytes::from_static(b"data: [DONE]\n\n"));
            }
        }
    }
}

impl crate::api::StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        Encoder::encode(self, event, out);
    }

    fn error(&mut self, err: &crate::error::ApiError) -> Bytes {
        crate::api::openai::error::chunk(err)
    }

    fn keepalive(&self) -> Bytes {
        Bytes::from_static(b": keepalive\n\n")
    }
}

fn frame(value: &impl serde::Serialize) -> Bytes {
    let json = serde_json::to_string(value).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("data: {json}\n\n"))
}

/// A custom call's raw input: the `input` string of its arguments, or else the arguments as
/// they are.
fn custom_input(arguments: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(mut object)) => match object.remove("input") {
            Some(serde_json::Value::String(input)) => input,
            _ => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    }
}

/// Folds events into one non-streamed completion.
#[derive(Default)]
pub(crate) struct Collector {
    text: String,
    reasoning: String,
    calls: Vec<(String, String, String)>,
    outcome: Option<Outcome>,
    /// The custom tools: a call to one is a custom call with its raw input.
    custom: HashSet<String>,
}

impl Collector {
    /// A collector for which calls to `custom` tools are custom calls.
    pub(crate) fn with_custom_tools(custom: HashSet<String>) -> Collector {
        Collector { custom, ..Collector::default() }
    }

    pub(crate) fn push(&mut self, event: ChatEvent) {
        match event {
            ChatEvent::Text(text) => self.text.push_str(&text),
            ChatEvent::CallStart { id, name, .. } => self.calls.push((id, name, String::new())),
            ChatEvent::CallArgs { index, json } => {
                if let Some(call) = self.calls.get_mut(index) {
                    call.2.push_str(&json);
                }
            }
            ChatEvent::CallEnd { .. } => {}
            ChatEvent::Done(outcome) => self.outcome = Some(outcome),
            ChatEvent::Reasoning(text) => self.reasoning.push_str(&text),
        }
    }

    pub(crate) fn finish(
        self,
        id: String,
        created: u64,
        model: String,
        legacy: bool,
    ) -> Completion {
        let outcome = self.outcome.unwrap_or(Outcome {
            finish: Finish::Stop,
            usage: Default::default(),
            retried: Default::default(),
        });
        let content =
            if self.text.is_empty() && !self.calls.is_empty() { None } else { Some(self.text) };
        let custom = self.custom;
        let mut calls = self.calls.into_iter().map(|(id, name, arguments)| {
            if custom.contains(&name) {
                let input = custom_input(&arguments);
                let custom = Some(WireCustom { name, input });
                return WireToolCall { id, kind: "custom", function: None, custom };
            }
            let arguments = if arguments.is_empty() { "{}".to_owned() } else { arguments };
            let function = Some(WireFunction { name, arguments });
            WireToolCall { id, kind: "function", function, custom: None }
        });
        let (tool_calls, function_call) = if legacy {
            (Vec::new(), calls.next().and_then(|call| call.function))
        } else {
            (calls.collect(), None)
        };
        Completion {
            id,
            object: "chat.completion",
            created,
            model,
            choices: vec![Choice {
                index: 0,
                message: ResponseMessage {
                    role: "assistant",
                    content,
                    reasoning_content: (!self.reasoning.is_empty()).then_some(self.reasoning),
                    refusal: None,
                    tool_calls,
                    function_call,
                    annotations: Vec::new(),
                },
                logprobs: None,
                finish_reason: finish_reason(outcome.finish, legacy),
            }],
            usage: to_wire_usage(outcome.usage),
        }
    }
}
