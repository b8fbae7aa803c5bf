//! The upstream wires, each answered in one place: how a request to it is authorized and
//! written, how its reply's payloads become events, and what in a payload ends or fails the
//! reply. The rest of the crate asks a `Wire`; only this file matches on one (`openai.rs` and
//! `anthropic.rs` hold each wire's JSON).

use serde_json::Value;

use crate::config::UpstreamApi;
use crate::neutral::{ChatRequest, UpstreamEvent, UpstreamRequest, Usage};
use crate::upstream::anthropic::NativeCalls;
use crate::upstream::constrain::Dialect;
use crate::upstream::reply::Payload;
use crate::upstream::{Unreadable, anthropic, anthropic_tools, openai};

/// Which API the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI Chat Completions (llama.cpp, vLLM, SGLang, Ollama, … too).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Wire {
    /// The GenAI conventions' `gen_ai.provider.name` of the API.
    pub(crate) fn provider(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        }
    }

    pub(crate) fn of(api: UpstreamApi) -> Wire {
        match api {
            UpstreamApi::OpenAi => Wire::OpenAi,
            UpstreamApi::Anthropic => Wire::Anthropic,
        }
    }

    /// The wire of a Chat Completions body (a passthrough's).
    pub(crate) fn chat_completions() -> Wire {
        Wire::OpenAi
    }

    /// Whether the upstream takes a Chat Completions body: a passthrough or a native
    /// request (tools declared), and llama.cpp's `GET /props` and extensions.
    pub(crate) fn takes_chat_completions(self) -> bool {
        self == Wire::OpenAi
    }

    /// The request with the upstream's credentials (and Anthropic's version header).
    pub(crate) fn authorize(
        self,
        request: reqwest::RequestBuilder,
        key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        match (self, key) {
            (Wire::OpenAi, Some(key)) => request.bearer_auth(key),
            (Wire::OpenAi, None) => request,
            (Wire::Anthropic, key) => {
                let request = request.header("anthropic-version", "2023-06-01");
                match key {
                    Some(key) => request.header("x-api-key", key),
                    None => request,
                }
            }
        }
    }

    /// The neutral request as this wire's streaming body; `grammar` and `prefill` say how a
    /// Chat Completions engine takes a grammar and continues a final assistant message.
    pub(crate) fn body(
        self,
        request: &UpstreamRequest,
        grammar: Option<Dialect>,
        prefill: Option<Dialect>,
    ) -> Value {
        match self {
            Wire::OpenAi => openai::body(request, grammar, prefill),
            Wire::Anthropic => anthropic::body(request),
        }
    }

    /// A reader of one reply's payloads into events.
    pub(crate) fn reader(self) -> EventReader {
        EventReader { wire: self, start: Usage::default(), native: None }
    }

    /// A reader of a reply to a request that declared its tools natively: its calls are
    /// read as calls.
    pub(crate) fn native_reader(self) -> EventReader {
        EventReader { wire: self, start: Usage::default(), native: Some(NativeCalls::default()) }
    }

    /// The request as this wire's streaming body with its tools declared (`native` and
    /// `auto` modes), for the upstream `model`.
    pub(crate) fn native_body(self, chat: &ChatRequest, model: &str) -> Value {
        match self {
            Wire::OpenAi => openai::native_body(chat, model),
            Wire::Anthropic => anthropic_tools::native_body(chat, model),
        }
    }

    /// A native body asking for an answer without calls.
    pub(crate) fn without_calls(self, body: &Value) -> Value {
        match self {
            Wire::OpenAi => openai::without_tools(body),
            Wire::Anthropic => anthropic_tools::without_calls(body),
        }
    }

    /// A native body with the model's reply and a correction of it added, to ask again.
    pub(crate) fn corrected(self, body: &Value, reply: &str, correction: &str) -> Value {
        let (assistant, user) = match self {
            Wire::OpenAi => (
                serde_json::json!({"role": "assistant", "content": reply}),
                serde_json::json!({"role": "user", "content": correction}),
            ),
            Wire::Anthropic => (
                serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": reply}]}),
                serde_json::json!({"role": "user", "content": [{"type": "text", "text": correction}]}),
            ),
        };
        let mut body = body.clone();
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            messages.push(assistant);
            messages.push(user);
        }
        body
    }

    /// The bytes of model output in one relayed payload, counted against
    /// `upstream.max_reply_bytes`.
    pub(crate) fn output_bytes(self, value: &Value) -> usize {
        match self {
            Wire::OpenAi => openai::output_bytes(value),
            Wire::Anthropic => anthropic::output_bytes(value),
        }
    }

    /// Whether a payload reports an error instead of output, and its message.
    pub(crate) fn error_of(self, value: &Value) -> Option<String> {
        let error = match self {
            Wire::Anthropic if value.get("type").and_then(Value::as_str) == Some("error") => {
                value.get("error").unwrap_or(value)
            }
            _ => value.get("error").filter(|e| !e.is_null())?,
        };
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| error.as_str().map(str::to_owned))
            .unwrap_or_else(|| error.to_string());
        Some(message)
    }

    /// Whether a streamed event says the reply is complete.
    pub(crate) fn completes(self, value: &Value) -> bool {
        match self {
            Wire::Anthropic => value.get("type").and_then(Value::as_str) == Some("message_stop"),
            Wire::OpenAi => value
                .get("choices")
                .and_then(Value::as_array)
                .is_some_and(|choices| choices.iter().any(|c| !c["finish_reason"].is_null())),
        }
    }

    /// Whether a whole JSON body is a complete reply.
    pub(crate) fn body_complete(self, value: &Value) -> bool {
        match self {
            Wire::Anthropic => value.get("stop_reason").is_some_and(|r| !r.is_null()),
            Wire::OpenAi => self.completes(value),
        }
    }

    /// Whether the stream ends with the event that completes the reply (Anthropic's
    /// `message_stop`); Chat Completions streams go on to usage and `[DONE]`.
    pub(crate) fn ends_when_complete(self) -> bool {
        self == Wire::Anthropic
    }
}

/// Reads one reply's payloads into events (an Anthropic reply's usage comes in two parts,
/// the start's kept until the end).
#[derive(Debug)]
pub(crate) struct EventReader {
    wire: Wire,
    start: Usage,
    /// A reply to native tools: Anthropic's `tool_use` blocks read so far.
    native: Option<NativeCalls>,
}

impl EventReader {
    /// The events of one payload, or why it cannot be read.
    pub(crate) fn read(&mut self, payload: &Payload) -> Result<Vec<UpstreamEvent>, Unreadable> {
        let native = self.native.is_some();
        match (payload, self.wire) {
            (Payload::Event(value), Wire::Anthropic) => {
                anthropic::stream_event(value, &mut self.start, self.native.as_mut())
            }
            (Payload::Body(value), Wire::Anthropic) => {
                anthropic::message_events(value, self.native.as_mut())
            }
            (Payload::Event(value), Wire::OpenAi) if native => openai::native_chunk_events(value),
            (Payload::Event(value), Wire::OpenAi) => openai::chunk_events(value),
            (Payload::Body(value), Wire::OpenAi) if native => {
                openai::native_completion_events(value)
            }
            (Payload::Body(value), Wire::OpenAi) => openai::completion_events(value),
        }
    }
}
