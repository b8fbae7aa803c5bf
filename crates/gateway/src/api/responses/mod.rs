//! The OpenAI Responses API (`POST /v1/responses`) on the same core: `wire` reads the request
//! (`items` the `input` items, `tools` the tools and `tool_choice`), `sse` writes the reply
//! (`raw_input` decodes a custom call's input as it arrives), `handlers` ties them together.
//! `error` words errors as the Responses API does, in OpenAI's error shape
//! (`api::openai::error`).

pub(crate) mod conversations;
pub(crate) mod error;
pub(crate) mod handlers;
mod items;
pub(crate) mod kept;
pub(crate) mod raw_input;
pub(crate) mod replay;
pub(crate) mod sse;
pub(crate) mod stored;
pub(crate) mod tools;
pub(crate) mod wire;
