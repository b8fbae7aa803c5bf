//! The protocol-neutral core: emulated tool calling on a chat-only upstream.
//!
//! `types` is what a request is, the settings it runs with and what it produces (a leaf
//! module of the core); `prompt` renders a
//! request into a neutral `UpstreamRequest` (the tool contract, history as text, neutralized
//! tool results); `shaper` turns the parser's events into chat events under the request's
//! policy; `pipeline::run` drives an `Upstream` (retries, commit, outcome). No OpenAI or
//! Anthropic JSON is known here.

pub(crate) mod arguments;
pub(crate) mod attempt;
pub(crate) mod continuation;
pub(crate) mod grammar;
pub(crate) mod grounding;
pub(crate) mod native;
pub(crate) mod numbers;
pub(crate) mod pipeline;
pub(crate) mod prompt;
pub(crate) mod reply;
pub(crate) mod schema;
pub(crate) mod shaper;
pub(crate) mod stated;
pub(crate) mod types;

pub(crate) use pipeline::run;
pub(crate) use types::*;
