//! Python call syntax: `get_weather(city="Paris")`.
//!
//! A *group* of calls is read as a whole and sent when it ends, because only its
//! end tells a call from code: a call alone on a line (the rest of the line must be
//! empty), a list `[f(a=1), g(b=2)]`, a ```` ```python ```` or ```` ```tool_code ````
//! fence whose lines are all calls, or calls inside tool-call markup. Argument values
//! are Python literals, read by the JSON reader (which already takes single quotes
//! and `True`/`False`/`None`). A name used as a value is a variable: the group is
//! code, not calls. A call used as a value rejects the call.

use crate::Config;
use crate::engine::call::{CallState, Cut, Status};
use crate::engine::step::{Look, Need, Step, Took};
use crate::json::args::ArgsNote;
use crate::json::reader::{Frame, Reader, Sink, Status as ReadStatus};
use crate::tools::ToolSet;

/// How the group is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One call on its own line; the group ends at the end of the line.
    Line,
    /// A list `[…]` of calls.
    List,
    /// The body of a Python fence; ends at its closing fence. Calls may be wrapped in
    /// a call to `wrapper` (`print(…)` in `tool_code` fences).
    Fence { wrapper: Option<&'static str> },
    /// Calls inside tool-call markup; ends at the first byte that is not a call.
    Inner,
}

const MAX_NAME: usize = 128;

/// Reader repairs that are plain Python syntax, so no warning.
const PYTHON_SYNTAX: &[&str] = &[
    "a single-quoted string was requoted",
    "a Python literal became JSON",
    "a trailing comma was removed",
];

/// Python names that are not tools, even when no tool list says so.
const NOT_TOOLS: &[&str] = &[
    "print",
    "len",
    "range",
    "str",
    "int",
    "float",
    "list",
    "dict",
    "set",
    "tuple",
    "open",
    "input",
    "sorted",
    "sum",
    "min",
    "max",
    "abs",
    "round",
    "type",
    "isinstance",
    "super",
    "exec",
    "eval",
    "assert",
    "return",
    "yield",
    "if",
    "elif",
    "while",
    "for",
    "with",
    "not",
    "and",
    "or",
    "lambda",
    "def",
    "class",
    "import",
    "from",
    "del",
    "raise",
    "try",
    "except",
    "async",
    "await",
    "map",
    "filter",
    "zip",
    "enumerate",
    "format",
    "repr",
    "help",
    "id",
    "hash",
    "iter",
    "next",
];

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// Looks for `name(` at the start of `rest`. With `strict`, the name must be a
/// declared tool (when there is a tool list) and not a Python built-in.
pub(crate) fn call_ahead(rest: &str, eof: bool, config: &Config, strict: bool) -> Look<()> {
    let b = rest.as_bytes();
    if !b.first().is_some_and(|&c| is_name_start(c)) {
        return if b.is_empty() && !eof { Err(Need) } else { Ok(None) };
    }
    let len = b.iter().take(MAX_NAME + 1).take_while(|&&c| is_name_byte(c)).count();
    if len > MAX_NAME {
        return Ok(None);
    }
    let mut i = len;
    while b.get(i).is_some_and(|&c| c == b' ') && i < len + 4 {
        i += 1;
    }
    match b.get(i) {
        None if !eof => return Err(Need),
        Some(b'(') => {}
        _ => return Ok(None),
    }
    let name = rest.get(..len).unwrap_or_default();
    if name.ends_with('.') || name.contains("..") {
        return Ok(None);
    }
    if strict {
        if NOT_TOOLS.contains(&name) {
            return Ok(None);
        }
        if let Some(tools) = &config.tools {
            if tools.resolve(name).is_none() {
                return Ok(None);
            }
        }
    }
    Ok(Some(()))
}

