//! Running continuations: [`Follow`] is the state of a reply's continuations (the plan, the
//! calls so far, the budget), [`Round`] reads one continued reply. Both are plain machines;
//! the paths that talk to the upstream drive them with a short loop:
//!
//! ```text
//! while let Some(prefix) = follow.next_prefix() {
//!     let mut round = follow.round(…);
//!     for event in send(prefix) { if round.feed(event) { break } }   // then the reply is dropped
//!     yield follow.end_round(round)                                   // the kept call, if any
//! }
//! ```

use std::sync::Arc;

use crate::chat::continuation::{Made, Plan};
use crate::chat::grounding::Grounding;
use crate::chat::shaper::{DeclaredTools, Judge, Sent, Shaper};
use crate::chat::types::{ChatEvent, ChatRequest, ToolChoice, Usage};
use crate::config::{FormatFile, ReasoningCalls};
use crate::error::ApiError;
use crate::metrics::Metrics;
use futures::StreamExt;

use crate::neutral::{UpstreamEvent, UpstreamStream};

use super::Echo;

/// The continuations of one reply.
#[derive(Debug)]
pub(crate) struct Follow {
    plan: Plan,
    grounding: Arc<Grounding>,
    /// The reply's calls so far, kept continued ones included.
    earlier: Vec<Made>,
    /// The index the next kept call gets.
    next_index: usize,
    /// The calls continuations added.
    added: usize,
    /// Continuations left.
    left: u32,
    /// A continuation ended the reply.
    done: bool,
    /// The token limit of one continuation: about twice the first call's length.
    max_tokens: u64,
    usage: Usage,
}

/// Whether a finished reply may be continued: its request lets it have more calls, and its
/// calls (`sent`, read from the reply's text) all went out whole.
pub(crate) fn may_continue(req: &ChatRequest, sent: &[Sent], n_calls: usize) -> bool {
    req.parallel_tool_calls
        && matches!(req.tool_choice, ToolChoice::Auto | ToolChoice::Required)
        && n_calls > 0
        && sent.len() == n_calls
}

impl Follow {
    /// The continuations of `raw`, a reply whose calls went out as `sent`; `None` when the
    /// first call's opening cannot be told (see `Plan::new`) or `budget` is 0.
    pub(crate) fn new(
        raw: &str,
        sent: &[Sent],
        grounding: Arc<Grounding>,
        budget: u32,
    ) -> Option<Follow> {
        let first = sent.first()?;
        let last_end = sent.last().map_or(first.span.end, |s| s.span.end);
        let plan = Plan::new(raw, (first.span.clone(), &first.name), last_end)?;
        (budget > 0).then(|| Follow {
            plan,
            grounding,
            earlier: sent.iter().map(|s| Made::new(&s.name, &s.arguments)).collect(),
            next_index: sent.len(),
            added: 0,
            left: budget,
            done: false,
            // Bytes of the first call over two: twice its tokens at about four bytes a
            // token, room for a call with longer values.
            max_tokens: (first.span.len() as u64 / 2).clamp(48, 2048),
            usage: Usage::default(),
        })
    }

    /// The text the next continuation continues, while one is due.
    pub(crate) fn next_prefix(&self) -> Option<&str> {
        (!self.done && self.left > 0).then_some(self.plan.prefix.as_str())
    }

    /// The token limit of a continuation.
    pub(crate) fn max_tokens(&self) -> u64 {
        self.max_tokens
    }

    /// A reader for the next continued reply.
    pub(crate) fn round(
        &self,
        req: &ChatRequest,
        declared: &DeclaredTools,
        reasoning_calls: ReasoningCalls,
        format_file: Option<&FormatFile>,
    ) -> Round {
        let mut shaper = Shaper::new(req, declared, true, reasoning_calls, format_file);
        // A continued call that breaks its schema is held back (never sent): it ends the
        // reply like any call that is not kept.
        shaper.check_arguments(true);
        shaper.judge_calls(Judge::Continuation {
            grounding: Arc::clone(&self.grounding),
            earlier: self.earlier.clone(),
            judged: false,
        });
        let mut events = Vec::new();
        shaper.feed(&self.plan.opener, &mut events);
        Round {
            echo: Echo::new(&self.plan.prefix),
            shaper,
            read: self.plan.opener.clone(),
            events,
            usage: Usage::default(),
            failed: false,
        }
    }

