//! The tag lexer: `<name attrs>`, `</name>`, `<name/>`, `<function=NAME>`, names with a
//! namespace (`<seed:tool_call>`) or a prefix (`<｜DSML｜invoke>`), and token-delimited
//! tags (`rows::markup::TOKEN_TAGS`). It reads one tag at the start of its input.

use crate::engine::step::{Look, Need};
use crate::rows::markup::{Role, TAG_PREFIXES, TOKEN_TAGS, TokenTags, tag as tag_row};

/// A tag as read from the input.
#[derive(Debug)]
pub(crate) struct Tag<'a> {
    pub(crate) closing: bool,
    pub(crate) name: &'a str,
    /// The value after `=` in `<function=NAME>`.
    pub(crate) eq: Option<&'a str>,
    pub(crate) attrs: &'a str,
    pub(crate) self_closing: bool,
    pub(crate) len: usize,
    /// A closing tag whose `>` is missing.
    pub(crate) unfinished: bool,
}

impl<'a> Tag<'a> {
    /// A closing tag whose `>` is missing (`</tool_call` at the end of the output).
    fn unfinished_close(name: &'a str, len: usize) -> Tag<'a> {
        Tag { closing: true, name, eq: None, attrs: "", self_closing: false, len, unfinished: true }
    }
}

pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':' | b'.')
}

const MAX_TAG: usize = 1024;
/// Longer than any opener name: look-ahead for a tag name stops here.
pub(crate) const MAX_NAME: usize = 32;
/// The longest value in `<function=NAME>`.
pub(crate) const MAX_EQ: usize = 256;
/// The longest fence opener line ("```" + label + spaces).
/// The length of a tag-name prefix at the start of `s` (0 when there is none).
pub(crate) fn tag_prefix(s: &str, eof: bool) -> Result<usize, Need> {
    // Every prefix starts with `｜` (0xEF 0xBD 0x9C) or `i`.
    if !matches!(s.as_bytes().first(), Some(&(0xEF | b'i'))) {
        return Ok(0);
    }
    for prefix in TAG_PREFIXES {
        if s.starts_with(prefix) {
            // `｜DSML｜` may be followed by a space still to come.
            if !eof && prefix.ends_with('｜') && s.len() == prefix.len() {
                return Err(Need);
            }
            return Ok(prefix.len());
        }
        if !eof && s.len() < prefix.len() && prefix.starts_with(s) && !s.is_empty() {
            return Err(Need);
        }
    }
    Ok(0)
}

/// A tag name without its namespace: `seed:tool_call` → `tool_call`.
///
/// A suffix after the name is no namespace: Hunyuan HY-V4 writes a per-checkpoint one on
/// every tag (`tool_call:6124c78e` → `tool_call`), hex digits with at least one digit.
pub(crate) fn local_name(name: &str) -> &str {
    // Names are short: a plain loop beats a call to `memrchr`.
    match name.bytes().rposition(|b| b == b':') {
        Some(at) => {
            let (head, tail) =
                (name.get(..at).unwrap_or_default(), name.get(at + 1..).unwrap_or(name));
            let suffix = (4..=16).contains(&tail.len())
                && tail.bytes().all(|b| b.is_ascii_hexdigit())
                && tail.bytes().any(|b| b.is_ascii_digit());
            if suffix && !head.is_empty() { local_name(head) } else { tail }
        }
        None => name,
    }
}

