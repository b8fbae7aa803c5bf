//! What an upstream is asked and answers, in neutral terms: the request an emulating (or
//! native) upstream gets, the events of its reply, and the `Upstream` the pipeline drives.
//! Each upstream wire (`crate::upstream`) writes and reads these in its own JSON.

use std::future::Future;
use std::pin::Pin;

use futures::Stream;

use crate::config::CallFormat;
use crate::error::{ApiError, Refuser};
use crate::neutral::{Image, OutputFormat, Sampling};

/// Who says a turn of the rendered conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One turn of the rendered conversation: plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    pub(crate) role: Role,
    pub(crate) text: String,
    /// Images after the text (user turns only).
    pub(crate) images: Vec<Image>,
}

impl Turn {
    pub(crate) fn text(role: Role, text: String) -> Turn {
        Turn { role, text, images: Vec::new() }
    }
}

/// A chat request as an emulating upstream gets it: a system text and plain text turns,
/// no tools. Each wire writes it in its own JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UpstreamRequest {
    /// The upstream's model name.
    pub(crate) model: String,
    /// The system prompt (empty: none).
    pub(crate) system: String,
    pub(crate) turns: Vec<Turn>,
    /// The client's sampling and length options; `sampling.stop` holds the client's stop
    /// sequences and, emulated, the gateway's own.
    pub(crate) sampling: Sampling,
    /// A structured-output format the upstream should enforce itself, when it may: only
    /// without tools in play. Each wire writes it its own way (OpenAI's `response_format`,
    /// Anthropic's `output_config.format`).
    pub(crate) response_format: Option<OutputFormat>,
    /// A GBNF grammar of the reply the tool contract asks for (`chat::grammar`), for an
    /// upstream that decodes under one (`upstream.constrain`); others never see it.
    pub(crate) grammar: Option<String>,
    /// The client marked its prompt for caching: an upstream that caches only where asked
    /// (Anthropic's) is asked to cache the system text and the conversation so far.
    pub(crate) cache_breakpoints: bool,
    /// The client's prompt-cache key, for a wire that takes one (Chat Completions'
    /// `prompt_cache_key`); Anthropic's has none and caches where `cache_breakpoints` asks.
    pub(crate) cache_key: Option<String>,
    /// The start of the assistant's reply, for the upstream to continue
    /// (`chat::continuation`; only for an upstream that does, `upstream.prefill`).
    pub(crate) prefill: Option<String>,
}

/// Why the upstream says its reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The token limit.
    Length,
    /// Anything else (a content filter, native tool calls).
    Other,
}

impl FinishReason {
    /// From OpenAI's `finish_reason` or Anthropic's `stop_reason`.
    pub(crate) fn from_wire(reason: &str) -> FinishReason {
        match reason {
            "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            _ => FinishReason::Other,
        }
    }
}

/// What the upstream's reply is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamEvent {
    Text(String),
    /// Reasoning the upstream sent apart from the text (`reasoning_content`, Anthropic
    /// `thinking`).
    Reasoning(String),
    Finish(FinishReason),
    Usage(Usage),
    /// A piece of a native tool call (only in a reply to a request that sent `tools`).
    Call(CallDelta),
}

/// A piece of a native tool call, as an upstream streams it: the call's place, and what this
/// piece adds (its id and name come once, its arguments in fragments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallDelta {
    pub(crate) index: usize,
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Usage {
    /// Every token of the prompt, cached ones included.
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    /// The prompt's tokens the upstream read from its cache (part of `prompt_tokens`).
    pub(crate) cached_tokens: u64,
}

impl Usage {
    /// Adds what `other` cost.
    pub(crate) fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
    }
}

/// What an upstream can refuse that is worth remembering: asking again would cost another
/// rejected round trip before the request is served another way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Refused {
    /// Native tools (`auto` mode; the request is then emulated).
    Tools,
    /// `response_format` (structured outputs; the format is then asked for in the prompt).
    ResponseFormat,
    /// The contract's grammar (constrained decoding; the reply is then only parsed).
    Grammar,
    /// The prompt-cache key (`prompt_cache_key`), by an upstream that rejects fields it does
    /// not know; requests then go without it.
    CacheKey,
}

pub(crate) type UpstreamStream =
    Pin<Box<dyn Stream<Item = Result<UpstreamEvent, ApiError>> + Send>>;

/// An upstream the pipeline can ask for a reply. `client::UpstreamClient` is the real one;
/// tests script one in memory.
pub(crate) trait Upstream: Send + Sync + 'static {
    /// Sends the request; the reply as it streams, or the error that kept it from starting.
    fn chat(
        &self,
        request: UpstreamRequest,
    ) -> impl Future<Output = Result<UpstreamStream, ApiError>> + Send;

    /// A request was refused (a 400 or 422, `by` that upstream and model) and the same
    /// request without `what` was taken: later requests need not offer it. Nothing by default.
    fn refused(&self, what: Refused, by: &Refuser) {
        let _ = (what, by);
    }

    /// Whether the upstream continues a final assistant message (`UpstreamRequest::prefill`).
    /// No by default.
    fn continues(&self) -> impl Future<Output = bool> + Send {
        async { false }
    }

    /// The call syntax the chat template of the model behind the upstream teaches, when the
    /// upstream shows its template (llama.cpp's `GET /props`). None by default.
    fn template_format(&self) -> impl Future<Output = Option<CallFormat>> + Send {
        async { None }
    }
}
