//! The OpenAI Responses API (`POST /v1/responses`) on the same pipeline: `wire` reads the
//! request, `sse` writes the reply, `handlers` ties them together. Errors use the OpenAI
//! error shape (`api::openai::error`).

pub(crate) mod handlers;
pub(crate) mod sse;
pub(crate) mod wire;
