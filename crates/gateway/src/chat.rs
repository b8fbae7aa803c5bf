//! The protocol-neutral chat pipeline: emulated tool calling on a chat-only upstream.
//!
//! `run` renders the request for the upstream (tool prompt, history as text), streams the
//! reply through `toolshim_parse::StreamParser`, enforces `tool_choice`, retries bad replies
//! while nothing has reached the client, and yields `ChatEvent`s that each API encodes in its
//! own wire format. It knows no OpenAI or Anthropic JSON.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde_json::Value;
use toolshim_parse::{
    Config as ParseConfig, Event, RejectedText, StreamParser, Tool, ToolSet, WarningCode,
};

use crate::error::ApiError;
use crate::prompt;
use crate::state::AppState;
use crate::upstream::client::UpstreamEvent;

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
    CallEnd {
        index: usize,
    },
    Done(Outcome),
}

/// How the reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) finish: Finish,
    pub(crate) usage: Usage,
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
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
}

/// Why a reply is asked for again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryReason {
    Refusal,
    MissingCall,
    Malformed,
    UnknownTool,
    Truncated,
}

impl RetryReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RetryReason::Refusal => "refusal",
            RetryReason::MissingCall => "missing_call",
            RetryReason::Malformed => "malformed",
            RetryReason::UnknownTool => "unknown_tool",
            RetryReason::Truncated => "truncated",
        }
    }
}

/// Text that could still turn out to be a refusal is held until it is this long.
const REFUSAL_WINDOW: usize = 200;

/// Runs a request in emulation mode.
pub(crate) fn run(
    state: AppState,
    req: ChatRequest,
    stream: bool,
) -> impl Stream<Item = Result<ChatEvent, ApiError>> + Send {
    async_stream::stream! {
        let engaged = !req.tools.is_empty();
        let tools = tool_set(&req.tools);
        let max_retries = state.config.max_retries;
        let mut feedback: Option<(String, RetryReason)> = None;
        let mut attempt: u32 = 0;
        // Usage of all attempts: retries cost tokens too.
        let mut spent = Usage::default();
        // The request as sent for a last plain answer (see below), once that is needed.
        let mut plain: Option<ChatRequest> = None;
        loop {
            let current = plain.as_ref().unwrap_or(&req);
            let body = prompt::upstream_body(&state, current, feedback.as_ref().map(|(reply, reason)| (reply.as_str(), *reason)));
            let mut upstream = match state.upstream.chat_stream(body).await {
                Ok(upstream) => upstream,
                Err(err) => {
                    yield Err(err);
                    return;
                }
            };
            let mut shaper = Shaper::new(current, tools.clone(), engaged);
            let mut held: Vec<ChatEvent> = Vec::new();
            let mut committed = false;
            let mut finish_reason: Option<String> = None;
            let mut usage = Usage::default();
            let mut raw = String::new();
            let mut failed: Option<ApiError> = None;
            while let Some(item) = upstream.next().await {
                let mut produced = Vec::new();
                match item {
                    Ok(UpstreamEvent::Text(text)) => {
                        if raw.len() < 1 << 20 {
                            raw.push_str(&text);
                        }
                        shaper.feed(&text, &mut produced);
                    }
                    Ok(UpstreamEvent::Finish(reason)) => finish_reason = Some(reason),
                    Ok(UpstreamEvent::Usage(u)) => usage = u,
                    Err(err) => {
                        failed = Some(err);
                        break;
                    }
                }
                if committed {
                    for event in produced {
                        yield Ok(event);
                    }
                    continue;
                }
                held.extend(produced);
                if stream && shaper.may_commit() {
                    committed = true;
                    for event in held.drain(..) {
                        yield Ok(event);
                    }
                }
            }
            if let Some(err) = failed {
                if committed {
                    // What the parser still holds is model output the client has not seen
                    // (a call cut off here ends with the arguments it had): send it, then
                    // the error, which the encoder reports in-band.
                    let mut produced = Vec::new();
                    shaper.finish(&mut produced);
                    for event in produced {
                        yield Ok(event);
                    }
                }
                yield Err(err);
                return;
            }
            let mut produced = Vec::new();
            shaper.finish(&mut produced);
            let truncated = finish_reason.as_deref() == Some("length");
            let problem = shaper.problem(truncated);
            spent.prompt_tokens += usage.prompt_tokens;
            spent.completion_tokens += if usage.completion_tokens == 0 && usage.prompt_tokens == 0 {
                (raw.chars().count() as u64).div_ceil(4)
            } else {
                usage.completion_tokens
            };
            if !committed {
                if let Some(reason) = problem {
                    state.metrics.retry(reason.as_str(), attempt < max_retries);
                    if attempt < max_retries {
                        tracing::info!(reason = reason.as_str(), attempt, "emulated reply rejected; asking the upstream again");
                        attempt += 1;
                        feedback = Some((raw, reason));
                        continue;
                    }
                    // The model kept calling tools that do not exist and wrote nothing else:
                    // under `auto` that leaves the client an empty reply. Ask once more,
                    // without tools, for a plain answer.
                    let nothing_shown = shaper.text.trim().is_empty();
                    if reason == RetryReason::UnknownTool && req.tool_choice == ToolChoice::Auto && nothing_shown {
                        tracing::info!(attempt, "only unknown tools were called; asking for a plain answer");
                        attempt += 1;
                        feedback = None;
                        let mut without_tools = req.clone();
                        without_tools.tool_choice = ToolChoice::None;
                        plain = Some(without_tools);
                        continue;
                    }
                    // A required call that never came (whatever the last reply did instead).
                    let required = matches!(req.tool_choice, ToolChoice::Required | ToolChoice::Named(_));
                    if reason == RetryReason::MissingCall || (required && shaper.n_calls == 0) {
                        yield Err(ApiError::ToolCallMissing {
                            message: match &req.tool_choice {
                                ToolChoice::Named(name) => format!("The model did not call the required tool `{name}` (after {attempt} retries)."),
                                _ => format!("The model did not produce the required tool call (after {attempt} retries)."),
                            },
                        });
                        return;
                    }
                }
                for event in held.drain(..) {
                    yield Ok(event);
                }
            }
            for event in produced {
                yield Ok(event);
            }
            // A streamed call that the token limit cut off could not be retried (it had
            // already gone out); like OpenAI, the reply then ends with `length`.
            let finish = if truncated && (shaper.n_calls == 0 || shaper.cut_off_call) {
                Finish::Length
            } else if shaper.n_calls > 0 {
                Finish::ToolCalls { forced: matches!(req.tool_choice, ToolChoice::Named(_)) }
            } else {
                Finish::Stop
            };
            state.metrics.calls(shaper.n_calls);
            tracing::info!(engaged, calls = shaper.n_calls, attempt, "reply finished");
            yield Ok(ChatEvent::Done(Outcome { finish, usage: spent }));
            return;
        }
    }
}