/// Whether `rest` starts a list of calls: `[`, spaces, `name(`.
pub(crate) fn list_ahead(rest: &str, eof: bool, config: &Config) -> Look<()> {
    let b = rest.as_bytes();
    let ws = b.iter().skip(1).take(17).take_while(|c| c.is_ascii_whitespace()).count();
    if ws > 16 {
        return Ok(None);
    }
    match rest.get(1 + ws..) {
        Some(after) if !after.is_empty() => call_ahead(after, eof, config, false),
        _ if eof => Ok(None),
        _ => Err(Need),
    }
}

/// Where the group's reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Before a list's `[` (List mode).
    ListOpen,
    /// Before a call: whitespace, separators, comments, brackets, the fence end.
    /// `line_start`: at the start of a line (where a fence's end may be).
    Start {
        line_start: bool,
    },
    /// Reading a (dotted) name into `word`.
    Name,
    /// After a name: the `(` that makes it a call.
    Open,
    /// After `(` or `,` in an argument list.
    ArgStart,
    /// A name in an argument list: a keyword or a positional variable.
    ArgWord,
    AfterArgWord,
    /// After `key=`.
    ValueStart,
    /// A bare word as a value: a literal, a variable or a nested call.
    ValueWord,
    /// A value read by the reader.
    Value,
    AfterValue,
    /// After the call's `)`.
    Close,
    /// A rejected call, skipped to its `)`.
    Skip {
        quote: Quoted,
    },
    /// A `#` comment, to the end of the line.
    Comment,
    /// Not calls: the rest of the group is skipped (shown as text later).
    Rest {
        line_start: bool,
    },
}

/// Inside a skipped call: whether a string is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoted {
    No,
    /// In a string opened by this quote.
    In(u8),
    /// Just after a backslash in such a string.
    Escaped(u8),
}

/// What the reader does after one state's work.
enum Flow {
    /// Look at the state again.
    Next,
    /// Wait for more input.
    Stop,
    /// The group ends after this many bytes.
    End(usize),
}

/// A group of Python calls being read.
#[derive(Debug)]
pub(crate) struct PyGroup {
    mode: Mode,
    st: St,
    /// Finished calls, sent when the group ends.
    #[expect(clippy::vec_box, reason = "calls move on to the envelope as boxes")]
    pub(crate) done: Vec<Box<CallState>>,
    call: Option<Box<CallState>>,
    word: String,
    word_at: usize,
    positional: usize,
    /// The reader of the value being read (`St::Value`), kept for its allocations.
    reader: Option<Reader>,
    /// `print(` wrappers open around the current call (Fence mode with a wrapper).
    wrappers: u8,
    /// Bracket depth of a list (`[`) in Fence and Inner mode; while skipping a rejected
    /// call, its bracket depth.
    depth: u32,
    /// Why the group is code, not calls.
    pub(crate) not_calls: Option<String>,
    max_depth: usize,
}