/// Reads a token-delimited tag (`syntax`) at the start of `s`.
pub(crate) fn read_token_tag<'s>(s: &'s str, eof: bool, syntax: &TokenTags) -> Look<Tag<'s>> {
    let closing = if s.starts_with(syntax.open) {
        false
    } else if s.starts_with(syntax.close) {
        true
    } else {
        let partial = |m: &str| s.len() < m.len() && m.starts_with(s);
        return if !eof && (partial(syntax.open) || partial(syntax.close)) {
            Err(Need)
        } else {
            Ok(None)
        };
    };
    let start = if closing { syntax.close.len() } else { syntax.open.len() };
    let b = s.as_bytes();
    let mut i = start;
    while b.get(i).is_some_and(|&c| is_name_byte(c)) {
        i += 1;
        if i - start > MAX_NAME {
            return Ok(None);
        }
    }
    let name = s.get(start..i).unwrap_or_default();
    // Attributes up to `<|sep|>`, respecting quotes.
    let attrs_start = i;
    match attrs_end(b, i, false) {
        AttrsEnd::At(i, b'<') => {
            let rest = s.get(i..).unwrap_or_default();
            if rest.starts_with(syntax.end) {
                let attrs = s.get(attrs_start..i).unwrap_or_default();
                if name.is_empty() || (!attrs.is_empty() && !attrs.starts_with(char::is_whitespace))
                {
                    return Ok(None);
                }
                return Ok(Some(Tag {
                    closing,
                    name,
                    eq: None,
                    attrs: attrs.trim_end(),
                    self_closing: false,
                    len: i + syntax.end.len(),
                    unfinished: false,
                }));
            }
            if !eof && rest.len() < syntax.end.len() && syntax.end.starts_with(rest) {
                return Err(Need);
            }
            Ok(None)
        }
        AttrsEnd::More(_) if !eof => Err(Need),
        _ => Ok(None),
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
pub(crate) fn read_tag(s: &str, eof: bool) -> Look<Tag<'_>> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'|') {
        return read_token_tag(s, eof, &TOKEN_TAGS);
    }
    let mut i = 1;
    let closing = b.get(1) == Some(&b'/');
    if closing {
        i += 1;
    }
    i += tag_prefix(s.get(i..).unwrap_or_default(), eof)?;
    let name_start = i;
    while b.get(i).is_some_and(|&c| is_name_byte(c)) {
        i += 1;
        if i - name_start > MAX_NAME {
            return Ok(None);
        }
    }
    let name = local_name(s.get(name_start..i).unwrap_or_default());
    tag_after_name(s, eof, closing, name, i)
}

/// The rest of a tag whose `name` (without its namespace) ends at `i`: the value after
/// `=`, or the attributes up to `>`.
pub(crate) fn tag_after_name<'s>(
    s: &'s str,
    eof: bool,
    closing: bool,
    name: &'s str,
    i: usize,
) -> Look<Tag<'s>> {
    let b = s.as_bytes();
    if i >= b.len() {
        return if eof {
            if closing && !name.is_empty() {
                Ok(Some(Tag::unfinished_close(name, i)))
            } else {
                Ok(None)
            }
        } else {
            Err(Need)
        };
    }
    if name.is_empty() {
        return Ok(None);
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
            return Ok(None);
        }
        match b.get(j) {
            Some(b'>') => {
                let value = s.get(start..j).unwrap_or_default().trim().trim_matches(['"', '\'']);
                eq = Some(value);
                return Ok(Some(Tag {
                    closing,
                    name,
                    eq,
                    attrs: "",
                    self_closing: false,
                    len: j + 1,
                    unfinished: false,
                }));
            }
            None if !eof => return Err(Need),
            _ => return Ok(None),
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
                return Ok(None);
            }
            return Ok(Some(Tag {
                closing,
                name,
                eq,
                attrs,
                self_closing,
                len: i + 1,
                unfinished: false,
            }));
        }
        AttrsEnd::At(i, b'\n') => i,
        AttrsEnd::More(i) => i,
        AttrsEnd::At(..) | AttrsEnd::TooLong => return Ok(None),
    };
    if closing && (eof || b.get(i) == Some(&b'\n')) {
        return Ok(Some(Tag::unfinished_close(name, i)));
    }
    if eof { Ok(None) } else { Err(Need) }
}

/// The value of attribute `key` in `attrs`, entities decoded.
pub(crate) fn attr(attrs: &str, key: &str) -> Option<String> {
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

/// The tool name a tag with this role carries (`<function=NAME>`, `<invoke name="NAME">`),
/// if not empty.
pub(crate) fn tool_name_of(tag: &Tag<'_>, role: Option<Role>) -> Option<String> {
    let names: &[&str] = match role {
        Some(Role::Call { names, .. }) => names,
        _ => &["name"],
    };
    tag.eq
        .map(str::to_owned)
        .or_else(|| names.iter().find_map(|key| attr(tag.attrs, key)))
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
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

fn norm(s: &str) -> impl Iterator<Item = u8> + '_ {
    s.bytes().filter(|c| *c != b'_' && *c != b'-').map(|c| c.to_ascii_lowercase())
}

/// Whether two tag names are the same, ignoring ASCII case, `_` and `-`.
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    a == b || norm(a).eq(norm(b))
}

