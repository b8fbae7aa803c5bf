//! Encodes `ChatEvent`s as Chat Completions chunks, and folds them into
//! one completion for non-streaming requests.

use bytes::Bytes;

use std::collections::{HashMap, HashSet};

use crate::api::openai::wire::{
    Choice, Chunk, ChunkChoice, Completion, CustomDelta, Delta, FunctionDelta, ResponseMessage,
    ToolCallDelta, WireCustom, WireFunction, WireToolCall, to_wire_usage,
};
use crate::api::responses::raw_input::RawInput;
use crate::chat::reply::{Part, Reply};
use crate::chat::{ChatEvent, Finish};

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
}

impl crate::api::StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn error(&mut self, err: &crate::error::ApiError) -> Bytes {
        crate::api::openai::error::chunk(err)
    }

    fn keepalive(&self) -> Bytes {
        Bytes::from_static(b": keepalive\n\n")
    }

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
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

/// A whole reply as one non-streamed completion; calls to the `custom` tools are custom
/// calls with their raw input, and with `legacy` the first call is a `function_call`.
pub(crate) fn completion(
    reply: Reply,
    custom: &HashSet<String>,
    id: String,
    created: u64,
    model: String,
    legacy: bool,
) -> Completion {
    let outcome = reply.outcome;
    let text = reply.text();
    let has_calls = reply.calls().next().is_some();
    let content = if text.is_empty() && has_calls { None } else { Some(text) };
    let mut calls = reply.parts.into_iter().filter_map(|part| match part {
        Part::Text(_) => None,
        Part::Call(call) if custom.contains(&call.name) => {
            let input = custom_input(&call.arguments);
            let custom = Some(WireCustom { name: call.name, input });
            Some(WireToolCall { id: call.id, kind: "custom", function: None, custom })
        }
        Part::Call(call) => {
            let arguments =
                if call.arguments.is_empty() { "{}".to_owned() } else { call.arguments };
            let function = Some(WireFunction { name: call.name, arguments });
            Some(WireToolCall { id: call.id, kind: "function", function, custom: None })
        }
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
                reasoning_content: (!reply.reasoning.is_empty()).then_some(reply.reasoning),
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
