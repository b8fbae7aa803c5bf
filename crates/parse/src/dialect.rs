//! The dialect registry: which call syntaxes the parser looks for, in which order.
//!
//! Every way of writing a call is a *dialect*. The built-in ones are named by
//! [`Builtin`]; a [`TagPair`] adds calls written as a JSON body between two custom
//! markers; anything else implements [`Dialect`], a small trait that sees only the
//! text between its markers. [`Dialects`] holds them in order: when two dialects
//! could both start at the same byte, the earlier one reads it.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::rows::native::{Opens, PAIRS, Row};

/// The built-in dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Builtin {
    /// Tool-call markup: `<tool_call>`, `<function_calls>`/`<invoke>`, `<function=NAME>`,
    /// `<func_call>`, `<func_name>`, and JSON or parameters inside them.
    Markup,
    /// Markdown fences (```` ```json ````, ```` ```json action ````, ```` ```xml ````,
    /// ```` ```tool_call ````) around JSON calls or markup.
    Fenced,
    /// Python call syntax: `get_weather(city="Paris")` alone on a line, a list
    /// `[f(a=1), g(b=2)]`, and ```` ```python ````/```` ```tool_code ```` fences that
    /// hold only calls.
    Python,
    /// Text labels: `function.name: NAME` followed by `function.arguments: {…}`.
    KeyValue,
    /// ReAct: `Action: NAME` followed by `Action Input: {…}` (or plain text for a
    /// tool with one parameter).
    React,
    /// Bare JSON call objects and lists of them in prose.
    Json,
    /// Guessing a call from plain prose ("call get_weather with city Paris"). A last
    /// resort: never on by default, needs a tool list, and is used only when the whole
    /// output holds no other call. The prose stays visible.
    FreeText,
}

impl Builtin {
    /// Every built-in dialect, in the default order.
    pub const ALL: [Builtin; 7] = [
        Builtin::Markup,
        Builtin::Fenced,
        Builtin::Python,
        Builtin::KeyValue,
        Builtin::React,
        Builtin::Json,
        Builtin::FreeText,
    ];

    /// The stable id used in settings and on the command line.
    pub fn id(self) -> &'static str {
        match self {
            Builtin::Markup => "markup",
            Builtin::Fenced => "fenced",
            Builtin::Python => "python",
            Builtin::KeyValue => "keyvalue",
            Builtin::React => "react",
            Builtin::Json => "json",
            Builtin::FreeText => "free_text",
        }
    }

    /// The built-in dialect with this id.
    pub fn from_id(id: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.id() == id)
    }
}

/// Calls written as a JSON body (a call object, a list of them, or a
/// `{"tool_calls": […]}` wrapper) between a start and an end marker, as in
/// `<my_call>{"name": "f", "arguments": {}}</my_call>`. The body streams like any
/// other JSON call: arguments arrive as they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagPair {
    id: String,
    start: String,
    /// Empty: no end marker; the region ends at the first thing that is not a call.
    end: String,
}

impl TagPair {
    /// A pair of markers. Its id is the start marker. Empty markers never match.
    pub fn new(start: impl Into<String>, end: impl Into<String>) -> TagPair {
        let start = start.into();
        TagPair { id: start.clone(), start, end: end.into() }
    }

    /// The id: the start marker.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The start marker.
    pub fn start(&self) -> &str {
        &self.start
    }

    /// The end marker (empty: none).
    pub fn end(&self) -> &str {
        &self.end
    }
}

/// One call as a custom [`Dialect`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallText {
    /// The tool name as written; the parser matches it against the tool list.
    pub name: String,
    /// The arguments as JSON-like text. The parser repairs it (quotes, commas,
    /// literals), makes it canonical and applies the tool's schema; an empty string
    /// means no arguments.
    pub arguments: String,
    /// The call's id, if the syntax carries one.
    pub id: Option<String>,
}

impl CallText {
    /// A call with a name and its arguments as JSON-like text (empty: none).
    pub fn new(name: impl Into<String>, arguments: impl Into<String>) -> CallText {
        CallText { name: name.into(), arguments: arguments.into(), id: None }
    }

    /// Sets the call's id.
    pub fn with_id(mut self, id: impl Into<String>) -> CallText {
        self.id = Some(id.into());
        self
    }
}

