//! The Gemini API (issue 28; docs/gemini.md): `generateContent`, `streamGenerateContent` and
//! `countTokens` under `/v1beta/models/…` and `/v1/models/…`, on the same core as the other
//! families, and the model list.

pub(crate) mod handlers;
pub(crate) mod reply;
pub(crate) mod wire;
