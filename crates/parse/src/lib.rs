//! Pulls tool calls out of language-model text, complete or streaming.
//!
//! Models write tool calls as text: `<tool_call>` JSON, bare JSON objects in prose,
//! fenced blocks, XML-ish `<invoke>` markup, often with broken JSON. This crate turns
//! any of that into exact calls. It is pure and synchronous, never panics, runs in
//! time linear in its input, and gives the same result for any chunking of a stream.
//!
//! ```
//! use toolshim_parse::{parse, Config};
//!
//! let out = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
//! let parsed = parse(out, &Config::default());
//! assert_eq!(parsed.content, "Let me check.\n");
//! assert_eq!(parsed.calls[0].name, "get_weather");
//! assert_eq!(parsed.calls[0].arguments, r#"{"city":"Paris"}"#);
//! ```
//!
//! Streaming gives the same result, event by event:
//!
//! ```
//! use toolshim_parse::{Config, Event, Parsed, StreamParser};
//!
//! let mut parser = StreamParser::new(&Config::default());
//! let mut events = Vec::new();
//! for chunk in ["{\"name\": \"get_", "weather\", \"arguments\": {\"city\": \"Par", "is\"}}"] {
//!     parser.feed(chunk, &mut events);
//! }
//! parser.finish(&mut events);
//! assert!(matches!(&events[0], Event::CallStart { name, .. } if name == "get_weather"));
//! let parsed = Parsed::from_events(events);
//! assert_eq!(parsed.calls[0].arguments, r#"{"city":"Paris"}"#);
//! ```
#![deny(clippy::indexing_slicing)]
#![warn(missing_docs)]

mod complete;
mod config;
mod dialect;
mod error;
mod event;
mod format;
mod json;
mod outcome;
mod stream;
mod tools;

pub use crate::{
    complete::parse,
    config::{Config, EXAMPLE_PHRASES, ExampleGuard, ReasoningCalls, RejectedText},
    dialect::{Builtin, CallText, Dialect, Dialects, TagPair},
    error::{Error, ErrorKind},
    event::{Event, Parsed, Rejected, ToolCall, Warning, WarningCode},
    outcome::{AgentTools, Outcome, ToolParseError, agent_outcome},
    stream::StreamParser,
    tools::{Tool, ToolSet},
};
