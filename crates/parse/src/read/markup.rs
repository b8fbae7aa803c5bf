//! Markup dialects and fences: how a region is opened, walked and closed.
//!
//! Recognized: `<tool_call>`, `<function_call>`, `<tools>`, `<tool_calls>`,
//! `<function_calls>` around JSON envelopes or call elements; `<invoke name="…">`
//! with `<parameter name="…">…</parameter>`; `<func_call name="…">` with
//! `<param name="…" value="…"/>`; `<func_name>…</func_name>` followed by
//! `<param name="…">…</param>`; `<function=NAME>` and `<function name="NAME">`
//! with a JSON body or parameters; nested fields `<name>…</name>` and
//! `<arguments>{…}</arguments>`; Markdown fences around any of these.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use crate::dialect::{Dialect, Entry, TagPair};
use crate::engine::call::CallState;
use crate::engine::settle::{Ctx, Decision};
use crate::engine::step::{Look, Need, Step, Took};
use crate::json::canon::canonical_json;
use crate::json::reader::{Frame as JsonFrame, Reader, Sink, Status};
use crate::read::envelope::Origin;
use crate::read::native;
use crate::read::python::{self, Ahead, Mode as PyMode, PyGroup, PyStep};
use crate::read::{Body, Until};
use crate::tools::ParamType;
use crate::{Builtin, Config, WarningCode};

/// Container tags: they hold calls (JSON envelopes or call elements), or act as one call.
const CONTAINERS: &[&str] = &[
    "calls",
    "dots_function_call",
    "tool_call",
    "toolcall",
    "tool_calls",
    "function_call",
    "function_calls",
    "tools",
    "tool_use",
];
/// Call elements that carry the tool name in an attribute.
const CALL_ELEMENTS: &[&str] = &["invoke", "func_call", "function", "tool", "call"];
const PARAMS: &[&str] = &["parameter", "param", "arg", "argument"];
/// GLM's key/value pairs (`<arg_key>city</arg_key><arg_value>Paris</arg_value>`) and
/// Hunyuan's separator after the name. K2 Horizon adds `<arg_type>string</arg_type>`
/// between them.
const KEY_VALUE: &[&str] = &["arg_key", "arg_type", "arg_value", "tool_sep"];
const NAME_FIELDS: &[&str] = &["name", "tool_name", "function_name"];
const ARGS_FIELDS: &[&str] = &["arguments", "parameters", "args", "input", "params"];
const FENCE_LABELS: &[&str] = &[
    "",
    "json",
    "json5",
    "jsonc",
    "xml",
    "tool_call",
    "tool_calls",
    "function_call",
    "tools",
    "action",
];
/// Fence labels whose body is Python (`{` after them is read as JSON).
const PYTHON_LABELS: &[&str] = &["python", "py", "python3", "tool_code"];

/// Names that open a region in plain text besides the containers (`<tool_use>` is a
/// container only inside markup).
const OTHER_OPENERS: &[&str] = &["invoke", "func_call", "func_name", "function"];

fn is_opener(name: &str) -> bool {
    (CONTAINERS.contains(&name) && name != "tool_use") || OTHER_OPENERS.contains(&name)
}

pub(crate) enum Opener {
    /// A bare `{` or `[`.
    Json,
    /// A fence opener line, this many bytes long.
    Fence(usize),
    /// A Python fence opener line, this many bytes long.
    PyFence { len: usize, tool_code: bool },
    /// A markup tag (read again by `Region::begin`, from the same bytes).
    Tag,
    /// Python calls: a list, or a call alone on its line.
    Python(PyMode),
    /// A labelled call (`Action:` … `Action Input:`); the name is at `name` within
    /// the opener, which is `len` bytes long.
    Labelled { name: Range<usize>, len: usize },
    /// The start marker of the registry entry with this index.
    Marker(usize),
}

impl Opener {
    /// Whether the example guard may take the region for an example: a bracket, a
    /// fence or a Python line may be one; markup, markers and labels are calls.
    pub(crate) fn is_guarded(&self) -> bool {
        match self {
            Opener::Json | Opener::Fence(_) | Opener::PyFence { .. } | Opener::Python(_) => true,
            Opener::Tag | Opener::Labelled { .. } | Opener::Marker(_) => false,
        }
    }
}

/// A tag as read from the input.
struct Tag<'a> {
    closing: bool,
    name: &'a str,
    /// The value after `=` in `<function=NAME>`.
    eq: Option<&'a str>,
    attrs: &'a str,
    self_closing: bool,
    len: usize,
    /// A closing tag whose `>` is missing.
    unfinished: bool,
}

impl<'a> Tag<'a> {
    /// A closing tag whose `>` is missing (`</tool_call` at the end of the output).
    fn unfinished_close(name: &'a str, len: usize) -> Tag<'a> {
        Tag { closing: true, name, eq: None, attrs: "", self_closing: false, len, unfinished: true }
    }
}

enum TagMatch<'a> {
    Tag(Tag<'a>),
    NeedMore,
    No,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.')
}

const MAX_TAG: usize = 1024;
/// Longer than any opener name: look-ahead for a tag name stops here.
const MAX_NAME: usize = 32;
/// The longest value in `<function=NAME>`.
const MAX_EQ: usize = 256;
/// The longest fence opener line ("```" + label + spaces).
const MAX_FENCE_LINE: usize = 40;
/// The most whitespace between a fence opener and what it holds.
const MAX_FENCE_GAP: usize = 64;

/// Namespace-like prefixes some models put inside `<`: DeepSeek's `｜DSML｜` (with a
/// space after it in V4.1), GigaChat's `｜GCML｜` and K2 Horizon's `ifm|`.
const TAG_PREFIXES: &[&str] = &["｜DSML｜ ", "｜DSML｜", "｜GCML｜", "ifm|"];

/// The length of a tag-name prefix at the start of `s` (0 when there is none), or
/// `None` when `s` may still become one.
fn tag_prefix(s: &str, eof: bool) -> Option<usize> {
    // Every prefix starts with `｜` (0xEF 0xBD 0x9C) or `i`.
    if !matches!(s.as_bytes().first(), Some(&(0xEF | b'i'))) {
        return Some(0);
    }
    for prefix in TAG_PREFIXES {
        if s.starts_with(prefix) {
            // `｜DSML｜` may be followed by a space still to come.
            if !eof && prefix.ends_with('｜') && s.len() == prefix.len() {
                return None;
            }
            return Some(prefix.len());
        }
        if !eof && s.len() < prefix.len() && prefix.starts_with(s) && !s.is_empty() {
            return None;
        }
    }
    Some(0)
}

/// A tag name without its namespace: `seed:tool_call` → `tool_call`.
fn local_name(name: &str) -> &str {
    // Names are short: a plain loop beats a call to `memrchr`.
    match name.bytes().rposition(|b| b == b':') {
        Some(at) => name.get(at + 1..).unwrap_or(name),
        None => name,
    }
}

/// Kimi K3's tag syntax: `<|open|>NAME attrs<|sep|>` and `<|close|>NAME<|sep|>`.
const XTML_OPEN: &str = "<|open|>";
const XTML_CLOSE: &str = "<|close|>";
const XTML_SEP: &str = "<|sep|>";

/// Reads a Kimi K3 tag at the start of `s` (which starts with `<|`).
fn read_xtml(s: &str, eof: bool) -> TagMatch<'_> {
    let closing = if s.starts_with(XTML_OPEN) {
        false
    } else if s.starts_with(XTML_CLOSE) {
        true
    } else {
        let partial = |m: &str| s.len() < m.len() && m.starts_with(s);
        return if !eof && (partial(XTML_OPEN) || partial(XTML_CLOSE)) {
            TagMatch::NeedMore
        } else {
            TagMatch::No
        };
    };
    let start = if closing { XTML_CLOSE.len() } else { XTML_OPEN.len() };
    let b = s.as_bytes();
    let mut i = start;
    while b.get(i).is_some_and(|&c| is_name_byte(c)) {
        i += 1;
        if i - start > MAX_NAME {
            return TagMatch::No;
        }
    }
    let name = s.get(start..i).unwrap_or_default();
    // Attributes up to `<|sep|>`, respecting quotes.
    let attrs_start = i;
    match attrs_end(b, i, false) {
        AttrsEnd::At(i, b'<') => {
            let rest = s.get(i..).unwrap_or_default();
            if rest.starts_with(XTML_SEP) {
                let attrs = s.get(attrs_start..i).unwrap_or_default();
                if name.is_empty() || (!attrs.is_empty() && !attrs.starts_with(char::is_whitespace))
                {
                    return TagMatch::No;
                }
                return TagMatch::Tag(Tag {
                    closing,
                    name,
                    eq: None,
                    attrs: attrs.trim_end(),
                    self_closing: false,
                    len: i + XTML_SEP.len(),
                    unfinished: false,
                });
            }
            if !eof && rest.len() < XTML_SEP.len() && XTML_SEP.starts_with(rest) {
                return TagMatch::NeedMore;
            }
            TagMatch::No
        }
        AttrsEnd::More(_) if !eof => TagMatch::NeedMore,
        _ => TagMatch::No,
    }
}

