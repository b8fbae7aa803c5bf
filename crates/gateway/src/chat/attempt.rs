//! One emulated attempt's reply as it is read: a plain state machine (no I/O, no async).
//! The upstream's events go in; out come the chat events the client may see now (nothing
//! of an answer before the shaper says it may commit, when streaming; reasoning as it is
//! written); what the attempt came to is read off it once the reply ended. `pipeline::run`
//! drives it with a short loop over the upstream's stream.

use crate::chat::shaper::Shaper;
use crate::chat::types::{ChatEvent, Usage};
use crate::error::ApiError;
use crate::neutral::{FinishReason, UpstreamEvent};

/// The most of a reply's raw text kept for a retry's correction and the error messages.
const MAX_RAW: usize = 1 << 20;

/// The state of one attempt's reply.
pub(crate) struct Attempt {
    pub(crate) shaper: Shaper,
    /// Its number (0: the first), for `separate`.
    number: u32,
    /// Streaming: events go out as soon as the attempt commits.
    stream: bool,
    /// The client asked for reasoning: the upstream's own goes out.
    show_reasoning: bool,
    /// Events not yet shown: the answer until the attempt commits.
    held: Vec<ChatEvent>,
    /// The attempt's answer started going out: it can no longer be asked for again.
    pub(crate) committed: bool,
    pub(crate) finish_reason: Option<FinishReason>,
    /// The upstream's usage, if it reported any.
    pub(crate) usage: Usage,
    /// The reply's text (the first `MAX_RAW` bytes).
    pub(crate) raw: String,
}

impl Attempt {
    pub(crate) fn new(shaper: Shaper, number: u32, stream: bool, show_reasoning: bool) -> Attempt {
        Attempt {
            shaper,
            number,
            stream,
            show_reasoning,
            held: Vec::new(),
            committed: false,
            finish_reason: None,
            usage: Usage::default(),
            raw: String::new(),
        }
    }

    /// Reads one event of the reply, pushing to `out` what may go out now; `shown` is the
    /// attempt whose reasoning went out last. An error (or a native call, which an emulated
    /// request never asks for) ends the reply: then `broke` says what still goes out.
    pub(crate) fn feed(
        &mut self,
        event: UpstreamEvent,
        shown: &mut Option<u32>,
        out: &mut Vec<ChatEvent>,
    ) -> Result<(), ApiError> {
        let mut produced = Vec::new();
        match event {
            UpstreamEvent::Text(text) => {
                if self.raw.len() < MAX_RAW {
                    self.raw.push_str(&text);
                }
                self.shaper.feed(&text, &mut produced);
            }
            UpstreamEvent::Reasoning(text) => {
                if self.show_reasoning {
                    produced.push(ChatEvent::Reasoning(text));
                }
            }
            UpstreamEvent::Finish(reason) => self.finish_reason = Some(reason),
            UpstreamEvent::Usage(usage) => self.usage = usage,
            // The emulated request declared no tools; the wires never read calls out of
            // its reply.
            UpstreamEvent::Call(_) => {
                return Err(ApiError::Internal(
                    "a native call in a reply to an emulated request".into(),
                ));
            }
        }
        if self.committed {
            self.show(produced, shown, out);
            return Ok(());
        }
        self.held.extend(produced);
        if self.stream && self.shaper.may_commit() {
            self.committed = true;
            self.shaper.committed();
            let held = std::mem::take(&mut self.held);
            self.show(held, shown, out);
        } else if self.stream && matches!(self.held.first(), Some(ChatEvent::Reasoning(_))) {
            // Reasoning is not the answer: what comes before any held answer goes out as
            // it is written, so a client that asked for it is not kept waiting for the
            // whole of it. A retry then shows as more reasoning, never as a second answer.
            let n = self.held.iter().take_while(|e| matches!(e, ChatEvent::Reasoning(_))).count();
            let early: Vec<ChatEvent> = self.held.drain(..n).collect();
            self.show(early, shown, out);
        }
        Ok(())
    }

    /// The reply broke off: once the attempt committed, what the parser still holds is
    /// model output the client has not seen (a call cut off here ends with the arguments it
    /// had), so it goes out before the error.
    pub(crate) fn broke(&mut self, shown: &mut Option<u32>, out: &mut Vec<ChatEvent>) {
        if self.committed {
            let mut produced = Vec::new();
            self.shaper.finish(&mut produced);
            self.show(produced, shown, out);
        }
    }

    /// The reply ended: what the parser still holds.
    pub(crate) fn finish(&mut self) -> Vec<ChatEvent> {
        let mut produced = Vec::new();
        self.shaper.finish(&mut produced);
        produced
    }

    /// The events held back, now that the attempt is taken as the answer.
    pub(crate) fn release(&mut self, shown: &mut Option<u32>, out: &mut Vec<ChatEvent>) {
        let held = std::mem::take(&mut self.held);
        self.show(held, shown, out);
    }