/// A custom dialect: a start marker, an end marker, and a function that reads the
/// text between them. The parser does the rest: it finds the markers (also when a
/// marker is split across chunks), holds the body, and turns what [`Dialect::read`]
/// returns into calls, matched, repaired and coerced like any other.
///
/// A custom dialect's calls come out whole, when the end marker arrives.
///
/// ```
/// use toolshim_parse::{CallText, Config, Dialect, parse};
///
/// /// `@@get_weather city=Paris@@`
/// #[derive(Debug)]
/// struct AtCalls;
///
/// impl Dialect for AtCalls {
///     fn id(&self) -> &str {
///         "at_calls"
///     }
///     fn start(&self) -> &str {
///         "@@"
///     }
///     fn end(&self) -> &str {
///         "@@"
///     }
///     fn read(&self, body: &str) -> Result<Vec<CallText>, String> {
///         let mut words = body.split_whitespace();
///         let name = words.next().ok_or("no tool name")?.to_owned();
///         let mut args = serde_json::Map::new();
///         for word in words {
///             let (key, value) = word.split_once('=').ok_or("expected key=value")?;
///             args.insert(key.to_owned(), value.into());
///         }
///         let arguments = serde_json::Value::Object(args).to_string();
///         Ok(vec![CallText::new(name, arguments)])
///     }
/// }
///
/// let mut config = Config::default();
/// config.dialects.add_custom(AtCalls);
/// let parsed = parse("Checking. @@get_weather city=Paris@@", &config);
/// assert_eq!(parsed.content, "Checking. ");
/// assert_eq!(parsed.calls[0].name, "get_weather");
/// assert_eq!(parsed.calls[0].arguments, r#"{"city":"Paris"}"#);
/// ```
pub trait Dialect: fmt::Debug + Send + Sync {
    /// A stable id, used by [`Dialects::prefer`] and [`Dialects::remove`].
    fn id(&self) -> &str;
    /// The literal text that starts the call syntax. Empty never matches.
    fn start(&self) -> &str;
    /// The literal text that ends it. Empty means the end of the line.
    fn end(&self) -> &str;
    /// Reads the text between the markers. An `Err` keeps the text visible, with a
    /// warning that carries the message and the raw text.
    fn read(&self, body: &str) -> Result<Vec<CallText>, String>;
}

/// One entry of the registry.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Builtin(Builtin),
    Pair(Arc<TagPair>),
    /// A model-native format's marker pair; the id is the format's.
    Native(Row),
    Custom(Arc<dyn Dialect>),
}

impl Entry {
    pub(crate) fn id(&self) -> &str {
        match self {
            Entry::Builtin(builtin) => builtin.id(),
            Entry::Pair(pair) => pair.id(),
            Entry::Native(pair) => &pair.id,
            Entry::Custom(custom) => custom.id(),
        }
    }

    /// The literal start marker of a pair or custom dialect, where it opens anywhere.
    pub(crate) fn start_marker(&self) -> Option<&str> {
        match self {
            Entry::Builtin(_) => None,
            Entry::Pair(pair) => Some(pair.start()),
            Entry::Native(pair) if pair.opens == Opens::Anywhere => Some(&*pair.start),
            Entry::Native(_) => None,
            Entry::Custom(custom) => Some(custom.start()),
        }
        .filter(|marker| !marker.is_empty())
    }

    /// The start marker of a native pair that opens only at the start of the output.
    pub(crate) fn start_only_marker(&self) -> Option<&str> {
        match self {
            Entry::Native(pair) if pair.opens == Opens::AtStart => Some(&pair.start),
            _ => None,
        }
    }
}

/// The dialects the parser looks for, in order of precedence.
///
/// The default holds every built-in dialect except [`Builtin::FreeText`]. When two
/// dialects could start at the same byte (a custom marker that begins with `<`, a
/// Python list and a JSON list both starting at `[`), the one earlier in the order
/// reads it; [`Dialects::prefer`] moves one to the front.
///
/// ```
/// use toolshim_parse::{Builtin, Config, TagPair, parse};
///
/// let mut config = Config::default();
/// config.dialects.add_pair(TagPair::new("<my_call>", "</my_call>"));
/// config.dialects.remove(Builtin::Json.id());
/// let parsed = parse(r#"<my_call>{"name": "f", "arguments": {"x": 1}}</my_call>"#, &config);
/// assert_eq!(parsed.calls[0].arguments, r#"{"x":1}"#);
/// // Bare JSON in prose is no longer read as a call.
/// let parsed = parse(r#"{"name": "f", "arguments": {"x": 1}}"#, &config);
/// assert!(parsed.calls.is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct Dialects {
    entries: Vec<Entry>,
    /// Built-ins that are on, as a bit per [`Builtin`] (for the engine's fast checks).
    on: u16,
}

impl Default for Dialects {
    fn default() -> Dialects {
        let mut dialects = Dialects { entries: Vec::new(), on: 0 };
        // Model-native markers first: they are the most specific.
        for pair in PAIRS.iter() {
            dialects.entries.push(Entry::Native(Row::clone(pair)));
        }
        for builtin in Builtin::ALL {
            if builtin != Builtin::FreeText {
                dialects.add(builtin);
            }
        }
        dialects
    }
}