/// Where a tag's attributes end.
enum AttrsEnd {
    /// At this offset, a `<`, `>` or `\n` outside quotes.
    At(usize, u8),
    /// The input ran out at this offset.
    More(usize),
    /// Longer than any tag.
    TooLong,
}

/// Scans attributes from `from`, respecting quotes, to the first `<` or `>` (or, with
/// `newline`, `\n`) outside them.
fn attrs_end(b: &[u8], from: usize, newline: bool) -> AttrsEnd {
    let mut i = from;
    let mut quote: Option<u8> = None;
    while let Some(&c) = b.get(i) {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(c),
            (None, b'<' | b'>') => return AttrsEnd::At(i, c),
            (None, b'\n') if newline => return AttrsEnd::At(i, c),
            _ => {}
        }
        i += 1;
        if i > MAX_TAG {
            return AttrsEnd::TooLong;
        }
    }
    AttrsEnd::More(i)
}

/// Reads a tag at the start of `s` (which starts with `<`).
fn read_tag(s: &str, eof: bool) -> TagMatch<'_> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'|') {
        return read_xtml(s, eof);
    }
    let mut i = 1;
    let closing = b.get(1) == Some(&b'/');
    if closing {
        i += 1;
    }
    match tag_prefix(s.get(i..).unwrap_or_default(), eof) {
        Some(len) => i += len,
        None => return TagMatch::NeedMore,
    }
    let name_start = i;
    while b.get(i).is_some_and(|&c| is_name_byte(c)) {
        i += 1;
        if i - name_start > MAX_NAME {
            return TagMatch::No;
        }
    }
    let name = local_name(s.get(name_start..i).unwrap_or_default());
    if i >= b.len() {
        return if eof {
            if closing && !name.is_empty() {
                TagMatch::Tag(Tag::unfinished_close(name, i))
            } else {
                TagMatch::No
            }
        } else {
            TagMatch::NeedMore
        };
    }
    if name.is_empty() {
        return TagMatch::No;
    }
    let mut eq = None;
    if !closing && b.get(i) == Some(&b'=') {
        let start = i + 1;
        let mut j = start;
        // Limits are checked before the byte, so the answer never depends on where
        // the buffer happened to end.
        while j - start < MAX_EQ && b.get(j).is_some_and(|&c| c != b'>' && c != b'<' && c != b'\n')
        {
            j += 1;
        }
        if j - start >= MAX_EQ {
            return TagMatch::No;
        }
        match b.get(j) {
            Some(b'>') => {
                let value = s.get(start..j).unwrap_or_default().trim().trim_matches(['"', '\'']);
                eq = Some(value);
                return TagMatch::Tag(Tag {
                    closing,
                    name,
                    eq,
                    attrs: "",
                    self_closing: false,
                    len: j + 1,
                    unfinished: false,
                });
            }
            None if !eof => return TagMatch::NeedMore,
            _ => return TagMatch::No,
        }
    }
    // Attributes up to `>`, respecting quotes.
    let attrs_start = i;
    let i = match attrs_end(b, i, closing) {
        AttrsEnd::At(i, b'>') => {
            let raw = s.get(attrs_start..i).unwrap_or_default();
            let self_closing = raw.trim_end().ends_with('/');
            let attrs = raw.trim_end().trim_end_matches('/');
            if !attrs.is_empty() && !attrs.starts_with(char::is_whitespace) {
                return TagMatch::No;
            }
            return TagMatch::Tag(Tag {
                closing,
                name,
                eq,
                attrs,
                self_closing,
                len: i + 1,
                unfinished: false,
            });
        }
        AttrsEnd::At(i, b'\n') => i,
        AttrsEnd::More(i) => i,
        AttrsEnd::At(..) | AttrsEnd::TooLong => return TagMatch::No,
    };
    if closing && (eof || b.get(i) == Some(&b'\n')) {
        return TagMatch::Tag(Tag::unfinished_close(name, i));
    }
    if eof { TagMatch::No } else { TagMatch::NeedMore }
}

/// The value of attribute `key` in `attrs`, entities decoded.
fn attr(attrs: &str, key: &str) -> Option<String> {
    let b = attrs.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        let start = i;
        while b.get(i).is_some_and(|&c| is_name_byte(c)) {
            i += 1;
        }
        let name = attrs.get(start..i).unwrap_or_default();
        if name.is_empty() {
            i += 1;
            continue;
        }
        while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        if b.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        let (value, next) = match b.get(i) {
            Some(&q @ (b'"' | b'\'')) => {
                let vstart = i + 1;
                let mut j = vstart;
                while b.get(j).is_some_and(|&c| c != q) {
                    j += 1;
                }
                (attrs.get(vstart..j).unwrap_or_default(), j + 1)
            }
            _ => {
                let vstart = i;
                let mut j = i;
                while b.get(j).is_some_and(|c| !c.is_ascii_whitespace()) {
                    j += 1;
                }
                (attrs.get(vstart..j).unwrap_or_default(), j)
            }
        };
        if name == key {
            return Some(decode_entities(value));
        }
        i = next;
    }
    None
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    text.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The tool name a tag carries (`<function=NAME>`, `<invoke name="NAME">`), if not empty.
fn tool_name_of(tag: &Tag<'_>) -> Option<String> {
    tag.eq
        .map(str::to_owned)
        .or_else(|| attr(tag.attrs, "name"))
        .or_else(|| attr(tag.attrs, "tool").filter(|_| tag.name == "call"))
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
}

fn is_prefix_of_any(partial: &str, names: &[&str]) -> bool {
    names.iter().any(|name| name.starts_with(partial))
}

/// Decides what plain text at a trigger byte starts, trying the dialects in the
/// registry's order. An earlier dialect that cannot decide yet holds the text.
pub(crate) fn open(rest: &str, eof: bool, config: &Config, heads: &[[u8; 2]]) -> Look<Opener> {
    let Some(&b) = rest.as_bytes().first() else { return Ok(None) };
    let second = rest.as_bytes().get(1).copied();
    let markers =
        heads.iter().any(|h| h[0] == b && (h[1] == 0 || second.is_none_or(|c| c == h[1])));
    let mut need_more = false;
    for (idx, entry) in config.dialects.entries().iter().enumerate() {
        let found = match entry {
            Entry::Pair(_) | Entry::Native(..) | Entry::Custom(_) => {
                if !markers {
                    continue;
                }
                let Some(marker) = entry.start_marker() else { continue };
                // Most markers share at most their first byte with the text: compare two
                // bytes before the whole marker.
                let second = rest.as_bytes().get(1);
                if marker.as_bytes().first() != Some(&b)
                    || second.is_some_and(|c| marker.as_bytes().get(1) != Some(c))
                {
                    continue;
                }
                if rest.starts_with(marker) {
                    Ok(Some(Opener::Marker(idx)))
                } else if !eof && rest.len() < marker.len() && marker.starts_with(rest) {
                    Err(Need)
                } else {
                    Ok(None)
                }
            }
            Entry::Builtin(Builtin::Markup) if b == b'<' => open_markup(rest, eof),
            Entry::Builtin(Builtin::Fenced) if b == b'`' => open_fence(rest, eof, config),
            Entry::Builtin(Builtin::Json) if b == b'{' || b == b'[' => Ok(Some(Opener::Json)),
            Entry::Builtin(Builtin::Python) if b == b'[' => {
                match python::list_ahead(rest, eof, config) {
                    Ahead::Yes => Ok(Some(Opener::Python(PyMode::List))),
                    Ahead::NeedMore => Err(Need),
                    Ahead::No => Ok(None),
                }
            }
            Entry::Builtin(_) => continue,
        };
        match found {
            Ok(None) => {}
            Err(Need) => need_more = true,
            found if need_more => {
                let _ = found;
                return Err(Need);
            }
            found => return found,
        }
    }
    if need_more { Err(Need) } else { Ok(None) }
}

