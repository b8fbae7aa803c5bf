//! A whole reply folded from its chat events, as `toolshim_parse::Parsed` is folded from
//! the parser's: the one fold every family's non-streamed reply is rendered from.

use futures::{Stream, StreamExt};

use crate::chat::types::{ChatEvent, Finish, Outcome};
use crate::error::ApiError;

/// A piece of the reply, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    Text(String),
    Call(Call),
}

/// A call of the reply: its id, name and arguments (JSON text, as the events wrote it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
    /// It ended whole (not cut off).
    pub(crate) complete: bool,
}

/// A reply: its reasoning, its text and calls in order, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) reasoning: String,
    pub(crate) parts: Vec<Part>,
    pub(crate) outcome: Outcome,
}

impl Default for Reply {
    fn default() -> Reply {
        let outcome = Outcome {
            finish: Finish::Stop,
            usage: Default::default(),
            retried: Default::default(),
        };
        Reply { reasoning: String::new(), parts: Vec::new(), outcome }
    }
}

impl Reply {
    /// Folds the events of a reply until it ends, or the first error.
    pub(crate) async fn collect(
        events: impl Stream<Item = Result<ChatEvent, ApiError>>,
    ) -> Result<Reply, ApiError> {
        let mut events = std::pin::pin!(events);
        let mut reply = Reply::default();
        while let Some(event) = events.next().await {
            reply.push(event?);
        }
        Ok(reply)
    }

    /// Folds one event in. Call events name their call by its index among the reply's calls.
    pub(crate) fn push(&mut self, event: ChatEvent) {
        match event {
            ChatEvent::Text(text) => match self.parts.last_mut() {
                Some(Part::Text(existing)) => existing.push_str(&text),
                _ => self.parts.push(Part::Text(text)),
            },
            ChatEvent::Reasoning(text) => self.reasoning.push_str(&text),
            ChatEvent::CallStart { id, name, .. } => {
                let call = Call { id, name, arguments: String::new(), complete: false };
                self.parts.push(Part::Call(call));
            }
            ChatEvent::CallArgs { index, json } => {
                if let Some(call) = self.call_mut(index) {
                    call.arguments.push_str(&json);
                }
            }
            ChatEvent::CallEnd { index, complete } => {
                if let Some(call) = self.call_mut(index) {
                    call.complete = complete;
                }
            }
            ChatEvent::Done(outcome) => self.outcome = outcome,
        }
    }

    fn call_mut(&mut self, index: usize) -> Option<&mut Call> {
        self.parts
            .iter_mut()
            .filter_map(|part| match part {
                Part::Call(call) => Some(call),
                Part::Text(_) => None,
            })
            .nth(index)
    }

    /// The reply's calls, in order.
    pub(crate) fn calls(&self) -> impl Iterator<Item = &Call> {
        self.parts.iter().filter_map(|part| match part {
            Part::Call(call) => Some(call),
            Part::Text(_) => None,
        })
    }

    /// All of the reply's text, its pieces joined.
    pub(crate) fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(text) => Some(text.as_str()),
                Part::Call(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::types::Usage;

    #[test]
    fn events_fold_into_parts_in_order() {
        let mut reply = Reply::default();
        let texts = ["Let me ", "check."].map(|t| ChatEvent::Text(t.into()));
        let events = [ChatEvent::Reasoning("Think.".into())]
            .into_iter()
            .chain(texts)
            .chain(ChatEvent::call(0, "call_a", "f", &["{\"x\":", "1}"]))
            .chain([
                ChatEvent::CallStart { index: 1, id: "call_b".into(), name: "g".into() },
                ChatEvent::CallEnd { index: 1, complete: false },
                ChatEvent::Text("Done.".into()),
            ]);
        for event in events {
            reply.push(event);
        }
        let outcome = Outcome {
            finish: Finish::ToolCalls { forced: false },
            usage: Usage { prompt_tokens: 3, completion_tokens: 4, cached_tokens: 0 },
            retried: Usage::default(),
        };
        reply.push(ChatEvent::Done(outcome));
        assert_eq!(reply.reasoning, "Think.");
        assert_eq!(reply.text(), "Let me check.Done.");
        let calls: Vec<_> = reply.calls().map(|c| (&*c.name, &*c.arguments, c.complete)).collect();
        assert_eq!(calls, [("f", "{\"x\":1}", true), ("g", "", false)]);
        assert_eq!(reply.parts.len(), 4, "text, call, call, text");
        assert_eq!(reply.outcome, outcome);
    }
}
