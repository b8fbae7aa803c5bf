//! The upstream wires, each answered in one place: how a request to it is authorized and
//! written, how its reply's payloads become events, and what in a payload ends or fails the
//! reply. The rest of the crate asks a `Wire`; only this file matches on one (`openai.rs` and
//! `anthropic.rs` hold each wire's JSON).

use serde_json::Value;

use crate::config::UpstreamApi;
use crate::neutral::{UpstreamEvent, UpstreamRequest, Usage};
use crate::upstream::constrain::Dialect;
use crate::upstream::reply::Payload;
use crate::upstream::{Unreadable, anthropic, openai};

/// Which API the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI Chat Completions (llama.cpp, vLLM, SGLang, Ollama, … too).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Wire {
    pub(crate) fn of(api: UpstreamApi) -> Wire {
        match api {
            UpstreamApi::OpenAi => Wire::OpenAi,
            UpstreamApi::Anthropic => Wire::Anthropic,
        }
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
        EventReader { wire: self, start: Usage::default() }
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
}

impl EventReader {
    /// The events of one payload, or why it cannot be read.
    pub(crate) fn read(&mut self, payload: &Payload) -> Result<Vec<UpstreamEvent>, Unreadable> {
        match (payload, self.wire) {
            (Payload::Event(value), Wire::Anthropic) => {
                anthropic::stream_event(value, &mut self.start)
            }
            (Payload::Event(value), Wire::OpenAi) => openai::chunk_events(value),
            (Payload::Body(value), Wire::Anthropic) => anthropic::message_events(value),
            (Payload::Body(value), Wire::OpenAi) => openai::completion_events(value),
        }
    }
}
