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
//! assert_eq!(parsed.content, "Let me check.");
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
//!
//! # Dialects
//!
//! The call syntaxes form a registry, [`Dialects`], in [`Config::dialects`]: the built-ins
//! ([`Builtin`]: markup tags, fences, Python calls, `function.name:` labels, ReAct
//! `Action:`/`Action Input:`, bare JSON, and free-text guessing, which is off by default),
//! marker pairs with a JSON body ([`TagPair`]), and custom dialects written against the
//! [`Dialect`] trait, which sees only the text between its markers. A new model whose calls
//! sit between its own tags takes one line:
//!
//! ```
//! use toolshim_parse::{parse, Config, TagPair};
//!
//! let mut config = Config::default();
//! config.dialects.add_pair(TagPair::new("<my_call>", "</my_call>"));
//! let parsed = parse(r#"Sure. <my_call>{"name": "f", "arguments": {"n": 1}}</my_call>"#, &config);
//! assert_eq!(parsed.content, "Sure. ");
//! assert_eq!(parsed.calls[0].arguments, r#"{"n":1}"#);
//! ```
//!
//! # Formats as data
//!
//! A model-native format is rows of one table, and the same rows can be read at run time
//! from a format file: a Hugging Face `response_template` (bare, or in the
//! `tokenizer_config.json` that ships it) or toolshim's own rows as JSON (TOML with the
//! `toml` feature), as [`Dialects::to_format_file`] writes any registry
//! ([`Dialects::from_format_file`], [`Config::format_from_template`]). What the parser
//! cannot express is an [`ErrorKind::InvalidFormat`] error whose [`Error::field`] names the
//! template's field: content parsed as `kv-lines`, patterns with alternations, optional
//! groups or anchors, reasoning markers it has no row for, fields other than `thinking`,
//! `content` and `tool_calls`. Loaded rows keep every guarantee of the built-in ones.
//!
//! # Which text is a call
//!
//! - **One call per piece of syntax.** A region (a tag, a fence, a bracket, a labelled or
//!   Python line) is read by one dialect from its first byte to its end, so a fence holding a
//!   `<tool_call>`, or `<tool_call>` holding JSON or a Python list, gives one call, not two.
//!   When two dialects could start at the same byte, the one earlier in [`Dialects`] reads it
//!   ([`Dialects::prefer`] moves one to the front); a custom marker comes before the
//!   built-ins.
//! - **Strong markers decide at once**: tags, `Action:` followed by `Action Input:` on the
//!   next line, custom markers. **Weak ones wait for evidence**: a bare JSON object is a call
//!   once it has a tool name and arguments (an object without a name, a list of numbers, a
//!   Markdown link or `[1]` stay text, unchanged); a Python call counts only when its line,
//!   list or fence holds nothing but calls.
//! - **Examples are not calls** ([`ExampleGuard`]): a fence, bare JSON or Python line after
//!   "for example", "e.g.", "such as", "looks like" and the like, inline code after other text
//!   on its line, and a Python block that defines or uses the function in a program stay
//!   text, with a [`WarningCode::Example`] warning.
//! - **Reasoning** (`<think>…</think>`, or from the start with [`Config::reasoning_open`]) goes
//!   to [`Parsed::reasoning`]; calls in it stay reasoning unless [`ReasoningCalls::Allow`].
//! - **A call cut off inside its arguments is never a call.** When the output ends in a
//!   value, after a key, a `:` or a `,`, or in a call's header, the call goes to
//!   [`Parsed::incomplete`] ([`ToolCall::complete`] is `false`) with a
//!   [`WarningCode::Truncated`] warning. A call whose values are all whole and only its
//!   closing brackets or tags are missing is a call, with a [`WarningCode::RepairedJson`]
//!   warning.
//! - **Arguments that are not JSON make no call; their text stays content.** When the
//!   arguments break off into something that is not JSON (`{invalid json}`, `{"city": Paris
//!   France}`), the call's text, its markup included, is content, with a
//!   [`WarningCode::MalformedCall`] warning. A streaming client already saw the call's
//!   name, so the call still ends, as incomplete, with an empty span (it is listed in
//!   [`Parsed::incomplete`] too). JSON that is whole and followed by stray text inside the
//!   call's element (`{…}} junk</tool_call>`) is a call; the stray text is dropped with a
//!   [`WarningCode::IgnoredText`] warning that carries it.
//! - **Markup never leaks.** An opener the output ends after, an empty `<tool_call></tool_call>`
//!   or tool-calls section is removed with a [`WarningCode::EmptyCallMarkup`] warning that
//!   carries it; a closer written twice after a call (`}`, `</tool_call>`) belongs to the call.
//! - **Whitespace a template writes around calls and markers is theirs, not content:** a run
//!   of whitespace that holds a line break before a call, whitespace that ends the output
//!   after a call, and whitespace next to a reasoning or channel marker (up to 256 bytes
//!   of each). So `Checking.\n\n<tool_call>…` has the content `Checking.`, and a reply
//!   that is only calls has none. Spaces between text and a call stay text
//!   (`before <tool_call>…</tool_call> after` keeps `before  after`).
//! - **Free text** ([`Builtin::FreeText`]) runs last, only with a tool list, and only when the
//!   whole output held no other call.
//!
//! # Tools and coercion
//!
//! With a tool list ([`Config::tools`], a [`ToolSet`]) a call's name is matched forgivingly
//! ([`ToolSet::resolve`]), and its argument values are coerced to the tool's JSON Schema at
//! every depth as they stream: a string holding a number, a boolean or JSON where the schema
//! declares `integer`, `number`, `boolean`, `array` or `object` is converted once it ends; a
//! number or boolean where it declares `string` becomes a string; a whole number where it
//! declares `number` (not `integer`) gets a fraction (`12` becomes `12.0`, as typed Python
//! tools and checkers such as BFCL's want), and a zero fraction is dropped where it declares
//! `integer` (`5.0` becomes `5`). The schema is followed through `properties`,
//! `additionalProperties`, `items` and `prefixItems`, local `$ref`s, `allOf`, and
//! `anyOf`/`oneOf` whose alternatives other than `null` agree on a type; a value the schema
//! does not pin down is left as written. Each coercion is a [`WarningCode::Coerced`] warning
//! that names where it happened (`conditions[0].value`); values with the same schema coerced
//! the same way are counted in the first one's warning.
//!
//! ```
//! use toolshim_parse::{parse, Config, ToolSet};
//!
//! let tools = ToolSet::from_json_str(r#"[{"name": "mean", "parameters": {"type": "object",
//!     "properties": {"xs": {"type": "array", "items": {"type": "number"}}}}}]"#)?;
//! let parsed = parse(r#"{"name": "mean", "arguments": {"xs": [12, "15", 2.5]}}"#, &Config::with_tools(tools));
//! assert_eq!(parsed.calls[0].arguments, r#"{"xs":[12.0,15.0,2.5]}"#);
//! # Ok::<(), toolshim_parse::Error>(())
//! ```
//!
//! # Features
//!
//! - `serde`: `Serialize` for [`Parsed`], [`Event`], [`ToolCall`], [`Outcome`] and their
//!   parts, in the JSON shapes `toolshim parse` prints: keys in a fixed order, call
//!   arguments embedded verbatim, byte spans left out.
#![deny(clippy::indexing_slicing)]
#![warn(missing_docs)]

mod catalog;
mod complete;
mod config;
mod dialect;
mod engine;
mod error;
mod event;
mod json;
mod outcome;
mod read;
mod rows;
mod schema;
#[cfg(feature = "serde")]
mod serialize;
mod tools;

pub use crate::{
    catalog::{Format, MODELS, Support, formats},
    complete::parse,
    config::{Config, EXAMPLE_PHRASES, ExampleGuard, ReasoningCalls, RejectedText},
    dialect::{Builtin, CallText, Dialect, Dialects, TagPair},
    engine::StreamParser,
    error::{Error, ErrorKind},
    event::{Event, Fragment, Parsed, Rejected, ToolCall, Warning, WarningCode},
    outcome::{AgentTools, Outcome, ToolParseError, agent_outcome},
    tools::{Tool, ToolSet},
};
