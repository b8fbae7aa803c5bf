//! The upstream chat endpoint: one shared HTTP client and an SSE decoder.

pub(crate) mod client;
pub(crate) mod sse_decode;
