//! Anthropic Messages.

pub(crate) mod error;
pub(crate) mod handlers;
pub(crate) mod sse;
pub(crate) mod wire;