    /// `events` go out, after `separate`.
    pub(crate) fn show(
        &self,
        mut events: Vec<ChatEvent>,
        shown: &mut Option<u32>,
        out: &mut Vec<ChatEvent>,
    ) {
        separate(&mut events, self.number, shown);
        out.extend(events);
    }
}

/// Reasoning about to go to the client: when an earlier attempt's reasoning went out already
/// (it is not held), a blank line goes before this attempt's, so that a retry reads as the
/// model thinking again. `shown` is the attempt whose reasoning went out last.
fn separate(events: &mut Vec<ChatEvent>, attempt: u32, shown: &mut Option<u32>) {
    let Some(first) = events.iter().position(|e| matches!(e, ChatEvent::Reasoning(_))) else {
        return;
    };
    if shown.is_some_and(|earlier| earlier != attempt) {
        events.insert(first, ChatEvent::Reasoning("\n\n".into()));
    }
    *shown = Some(attempt);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::shaper::DeclaredTools;
    use crate::chat::types::{ChatRequest, Message, ToolSpec};
    use crate::config::ReasoningCalls;

    fn attempt(stream: bool, number: u32) -> Attempt {
        let tool = ToolSpec {
            name: "get_weather".into(),
            description: None,
            parameters: None,
            strict: false,
        };
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![Message::User("Weather in Paris?".into())],
            tools: vec![tool],
            show_reasoning: true,
            ..ChatRequest::default()
        };
        let Ok(tools) = DeclaredTools::new(&req.tools) else { unreachable!("one tool") };
        let shaper = Shaper::new(&req, &tools, true, ReasoningCalls::Ignore, None);
        Attempt::new(shaper, number, stream, true)
    }

    /// Feeds `events` one by one; what went out after each.
    fn run(read: &mut Attempt, events: Vec<UpstreamEvent>) -> Vec<Vec<ChatEvent>> {
        let mut shown = None;
        events
            .into_iter()
            .map(|event| {
                let mut out = Vec::new();
                assert!(read.feed(event, &mut shown, &mut out).is_ok());
                out
            })
            .collect()
    }

    /// Streaming, an answer is held until the shaper lets the attempt commit; reasoning goes
    /// out as it comes; usage and the finish reason are kept.
    #[test]
    fn a_streamed_answer_is_held_until_the_attempt_may_commit() {
        let mut read = attempt(true, 0);
        let call = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
        let usage = Usage { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0 };
        let out = run(
            &mut read,
            vec![
                UpstreamEvent::Reasoning("Paris, then.".into()),
                UpstreamEvent::Text(call.into()),
                UpstreamEvent::Usage(usage),
                UpstreamEvent::Finish(FinishReason::Stop),
            ],
        );
        assert_eq!(out[0], [ChatEvent::Reasoning("Paris, then.".into())]);
        assert!(read.finish_reason == Some(FinishReason::Stop) && read.usage == usage);
        assert_eq!(read.raw, call);
        let mut rest = read.finish();
        if !read.committed {
            let mut shown = None;
            let mut held = Vec::new();
            read.release(&mut shown, &mut held);
            held.append(&mut rest);
            rest = held;
        }
        let sent: Vec<ChatEvent> = out.into_iter().flatten().chain(rest).collect();
        let names: Vec<&str> = sent
            .iter()
            .filter_map(|e| match e {
                ChatEvent::CallStart { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["get_weather"], "{sent:?}");
    }

    /// Not streaming, nothing of the answer goes out while the reply is read: the attempt
    /// may still be asked for again.
    #[test]
    fn a_whole_reply_is_held_while_it_is_read() {
        let mut read = attempt(false, 0);
        let out = run(&mut read, vec![UpstreamEvent::Text("It is sunny in Paris.".into())]);
        assert!(out.iter().all(Vec::is_empty), "{out:?}");
        assert!(!read.committed);
        let mut shown = None;
        let mut held = Vec::new();
        read.release(&mut shown, &mut held);
        held.extend(read.finish());
        assert_eq!(ChatEvent::joined(&held).0, "It is sunny in Paris.");
    }

    /// A native call in a reply to an emulated request ends it with an error; a retry's
    /// reasoning is set apart from the earlier attempt's by a blank line.
    #[test]
    fn a_native_call_is_an_error_and_a_retrys_reasoning_is_set_apart() {
        let mut read = attempt(true, 0);
        let mut shown = Some(0);
        let mut out = Vec::new();
        let call = crate::neutral::CallDelta {
            index: 0,
            id: None,
            name: Some("get_weather".into()),
            arguments: String::new(),
        };
        assert!(read.feed(UpstreamEvent::Call(call), &mut shown, &mut out).is_err());
        let mut retry = attempt(true, 1);
        retry.feed(UpstreamEvent::Reasoning("Again.".into()), &mut shown, &mut out).unwrap();
        assert_eq!(
            out,
            [ChatEvent::Reasoning("\n\n".into()), ChatEvent::Reasoning("Again.".into())]
        );
        assert_eq!(shown, Some(1));
    }
}