fn tool_set(specs: &[ToolSpec]) -> Option<Arc<ToolSet>> {
    if specs.is_empty() {
        return None;
    }
    let tools =
        specs.iter().map(|spec| Tool::new(spec.name.clone(), spec.parameters.clone())).collect();
    ToolSet::new(tools).ok().map(Arc::new)
}

/// Turns the parser's events into chat events under the request's tool policy.
struct Shaper {
    /// Tools are declared: replies are parsed for calls.
    engaged: bool,
    /// `None` when no tools are engaged (text passes through unparsed), or after `finish`.
    parser: Option<StreamParser>,
    choice: ToolChoice,
    parallel: bool,
    /// Parser call index → forwarded call index (`None`: dropped by policy).
    map: Vec<Option<usize>>,
    n_calls: usize,
    /// Visible text so far (bounded), for refusal detection.
    text: String,
    /// Whitespace-only text not yet sent: dropped if a call follows (it is layout around
    /// the call, not content), sent with the next visible text otherwise.
    blank: String,
    rejected: usize,
    malformed: bool,
    cut_off_call: bool,
}

impl Shaper {
    fn new(req: &ChatRequest, tools: Option<Arc<ToolSet>>, engaged: bool) -> Shaper {
        let parser = engaged.then(|| {
            let mut config = ParseConfig::default();
            config.tools = tools;
            config.rejected_text = RejectedText::Hide;
            StreamParser::new(&config)
        });
        Shaper {
            engaged,
            parser,
            choice: req.tool_choice.clone(),
            parallel: req.parallel_tool_calls,
            map: Vec::new(),
            n_calls: 0,
            text: String::new(),
            blank: String::new(),
            rejected: 0,
            malformed: false,
            cut_off_call: false,
        }
    }

    fn feed(&mut self, text: &str, out: &mut Vec<ChatEvent>) {
        match &mut self.parser {
            Some(parser) => {
                let mut events = Vec::new();
                parser.feed(text, &mut events);
                self.shape(events, out);
            }
            None => self.text_event(text.to_owned(), out),
        }
    }

    fn finish(&mut self, out: &mut Vec<ChatEvent>) {
        if let Some(parser) = self.parser.take() {
            let mut events = Vec::new();
            parser.finish(&mut events);
            self.shape(events, out);
        }
        if self.n_calls == 0 && !self.blank.is_empty() {
            let blank = std::mem::take(&mut self.blank);
            self.send_text(blank, out);
        }
    }

    fn text_event(&mut self, text: String, out: &mut Vec<ChatEvent>) {
        if text.is_empty() {
            return;
        }
        if self.engaged && text.trim().is_empty() {
            self.blank.push_str(&text);
            return;
        }
        let text =
            if self.blank.is_empty() { text } else { std::mem::take(&mut self.blank) + &text };
        self.send_text(text, out);
    }

    fn send_text(&mut self, text: String, out: &mut Vec<ChatEvent>) {
        if self.text.len() < 4096 {
            self.text.push_str(&text);
        }
        out.push(ChatEvent::Text(text));
    }

