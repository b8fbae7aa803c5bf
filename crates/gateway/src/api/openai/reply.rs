//! The Chat Completions reply on the wire: a whole completion and a streamed chunk, and usage
//! in OpenAI's terms.

use serde::Serialize;

use crate::chat::Usage;

#[derive(Debug, Serialize)]
pub(crate) struct Completion {
    pub(crate) id: String,
    pub(crate) object: &'static str,
    pub(crate) created: u64,
    pub(crate) model: String,
    pub(crate) choices: Vec<Choice>,
    pub(crate) usage: WireUsage,
}

#[derive(Debug, Serialize)]
pub(crate) struct Choice {
    pub(crate) index: u32,
    pub(crate) message: ResponseMessage,
    pub(crate) logprobs: Option<()>,
    pub(crate) finish_reason: &'static str,
}

#[derive(Debug, Serialize)]
pub(crate) struct ResponseMessage {
    pub(crate) role: &'static str,
    pub(crate) content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_content: Option<String>,
    pub(crate) refusal: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<WireToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function_call: Option<WireFunction>,
    pub(crate) annotations: Vec<()>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireToolCall {
    pub(crate) id: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function: Option<WireFunction>,
    /// A custom (freeform) tool's call: its name and raw input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom: Option<WireCustom>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireCustom {
    pub(crate) name: String,
    pub(crate) input: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireFunction {
    pub(crate) name: String,
    pub(crate) arguments: String,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct WireUsage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) total_tokens: u64,
    pub(crate) prompt_tokens_details: PromptDetails,
    pub(crate) completion_tokens_details: CompletionDetails,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct PromptDetails {
    pub(crate) cached_tokens: u64,
    pub(crate) audio_tokens: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CompletionDetails {
    pub(crate) reasoning_tokens: u64,
    pub(crate) audio_tokens: u64,
    pub(crate) accepted_prediction_tokens: u64,
    pub(crate) rejected_prediction_tokens: u64,
}

pub(crate) fn to_wire_usage(usage: Usage) -> WireUsage {
    WireUsage {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details: PromptDetails {
            cached_tokens: usage.cached_tokens,
            audio_tokens: 0,
        },
        completion_tokens_details: CompletionDetails {
            reasoning_tokens: 0,
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
        },
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Chunk<'a> {
    pub(crate) id: &'a str,
    pub(crate) object: &'static str,
    pub(crate) created: u64,
    pub(crate) model: &'a str,
    pub(crate) choices: Vec<ChunkChoice>,
    /// Absent unless usage was asked for; then `null` on every chunk but the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Option<WireUsage>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ChunkChoice {
    pub(crate) index: u32,
    pub(crate) delta: Delta,
    pub(crate) logprobs: Option<()>,
    pub(crate) finish_reason: Option<&'static str>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<&'static str>,
    /// The model's reasoning, as DeepSeek, vLLM and llama.cpp send it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_content: Option<String>,
    /// `Some(None)` writes `"content": null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refusal: Option<Option<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<ToolCallDelta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function_call: Option<FunctionDelta>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ToolCallDelta {
    pub(crate) index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function: Option<FunctionDelta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom: Option<CustomDelta>,
}

/// A piece of a custom call: its name first, then its raw input in pieces.
#[derive(Debug, Serialize)]
pub(crate) struct CustomDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    pub(crate) input: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct FunctionDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    pub(crate) arguments: String,
}