/// Tool-call markup at a `<`.
fn open_markup(rest: &str, eof: bool) -> Look<Opener> {
    let b = rest.as_bytes();
    if b.get(1) == Some(&b'|') || (b.len() == 1 && !eof) {
        if b.len() == 1 {
            return Err(Need);
        }
        return match read_xtml(rest, eof) {
            TagMatch::NeedMore => Err(Need),
            TagMatch::Tag(tag) if !tag.closing && is_opener(tag.name) => Ok(Some(Opener::Tag)),
            _ => Ok(None),
        };
    }
    let Some(prefix) = tag_prefix(rest.get(1..).unwrap_or_default(), eof) else {
        return Err(Need);
    };
    let start = 1 + prefix;
    // Decide early for ordinary `<` so text is not held.
    let name_len = b.iter().skip(start).take(MAX_NAME).take_while(|&&c| is_name_byte(c)).count();
    let full = rest.get(start..start + name_len).unwrap_or_default();
    let partial = local_name(full);
    if start + name_len >= b.len() {
        // A name still growing may gain a namespace (`<seed:tool_call>`).
        let could_grow = partial.len() < MAX_NAME && !full.is_empty();
        let prefix_of_opener =
            is_prefix_of_any(partial, CONTAINERS) || is_prefix_of_any(partial, OTHER_OPENERS);
        return if !eof && (prefix_of_opener || could_grow) { Err(Need) } else { Ok(None) };
    }
    if !is_opener(partial) {
        return Ok(None);
    }
    match read_tag(rest, eof) {
        TagMatch::NeedMore => Err(Need),
        TagMatch::No => Ok(None),
        TagMatch::Tag(tag) if tag.closing => Ok(None),
        TagMatch::Tag(tag) => {
            let call_element = matches!(tag.name, "function" | "invoke" | "func_call");
            if call_element && tool_name_of(&tag).is_none() {
                return Ok(None);
            }
            Ok(Some(Opener::Tag))
        }
    }
}

/// A fence opener: "```label\n" followed by something that may be a call.
fn open_fence(rest: &str, eof: bool, config: &Config) -> Look<Opener> {
    let b = rest.as_bytes();
    // Bounded look-ahead: a long run of backticks must not be recounted per byte.
    let ticks = b.iter().take(4).take_while(|&&c| c == b'`').count();
    if ticks < 3 {
        return if ticks == b.len() && !eof { Err(Need) } else { Ok(None) };
    }
    if ticks > 3 {
        return Ok(None);
    }
    let mut i = 3;
    while i < MAX_FENCE_LINE
        && b.get(i).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        i += 1;
    }
    let label = rest.get(3..i).unwrap_or_default().to_ascii_lowercase();
    while i < MAX_FENCE_LINE && b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r') {
        i += 1;
    }
    // A second word: "```json action".
    let second = rest.get(i..).unwrap_or_default();
    if i > 3 + label.len() && !eof && second.len() < 6 && "action".starts_with(second) {
        return Err(Need);
    }
    if second.starts_with("action") && i > 3 + label.len() {
        i += "action".len();
        while i < MAX_FENCE_LINE && b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r')
        {
            i += 1;
        }
    }
    if i >= MAX_FENCE_LINE {
        return Ok(None);
    }
    match b.get(i) {
        None if !eof => return Err(Need),
        Some(b'\n') => i += 1,
        _ => return Ok(None),
    }
    let python = PYTHON_LABELS.contains(&label.as_str()) && config.dialects.has(Builtin::Python);
    if !FENCE_LABELS.contains(&label.as_str()) && !python {
        return Ok(None);
    }
    let line = i;
    while i - line < MAX_FENCE_GAP && b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    if i - line >= MAX_FENCE_GAP {
        return Ok(None);
    }
    match b.get(i) {
        Some(b'{' | b'<') => Ok(Some(Opener::Fence(line))),
        Some(b'[') if !python => Ok(Some(Opener::Fence(line))),
        Some(&c) if python && (c.is_ascii_alphabetic() || c == b'_' || c == b'#' || c == b'[') => {
            let tool_code = label == "tool_code";
            Ok(Some(Opener::PyFence { len: line, tool_code }))
        }
        None if !eof => Err(Need),
        _ => Ok(None),
    }
}

/// The open markup elements of a region, outermost first.
#[derive(Debug, Default)]
pub(crate) struct Markup {
    frames: Vec<Elem>,
    inner: Inner,
    /// The key of an `<arg_key>` waiting for its `<arg_value>`.
    key: Option<String>,
    /// The string flag an `<arg_type>` gave the next `<arg_value>`.
    key_string: Option<bool>,
}

impl Markup {
    /// Empties it, keeping its allocations.
    pub(crate) fn recycle(&mut self) {
        self.frames.clear();
        self.inner = Inner::Between;
        self.key = None;
    }
}

#[derive(Debug)]
enum Elem {
    Fence,
    /// `<tool_call>` and friends. Holds JSON envelopes or call elements, or acts as
    /// one call once a name field or a parameter shows up.
    Container {
        close: &'static str,
        at: usize,
        call: Option<Box<CallState>>,
    },
    /// A call whose name the markup gave. `close` is empty for `<func_name>` calls,
    /// which end at the first thing that is not a parameter.
    Call {
        close: &'static str,
        call: Option<Box<CallState>>,
    },
    /// `<arguments>`: JSON arguments of the enclosing call.
    ArgsField {
        close: &'static str,
    },
    /// A custom marker pair ([`crate::TagPair`]): ends at its end marker.
    Pair {
        close: Arc<TagPair>,
    },
}

#[derive(Debug, Default)]
enum Inner {
    #[default]
    Between,
    /// After a label like `Action Input:`: the arguments of `call` come next.
    LabelArgs { call: Box<CallState> },
    /// Plain-text arguments after a label, read to the end of the line.
    LabelText { call: Box<CallState>, text: String },
    /// The body of a custom dialect, read until its end marker.
    Custom { dialect: Arc<dyn Dialect>, body: String, at: usize },

