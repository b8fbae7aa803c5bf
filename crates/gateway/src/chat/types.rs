//! The pipeline's own types: the settings a request runs with, what it produces, and how it
//! ended. The request itself is `crate::neutral`'s, re-exported here.

use crate::config::{CallFormat, FormatFile, ReasoningCalls};
pub(crate) use crate::neutral::{
    ChatRequest, Image, Message, OutputFormat, PriorCall, ToolChoice, ToolSpec, Usage,
};

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

#[cfg(test)]
impl ChatEvent {
    /// A whole call's events: its start, one `CallArgs` a piece, its end (whole).
    pub(crate) fn call(index: usize, id: &str, name: &str, pieces: &[&str]) -> Vec<ChatEvent> {
        let (id, name) = (id.into(), name.into());
        let args = pieces.iter().map(|json| ChatEvent::CallArgs { index, json: (*json).into() });
        std::iter::once(ChatEvent::CallStart { index, id, name })
            .chain(args)
            .chain([ChatEvent::CallEnd { index, complete: true }])
            .collect()
    }

    /// The text of `events`, and their reasoning, each joined.
    pub(crate) fn joined(events: &[ChatEvent]) -> (String, String) {
        let (mut text, mut reasoning) = (String::new(), String::new());
        for event in events {
            match event {
                ChatEvent::Text(t) => text.push_str(t),
                ChatEvent::Reasoning(t) => reasoning.push_str(t),
                _ => {}
            }
        }
        (text, reasoning)
    }
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

impl Finish {
    /// As OpenAI words it (`stop`, `length`, `tool_calls`), for traces.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::ToolCalls { .. } => "tool_calls",
        }
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
