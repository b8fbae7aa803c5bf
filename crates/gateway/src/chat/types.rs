//! The pipeline's own types: what a request is, what it produces, and how it ended. A leaf
//! module: the API families, the prompt, the shaper and the upstream all build on it.

use serde_json::Value;

pub(crate) use crate::chat::schema::OutputFormat;
use crate::config::{CallFormat, FormatFile, ReasoningCalls};

/// A chat request in the gateway's own terms.
#[derive(Debug, Clone)]
pub(crate) struct ChatRequest {
    /// The model the client asked for.
    pub(crate) model: String,
    /// The conversation.
    pub(crate) messages: Vec<Message>,
    /// Declared tools (or, with none declared, the tools seen in the history).
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) tool_choice: ToolChoice,
    /// `false`: at most one call per reply.
    pub(crate) parallel_tool_calls: bool,
    /// Sampling and length options forwarded to the upstream unchanged.
    pub(crate) sampling: serde_json::Map<String, Value>,
    /// The client asked to see the model's reasoning (Anthropic `thinking`, OpenAI-compatible
    /// `reasoning_effort`, `include_reasoning`, …); without it, reasoning is left out.
    pub(crate) show_reasoning: bool,
    /// The format the answer must have (structured outputs), if the client set one.
    pub(crate) output: Option<OutputFormat>,
    /// The client marked parts of its prompt for caching (Anthropic's `cache_control`): an
    /// upstream that caches only where asked (Anthropic's) is asked to cache the prompt.
    pub(crate) cache_breakpoints: bool,
    /// Images the conversation carries, each with the index of the message it came with (a
    /// user message, or a tool result): passed to the upstream as image parts, emulated or
    /// native.
    pub(crate) images: Vec<(usize, Image)>,
}

/// An image: an `http(s)` URL, passed on and never fetched by the gateway, or a `data:` URL
/// holding the image itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) url: String,
}

impl Image {
    /// The media type and base64 data of a `data:` URL.
    pub(crate) fn data(&self) -> Option<(&str, &str)> {
        let rest = self.url.strip_prefix("data:")?;
        let (media, data) = rest.split_once(',')?;
        Some((media.strip_suffix(";base64")?, data))
    }
}

impl ChatRequest {
    /// The images that came with message `index`.
    pub(crate) fn images_of(&self, index: usize) -> impl Iterator<Item = &Image> {
        self.images.iter().filter(move |(at, _)| *at == index).map(|(_, image)| image)
    }
}

/// What the pipeline needs to know besides the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The model name sent upstream.
    pub(crate) upstream_model: String,
    /// How the prompt asks for calls.
    pub(crate) call_format: CallFormat,
    /// How often a bad reply is asked for again.
    pub(crate) max_retries: u32,
    /// Whether calls inside reasoning count.
    pub(crate) reasoning_calls: ReasoningCalls,
    /// The model's format file: its calls are read in that format only.
    pub(crate) format_file: Option<FormatFile>,
    /// Whether calls' arguments are checked against their tools' schemas.
    pub(crate) check_arguments: bool,
    /// Whether calls whose required arguments hold values given nowhere are dropped as
    /// guesses (`check_grounding`).
    pub(crate) check_grounding: bool,
    /// The most calls continuations may add to a reply (`continue_calls`; 0: none).
    pub(crate) continue_calls: u32,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    System(String),
    User(String),
    Assistant { text: String, calls: Vec<PriorCall> },
    ToolResult { call_id: String, name: Option<String>, content: String, is_error: bool },
}

/// A call the assistant made earlier in the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PriorCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as the client sent them back (normally JSON text).
    pub(crate) arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) parameters: Option<Value>,
    /// The client asked for its schema to be kept exactly (`strict: true`): a call whose
    /// arguments break it never reaches the client.
    pub(crate) strict: bool,
}

/// Which calls the reply must (or must not) contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    None,
    Auto,
    Required,
    Named(String),
}

/// What the pipeline produces, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChatEvent {
    Text(String),
    /// Reasoning the parser separated from the answer (`<think>`, Harmony's analysis
    /// channel, …) or the upstream sent apart from it. The pipeline produces it only for
    /// requests that asked to see it (`show_reasoning`): Chat Completions writes it as
    /// `reasoning_content`, Messages as thinking blocks, Responses as reasoning items.
    Reasoning(String),
    CallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of the call's arguments JSON; fragments concatenate to a JSON object.
    CallArgs {
        index: usize,
        json: String,
    },
    /// The call ended; `complete: false`, the reply cut it off inside its arguments.
    CallEnd {
        index: usize,
        complete: bool,
    },
    Done(Outcome),
}

/// How the reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) finish: Finish,
    /// What every attempt cost, retries included.
    pub(crate) usage: Usage,
    /// What the attempts before the last one cost (counted in `usage` too), for a family
    /// that counts the last attempt's prompt its own way (Anthropic's `input_tokens`).
    pub(crate) retried: Usage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    Stop,
    Length,
    /// At least one call; `forced` when `tool_choice` named the tool.
    ToolCalls {
        forced: bool,
    },
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

/// Why a reply is asked for again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryReason {
    Refusal,
    MissingCall,
    Malformed,
    UnknownTool,
    Truncated,
    /// Tools were offered and the reply had neither a call nor any text (a small model
    /// that starts to write a tool result is cut off by the stop sequence at once).
    Empty,
    /// The answer does not have the format the client asked for.
    InvalidOutput,
    /// A call's arguments do not fit its tool's schema.
    InvalidArguments,
    /// The reply's only calls hold required values given nowhere: guesses, dropped.
    GuessedArguments,
}

/// A reply that is asked for again: what the model wrote, why, and what exactly was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retry {
    pub(crate) reply: String,
    pub(crate) reason: RetryReason,
    pub(crate) detail: Option<String>,
}

impl RetryReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RetryReason::Refusal => "refusal",
            RetryReason::MissingCall => "missing_call",
            RetryReason::Malformed => "malformed",
            RetryReason::UnknownTool => "unknown_tool",
            RetryReason::Truncated => "truncated",
            RetryReason::Empty => "empty",
            RetryReason::InvalidOutput => "invalid_output",
            RetryReason::InvalidArguments => "invalid_arguments",
            RetryReason::GuessedArguments => "guessed_arguments",
        }
    }
}

/// Why a tool list cannot be used: a call could not be matched to one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolListProblem {
    /// Two tools have this name.
    Duplicate(String),
    /// A tool has no name.
    Empty,
}

/// The first reason `tools` cannot be used, if any.
pub(crate) fn check_tools(tools: &[ToolSpec]) -> Result<(), ToolListProblem> {
    let mut seen = std::collections::HashSet::new();
    for tool in tools {
        if tool.name.is_empty() {
            return Err(ToolListProblem::Empty);
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(ToolListProblem::Duplicate(tool.name.clone()));
        }
    }
    Ok(())
}

/// The tools the history's earlier calls name, for a turn that carries tool history but no
/// `tools`: tool calling stays on for them.
pub(crate) fn tools_from_history(messages: &[Message]) -> Vec<ToolSpec> {
    let mut tools: Vec<ToolSpec> = Vec::new();
    for message in messages {
        if let Message::Assistant { calls, .. } = message {
            for call in calls {
                if !tools.iter().any(|t| t.name == call.name) {
                    tools.push(ToolSpec {
                        name: call.name.clone(),
                        description: None,
                        parameters: None,
                        strict: false,
                    });
                }
            }
        }
    }
    tools
}