/// Whether two tag names mean the same element: [`same_name`], or one is the other
/// plus a final `s` (`</tool_calls>` for `<tool_call>`).
pub(crate) fn same_tag(a: &str, b: &str) -> bool {
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

/// How far a field's text goes: `text` bytes of the input are surely its text, and
/// `closer` is the length of its end tag once found (0 when the input ended instead).
pub(crate) struct Upto {
    pub(crate) text: usize,
    pub(crate) closer: Option<usize>,
}

/// How a parameter's value may end, besides its own end tag.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ValueEnds<'a> {
    /// The end tags of the elements around the value (`</function>`, `</tool_call>`):
    /// one followed by a tag or the end of the output ends a value that misses its own.
    pub(crate) enclosing: &'a [&'static str],
    /// The value is padded with line breaks (Qwen3-Coder): its own end tag at the start
    /// of a line ends it, and so does a `<parameter=` there when its end tag is missing.
    /// Elsewhere, in every format, its end tag followed by another tag or the end of the
    /// output ends it; one followed by text ends it unless another end tag of its own
    /// comes before the next markup (then the first, an inline `</parameter>` or
    /// `<|close|>argument<|sep|>`, is text: [`scan_after_end`]).
    pub(crate) padded: bool,
    /// A token written before every tag (MiniMax-M3's `]<]minimax[>[`).
    pub(crate) namespace: Option<&'a str>,
}

/// How a field's value ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueEnd {
    /// Its end tag, this long.
    Closer(usize),
    /// The tag at the end of the text, which is not its end tag: its end tag is missing.
    Missing,
    /// The input ended inside it.
    Cut,
    /// An end tag followed by text: the value ends there unless a later end tag comes
    /// before the next markup ([`scan_after_end`] decides).
    Text(EndTag),
}

/// An end tag that may end a value, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndTag {
    /// The value's own.
    Own(usize),
    /// One of an element around the value, which misses its own.
    Around(usize),
}

impl EndTag {
    pub(crate) fn len(self) -> usize {
        match self {
            EndTag::Own(len) | EndTag::Around(len) => len,
        }
    }
}

/// How far a value's text goes: `text` bytes of the input are surely its text, and
/// `end` says how it ended, once that is known.
pub(crate) struct ValueUpto {
    pub(crate) text: usize,
    pub(crate) end: Option<ValueEnd>,
}

/// What follows a tag that may end a value: `Some(true)` a tag or the end of the output
/// (after blanks), `Some(false)` other text, `None` not known yet.
fn tag_follows(after: &str, namespace: Option<&str>, eof: bool) -> Option<bool> {
    let blanks =
        after.bytes().take(MAX_BLANKS_AFTER_END).take_while(u8::is_ascii_whitespace).count();
    if let Some(token) = namespace {
        let rest = after.get(blanks..).unwrap_or_default();
        if rest.starts_with(token) {
            return Some(true);
        }
        if !eof && rest.len() < token.len() && token.starts_with(rest) {
            return None;
        }
    }
    match after.as_bytes().get(blanks) {
        Some(b'<') => Some(true),
        Some(_) => Some(blanks == MAX_BLANKS_AFTER_END),
        None if eof || blanks == MAX_BLANKS_AFTER_END => Some(true),
        None => None,
    }
}

/// The most blanks between a value's end tag and the tag after it that are looked at.
const MAX_BLANKS_AFTER_END: usize = 256;