    fn shape(&mut self, events: Vec<Event>, out: &mut Vec<ChatEvent>) {
        for event in events {
            match event {
                Event::Text(text) => self.text_event(text.into(), out),
                Event::Reasoning(_) => {}
                Event::CallStart { call_idx, name, .. } => {
                    let allowed = match &self.choice {
                        ToolChoice::None => false,
                        ToolChoice::Named(wanted) => *wanted == name && self.n_calls == 0,
                        ToolChoice::Auto | ToolChoice::Required => {
                            self.parallel || self.n_calls == 0
                        }
                    };
                    let slot = allowed.then_some(self.n_calls);
                    if self.map.len() <= call_idx {
                        self.map.resize(call_idx + 1, None);
                    }
                    if let Some(entry) = self.map.get_mut(call_idx) {
                        *entry = slot;
                    }
                    if let Some(index) = slot {
                        self.blank.clear();
                        self.n_calls += 1;
                        out.push(ChatEvent::CallStart { index, id: new_call_id(), name });
                    }
                }
                Event::ArgsDelta { call_idx, json } => {
                    if let Some(Some(index)) = self.map.get(call_idx) {
                        out.push(ChatEvent::CallArgs { index: *index, json: json.into() });
                    }
                }
                Event::CallEnd { call_idx, .. } => {
                    if let Some(Some(index)) = self.map.get(call_idx) {
                        out.push(ChatEvent::CallEnd { index: *index });
                    }
                }
                Event::Rejected(rejected) => {
                    tracing::debug!(name = %rejected.name, "the model called an unknown tool");
                    self.rejected += 1;
                }
                Event::Warning(warning) => {
                    match warning.code {
                        WarningCode::MalformedCall | WarningCode::InvalidArguments => {
                            self.malformed = true
                        }
                        WarningCode::Truncated => self.cut_off_call = true,
                        _ => {}
                    }
                    tracing::debug!(code = warning.code.as_str(), message = %warning.message, "parse warning");
                }
                // Events a newer parser adds carry nothing the pipeline uses yet.
                _ => {}
            }
        }
    }

    /// Whether held output may go to a streaming client now: a call has begun, or enough
    /// plain text has come that it is not a refusal, and the policy cannot fail any more.
    fn may_commit(&self) -> bool {
        let needs_call = matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_));
        if !self.engaged {
            return true;
        }
        if self.n_calls > 0 {
            return true;
        }
        !needs_call && self.text.len() >= REFUSAL_WINDOW && !looks_like_refusal(&self.text)
    }

    /// What is wrong with the finished reply, if anything worth a retry.
    fn problem(&self, truncated: bool) -> Option<RetryReason> {
        if !self.engaged || self.choice == ToolChoice::None {
            return None;
        }
        if self.n_calls > 0 {
            return (truncated && self.cut_off_call).then_some(RetryReason::Truncated);
        }
        if truncated && self.cut_off_call {
            return Some(RetryReason::Truncated);
        }
        if self.rejected > 0 {
            return Some(RetryReason::UnknownTool);
        }
        if self.malformed {
            return Some(RetryReason::Malformed);
        }
        if matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_)) {
            return Some(RetryReason::MissingCall);
        }
        looks_like_refusal(&self.text).then_some(RetryReason::Refusal)
    }
}

/// Phrases with which models claim they have no tools, in the opening of a reply.
fn looks_like_refusal(text: &str) -> bool {
    const PHRASES: &[&str] = &[
        "don't have access to",
        "do not have access to",
        "don't have the ability",
        "do not have the ability",
        "don't have any tools",
        "do not have any tools",
        "don't have tools",
        "no tools available",
        "no access to tools",
        "cannot call",
        "can't call",
        "unable to call",
        "cannot access real-time",
        "can't access real-time",
        "don't have real-time",
        "do not have real-time",
        "unable to access",
        "as an ai language model",
        "i'm not able to browse",
        "没有可用的工具",
        "无法调用",
        "无法访问",
        "没有工具",
    ];
    let opening: String =
        text.chars().take(400).collect::<String>().to_lowercase().replace('’', "'");
    PHRASES.iter().any(|phrase| opening.contains(phrase))
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
                    });
                }
            }
        }
    }
    tools
}

/// A fresh OpenAI-style call id: `call_` and 24 letters and digits.
pub(crate) fn new_call_id() -> String {
    let mut id = String::with_capacity(29);
    id.push_str("call_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_recognized() {
        assert!(looks_like_refusal(
            "I’m sorry, but I don't have access to real-time weather data."
        ));
        assert!(looks_like_refusal("抱歉，我没有可用的工具。"));
        assert!(!looks_like_refusal("Paris is sunny today."));
    }

    #[test]
    fn call_ids_look_like_openai_ids() {
        let id = new_call_id();
        assert!(id.starts_with("call_") && id.len() == 29);
        assert_ne!(id, new_call_id());
    }
}