    /// A parameter's raw value, read until `</close>`. `string` is an explicit type
    /// flag (DSML `string="true|false"`, a `type` attribute).
    Param { key: String, close: Cow<'static, str>, text: String, string: Option<bool> },
    /// A name field's text, read until `</close>`.
    Name { close: &'static str, text: String, func_name: bool, at: usize },
    /// An `<arg_key>`'s (or `<arg_type>`'s) text, read until its end tag.
    Key { text: String, close: &'static str },
}

fn norm(s: &str) -> impl Iterator<Item = u8> + '_ {
    s.bytes().filter(|c| *c != b'_' && *c != b'-').map(|c| c.to_ascii_lowercase())
}

/// Whether two tag names are the same, ignoring ASCII case, `_` and `-`.
fn same_name(a: &str, b: &str) -> bool {
    a == b || norm(a).eq(norm(b))
}

/// Whether two tag names mean the same element: [`same_name`], or one is the other
/// plus a final `s` (`</tool_calls>` for `<tool_call>`).
fn same_tag(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let plural_of = |long: &str, short: &str| {
        let count = norm(long).count();
        count == norm(short).count() + 1
            && norm(long).last() == Some(b's')
            && norm(long).take(count - 1).eq(norm(short))
    };
    norm(a).eq(norm(b)) || plural_of(a, b) || plural_of(b, a)
}

/// Every tag name the markup dialects use, so open elements can name their end tag
/// without an allocation.
fn static_name(name: &str) -> &'static str {
    [CONTAINERS, CALL_ELEMENTS, PARAMS, KEY_VALUE, NAME_FIELDS, ARGS_FIELDS, OTHER_OPENERS]
        .iter()
        .flat_map(|names| names.iter())
        .find(|known| **known == name)
        .copied()
        .unwrap_or("")
}

impl Elem {
    fn close_name(&self) -> Option<&str> {
        match self {
            Elem::Fence | Elem::Pair { .. } => None,
            Elem::Container { close, .. }
            | Elem::Call { close, .. }
            | Elem::ArgsField { close } => Some(close),
        }
    }
}

impl Body {
    /// Sets the region up for its opener; returns how many bytes the opener took.
    pub(crate) fn begin(
        &mut self,
        opener: Opener,
        rest: &str,
        abs: usize,
        ctx: &mut Ctx<'_, '_>,
    ) -> usize {
        match opener {
            Opener::Json => {
                self.env.begin_value(Origin::Bare, ctx);
                ctx.set_decision(Decision::Pending);
                self.start_reader(ctx.config().max_depth);
                0
            }
            Opener::Fence(len) => {
                ctx.set_decision(Decision::Pending);
                self.markup.frames.push(Elem::Fence);
                len
            }
            Opener::PyFence { len, tool_code } => {
                ctx.set_decision(Decision::Pending);
                self.markup.frames.push(Elem::Fence);
                self.python = Some(Box::new(PyGroup::new(
                    PyMode::Fence { tool_code },
                    ctx.config().max_depth,
                )));
                len
            }
            Opener::Python(mode) => {
                ctx.set_decision(Decision::Pending);
                self.python = Some(Box::new(PyGroup::new(mode, ctx.config().max_depth)));
                0
            }
            Opener::Labelled { name, len } => {
                ctx.markup();
                self.until = Until::Value;
                let mut call = ctx.open_call(abs);
                call.name = Some(crate::read::line::clean_name(rest.get(name).unwrap_or_default()));
                self.markup.inner = Inner::LabelArgs { call };
                len
            }
            Opener::Marker(idx) => {
                ctx.markup();
                match ctx.config().dialects.entries().get(idx) {
                    Some(Entry::Pair(pair) | Entry::Native(_, pair)) => {
                        self.markup.frames.push(Elem::Pair { close: Arc::clone(pair) });
                        pair.start.len()
                    }
                    Some(Entry::Custom(dialect)) => {
                        let len = dialect.start().len();
                        self.markup.inner = Inner::Custom {
                            dialect: Arc::clone(dialect),
                            body: String::new(),
                            at: abs,
                        };
                        len
                    }
                    _ => 0,
                }
            }
            Opener::Tag => {
                ctx.markup();
                // `open` found a complete opening tag here; reading it again gives the same.
                let TagMatch::Tag(tag) = read_tag(rest, false) else {
                    debug_assert!(false, "the opener tag could not be read again");
                    return 0;
                };
                self.open_tag(&tag, abs, ctx);
                tag.len
            }
        }
    }

    /// Starts reading a JSON value, reusing the last reader's allocations.
    fn start_reader(&mut self, max_depth: usize) {
        let mut reader = match self.spare.take() {
            Some(mut reader) => {
                reader.recycle(max_depth);
                reader
            }
            None => Reader::new(max_depth),
        };
        let token = self.markup.frames.iter().rev().find_map(|f| match f {
            Elem::Pair { close } => close.string_token,
            _ => None,
        });
        reader.set_string_token(token);
        self.json = Some(reader);
    }

    /// Opens a tag inside the region (or as its opener). Returns false when the
    /// tag does not belong to tool-call markup.
    fn open_tag(&mut self, tag: &Tag<'_>, at: usize, ctx: &mut Ctx<'_, '_>) -> bool {
        let opened = self.open_tag_inner(tag, at, ctx);
        if opened {
            // Tool-call markup (inside a fence, say) settles that this is call syntax.
            ctx.markup();
            if ctx.decision() == Decision::Pending {
                ctx.set_decision(Decision::Calls);
            }
        }
        opened
    }

    fn open_tag_inner(&mut self, tag: &Tag<'_>, at: usize, ctx: &mut Ctx<'_, '_>) -> bool {
        let name = tag.name;
        let named = tool_name_of(tag);
        if name == "func_name" {
            self.markup.inner =
                Inner::Name { close: static_name(name), text: String::new(), func_name: true, at };
            return true;
        }
        if PARAMS.contains(&name) && self.call_frame().is_some()
            || PARAMS.contains(&name) && self.container_can_call()
        {
            let key = tag
                .eq
                .map(str::to_owned)
                .or_else(|| attr(tag.attrs, "name"))
                .or_else(|| attr(tag.attrs, "key"))
                .unwrap_or_default();
            let string = match (attr(tag.attrs, "string"), attr(tag.attrs, "type")) {
                (Some(flag), _) => Some(flag == "true"),
                (None, Some(kind)) => Some(kind == "string" || kind == "str"),
                (None, None) => None,
            };
            if let Some(value) = attr(tag.attrs, "value").filter(|_| tag.self_closing) {
                self.write_param(&key, &value, string, at, ctx);
                return true;
            }
            if tag.self_closing {
                return true;
            }
            self.markup.inner =
                Inner::Param { key, close: static_name(name).into(), text: String::new(), string };
            return true;
        }
        if KEY_VALUE.contains(&name) && (self.container_can_call() || self.call_frame().is_some()) {
            match name {
                "arg_key" | "arg_type" if !tag.self_closing => {
                    self.markup.inner = Inner::Key { text: String::new(), close: static_name(name) }
                }
                "arg_value" if !tag.self_closing => {
                    let key = self.markup.key.take().unwrap_or_default();
                    let string = self.markup.key_string.take();
                    self.markup.inner = Inner::Param {
                        key,
                        close: "arg_value".into(),
                        text: String::new(),
                        string,
                    };
                }
                _ => {}
            }
            return true;
        }
        if NAME_FIELDS.contains(&name) && self.container_can_call() {
            self.markup.inner =
                Inner::Name { close: static_name(name), text: String::new(), func_name: false, at };
            return true;
        }
        if ARGS_FIELDS.contains(&name) && (self.container_can_call() || self.call_frame().is_some())
        {
            self.ensure_container_call(at, ctx);
            self.markup.frames.push(Elem::ArgsField { close: static_name(name) });
            return true;
        }
        let is_call_element = CALL_ELEMENTS.contains(&name) && named.is_some();
        let is_container = CONTAINERS.contains(&name) || (name == "function" && named.is_none());
        if is_call_element || (is_container && named.is_some()) {
            self.close_open_calls(at, ctx);
            let mut call = ctx.open_call(at);
            call.name = named;
            // Kimi K3 numbers its calls: `<|open|>call tool="…" index="1"<|sep|>`.
            call.id = attr(tag.attrs, "index").filter(|_| name == "call");
            ctx.resolve(&mut call);
            if tag.self_closing {
                ctx.finish_call(call);
                return true;
            }
            self.markup.frames.push(Elem::Call { close: static_name(name), call: Some(call) });
            return true;
        }
        if is_container {
            self.close_open_calls(at, ctx);
            self.markup.frames.push(Elem::Container { close: static_name(name), at, call: None });
            return true;
        }
        // MiniMax-M3: any other tag inside a call is a parameter named by the tag.
        if self.namespace_token().is_some() && !tag.self_closing && self.call_frame().is_some() {
            self.markup.inner = Inner::Param {
                key: name.to_owned(),
                close: Cow::Owned(name.to_owned()),
                text: String::new(),
                string: None,
            };
            return true;
        }
        false
    }

    /// The namespace token of the innermost pair that has one (MiniMax-M3's
    /// `]<]minimax[>[`): tags inside its calls are parameters.
    fn namespace_token(&self) -> Option<&'static str> {
        self.markup.frames.iter().rev().find_map(|f| match f {
            Elem::Pair { close } => close.namespace_token,
            _ => None,
        })
    }