/// Looks for the end of a parameter's value in `rest`: its end tag `</close>`, or (when
/// that is missing) an end tag around it or the next parameter, as `ends` allows.
/// Holds back a possible partial tag, and a tag whose meaning the next bytes decide.
/// `after_newline`: the value's text so far is empty or ends with a line break.
pub(crate) fn scan_value(
    rest: &str,
    close: &str,
    ends: ValueEnds<'_>,
    after_newline: bool,
    eof: bool,
) -> ValueUpto {
    let bytes = rest.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memchr(b'<', bytes.get(from..).unwrap_or_default()) {
        let at = from + off;
        let tail = rest.get(at..).unwrap_or_default();
        let line_start = if at == 0 { after_newline } else { bytes.get(at - 1) == Some(&b'\n') };
        match read_tag(tail, eof) {
            Ok(Some(tag)) if tag.closing && same_tag(tag.name, close) => {
                if ends.padded && line_start {
                    return ValueUpto { text: at, end: Some(ValueEnd::Closer(tag.len)) };
                }
                let end =
                    match tag_follows(tail.get(tag.len..).unwrap_or_default(), ends.namespace, eof)
                    {
                        Some(true) => ValueEnd::Closer(tag.len),
                        Some(false) => ValueEnd::Text(EndTag::Own(tag.len)),
                        None => return ValueUpto { text: at, end: None },
                    };
                return ValueUpto { text: at, end: Some(end) };
            }
            Ok(Some(tag))
                if tag.closing
                    && ends
                        .enclosing
                        .iter()
                        .any(|outer| !outer.is_empty() && same_tag(tag.name, outer)) =>
            {
                let end =
                    match tag_follows(tail.get(tag.len..).unwrap_or_default(), ends.namespace, eof)
                    {
                        Some(true) => ValueEnd::Missing,
                        Some(false) => ValueEnd::Text(EndTag::Around(tag.len)),
                        None => return ValueUpto { text: at, end: None },
                    };
                return ValueUpto { text: at, end: Some(end) };
            }
            Ok(Some(tag))
                if ends.padded
                    && line_start
                    && !tag.closing
                    && tag.eq.is_some()
                    && same_tag(tag.name, close) =>
            {
                return ValueUpto { text: at, end: Some(ValueEnd::Missing) };
            }
            Err(Need)
                if tail.len() < 2
                    || tail.starts_with("</")
                    || (ends.padded && line_start)
                    || TOKEN_TAGS.close.get(..2).is_some_and(|lead| tail.starts_with(lead)) =>
            {
                return ValueUpto { text: at, end: None };
            }
            _ => from = at + 1,
        }
    }
    ValueUpto { text: rest.len(), end: eof.then_some(ValueEnd::Cut) }
}

/// What the input after an end tag that text follows says about the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterEnd {
    /// The value ended at that end tag.
    Ended,
    /// The value ended at its own end tag, and an end tag around it or the call's next
    /// parameter follows the text after it: that text is inside the element.
    EndedInElement,
    /// A later end tag begins at this offset: the first one was text of the value (an
    /// inline `</parameter>`, Kimi K3's `<|close|>argument<|sep|>`).
    Again(usize),
    /// Not known yet: the scan goes on from this offset when more input comes.
    More(usize),
}

/// How far past a value's end tag another end tag of its own may show that the first one
/// was text: tags that begin within this many bytes of it are read.
pub(crate) const MAX_AFTER_END: usize = 4096;

/// Reads on after an end tag `seen` that text follows, at the start of `rest`, in a value
/// whose own end tag is `</close>`: a later end tag of its own (or, after an end tag
/// around it, a later one of those) makes the first one text; a tag that starts markup (a
/// parameter, a key, a call: in Qwen3-Coder's padded values only at the start of a line,
/// in namespaced markup only after the token), an end tag around the value followed by a
/// tag or the end of the output, the end of the output or [`MAX_AFTER_END`] bytes without
/// either make it the value's end. The scan starts at `from` (past the end tag) and is
/// bounded, so each byte is read a bounded number of times.
pub(crate) fn scan_after_end(
    rest: &str,
    close: &str,
    ends: ValueEnds<'_>,
    seen: EndTag,
    from: usize,
    eof: bool,
) -> AfterEnd {
    debug_assert!(from >= seen.len(), "the scan starts past the end tag");
    let bytes = rest.as_bytes();
    // Only tags that begin before the bound count, so the answer is the same however the
    // input was cut into chunks.
    let window = bytes.get(..rest.len().min(MAX_AFTER_END)).unwrap_or_default();
    let mut from = from;
    while let Some(off) = memchr::memchr(b'<', window.get(from..).unwrap_or_default()) {
        let at = from + off;
        let tail = rest.get(at..).unwrap_or_default();
        let before = rest.get(..at).unwrap_or_default();
        let tag = match read_tag(tail, eof) {
            Ok(Some(tag)) => tag,
            Ok(None) => {
                from = at + 1;
                continue;
            }
            Err(Need) => return AfterEnd::More(at),
        };
        if tag.closing && same_tag(tag.name, close) {
            return AfterEnd::Again(at);
        }
        if tag.closing {
            let around =
                ends.enclosing.iter().any(|outer| !outer.is_empty() && same_tag(tag.name, outer));
            if around && matches!(seen, EndTag::Around(_)) {
                return AfterEnd::Again(at);
            }
            if around {
                match tag_follows(tail.get(tag.len..).unwrap_or_default(), ends.namespace, eof) {
                    Some(true) => return AfterEnd::EndedInElement,
                    None => return AfterEnd::More(at),
                    Some(false) => {}
                }
            }
        } else {
            let row = tag_row(tag.name).map(|(_, role)| role);
            let starts_markup = match ends.namespace {
                Some(token) => before.ends_with(token),
                None => row.is_some() && (!ends.padded || before.ends_with('\n')),
            };
            // A call's next parameter (or field) keeps the text before it inside the
            // element; a call, a name or a container starts something else.
            let calls = matches!(
                row,
                Some(Role::Call { .. } | Role::CallName { .. } | Role::Container { .. })
            );
            // After an end tag around the value (the value missed its own), a parameter tag
            // decides nothing: the value's own end tag may still come after it (a value that
            // quotes the markup, `… </tool_call>; keys go in <arg_key>.</arg_value>`).
            match (starts_markup, calls, seen) {
                (true, true, _) => return AfterEnd::Ended,
                (true, false, EndTag::Own(_)) => return AfterEnd::EndedInElement,
                _ => {}
            }
        }
        from = at + 1;
    }
    if eof || window.len() == MAX_AFTER_END { AfterEnd::Ended } else { AfterEnd::More(rest.len()) }
}

