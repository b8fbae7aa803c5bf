//! The neutral core's types: the request every client family is read into, the request and
//! reply events every upstream wire is written from and read into, and which call syntax a
//! model family writes. Neither a client's nor an upstream's JSON is known here; `chat`
//! (emulation) and `upstream` (the wires) both build on it and not on each other
//! (`tests/layout.rs` checks it).

pub(crate) mod family;
pub(crate) mod request;
pub(crate) mod upstream;

pub(crate) use request::*;
pub(crate) use upstream::*;
