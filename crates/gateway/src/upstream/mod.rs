//! The upstream chat endpoint: one shared HTTP client (`client`), the reply read with every
//! limit and check (`reply`, over `sse_decode`), and one module per upstream wire.

pub(crate) mod anthropic;
pub(crate) mod client;
pub(crate) mod openai;
pub(crate) mod reply;
pub(crate) mod sse_decode;