/// Looks for `</close>` in `rest`, holding back a possible partial closer.
pub(crate) fn scan_until_close(rest: &str, close: &str, eof: bool) -> Upto {
    let bytes = rest.as_bytes();
    let mut from = 0;
    while let Some(off) = memchr::memchr(b'<', bytes.get(from..).unwrap_or_default()) {
        let at = from + off;
        let tail = rest.get(at..).unwrap_or_default();
        match read_tag(tail, eof) {
            Ok(Some(tag)) if tag.closing && same_tag(tag.name, close) => {
                return Upto { text: at, closer: Some(tag.len) };
            }
            Err(Need)
                if tail.len() < 2
                    || tail.starts_with("</")
                    || TOKEN_TAGS.close.get(..2).is_some_and(|lead| tail.starts_with(lead)) =>
            {
                return Upto { text: at, closer: None };
            }
            _ => from = at + 1,
        }
    }
    Upto { text: rest.len(), closer: eof.then_some(0) }
}

/// A closer left over after a finished call at the start of `rest`: a `}` (the model
/// closed its JSON twice) or the end tag of a call container (`</tool_call>` after a
/// call that never opened it). Its length.
pub(crate) fn stray_closer(rest: &str, eof: bool) -> Look<usize> {
    match rest.as_bytes().first() {
        Some(b'}') => Ok(Some(1)),
        Some(b'<') => match read_tag(rest, eof)? {
            Some(tag)
                if tag.closing
                    && !tag.unfinished
                    && matches!(tag_row(tag.name), Some((_, Role::Container { .. }))) =>
            {
                Ok(Some(tag.len))
            }
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

/// Whether `text` holds nothing but whitespace, tags and special tokens (`<|…|>`,
/// `<｜…｜>`, `[UPPER_CASE]`): markup with no content.
pub(crate) fn only_markers(text: &str) -> bool {
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let len = special_token_len(rest).or_else(|| match read_tag(rest, true) {
            Ok(Some(tag)) if !tag.unfinished => Some(tag.len),
            _ => None,
        });
        match len {
            Some(len) => rest = rest.get(len..).unwrap_or_default().trim_start(),
            None => return false,
        }
    }
    true
}

/// The length of a special token at the start of `rest`: `<|name|>`, `<｜name｜>` or
/// `[NAME]` (upper case and `_`), each at most 64 bytes.
fn special_token_len(rest: &str) -> Option<usize> {
    const MAX: usize = 64;
    for (open, close) in [("<|", "|>"), ("<｜", "｜>")] {
        if let Some(after) = rest.strip_prefix(open) {
            // Bytes, so that the bound holds even where byte 64 splits a character.
            let inner = after.as_bytes().get(..after.len().min(MAX)).unwrap_or_default();
            let end = memchr::memmem::find(inner, close.as_bytes())?;
            let name = after.get(..end).unwrap_or_default();
            if name.contains(char::is_whitespace) {
                return None;
            }
            return Some(open.len() + end + close.len());
        }
    }
    let after = rest.strip_prefix('[')?;
    let end = after.bytes().take(MAX).position(|b| b == b']')?;
    let name = after.get(..end).unwrap_or_default();
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        .then_some(end + 2)
}