    /// Calls do not nest: a call that begins while another is open ends that one
    /// (its end tag was missing).
    fn close_open_calls(&mut self, at: usize, ctx: &mut Ctx<'_, '_>) {
        let first = self.markup.frames.iter().position(|f| {
            matches!(f, Elem::Call { call: Some(_), .. } | Elem::Container { call: Some(_), .. })
        });
        let Some(first) = first else { return };
        for frame in self.markup.frames.iter_mut().skip(first) {
            if let Elem::Call { close, call: Some(call) }
            | Elem::Container { close, call: Some(call), .. } = frame
            {
                if !close.is_empty() {
                    call.extra_notes.push((
                        WarningCode::MissingEndMarker,
                        format!("the end tag `</{close}>` is missing before the next call"),
                    ));
                }
            }
        }
        self.close_frames(first, at, ctx);
    }

    /// The innermost call element, if the innermost frame is one.
    fn call_frame(&mut self) -> Option<&mut CallState> {
        match self.markup.frames.last_mut() {
            Some(Elem::Call { call, .. }) => call.as_deref_mut(),
            _ => None,
        }
    }

    /// Whether the innermost frame is a container that may act as a call.
    fn container_can_call(&self) -> bool {
        matches!(self.markup.frames.last(), Some(Elem::Container { .. }))
    }

    fn ensure_container_call(&mut self, _at: usize, ctx: &mut Ctx<'_, '_>) {
        let needs = matches!(self.markup.frames.last(), Some(Elem::Container { call: None, .. }));
        if needs {
            let at = match self.markup.frames.last() {
                Some(Elem::Container { at, .. }) => *at,
                _ => 0,
            };
            let call = ctx.open_call(at);
            if let Some(Elem::Container { call: slot, .. }) = self.markup.frames.last_mut() {
                *slot = Some(call);
            }
        }
    }

    /// The call that fields and parameters of the innermost frames belong to.
    fn current_call(&mut self) -> Option<&mut CallState> {
        for frame in self.markup.frames.iter_mut().rev() {
            match frame {
                Elem::Call { call, .. } | Elem::Container { call, .. } => {
                    return call.as_deref_mut();
                }
                Elem::ArgsField { .. } => continue,
                Elem::Fence | Elem::Pair { .. } => return None,
            }
        }
        None
    }

    fn write_param(
        &mut self,
        key: &str,
        raw: &str,
        string: Option<bool>,
        at: usize,
        ctx: &mut Ctx<'_, '_>,
    ) {
        self.ensure_container_call(at, ctx);
        let Some(call) = self.current_call() else { return };
        write_typed_value(call, key, raw, string);
        ctx.flush(call);
    }

    /// One step of the region over the unread input `rest` (at absolute offset `abs`).
    pub(crate) fn step(
        &mut self,
        rest: &str,
        abs: usize,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        if let Some(group) = self.python.as_mut() {
            match group.step(rest, abs, ctx.config(), eof) {
                PyStep::Consumed(n) => return Ok(Took::Go(n)),
                PyStep::NeedMore => return Err(Need),
                PyStep::Done(n) => {
                    if let Some(group) = self.python.take() {
                        if let PyMode::Fence { .. } = group.mode() {
                            if matches!(self.markup.frames.last(), Some(Elem::Fence)) {
                                self.markup.frames.pop();
                            }
                        }
                        self.commit_python(group, abs + n, ctx);
                    }
                    if self.markup.frames.is_empty() || ctx.decision() == Decision::Data {
                        return Ok(Took::End(n));
                    }
                    return Ok(Took::Go(n));
                }
            }
        }
        if let Some(reader) = self.json.as_mut() {
            if rest.is_empty() {
                return Err(Need);
            }
            let mut sink = self.env.sink(ctx);
            let status = reader.feed(rest, abs, &mut sink);
            let (consumed, broke) = match status {
                Status::NeedMore => return Ok(Took::Go(rest.len())),
                Status::Done(n) => (n, false),
                Status::Invalid(k) => (k, true),
            };
            // Past `max_depth` the call (or what looked like one) ends at the bracket, and
            // the rest of the input is read as if the region had ended there.
            let too_deep = broke && reader.too_deep();
            if too_deep && ctx.decision() != Decision::Data {
                let at = abs + consumed;
                let message = crate::engine::out::too_deep_message(ctx.config().max_depth);
                ctx.warn(WarningCode::LimitReached, message, at..at + 1);
            }
            let mut truncated = false;
            if broke {
                self.env.repairing = true;
                let mut sink = self.env.sink(ctx);
                truncated = reader.finish(abs + consumed, &mut sink);
                self.env.repairing = false;
            }
            self.spare = self.json.take();
            if let Some(mut call) = self.env.take_args_call() {
                call.truncated |= truncated;
                self.put_back(call);
            }
            if self.markup.frames.is_empty()
                || ctx.decision() == Decision::Data
                || self.until == Until::Value
                || too_deep
            {
                return Ok(Took::End(consumed));
            }
            return Ok(Took::Go(consumed));
        }
        match std::mem::take(&mut self.markup.inner) {
            Inner::Between => self.between(rest, abs, ctx, eof),
            Inner::LabelArgs { mut call } => {
                let b = rest.as_bytes();
                let ws = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
                let more =
                    b.iter().skip(ws).take(64).take_while(|c| c.is_ascii_whitespace()).count();
                match (b.get(ws), b.get(ws + more)) {
                    (None, _) if !eof => {
                        self.markup.inner = Inner::LabelArgs { call };
                        if ws > 0 { Ok(Took::Go(ws)) } else { Err(Need) }
                    }
                    (Some(b'\r' | b'\n'), None) if !eof && more < 64 => {
                        self.markup.inner = Inner::LabelArgs { call };
                        Err(Need)
                    }
                    (Some(b'{'), _) | (Some(b'\r' | b'\n'), Some(b'{')) => {
                        ctx.resolve(&mut call);
                        self.markup.frames.push(Elem::Call { close: "", call: Some(call) });
                        let n = if b.get(ws) == Some(&b'{') { ws } else { ws + more };
                        Ok(Took::Go(n))
                    }
                    (None | Some(b'\r' | b'\n'), _) => {
                        self.finish_label(call, "", abs, ctx);
                        Ok(Took::End(ws))
                    }
                    _ => {
                        self.markup.inner = Inner::LabelText { call, text: String::new() };
                        Ok(Took::Go(ws))
                    }
                }
            }
            Inner::LabelText { call, mut text } => match memchr::memchr(b'\n', rest.as_bytes()) {
                Some(n) => {
                    text.push_str(rest.get(..n).unwrap_or_default());
                    self.finish_label(call, &text, abs + n, ctx);
                    Ok(Took::End(n))
                }
                None if eof => {
                    text.push_str(rest);
                    self.finish_label(call, &text, abs + rest.len(), ctx);
                    Ok(Took::End(rest.len()))
                }
                None => {
                    text.push_str(rest);
                    self.markup.inner = Inner::LabelText { call, text };
                    if rest.is_empty() { Err(Need) } else { Ok(Took::Go(rest.len())) }
                }
            },
            Inner::Custom { dialect, mut body, at } => {
                let end_marker = if dialect.end().is_empty() { "\n" } else { dialect.end() };
                let consume_end = !dialect.end().is_empty();
                match memchr::memmem::find(rest.as_bytes(), end_marker.as_bytes()) {
                    Some(k) => {
                        body.push_str(rest.get(..k).unwrap_or_default());
                        let n = if consume_end { k + end_marker.len() } else { k };
                        self.custom_calls(&*dialect, &body, at, abs + n, false, ctx);
                        Ok(Took::End(n))
                    }
                    None if eof => {
                        body.push_str(rest);
                        self.custom_calls(&*dialect, &body, at, abs + rest.len(), true, ctx);
                        Ok(Took::End(rest.len()))
                    }
                    None => {
                        // Hold a tail that may be the start of the end marker.
                        let mut keep = (1..end_marker.len())
                            .rev()
                            .find(|&k| {
                                k <= rest.len()
                                    && rest.ends_with(end_marker.get(..k).unwrap_or_default())
                            })
                            .unwrap_or(0);
                        while !rest.is_char_boundary(rest.len() - keep) {
                            keep += 1;
                        }
                        let n = rest.len() - keep;
                        body.push_str(rest.get(..n).unwrap_or_default());
                        self.markup.inner = Inner::Custom { dialect, body, at };
                        if n == 0 { Err(Need) } else { Ok(Took::Go(n)) }
                    }
                }
            }
            Inner::Param { key, close, mut text, string } => {
                match scan_until_close(rest, &close, eof) {
                    Scan::Found { text_len, tag_len } => {
                        text.push_str(rest.get(..text_len).unwrap_or_default());
                        // MiniMax-M3 writes its namespace token before the end tag.
                        if let Some(token) = self.namespace_token() {
                            if text.ends_with(token) {
                                text.truncate(text.len() - token.len());
                            }
                        }
                        self.write_param(&key, &text, string, abs, ctx);
                        if tag_len == 0 {
                            // The output ended inside the value.
                            if let Some(call) = self.current_call() {
                                call.truncated = true;
                            }
                        }
                        Ok(Took::Go(text_len + tag_len))
                    }
                    Scan::Partial(n) => {
                        text.push_str(rest.get(..n).unwrap_or_default());
                        self.markup.inner = Inner::Param { key, close, text, string };
                        if n == 0 { Err(Need) } else { Ok(Took::Go(n)) }
                    }
                }
            }
            Inner::Key { mut text, close } => match scan_until_close(rest, close, eof) {
                Scan::Found { text_len, tag_len } => {
                    text.push_str(rest.get(..text_len).unwrap_or_default());
                    if close == "arg_type" {
                        let kind = text.trim();
                        self.markup.key_string = Some(kind == "string" || kind == "str");
                    } else {
                        self.markup.key = Some(text.trim().to_owned());
                        self.markup.key_string = None;
                    }
                    Ok(Took::Go(text_len + tag_len))
                }
                Scan::Partial(n) => {
                    text.push_str(rest.get(..n).unwrap_or_default());
                    self.markup.inner = Inner::Key { text, close };
                    if n == 0 { Err(Need) } else { Ok(Took::Go(n)) }
                }
            },
            Inner::Name { close, mut text, func_name, at } => {
                match scan_until_close(rest, close, eof) {
                    Scan::Found { text_len, tag_len } => {
                        text.push_str(rest.get(..text_len).unwrap_or_default());
                        let name = text.trim().to_owned();
                        if func_name {
                            self.close_open_calls(at, ctx);
                            let mut call = ctx.open_call(at);
                            call.name = Some(name);
                            ctx.resolve(&mut call);
                            self.markup.frames.push(Elem::Call { close: "", call: Some(call) });
                        } else {
                            self.ensure_container_call(at, ctx);
                            if let Some(call) = self.current_call() {
                                call.name.get_or_insert(name);
                                ctx.resolve(call);
                            }
                        }
                        Ok(Took::Go(text_len + tag_len))
                    }
                    Scan::Partial(n) => {
                        text.push_str(rest.get(..n).unwrap_or_default());
                        self.markup.inner = Inner::Name { close, text, func_name, at };
                        if n == 0 { Err(Need) } else { Ok(Took::Go(n)) }
                    }
                }
            }
        }
    }

