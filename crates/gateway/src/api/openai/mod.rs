//! OpenAI Chat Completions.

pub(crate) mod error;
pub(crate) mod handlers;
pub(crate) mod repair;
pub(crate) mod reply;
pub(crate) mod sse;
pub(crate) mod wire;