    /// What a finished round adds to the reply: its kept call's events, numbered after the
    /// reply's calls. A round that kept nothing ends the continuations.
    pub(crate) fn end_round(&mut self, round: Round, metrics: &Metrics) -> Vec<ChatEvent> {
        self.left = self.left.saturating_sub(1);
        self.usage.prompt_tokens += round.usage.prompt_tokens;
        self.usage.completion_tokens += round.usage.completion_tokens;
        let Round { mut shaper, read, mut events, failed, .. } = round;
        // The judge decides the first call only: a later one in the same text is not sent.
        let kept = shaper.sent().first().cloned();
        let result = match (&kept, failed, shaper.stopped()) {
            (_, true, _) => "failed",
            (Some(_), false, _) => "kept",
            (None, false, Some(stop)) => stop.as_str(),
            // Held back for breaking its schema.
            (None, false, None) if shaper.problem().is_some() => "invalid_arguments",
            (None, false, None) => "no_call",
        };
        metrics.continuation(result);
        let Some(call) = kept.filter(|_| !failed) else {
            self.done = true;
            tracing::info!(result, added = self.added, "continuation ended the reply");
            return Vec::new();
        };
        // What the model wrote for the call, after the opener it was given.
        let written = read.get(self.plan.opener.len()..call.span.end).unwrap_or_default();
        self.plan = self.plan.after(written);
        self.earlier.push(Made::new(&call.name, &call.arguments));
        let index = self.next_index;
        self.next_index += 1;
        self.added += 1;
        tracing::info!(tool = %call.name, index, "continuation added a call");
        // The kept call's events only (what the model wrote after it is not the reply's).
        let mut out = Vec::new();
        shaper.finish(&mut events);
        for event in events {
            match event {
                ChatEvent::CallStart { index: 0, id, name } => {
                    out.push(ChatEvent::CallStart { index, id, name });
                }
                ChatEvent::CallArgs { index: 0, json } => {
                    out.push(ChatEvent::CallArgs { index, json })
                }
                ChatEvent::CallEnd { index: 0, complete } => {
                    out.push(ChatEvent::CallEnd { index, complete });
                }
                _ => {}
            }
        }
        out
    }

    /// A continuation that could not be sent: the reply ends with the calls it has.
    pub(crate) fn failed(&mut self, err: &ApiError, metrics: &Metrics) {
        tracing::warn!(kind = err.kind(), detail = %err.detail(), "a continuation failed; the reply keeps the calls it has");
        metrics.continuation("failed");
        self.done = true;
    }

    /// What the continuations cost.
    pub(crate) fn usage(&self) -> crate::chat::types::Usage {
        self.usage
    }
}

/// One continued reply, read until its first call has ended.
pub(crate) struct Round {
    echo: Echo,
    shaper: Shaper,
    /// What the shaper was fed: the opener, then the text the upstream added.
    read: String,
    /// The shaper's events so far (its first call, if it is kept).
    events: Vec<ChatEvent>,
    usage: Usage,
    failed: bool,
}

impl Round {
    /// Reads one event of the continued reply; `true` once the round is decided (its first
    /// call ended, kept or not): the rest need not be read.
    pub(crate) fn feed(&mut self, event: UpstreamEvent) -> bool {
        match event {
            UpstreamEvent::Text(text) => {
                let added = self.echo.feed(&text);
                self.read.push_str(&added);
                self.shaper.feed(&added, &mut self.events);
            }
            UpstreamEvent::Usage(usage) => self.usage = usage,
            // The upstream's own parser read a call out of the continued message: its
            // text is not ours to read, so nothing more is added.
            UpstreamEvent::Call(_) => {
                self.failed = true;
                return true;
            }
            UpstreamEvent::Reasoning(_) | UpstreamEvent::Finish(_) => {}
        }
        self.decided()
    }

    /// The continued reply could not be read to its end.
    pub(crate) fn broke(&mut self, err: &ApiError) {
        tracing::warn!(kind = err.kind(), detail = %err.detail(), "a continuation broke off");
        self.failed = true;
    }

    /// Reads the continued reply until the round is decided, it ends or it breaks off,
    /// then ends the round.
    pub(crate) async fn read(&mut self, reply: &mut UpstreamStream) {
        while let Some(item) = reply.next().await {
            match item {
                Ok(event) => {
                    if self.feed(event) {
                        break;
                    }
                }
                Err(err) => {
                    self.broke(&err);
                    break;
                }
            }
        }
        self.end();
    }

    /// The reply ended (or was left once decided): what the echo still held was the
    /// upstream's own text, and the parser gives what it held.
    pub(crate) fn end(&mut self) {
        if self.decided() {
            return;
        }
        let rest = std::mem::replace(&mut self.echo, Echo::new("")).finish();
        self.read.push_str(&rest);
        self.shaper.feed(&rest, &mut self.events);
        self.shaper.finish(&mut self.events);
    }

    fn decided(&self) -> bool {
        !self.shaper.sent().is_empty()
            || self.shaper.stopped().is_some()
            || self.shaper.calls_ended() > 0
    }
}