    /// Gives a call lent to the JSON envelope back to its frame.
    fn put_back(&mut self, call: Box<CallState>) {
        let slot = self.markup.frames.iter_mut().rev().find_map(|frame| match frame {
            Elem::Call { call: slot, .. } | Elem::Container { call: slot, .. } => Some(slot),
            Elem::Fence | Elem::ArgsField { .. } | Elem::Pair { .. } => None,
        });
        match slot {
            Some(slot) if slot.is_none() => *slot = Some(call),
            // No frame to take it: a lent call is never dropped, so this does not happen.
            _ => debug_assert!(false, "a lent call had no frame to return to"),
        }
    }

    /// Between items: whitespace, a JSON value, a tag, a fence, or the region's end.
    fn between(&mut self, rest: &str, abs: usize, ctx: &mut Ctx<'_, '_>, eof: bool) -> Step {
        let ws = rest.bytes().take_while(u8::is_ascii_whitespace).count();
        if ws > 0 {
            return Ok(Took::Go(ws));
        }
        let Some(&b) = rest.as_bytes().first() else {
            return Err(Need);
        };
        let at = abs;
        // The end of the reasoning the region is in.
        if let Some(stop) = self.stop {
            if rest.starts_with(stop) {
                return Ok(Took::End(0));
            }
            if !eof && rest.len() < stop.len() && stop.starts_with(rest) {
                return Err(Need);
            }
        }
        // The end markers of open pairs, innermost first; then what the innermost pair
        // makes of the text (its start again, an inner pair, a name-then-arguments call).
        let pairs: Vec<(usize, Arc<TagPair>)> = self
            .markup
            .frames
            .iter()
            .enumerate()
            .rev()
            .filter_map(|(idx, f)| match f {
                Elem::Pair { close } => Some((idx, Arc::clone(close))),
                _ => None,
            })
            .collect();
        for (idx, pair) in &pairs {
            match native::end_of(pair, rest, eof) {
                Some(Ok(len)) => {
                    self.close_frames(*idx, at, ctx);
                    if self.markup.frames.is_empty() {
                        return Ok(Took::End(len));
                    }
                    return Ok(Took::Go(len));
                }
                Some(Err(())) => return Err(Need),
                None => {}
            }
        }
        if let Some((_, close)) = pairs.first() {
            let innermost_pair = matches!(self.markup.frames.last(), Some(Elem::Pair { .. }));
            match native::pair_step(close, rest, eof) {
                native::PairStep::None => {}
                native::PairStep::NeedMore => return Err(Need),
                native::PairStep::Skip(len) => {
                    // The pair's own start again (the next call), or a separator.
                    self.close_open_calls(at, ctx);
                    return Ok(Took::Go(len));
                }
                native::PairStep::Ignore(len) => return Ok(Took::Go(len)),
                native::PairStep::Inner(inner) => {
                    self.close_open_calls(at, ctx);
                    let len = inner.start.len();
                    self.markup.frames.push(Elem::Pair { close: inner });
                    return Ok(Took::Go(len));
                }
                native::PairStep::Name if innermost_pair => {
                    match native::read_name(close, rest, eof) {
                        native::NameStep::NeedMore => return Err(Need),
                        native::NameStep::Fail => {}
                        native::NameStep::Done { len, .. } if close.header_only => {
                            return Ok(Took::Go(len));
                        }
                        native::NameStep::Done { name, id, len } => {
                            let mut call = ctx.open_call(at);
                            call.name = Some(name);
                            call.id = id;
                            ctx.resolve(&mut call);
                            self.markup.frames.push(Elem::Call { close: "", call: Some(call) });
                            return Ok(Took::Go(len));
                        }
                    }
                }
                native::PairStep::Name => {}
            }
        }
        // Python calls inside markup.
        let holds_calls = matches!(
            self.markup.frames.last(),
            Some(Elem::Container { call: None, .. } | Elem::Pair { .. })
        );
        if holds_calls && ctx.config().dialects.has(Builtin::Python) {
            let ahead = match b {
                b'[' => python::list_ahead(rest, eof, ctx.config()),
                _ if b.is_ascii_alphabetic() || b == b'_' => {
                    python::call_ahead(rest, eof, ctx.config(), false)
                }
                _ => Ahead::No,
            };
            match ahead {
                Ahead::Yes => {
                    self.python =
                        Some(Box::new(PyGroup::new(PyMode::Inner, ctx.config().max_depth)));
                    return Ok(Took::Go(0));
                }
                Ahead::NeedMore => return Err(Need),
                Ahead::No => {}
            }
        }
        // GLM: the name right after `<tool_call>`, then key/value tags.
        let bare_container =
            matches!(self.markup.frames.last(), Some(Elem::Container { call: None, .. }));
        if bare_container && (b.is_ascii_alphabetic() || b == b'_') {
            match glm_name(rest, eof) {
                GlmName::NeedMore => return Err(Need),
                GlmName::No => {}
                GlmName::Yes(len) => {
                    let name = rest.get(..len).unwrap_or_default().to_owned();
                    self.ensure_container_call(at, ctx);
                    if let Some(call) = self.current_call() {
                        call.name = Some(name);
                        ctx.resolve(call);
                    }
                    return Ok(Took::Go(len));
                }
            }
        }
        match b {
            b'{' | b'[' => {
                // The innermost call, looking through fences and argument fields.
                let mut lend = None;
                for frame in self.markup.frames.iter_mut().rev() {
                    match frame {
                        Elem::Fence | Elem::ArgsField { .. } | Elem::Pair { .. } => continue,
                        Elem::Call { call, .. } | Elem::Container { call, .. } => {
                            lend = call.take();
                            break;
                        }
                    }
                }
                match lend {
                    Some(call) if !call.args.started() => self.env.begin_args(call, ctx),
                    lent => {
                        // A second JSON value after the call's arguments: the call is
                        // over, and the value is read on its own.
                        if let Some(call) = lent {
                            self.put_back(call);
                            self.close_open_calls(at, ctx);
                        }
                        let fenced_only =
                            self.markup.frames.iter().all(|f| matches!(f, Elem::Fence));
                        self.env.begin_value(
                            if fenced_only { Origin::Bare } else { Origin::Marked },
                            ctx,
                        );
                        // Apertus: `{"NAME": {args}}` objects inside its pair.
                        self.env.single_key =
                            self.markup.frames.iter().any(
                                |f| matches!(f, Elem::Pair { close } if close.single_key_calls),
                            );
                    }
                }
                self.start_reader(ctx.config().max_depth);
                Ok(Took::Go(0))
            }
            b'`' => {
                let ticks = rest.bytes().take(3).take_while(|&c| c == b'`').count();
                if ticks < 3 {
                    return if ticks == rest.len() && !eof { Err(Need) } else { Ok(Took::End(0)) };
                }
                if matches!(self.markup.frames.last(), Some(Elem::Fence)) {
                    self.markup.frames.pop();
                    if self.markup.frames.is_empty() {
                        return Ok(Took::End(ticks));
                    }
                    return Ok(Took::Go(ticks));
                }
                // A fence inside markup: skip its opener line.
                let line = rest.as_bytes().iter().take(MAX_FENCE_LINE).position(|&c| c == b'\n');
                match line {
                    Some(n) => {
                        self.markup.frames.push(Elem::Fence);
                        Ok(Took::Go(n + 1))
                    }
                    None if !eof && rest.len() < MAX_FENCE_LINE => Err(Need),
                    _ => Ok(Took::End(0)),
                }
            }
            b'<' => match read_tag(rest, eof) {
                TagMatch::NeedMore => Err(Need),
                TagMatch::No => Ok(Took::End(0)),
                TagMatch::Tag(tag) if tag.closing => self.close_tag(&tag, at, ctx),
                TagMatch::Tag(tag) => {
                    // The same container opening again: the previous one missed its end tag.
                    let reopen = self.markup.frames.iter().any(|f| {
                        matches!(f, Elem::Container { close, call, .. } if same_name(close, tag.name) && (call.is_some() || ctx.has_calls()))
                    });
                    if reopen {
                        return Ok(Took::End(0));
                    }
                    if self.open_tag(&tag, at, ctx) {
                        Ok(Took::Go(tag.len))
                    } else {
                        Ok(Took::End(0))
                    }
                }
            },
            _ => Ok(Took::End(0)),
        }
    }

