//! Tool-call dialects: how call syntax is recognized and read.
//!
//! `envelope` reads JSON call objects (and lists and wrappers of them); `markup`
//! reads tags and fences and hands JSON bodies to `envelope`; `call` holds the call
//! being assembled and sends its events. None of them touches the input buffer.

pub(crate) mod envelope;
pub(crate) mod free_text;
pub(crate) mod line;
pub(crate) mod markup;
pub(crate) mod native;
pub(crate) mod python;