impl Dialects {
    /// No dialect at all: every output is plain text.
    pub fn none() -> Dialects {
        Dialects { entries: Vec::new(), on: 0 }
    }

    /// Adds a built-in dialect at the end of the order (moves it there if present).
    pub fn add(&mut self, builtin: Builtin) -> &mut Dialects {
        self.remove(builtin.id());
        self.entries.push(Entry::Builtin(builtin));
        self.on |= bit(builtin);
        self
    }

    /// Adds a marker pair with a JSON body, at the front of the order: a custom
    /// marker is more specific than the built-in syntax it may resemble.
    pub fn add_pair(&mut self, pair: TagPair) -> &mut Dialects {
        self.remove(pair.id());
        self.entries.insert(0, Entry::Pair(Arc::new(pair)));
        self
    }

    /// Adds a custom dialect at the front of the order.
    pub fn add_custom(&mut self, dialect: impl Dialect + 'static) -> &mut Dialects {
        self.remove(dialect.id());
        self.entries.insert(0, Entry::Custom(Arc::new(dialect)));
        self
    }

    /// Removes the dialect with this id. Returns whether it was there.
    pub fn remove(&mut self, id: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.id() != id);
        if let Some(builtin) = Builtin::from_id(id) {
            self.on &= !bit(builtin);
        }
        before != self.entries.len()
    }

    /// Moves the dialect with this id to the front, so it wins every conflict.
    /// Returns whether it was there.
    pub fn prefer(&mut self, id: &str) -> bool {
        let Some(at) = self.entries.iter().position(|entry| entry.id() == id) else {
            return false;
        };
        let entry = self.entries.remove(at);
        self.entries.insert(0, entry);
        true
    }

    /// Puts the dialects in this order; ids not listed keep their relative order
    /// after the listed ones. Unknown ids are returned.
    pub fn reorder<'a>(&mut self, ids: &[&'a str]) -> Vec<&'a str> {
        let mut unknown = Vec::new();
        for id in ids.iter().rev() {
            if !self.prefer(id) {
                unknown.push(*id);
            }
        }
        unknown.reverse();
        unknown
    }

    /// Keeps, from `all`, the entries whose id is in `ids`, in `all`'s order.
    pub(crate) fn keep_from(&mut self, all: &Dialects, ids: &[&str]) {
        for entry in all.entries.iter().filter(|entry| ids.contains(&entry.id())) {
            if let Entry::Builtin(builtin) = entry {
                self.on |= bit(*builtin);
            }
            self.entries.push(entry.clone());
        }
    }

    /// Reads a registry from a format file: toolshim's own rows written as data (JSON, or
    /// TOML with the `toml` feature), as [`Dialects::to_format_file`] writes them, or a
    /// Hugging Face `response_template` (bare, or inside the `tokenizer_config.json` that
    /// ships it). The rows it builds are the same typed rows the built-in formats are made
    /// of. Anything the parser cannot read is an [`crate::ErrorKind::InvalidFormat`] error
    /// whose [`crate::Error::field`] names the field.
    ///
    /// ```
    /// use toolshim_parse::{parse, Config, Dialects};
    ///
    /// let template = r#"{"fields": {"tool_calls": {
    ///     "open": "<call>", "close": "</call>", "content": "json",
    ///     "transform": {"type": "function", "function": "{content}"}}}}"#;
    /// let mut config = Config::default();
    /// config.dialects = Dialects::from_format_file(template)?;
    /// let parsed = parse(r#"Sure.<call>{"name": "f", "arguments": {"n": 1}}</call>"#, &config);
    /// assert_eq!(parsed.calls[0].arguments, r#"{"n":1}"#);
    /// # Ok::<(), toolshim_parse::Error>(())
    /// ```
    pub fn from_format_file(text: &str) -> Result<Dialects, Error> {
        crate::rows::file::load(text).map(|loaded| loaded.dialects)
    }

    /// This registry written as a format file (toolshim's rows, as JSON), which
    /// [`Dialects::from_format_file`] reads back into the same registry. A custom
    /// [`Dialect`] is code, not data: a registry holding one is an error.
    pub fn to_format_file(&self) -> Result<String, Error> {
        let value = crate::rows::file::write(self)?;
        serde_json::to_string_pretty(&value)
            .map_err(|err| Error::new(ErrorKind::InvalidFormat, err.to_string()))
    }

    /// The ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(Entry::id)
    }

    /// Whether a built-in dialect is on.
    pub fn has(&self, builtin: Builtin) -> bool {
        self.on & bit(builtin) != 0
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Adds an entry at the end of the order.
    pub(crate) fn push(&mut self, entry: Entry) {
        if let Entry::Builtin(builtin) = entry {
            self.on |= bit(builtin);
        }
        self.entries.push(entry);
    }
}

fn bit(builtin: Builtin) -> u16 {
    1 << (builtin as u16)
}