    fn close_tag(&mut self, tag: &Tag<'_>, at: usize, ctx: &mut Ctx<'_, '_>) -> Step {
        let target =
            self.markup.frames.iter().rposition(|f| {
                f.close_name().is_some_and(|c| !c.is_empty() && same_tag(c, tag.name))
            });
        let Some(target) = target else {
            // A `</func_call>`-style closer after `<func_name>` calls, or a typo
            // like `</toolcall>` for the outermost container: close what is open.
            let loose = tag.name.contains("call")
                || tag.name.contains("tool")
                || tag.name.contains("function");
            if loose && !self.markup.frames.is_empty() {
                if tag.name != "func_call" {
                    if let Some(call) = self.current_call() {
                        call.extra_notes.push((
                            WarningCode::MissingEndMarker,
                            format!(
                                "the end tag `</{}>` did not match its start tag; taken as its end",
                                tag.name
                            ),
                        ));
                    }
                }
                self.close_frames(0, at, ctx);
                return Ok(Took::End(tag.len));
            }
            return Ok(Took::End(0));
        };
        let exact = self.markup.frames.get(target).and_then(Elem::close_name) == Some(tag.name);
        if !exact || tag.unfinished {
            if let Some(call) = self.current_call() {
                call.extra_notes.push((
                    WarningCode::MissingEndMarker,
                    format!("the end tag `</{}>` was misspelled or unfinished", tag.name),
                ));
            }
        }
        self.close_frames(target, at, ctx);
        if self.markup.frames.is_empty() {
            return Ok(Took::End(tag.len));
        }
        Ok(Took::Go(tag.len))
    }

    /// Closes frames from the innermost down to index `keep` (inclusive).
    fn close_frames(&mut self, keep: usize, _at: usize, ctx: &mut Ctx<'_, '_>) {
        while self.markup.frames.len() > keep {
            let Some(frame) = self.markup.frames.pop() else { break };
            match frame {
                Elem::Call { call: Some(call), .. } | Elem::Container { call: Some(call), .. } => {
                    ctx.finish_call(call);
                }
                _ => {}
            }
        }
    }
}

impl Body {
    /// Sends the calls of a finished Python group, or decides the group is code.
    pub(crate) fn commit_python(
        &mut self,
        mut group: Box<PyGroup>,
        end: usize,
        ctx: &mut Ctx<'_, '_>,
    ) {
        let unusable = group.not_calls.is_some() || group.done.is_empty();
        if unusable && ctx.has_calls() {
            // Calls came before in this region: only the group's own bytes are text.
            let message = format!(
                "text in tool-call markup was not a call ({}); it was kept as content",
                group.not_calls.as_deref().unwrap_or("no call")
            );
            ctx.not_calls(end, Some((WarningCode::MalformedCall, message)));
            return;
        }
        if let Some(why) = group.not_calls.take() {
            let fence = matches!(group.mode(), PyMode::Fence { .. });
            if fence && (group.saw_call() || ctx.unsettled_calls_a_tool(end)) {
                ctx.warn_unsettled(
                    WarningCode::Example,
                    format!(
                        "a Python block that is a program, not calls, was kept as text ({why})"
                    ),
                    end,
                );
            }
            ctx.set_decision(Decision::Data);
            return;
        }
        if group.done.is_empty() {
            if group.mode() != PyMode::Inner {
                ctx.set_decision(Decision::Data);
            }
            return;
        }
        if ctx.decision() == Decision::Data {
            return;
        }
        ctx.set_decision(Decision::Calls);
        ctx.markup();
        for mut call in group.done.drain(..) {
            ctx.settle_before(call.start);
            if !call.is_rejected() {
                ctx.resolve(&mut call);
            }
            ctx.finish_call(call);
        }
    }

    /// Ends a labelled call whose arguments were plain text (or nothing).
    fn finish_label(
        &mut self,
        mut call: Box<CallState>,
        text: &str,
        end: usize,
        ctx: &mut Ctx<'_, '_>,
    ) {
        let text = text.trim();
        if !text.is_empty() {
            call.bind_tool(ctx.config());
            // The one parameter, or the one required parameter; `input` without a schema.
            let key = match (&ctx.config().tools, call.args.tool()) {
                (_, Some(tool)) if tool.param_names().len() == 1 => {
                    tool.param_names().first().cloned()
                }
                (_, Some(tool)) if tool.required().len() == 1 => tool.required().first().cloned(),
                (_, Some(tool)) if !tool.has_schema() => Some("input".to_owned()),
                (None, _) => Some("input".to_owned()),
                _ => None,
            };
            let Some(key) = key else {
                ctx.warn_unsettled(
                    WarningCode::MalformedCall,
                    format!(
                        "the input of `{}` is plain text, and the tool has no single parameter it can fill: {text:?}",
                        call.name.as_deref().unwrap_or_default()
                    ),
                    end,
                );
                ctx.set_decision(Decision::Data);
                return;
            };
            write_param_value(&mut call, &key, text);
        }
        ctx.resolve(&mut call);
        ctx.finish_call(call);
    }