impl PyGroup {
    pub(crate) fn new(mode: Mode, max_depth: usize) -> PyGroup {
        PyGroup {
            mode,
            st: if mode == Mode::List { St::ListOpen } else { St::Start { line_start: true } },
            done: Vec::new(),
            call: None,
            word: String::new(),
            word_at: 0,
            positional: 0,
            reader: None,
            wrappers: 0,
            depth: 0,
            not_calls: None,
            max_depth,
        }
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether a call was seen (finished or not).
    pub(crate) fn saw_call(&self) -> bool {
        !self.done.is_empty() || self.call.is_some()
    }

    fn code(&mut self, why: impl Into<String>) {
        if self.not_calls.is_none() {
            self.not_calls = Some(why.into());
        }
        self.st = St::Rest { line_start: false };
        self.depth = 0;
    }

    fn reject(&mut self, reason: String) {
        if let Some(call) = self.call.as_mut() {
            if !call.is_rejected() {
                let name = call.name.clone().unwrap_or_default();
                call.status = Status::Rejected { name, reason };
            }
        }
        self.reader = None;
        self.st = St::Skip { quote: Quoted::No };
        self.depth = 1;
    }

    fn begin_call(&mut self, at: usize, config: &Config) {
        let mut call = Box::new(CallState::new(self.word_at, self.max_depth));
        let mut name = std::mem::take(&mut self.word);
        // Llama 3.1 built-in tools: `brave_search.call(query="…")`.
        if let Some(tool) = name.strip_suffix(".call").filter(|tool| !tool.is_empty()) {
            name = tool.to_owned();
        }
        if let Some(tools) = &config.tools {
            if let Some(tool) = ToolSet::resolve_shared(tools, &name) {
                call.args.set_tool(tool);
            }
        }
        call.name = Some(name);
        call.args_seen = true;
        call.args.open(Frame::Object, at);
        self.call = Some(call);
        self.positional = 0;
        self.st = St::ArgStart;
    }

    fn end_call(&mut self, end: usize) {
        if let Some(mut call) = self.call.take() {
            // Python's own literals are not repairs.
            call.args.notes.retain(
                |note| !matches!(note, ArgsNote::Repaired(what) if PYTHON_SYNTAX.contains(what)),
            );
            if call.args.canon.depth() > 0 {
                call.args.close(end);
            }
            self.done.push(call);
        }
        self.st = St::Close;
    }

    /// The key for the next positional argument, from the tool's schema.
    fn positional_key(&mut self) -> Option<String> {
        let call = self.call.as_ref()?;
        let key = call.args.tool()?.param_names().get(self.positional)?.clone();
        self.positional += 1;
        Some(key)
    }

    fn start_value(&mut self) {
        let mut reader = self.reader.take().unwrap_or_else(|| Reader::new_value(self.max_depth));
        reader.recycle_value(self.max_depth);
        self.reader = Some(reader);
        self.st = St::Value;
    }

    /// Writes a bare word value (already keyed): a literal, or else the group is code.
    fn word_value(&mut self, key: Option<&str>) {
        let json = match self.word.as_str() {
            "True" | "true" => Some("true"),
            "False" | "false" => Some("false"),
            "None" | "null" => Some("null"),
            _ => None,
        };
        match (json, self.call.as_mut()) {
            (Some(json), Some(call)) => {
                if let Some(key) = key {
                    call.args.key(key);
                }
                call.args.scalar(json);
            }
            _ => {
                let word = std::mem::take(&mut self.word);
                self.code(format!("`{word}` is a variable, not a value"));
            }
        }
        self.word.clear();
    }

    /// After a value written from a word: the next argument, unless the word made the
    /// group code.
    fn after_word_value(&mut self) {
        if !matches!(self.st, St::Rest { .. }) {
            self.st = St::AfterValue;
        }
    }

    /// Starts a (dotted) name at `at`.
    fn begin_name(&mut self, at: usize) {
        self.word.clear();
        self.word_at = at;
        self.st = St::Name;
    }

    /// Reads as far as `rest` allows. `abs` is the absolute offset of `rest`.
    pub(crate) fn step(&mut self, rest: &str, abs: usize, config: &Config, eof: bool) -> Step {
        let bytes = rest.as_bytes();
        let mut i = 0;
        loop {
            let flow = if self.st == St::Value {
                self.value(rest, abs, &mut i)
            } else {
                let Some(&b) = bytes.get(i) else { break };
                match self.st {
                    St::ListOpen | St::Start { .. } => {
                        self.start(b, rest, abs, &mut i, config, eof)
                    }
                    St::Name | St::Open => self.name(b, abs, &mut i, config),
                    St::ArgStart
                    | St::ArgWord
                    | St::AfterArgWord
                    | St::ValueStart
                    | St::ValueWord
                    | St::AfterValue => self.argument(b, bytes, abs, &mut i, config, eof),
                    St::Skip { quote } => self.skip(b, quote, abs, &mut i),
                    St::Close => self.close(b, bytes, &mut i, eof),
                    St::Comment => self.comment(bytes, &mut i),
                    St::Rest { line_start } => self.rest(b, bytes, line_start, &mut i, eof),
                    St::Value => Flow::Next,
                }
            };
            match flow {
                Flow::Next => {}
                Flow::Stop => break,
                Flow::End(n) => return Ok(Took::End(n)),
            }
        }
        if i == 0 { Err(Need) } else { Ok(Took::Go(i)) }
    }

    /// A value read by the JSON reader in value mode (Python literals).
    fn value(&mut self, rest: &str, abs: usize, i: &mut usize) -> Flow {
        let (Some(reader), Some(call)) = (self.reader.as_mut(), self.call.as_mut()) else {
            self.st = St::AfterValue;
            return Flow::Next;
        };
        let input = rest.get(*i..).unwrap_or_default();
        if input.is_empty() {
            return Flow::Stop;
        }
        if !reader.has_begun() && input.starts_with('{') {
            // A set literal (`{"a", "b"}`) is a JSON array.
            match set_literal_len(input) {
                Err(Need) => return Flow::Stop,
                Ok(Some(len)) => {
                    let inner = input.get(1..len - 1).unwrap_or_default();
                    let _ = reader.feed("[", abs + *i, &mut call.args);
                    let _ = reader.feed(inner, abs + *i + 1, &mut call.args);
                    let status = reader.feed("]", abs + *i + len - 1, &mut call.args);
                    *i += len;
                    self.st = St::AfterValue;
                    if !matches!(status, ReadStatus::Done(_)) {
                        self.reject("an argument is not a Python literal".into());
                    }
                    return Flow::Next;
                }
                Ok(None) => {}
            }
        }
        match reader.feed(input, abs + *i, &mut call.args) {
            ReadStatus::NeedMore => {
                *i = rest.len();
                return Flow::Stop;
            }
            ReadStatus::Done(n) => {
                *i += n;
                self.st = St::AfterValue;
            }
            ReadStatus::Invalid(k) => {
                *i += k;
                if reader.complete() {
                    self.st = St::AfterValue;
                } else {
                    self.reject("an argument is not a Python literal".into());
                }
            }
        }
        Flow::Next
    }

    /// Before a call (or before a list's `[`).
    fn start(
        &mut self,
        b: u8,
        rest: &str,
        abs: usize,
        i: &mut usize,
        config: &Config,
        eof: bool,
    ) -> Flow {
        let bytes = rest.as_bytes();
        let line_start = matches!(self.st, St::Start { line_start: true });
        if line_start && b == b'`' {
            if let Mode::Fence { .. } = self.mode {
                let n = bytes.iter().skip(*i).take(3).take_while(|&&c| c == b'`').count();
                if n == 3 {
                    return Flow::End(*i + 3);
                }
                if *i + n == bytes.len() && !eof {
                    return Flow::Stop;
                }
                self.code("a fence line is not a call");
                self.st = St::Rest { line_start: true };
                return Flow::Next;
            }
        }
        match b {
            b'\n' => {
                *i += 1;
                if self.mode == Mode::Line {
                    return Flow::End(*i - 1);
                }
                if let St::Start { .. } = self.st {
                    self.st = St::Start { line_start: true };
                }
                return Flow::Next;
            }
            _ if b.is_ascii_whitespace() => {
                *i += 1;
                return Flow::Next;
            }
            _ => {}
        }
        if self.st == St::ListOpen {
            if b == b'[' {
                self.st = St::Start { line_start: false };
                *i += 1;
            } else {
                self.code("not a list");
            }
            return Flow::Next;
        }
        self.st = St::Start { line_start: false };
        match (self.mode, b) {
            (Mode::List, b']') | (Mode::Inner, b']') if self.depth == 0 => {
                return Flow::End(*i + usize::from(self.mode == Mode::List));
            }
            (Mode::Inner | Mode::Fence { .. }, b']') if self.depth > 0 => {
                self.depth -= 1;
                *i += 1;
            }
            (Mode::Inner | Mode::Fence { .. }, b'[') => {
                self.depth += 1;
                *i += 1;
            }
            (Mode::List | Mode::Inner, b',' | b';') => *i += 1,
            (Mode::Fence { .. }, b',') if self.depth > 0 => *i += 1,
            (Mode::Fence { .. }, b'#') => self.st = St::Comment,
            (Mode::Inner, _) => {
                match call_ahead(rest.get(*i..).unwrap_or_default(), eof, config, false) {
                    Ok(Some(())) => self.begin_name(abs + *i),
                    Err(Need) => return Flow::Stop,
                    Ok(None) => return Flow::End(*i),
                }
            }
            (_, _) if is_name_start(b) => self.begin_name(abs + *i),
            _ => self.code("a line that is not a call"),
        }
        Flow::Next
    }

    /// A call's (dotted) name, then its `(`.
    fn name(&mut self, b: u8, abs: usize, i: &mut usize, config: &Config) -> Flow {
        if self.st == St::Name {
            if is_name_byte(b) {
                if self.word.len() >= MAX_NAME {
                    self.code("a name that is too long");
                    return Flow::Next;
                }
                self.word.push(char::from(b));
                *i += 1;
            } else {
                self.st = St::Open;
            }
            return Flow::Next;
        }
        match b {
            b' ' | b'\t' => *i += 1,
            b'(' => {
                let wrapper = matches!(self.mode, Mode::Fence { wrapper: Some(w) } if self.word == w)
                    && self.wrappers == 0
                    && self.call.is_none();
                if wrapper {
                    self.wrappers += 1;
                    self.word.clear();
                    self.st = St::Start { line_start: false };
                    *i += 1;
                } else if NOT_TOOLS.contains(&self.word.as_str()) && !declared(config, &self.word) {
                    let word = std::mem::take(&mut self.word);
                    self.code(format!("`{word}(…)` is code, not a tool call"));
                } else {
                    self.begin_call(abs + *i, config);
                    *i += 1;
                }
            }
            _ => {
                let word = std::mem::take(&mut self.word);
                self.code(format!("`{word}` begins a statement that is not a call"));
            }
        }
        Flow::Next
    }

    /// The argument list: keywords, positional values, words as values.
    fn argument(
        &mut self,
        b: u8,
        bytes: &[u8],
        abs: usize,
        i: &mut usize,
        config: &Config,
        eof: bool,
    ) -> Flow {
        match self.st {
            St::ArgStart => match b {
                _ if b.is_ascii_whitespace() => *i += 1,
                b')' => {
                    *i += 1;
                    self.end_call(abs + *i);
                }
                b'*' => self.code("`*` arguments are code, not literals"),
                _ if is_name_start(b) => {
                    self.word.clear();
                    self.st = St::ArgWord;
                }
                _ => match self.positional_key() {
                    Some(key) => {
                        if let Some(call) = self.call.as_mut() {
                            call.args.key(&key);
                        }
                        self.start_value();
                    }
                    // Without a tool list this may be any code; with one, it is a
                    // call to a tool whose schema does not name its parameters.
                    None if config.tools.is_none() => {
                        self.code("positional arguments, and no schema names them");
                    }
                    None => self
                        .reject("a positional argument, and no schema names the parameters".into()),
                },
            },
            St::ArgWord | St::ValueWord if is_name_byte(b) && self.word.len() < MAX_NAME => {
                self.word.push(char::from(b));
                *i += 1;
            }
            St::ArgWord => self.st = St::AfterArgWord,
            St::AfterArgWord => match b {
                b' ' | b'\t' | b'\n' | b'\r' => *i += 1,
                b'=' => {
                    if bytes.get(*i + 1).is_none() && !eof {
                        return Flow::Stop;
                    }
                    if bytes.get(*i + 1) == Some(&b'=') {
                        self.code("a comparison is code, not a value");
                        return Flow::Next;
                    }
                    let key = std::mem::take(&mut self.word);
                    if let Some(call) = self.call.as_mut() {
                        call.args.key(&key);
                    }
                    *i += 1;
                    self.st = St::ValueStart;
                }
                b'(' => {
                    let word = std::mem::take(&mut self.word);
                    self.reject(format!("the call `{word}(…)` is used as an argument value"));
                }
                _ => {
                    match self.positional_key() {
                        Some(key) => self.word_value(Some(&key)),
                        None => {
                            let word = std::mem::take(&mut self.word);
                            self.code(format!("`{word}` is a variable, not a value"));
                        }
                    }
                    self.after_word_value();
                }
            },
            St::ValueStart => match b {
                b' ' | b'\t' | b'\n' | b'\r' => *i += 1,
                _ if is_name_start(b) => {
                    self.word.clear();
                    self.st = St::ValueWord;
                }
                _ => self.start_value(),
            },
            St::ValueWord if b == b'(' => {
                let word = std::mem::take(&mut self.word);
                self.reject(format!("the call `{word}(…)` is used as an argument value"));
            }
            St::ValueWord => {
                self.word_value(None);
                self.after_word_value();
            }
            St::AfterValue => match b {
                _ if b.is_ascii_whitespace() => *i += 1,
                b',' => {
                    *i += 1;
                    self.st = St::ArgStart;
                }
                b')' => {
                    *i += 1;
                    self.end_call(abs + *i);
                }
                _ => self.reject("an argument is not a Python literal".into()),
            },
            _ => {}
        }
        Flow::Next
    }

    /// A rejected call, skipped to its closing bracket (strings respected).
    fn skip(&mut self, b: u8, quote: Quoted, abs: usize, i: &mut usize) -> Flow {
        *i += 1;
        let quote = match (quote, b) {
            (Quoted::Escaped(q), _) => Quoted::In(q),
            (Quoted::In(q), b'\\') => Quoted::Escaped(q),
            (Quoted::In(q), _) if q == b => Quoted::No,
            (Quoted::In(q), _) => Quoted::In(q),
            (Quoted::No, b'"' | b'\'') => Quoted::In(b),
            (Quoted::No, b'(' | b'[' | b'{') => {
                self.depth += 1;
                Quoted::No
            }
            (Quoted::No, b')' | b']' | b'}') => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.end_call(abs + *i);
                    return Flow::Next;
                }
                Quoted::No
            }
            (Quoted::No, _) => Quoted::No,
        };
        self.st = St::Skip { quote };
        Flow::Next
    }

    /// After a call's `)`: a wrapper's `)`, a separator, the end of the line or list.
    fn close(&mut self, b: u8, bytes: &[u8], i: &mut usize, eof: bool) -> Flow {
        if self.wrappers > 0 {
            match b {
                b' ' | b'\t' => *i += 1,
                b')' => {
                    self.wrappers -= 1;
                    *i += 1;
                }
                _ => self.code("`print(…)` holds more than a call"),
            }
            return Flow::Next;
        }
        match (self.mode, b) {
            (Mode::Fence { .. }, b',' | b']') if self.depth > 0 => {
                self.st = St::Start { line_start: false };
            }
            (Mode::Line | Mode::Fence { .. }, b' ' | b'\t' | b';' | b'\r') => *i += 1,
            (Mode::Line | Mode::Fence { .. }, b'#') => self.st = St::Comment,
            (Mode::Line, b'\n') => return Flow::End(*i),
            (Mode::Fence { .. }, b'\n') => self.st = St::Start { line_start: false },
            (Mode::Line | Mode::Fence { .. }, _) => self.code("the line goes on after the call"),
            (Mode::List, _) if b.is_ascii_whitespace() => *i += 1,
            (Mode::List, b',') => {
                *i += 1;
                self.st = St::Start { line_start: false };
            }
            (Mode::List, b']') => match bytes.get(*i + 1) {
                None if !eof => return Flow::Stop,
                // `[f()](url)` is a Markdown link.
                Some(b'(') => self.code("a Markdown link, not a list of calls"),
                _ => return Flow::End(*i + 1),
            },
            (Mode::List, _) => self.code("the list holds more than calls"),
            (Mode::Inner, _) => self.st = St::Start { line_start: false },
        }
        Flow::Next
    }

    /// A `#` comment, to the end of the line.
    fn comment(&mut self, bytes: &[u8], i: &mut usize) -> Flow {
        match memchr::memchr(b'\n', bytes.get(*i..).unwrap_or_default()) {
            Some(n) => {
                *i += n;
                if self.mode == Mode::Line {
                    return Flow::End(*i);
                }
                self.st = St::Start { line_start: false };
                Flow::Next
            }
            None => {
                *i = bytes.len();
                Flow::Stop
            }
        }
    }

    /// Code, not calls: skipped to the group's end (the line, the list, the fence).
    fn rest(&mut self, b: u8, bytes: &[u8], line_start: bool, i: &mut usize, eof: bool) -> Flow {
        match self.mode {
            Mode::Inner => Flow::End(*i),
            Mode::Line | Mode::List => {
                match memchr::memchr(b'\n', bytes.get(*i..).unwrap_or_default()) {
                    Some(n) => Flow::End(*i + n),
                    None => {
                        *i = bytes.len();
                        Flow::Stop
                    }
                }
            }
            Mode::Fence { .. } => {
                // Lines until the closing fence.
                if line_start && (b == b' ' || b == b'\t') {
                    *i += 1;
                    return Flow::Next;
                }
                if line_start && b == b'`' {
                    let n = bytes.iter().skip(*i).take(3).take_while(|&&c| c == b'`').count();
                    if n == 3 {
                        return Flow::End(*i + 3);
                    }
                    if *i + n == bytes.len() && !eof {
                        return Flow::Stop;
                    }
                }
                match memchr::memchr(b'\n', bytes.get(*i..).unwrap_or_default()) {
                    Some(n) => {
                        *i += n + 1;
                        self.st = St::Rest { line_start: true };
                        Flow::Next
                    }
                    None => {
                        *i = bytes.len();
                        self.st = St::Rest { line_start: false };
                        Flow::Stop
                    }
                }
            }
        }
    }

    /// The input ended (or the region was cut) at `end`: closes what is open.
    pub(crate) fn finish(&mut self, end: usize) {
        if let Some(mut call) = self.call.take() {
            if let Some(mut reader) = self.reader.take() {
                reader.finish(end, &mut call.args);
            }
            call.cut_off(Cut::Value);
            self.done.push(call);
        }
    }
}

fn declared(config: &Config, name: &str) -> bool {
    config.tools.as_ref().is_some_and(|tools| tools.resolve(name).is_some())
}

/// The length of a Python set literal at the start of `input` (which starts with `{`):
/// braces with no `:` at their top level. `None` for a dict, `{}` (an empty dict) or a set
/// longer than [`MAX_SET`].
fn set_literal_len(input: &str) -> Look<usize> {
    let bytes = input.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().take(MAX_SET) {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == q {
                quote = None;
            }
            continue;
        }
        match b {
            b'\'' | b'"' => quote = Some(b),
            b'{' | b'[' | b'(' => depth += 1,
            b'}' | b']' | b')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(if i == 1 { None } else { Some(i + 1) });
                }
            }
            b':' if depth == 1 => return Ok(None),
            _ => {}
        }
    }
    if bytes.len() >= MAX_SET { Ok(None) } else { Err(Need) }
}

/// The longest set literal read (a longer one is left to the JSON reader).
const MAX_SET: usize = 4096;
