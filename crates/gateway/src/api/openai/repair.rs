//! A native reply to a Chat Completions request with tools, repaired (issue 24): the
//! relayed body's reply folded by the native path every family shares
//! (`dispatch::repaired`), rendered as a completion or a stream.

use axum::response::Response;
use serde_json::Value;

use crate::api::openai::handlers::{Shape, respond};
use crate::api::openai::wire;
use crate::config::ReasoningCalls;
use crate::dispatch::{Native, repaired as fold};
use crate::error::ApiError;
use crate::state::{AppState, Chain};
use crate::upstream::client::PayloadStream;

/// How a native reply is repaired: the request as the gateway read it.
#[derive(Clone, Copy)]
pub(crate) struct Repair<'a> {
    pub(crate) parsed: &'a wire::Parsed,
    pub(crate) reasoning_calls: ReasoningCalls,
    /// For a request sent without its tools for a plain answer: the body with them and the
    /// request as read, sent after all when the plain answer only refuses.
    pub(crate) instead_of: Option<(&'a Value, &'a wire::Parsed)>,
}

/// The request `parsed` as sent natively in `body`, with only the tools it allows.
fn native(body: &Value, parsed: &wire::Parsed, reasoning_calls: ReasoningCalls) -> Native {
    let mut chat = parsed.chat.clone();
    if let Some(names) = &parsed.allowed {
        chat.tools.retain(|tool| names.contains(&tool.name));
    }
    Native::relayed(body.clone(), chat, reasoning_calls)
}

/// A native reply read into chat events, and what follows it, as the client's reply.
pub(crate) async fn repaired(
    state: &AppState,
    chain: &Chain,
    body: &Value,
    payloads: PayloadStream,
    repair: Repair<'_>,
) -> Result<Response, ApiError> {
    let parsed = repair.parsed;
    let model = parsed.chat.model.clone();
    let mut native = native(body, parsed, repair.reasoning_calls);
    native.instead_of = repair
        .instead_of
        .map(|(body, parsed)| Box::new(self::native(body, parsed, repair.reasoning_calls)));
    let events = fold(state, chain, payloads, native, true)?;
    let shape = Shape {
        stream: parsed.stream,
        model,
        include_usage: parsed.include_usage,
        legacy: parsed.legacy,
        custom: parsed.custom.clone(),
    };
    respond(state, events, shape).await
}