    /// Turns the body of a custom dialect into calls.
    fn custom_calls(
        &mut self,
        dialect: &dyn Dialect,
        body: &str,
        at: usize,
        end: usize,
        truncated: bool,
        ctx: &mut Ctx<'_, '_>,
    ) {
        let calls = match dialect.read(body) {
            Ok(calls) if !calls.is_empty() => calls,
            Ok(_) => {
                ctx.set_decision(Decision::Data);
                return;
            }
            Err(message) => {
                ctx.warn(
                    WarningCode::MalformedCall,
                    format!("`{}` could not read its call ({message}): {body:?}", dialect.id()),
                    at..end,
                );
                ctx.set_decision(Decision::Data);
                return;
            }
        };
        for text in calls {
            let mut call = ctx.open_call(at);
            call.name = Some(text.name);
            call.id = text.id;
            call.truncated = truncated;
            call.bind_tool(ctx.config());
            let arguments = text.arguments.trim();
            if !arguments.is_empty() {
                let mut reader = Reader::new(ctx.config().max_depth);
                let status = reader.feed(arguments, 0, &mut call.args);
                reader.finish(0, &mut call.args);
                let object = call.args.canon.out.starts_with('{');
                if !object || matches!(status, Status::Invalid(_)) {
                    call.extra_notes.push((
                        WarningCode::InvalidArguments,
                        format!("the arguments are not a JSON object: {arguments:?}"),
                    ));
                    if !object {
                        call.args = Default::default();
                        call.bind_tool(ctx.config());
                    }
                }
            }
            call.args_seen = true;
            ctx.resolve(&mut call);
            ctx.finish_call(call);
        }
    }
}

impl Body {
    /// The region ends at `end`: closes the JSON value, the Python group and the markup
    /// still open, and hands the calls they held to the engine.
    pub(crate) fn end(&mut self, end: usize, ctx: &mut Ctx<'_, '_>) {
        let region = self;
        let mut truncated = false;
        if let Some(mut reader) = region.json.take() {
            region.env.repairing = true;
            truncated = reader.finish(end, &mut region.env.sink(ctx));
            region.env.repairing = false;
            region.spare = Some(reader);
        }
        if let Some(mut call) = region.env.take_args_call() {
            call.truncated |= truncated;
            region.put_back(call);
        }
        if let Some(mut group) = region.python.take() {
            group.finish(end);
            region.commit_python(group, end, ctx);
        }
        let inner = std::mem::take(&mut region.markup.inner);
        match inner {
            Inner::LabelArgs { call } => region.finish_label(call, "", end, ctx),
            Inner::LabelText { mut call, text } => {
                call.truncated = true;
                region.finish_label(call, &text, end, ctx);
            }
            Inner::Custom { dialect, body, at } => {
                region.custom_calls(&*dialect, &body, at, end, true, ctx);
            }
            Inner::Key { .. } => {}

            Inner::Param { key, text, string, .. } => {
                region.write_param(&key, &text, string, end, ctx);
                if let Some(call) = region.current_call() {
                    call.truncated = true;
                }
            }
            Inner::Name { text, func_name, at, .. } => {
                if func_name {
                    region.close_open_calls(at, ctx);
                    let mut call = ctx.open_call(at);
                    call.name = Some(text.trim().to_owned());
                    ctx.resolve(&mut call);
                    call.truncated = true;
                    region.markup.frames.push(Elem::Call { close: "", call: Some(call) });
                }
            }
            Inner::Between => {}
        }
        for frame in &mut region.markup.frames {
            if let Elem::Call { close, call: Some(call) }
            | Elem::Container { close, call: Some(call), .. } = frame
            {
                if !close.is_empty() && !call.truncated {
                    call.extra_notes.push((
                        WarningCode::MissingEndMarker,
                        format!("the end tag `</{close}>` is missing"),
                    ));
                }
            }
        }
        region.close_frames(0, end, ctx);
        region.env.end(truncated, ctx);
    }
}

enum Scan {
    /// The closing tag was found after `text_len` bytes; it is `tag_len` long.
    Found { text_len: usize, tag_len: usize },
    /// No closing tag yet; this many bytes are surely text.
    Partial(usize),
}

/// Looks for `</close>` in `rest`, holding back a possible partial closer.
fn scan_until_close(rest: &str, close: &str, eof: bool) -> Scan {
    let bytes = rest.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memchr(b'<', bytes.get(from..).unwrap_or_default()) {
        let at = from + off;
        let tail = rest.get(at..).unwrap_or_default();
        match read_tag(tail, eof) {
            TagMatch::Tag(tag) if tag.closing && same_tag(tag.name, close) => {
                return Scan::Found { text_len: at, tag_len: tag.len };
            }
            TagMatch::NeedMore
                if tail.len() < 2 || tail.starts_with("</") || tail.starts_with("<|") =>
            {
                return Scan::Partial(at);
            }
            _ => from = at + 1,
        }
    }
    if eof { Scan::Found { text_len: rest.len(), tag_len: 0 } } else { Scan::Partial(rest.len()) }
}

/// Writes one parameter's raw text as a JSON value; `string` is an explicit type
/// flag that overrides the schema (`Some(true)`: the text as it is).
pub(crate) fn write_typed_value(call: &mut CallState, key: &str, raw: &str, string: Option<bool>) {
    match string {
        None => write_param_value(call, key, raw),
        Some(true) => write_value(call, key, raw, ParamType::String),
        Some(false) => write_value(call, key, raw, ParamType::Any),
    }
}

/// Writes one parameter's raw text as a JSON value into the call's arguments.
pub(crate) fn write_param_value(call: &mut CallState, key: &str, raw: &str) {
    let declared = call.args.tool().map(|tool| tool.param_type(key)).unwrap_or(ParamType::Any);
    write_value(call, key, raw, declared);
}

/// Writes `raw` as a string when `declared` is a string, else as the JSON it holds.
fn write_value(call: &mut CallState, key: &str, raw: &str, declared: ParamType) {
    let args = &mut call.args;
    if !args.started() {
        args.open(JsonFrame::Object, 0);
    } else if args.canon.depth() == 0 {
        // The arguments object is already closed (a JSON body came first).
        call.extra_notes.push((
            WarningCode::InvalidArguments,
            format!("parameter `{key}` came after the arguments object and was not used: {raw:?}"),
        ));
        return;
    }
    call.args_seen = true;
    let text = raw.strip_prefix('\n').unwrap_or(raw);
    let text = text.strip_suffix('\n').unwrap_or(text);
    // MiniCPM5 wraps values in CDATA.
    let text = match text.trim().strip_prefix("<![CDATA[").and_then(|t| t.strip_suffix("]]>")) {
        Some(inner) => inner,
        None => text,
    };
    args.key(key);
    let trimmed = text.trim();
    if declared != ParamType::String {
        let structured = trimmed.starts_with('{') || trimmed.starts_with('[');
        if structured {
            if let Some(json) = canonical_json(trimmed) {
                let mut reader = Reader::new(128);
                let _ = reader.feed(&json, 0, args);
                return;
            }
        }
        let literal = matches!(trimmed, "true" | "false" | "null")
            || crate::json::reader::is_json_number(trimmed);
        if literal {
            args.scalar(trimmed);
            return;
        }
    }
    args.str_start();
    args.str_part(text, false);
    args.str_end();
}

enum GlmName {
    Yes(usize),
    No,
    NeedMore,
}

/// A GLM call name: name bytes, then (after optional whitespace) a tag.
fn glm_name(rest: &str, eof: bool) -> GlmName {
    let b = rest.as_bytes();
    let len = b.iter().take(MAX_EQ + 1).take_while(|&&c| is_name_byte(c)).count();
    if len > MAX_EQ {
        return GlmName::No;
    }
    let ws = b.iter().skip(len).take(MAX_FENCE_GAP).take_while(|c| c.is_ascii_whitespace()).count();
    match b.get(len + ws) {
        Some(b'<') => GlmName::Yes(len),
        None if !eof && ws < MAX_FENCE_GAP => GlmName::NeedMore,
        _ => GlmName::No,
    }
}
