//! A native reply to a Chat Completions request with tools, repaired (issue 24): the
//! upstream's own calls, and calls its parser left in the text, folded by `NativeReply`;
//! then what follows the reply: a plain answer for a reply whose only calls were guesses,
//! continuations for one whose calls were read from its text.

use std::sync::Arc;

use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use crate::api::openai::handlers::respond;
use crate::api::openai::wire;
use crate::chat::continuation::Follow;
use crate::chat::native::{Followups, NativeReply, Next};
use crate::chat::shaper::DeclaredTools;
use crate::chat::{ChatEvent, ChatRequest, Outcome};
use crate::config::ReasoningCalls;
use crate::error::ApiError;
use crate::state::{AppState, Chain};
use crate::upstream::client::{PayloadStream, native_reply};
use crate::upstream::{UpstreamStream, openai};

/// How a native reply is repaired: the request as the gateway read it.
#[derive(Clone, Copy)]
pub(crate) struct Repair<'a> {
    pub(crate) parsed: &'a wire::Parsed,
    pub(crate) reasoning_calls: ReasoningCalls,
}

/// What a repaired reply needs after its first reply: the request as relayed, and the
/// request as the gateway read it.
struct After {
    state: AppState,
    chain: Chain,
    /// The relayed body (with the tools `allowed_tools` allows).
    body: Value,
    chat: ChatRequest,
    declared: DeclaredTools,
    reasoning_calls: ReasoningCalls,
    shown: String,
}

/// A native reply read into chat events through `NativeReply`, and what follows it.
pub(crate) async fn repaired(
    state: &AppState,
    chain: &Chain,
    body: &Value,
    payloads: PayloadStream,
    repair: Repair<'_>,
) -> Result<Response, ApiError> {
    let parsed = repair.parsed;
    let mut chat = parsed.chat.clone();
    if let Some(names) = &parsed.allowed {
        chat.tools.retain(|tool| names.contains(&tool.name));
    }
    let declared = DeclaredTools::new(&chat.tools)?;
    let followups = Followups {
        check_grounding: state.config.check_grounding,
        continue_calls: state.config.continue_calls,
    };
    let mut fold = NativeReply::new(&chat, &declared, repair.reasoning_calls, followups);
    let shown = chain.first().map_or("upstream", |(_, client, _)| client.shown()).to_owned();
    let mut reply = native_reply(payloads, shown.clone());
    let after = After {
        state: state.clone(),
        chain: chain.clone(),
        body: body.clone(),
        chat: chat.clone(),
        declared,
        reasoning_calls: repair.reasoning_calls,
        shown,
    };
    let events = async_stream::stream! {
        while let Some(item) = reply.next().await {
            let mut out = Vec::new();
            match item {
                Ok(event) => fold.feed(event, &mut out),
                Err(err) => { yield Err(err); return; }
            }
            for event in out { yield Ok(event); }
        }
        let mut out = Vec::new();
        let (mut outcome, next) = fold.finish(&mut out);
        after.state.metrics.guessed_calls(fold.guesses());
        for event in out { yield Ok(event); }
        match next {
            Next::Done => {}
            Next::Plain => {
                let (mut fold, mut reply) = match after.plain().await {
                    Ok(plain) => plain,
                    Err(err) => { yield Err(err); return; }
                };
                while let Some(item) = reply.next().await {
                    let mut out = Vec::new();
                    match item {
                        Ok(event) => fold.feed(event, &mut out),
                        Err(err) => { yield Err(err); return; }
                    }
                    for event in out { yield Ok(event); }
                }
                let mut out = Vec::new();
                let (answered, _) = fold.finish(&mut out);
                for event in out { yield Ok(event); }
                outcome = instead(outcome, answered);
            }
            Next::Continue(mut follow) => {
                if let Some(dialect) = after.prefill().await {
                    while let Some(prefix) = follow.next_prefix() {
                        let body = openai::continued(&after.body, prefix, dialect, follow.max_tokens());
                        for event in after.round(&body, &mut follow).await { yield Ok(event); }
                    }
                    outcome.usage.add(follow.usage());
                }
            }
        }
        yield Ok(ChatEvent::Done(outcome));
    };
    respond(state, events, parsed.stream, chat.model, parsed.include_usage, parsed.legacy).await
}

impl After {
    /// How the route's first upstream continues a final assistant message, if it does.
    async fn prefill(&self) -> Option<crate::upstream::constrain::Dialect> {
        match self.chain.first() {
            Some((_, client, _)) => client.prefill_dialect().await,
            None => None,
        }
    }

    /// One continuation: the kept call's events, if any.
    async fn round(&self, body: &Value, follow: &mut Follow) -> Vec<ChatEvent> {
        let metrics = Arc::clone(&self.state.metrics);
        match self.chain.relay(body).await {
            Ok(payloads) => {
                let mut round =
                    follow.round(&self.chat, &self.declared, self.reasoning_calls, None);
                let mut reply: UpstreamStream = native_reply(payloads, self.shown.clone());
                while let Some(item) = reply.next().await {
                    match item {
                        Ok(event) => {
                            if round.feed(event) {
                                break;
                            }
                        }
                        Err(err) => {
                            round.broke(&err);
                            break;
                        }
                    }
                }
                round.end();
                follow.end_round(round, &metrics)
            }
            Err(err) => {
                follow.failed(&err, &metrics);
                Vec::new()
            }
        }
    }

    /// The reply's only calls were guesses: the same conversation without tools, for a
    /// plain answer; its fold and its reply.
    async fn plain(&self) -> Result<(NativeReply, UpstreamStream), ApiError> {
        self.state.metrics.retry("guessed_arguments", true);
        tracing::info!("the reply's calls were guesses; asking for a plain answer");
        let payloads = self.chain.relay(&openai::without_tools(&self.body)).await?;
        let mut plain = self.chat.clone();
        plain.tools.clear();
        plain.tool_choice = crate::chat::ToolChoice::None;
        let fold = NativeReply::new(
            &plain,
            &DeclaredTools::default(),
            self.reasoning_calls,
            Followups::NONE,
        );
        Ok((fold, native_reply(payloads, self.shown.clone())))
    }
}

/// The outcome of a plain answer asked for instead of a reply that only guessed: it ended as
/// the answer did, and cost both.
fn instead(guessed: Outcome, answered: Outcome) -> Outcome {
    let mut usage = guessed.usage;
    usage.add(answered.usage);
    Outcome { finish: answered.finish, usage, retried: guessed.usage }
}
