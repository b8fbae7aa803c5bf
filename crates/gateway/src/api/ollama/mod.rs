//! The Ollama API (issue 28; docs/ollama.md): `/api/chat` and `/api/generate` on the same
//! core as the other families (native, emulated or auto, as the route says), NDJSON streams,
//! and the model endpoints Ollama clients probe (`/api/tags`, `/api/show`, `/api/version`,
//! `/api/ps`, `/`).

pub(crate) mod handlers;
pub(crate) mod reply;
pub(crate) mod wire;
