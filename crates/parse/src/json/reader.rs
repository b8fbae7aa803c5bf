//! A resumable, repairing JSON reader.
//!
//! `Reader::feed` consumes text in any chunking and reports tokens to a [`Sink`]
//! as soon as they are settled. It keeps its own state between calls, so the total
//! work is linear in the input. It accepts what models write besides JSON (single
//! and smart quotes, unquoted keys, trailing or missing commas, comments, Python
//! literals, raw control characters in strings) and reports each repair.

use crate::json::expr;
use crate::json::scalar::{Scalar, canonical_scalar};
use crate::json::scan::{plain_run, stop_table_for};
pub(crate) use crate::json::sink::{Closed, Frame, Sink};

mod arithmetic;

/// How far `feed` got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// All input consumed; the value is not finished.
    NeedMore,
    /// The value ended; this many bytes of the input were consumed.
    Done(usize),
    /// The byte at this offset of the input cannot continue the value. Nothing
    /// from it on was consumed; the reader is as it was before it.
    Invalid(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Value,
    /// After `[`: a value or `]`.
    FirstValue,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After `,` in an object.
    Key,
    Colon,
    CommaOrEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quote {
    Double,
    Single,
    /// Opened with U+201C, closed by U+201D (or `"`).
    SmartDouble,
    /// Opened with U+2018, closed by U+2019.
    SmartSingle,
    /// Opened and closed by the reader's string token (Gemma 4's `<|"|>`): the text
    /// between is raw, with no escapes.
    Token,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// `\u` and `n` hex digits so far.
    Hex {
        n: u8,
        acc: u32,
    },
    /// In a [`Quote::Token`] string: this many bytes of the string token matched so far.
    Token(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    Structural,
    Str {
        quote: Quote,
        key: bool,
        escape: Escape,
    },
    /// A number, literal or unquoted key being collected in `scalar`.
    Scalar {
        key: bool,
    },
    /// This many bytes of the string token, where a key or value starts.
    TokenOpen {
        key: bool,
        k: u8,
    },
    /// A number in an object or array, then white space: it stands unless an operator
    /// follows (`8 / 100`, a sum the model did not work out; [`crate::json::expr`]).
    AfterNumber,
    /// An arithmetic expression being collected in `scalar`, `depth` parentheses open.
    Expr {
        depth: u8,
    },
    /// A `/` that may start a comment.
    Slash,
    LineComment,
    BlockComment {
        star: bool,
    },
}

/// Invariant: `stack.len() <= max_depth`; `lex` is `Str { key: true, .. }` or
/// `Scalar { key: true }` only while the innermost frame is an object.
#[derive(Debug)]
pub(crate) struct Reader {
    stack: Vec<Frame>,
    expect: Expect,
    lex: Lex,
    key: String,
    scalar: String,
    high_surrogate: Option<u16>,
    max_depth: usize,
    /// The value stopped at a bracket that would have nested deeper than `max_depth`.
    too_deep: bool,
    started: bool,
    /// A string, number or literal may be the whole value (Python argument values).
    top_scalar: bool,
    /// The token that opens and closes raw strings (Gemma 4's `<|"|>`), when the format
    /// has one. Its first byte occurs in it once only.
    string_token: Option<std::sync::Arc<str>>,
}

const LEFT_DOUBLE: char = '\u{201C}';
const RIGHT_DOUBLE: char = '\u{201D}';
const LEFT_SINGLE: char = '\u{2018}';
const RIGHT_SINGLE: char = '\u{2019}';

/// JSON whitespace (also what may sit between a call or marker and the text).
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-' | b'.' | b'$')
}

impl Reader {
    pub(crate) fn new(max_depth: usize) -> Reader {
        Reader {
            stack: Vec::with_capacity(8),
            expect: Expect::Value,
            lex: Lex::Structural,
            key: String::with_capacity(16),
            scalar: String::new(),
            high_surrogate: None,
            max_depth: max_depth.max(1),
            too_deep: false,
            started: false,
            top_scalar: false,
            string_token: None,
        }
    }

    /// Sets the token that opens and closes raw strings (the format's literal syntax:
    /// unquoted keys are then no repair either).
    pub(crate) fn set_string_token(&mut self, token: Option<std::sync::Arc<str>>) {
        self.string_token = token.filter(|t| !t.is_empty() && t.len() < usize::from(u8::MAX));
    }

    /// A reader whose value may also be a string, number or literal. It stops (with
    /// [`Status::Invalid`] and [`Reader::complete`] true) at the first byte after it.
    pub(crate) fn new_value(max_depth: usize) -> Reader {
        Reader { top_scalar: true, ..Reader::new(max_depth) }
    }

    /// Makes this reader a new value reader (see [`Reader::new_value`]), keeping its
    /// allocations.
    pub(crate) fn recycle_value(&mut self, max_depth: usize) {
        self.recycle(max_depth);
        self.top_scalar = true;
    }

    /// Whether the reader has begun its value.
    pub(crate) fn has_begun(&self) -> bool {
        self.started
    }

    /// Whether the reader is inside a value string in double quotes: text without a `"`
    /// leaves it there, whatever its escapes.
    pub(crate) fn in_value_string(&self) -> bool {
        matches!(self.lex, Lex::Str { quote: Quote::Double, key: false, .. })
    }

    /// Whether a whole value has been read.
    pub(crate) fn complete(&self) -> bool {
        self.started
            && self.stack.is_empty()
            && self.expect == Expect::CommaOrEnd
            && self.lex == Lex::Structural
    }

    /// Whether the value stopped at a bracket nested deeper than `max_depth`.
    pub(crate) fn too_deep(&self) -> bool {
        self.too_deep
    }

    /// Makes this reader a new one, keeping its allocations.
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.stack.clear();
        self.key.clear();
        self.scalar.clear();
        self.expect = Expect::Value;
        self.lex = Lex::Structural;
        self.high_surrogate = None;
        self.max_depth = max_depth.max(1);
        self.too_deep = false;
        self.started = false;
        self.top_scalar = false;
        self.string_token = None;
    }

    /// Consumes `input`, which starts at absolute offset `base`.
    pub(crate) fn feed(&mut self, input: &str, base: usize, sink: &mut impl Sink) -> Status {
        let bytes = input.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match self.lex {
                Lex::Str { quote: Quote::Token, key, escape } => {
                    i += self.token_string(input, i, key, escape, sink);
                }
                Lex::TokenOpen { key, k } => {
                    let token = self.string_token.as_deref().unwrap_or_default().as_bytes();
                    if token.get(usize::from(k)) != Some(&b) {
                        return Status::Invalid(i);
                    }
                    i += 1;
                    if usize::from(k) + 1 == token.len() {
                        self.lex = Lex::Str { quote: Quote::Token, key, escape: Escape::None };
                        if key {
                            self.key.clear();
                        } else {
                            sink.str_start();
                        }
                    } else {
                        self.lex = Lex::TokenOpen { key, k: k + 1 };
                    }
                }
                Lex::Str { quote, key, escape: Escape::None } => {
                    let start = i;
                    let table = stop_table_for(quote);
                    let words = matches!(quote, Quote::Double | Quote::Token);
                    i += plain_run(bytes.get(i..).unwrap_or_default(), table, words);
                    // In a value string, the escapes canonical JSON also uses pass through
                    // as they are, so text full of `\n` and `\"` is copied, not decoded.
                    let mut escaped = false;
                    if quote == Quote::Double && !key && self.high_surrogate.is_none() {
                        while bytes.get(i) == Some(&b'\\')
                            && matches!(
                                bytes.get(i + 1),
                                Some(b'n' | b't' | b'r' | b'b' | b'f' | b'"' | b'\\')
                            )
                        {
                            escaped = true;
                            i += 2;
                            i += plain_run(bytes.get(i..).unwrap_or_default(), table, words);
                        }
                    }
                    if i > start {
                        let run = input.get(start..i).unwrap_or_default();
                        if escaped {
                            sink.str_escaped(run);
                        } else {
                            self.str_text(run, quote == Quote::Double, key, sink);
                        }
                    }
                    let Some(&b) = bytes.get(i) else { break };
                    i += self.string_stop(input, i, b, quote, key, sink);
                }
                Lex::Str { quote, key, escape } => {
                    let c =
                        input.get(i..).and_then(|rest| rest.chars().next()).unwrap_or('\u{FFFD}');
                    i += c.len_utf8();
                    self.escape_char(c, quote, key, escape, sink);
                }
                Lex::Scalar { key } => {
                    // Unquoted keys of token-string formats (Gemma 4) may hold spaces:
                    // `call:record{key with space:1}`.
                    if is_scalar_byte(b) || (key && b == b' ' && self.string_token.is_some()) {
                        self.scalar.push(char::from(b));
                        i += 1;
                    } else if !key
                        && (is_ws(b) || matches!(b, b'*' | b'/'))
                        && !self.stack.is_empty()
                        && expr::is_number(&self.scalar)
                    {
                        self.lex = if is_ws(b) {
                            Lex::AfterNumber
                        } else {
                            self.scalar.push(char::from(b));
                            Lex::Expr { depth: 0 }
                        };
                        i += 1;
                    } else {
                        self.lex = Lex::Structural;
                        if key {
                            self.end_unquoted_key(sink);
                        } else {
                            self.end_scalar(sink);
                        }
                    }
                }
                Lex::AfterNumber | Lex::Expr { .. } => match self.arithmetic(b, sink) {
                    Some(n) => i += n,
                    None => return Status::Invalid(i),
                },
                Lex::Slash => match b {
                    b'/' => {
                        self.lex = Lex::LineComment;
                        i += 1;
                    }
                    b'*' => {
                        self.lex = Lex::BlockComment { star: false };
                        i += 1;
                    }
                    // Not a comment: the `/` stays consumed (it may have ended an earlier
                    // chunk), and this byte is where the value broke off.
                    _ => return Status::Invalid(i),
                },
                Lex::LineComment => {
                    match memchr::memchr(b'\n', bytes.get(i..).unwrap_or_default()) {
                        Some(n) => {
                            i += n + 1;
                            self.lex = Lex::Structural;
                        }
                        None => i = bytes.len(),
                    }
                }
                Lex::BlockComment { star } => {
                    i += 1;
                    self.lex = match (star, b) {
                        (true, b'/') => Lex::Structural,
                        (_, b'*') => Lex::BlockComment { star: true },
                        _ => Lex::BlockComment { star: false },
                    };
                }
                Lex::Structural => match self.structural_run(input, i, base, sink) {
                    Ok(next) => i = next,
                    Err(status) => return status,
                },
            }
        }
        Status::NeedMore
    }

    /// Structural bytes from `input[i..]` one after another, without going back to the
    /// dispatch on `lex` until a token changes it: where the next token starts, or how
    /// the value ended.
    fn structural_run(
        &mut self,
        input: &str,
        mut i: usize,
        base: usize,
        sink: &mut impl Sink,
    ) -> Result<usize, Status> {
        let bytes = input.as_bytes();
        while let Some(&b) = bytes.get(i) {
            if is_ws(b) {
                i += 1;
                continue;
            }
            match self.structural(input, i, b, base, sink) {
                Step::Consumed(n) => i += n,
                Step::Done(n) => return Err(Status::Done(i + n)),
                Step::Invalid => return Err(Status::Invalid(i)),
            }
            if self.lex != Lex::Structural {
                break;
            }
        }
        Ok(i)
    }

    /// What [`Reader::finish`] would close now.
    pub(crate) fn open_cut(&self) -> Closed {
        let in_value = match self.lex {
            Lex::Str { .. } | Lex::Scalar { .. } | Lex::TokenOpen { .. } | Lex::Expr { .. } => true,
            // The number stands: `finish` ends it as whole.
            Lex::AfterNumber => return Closed::Brackets,
            Lex::Slash | Lex::LineComment | Lex::BlockComment { .. } | Lex::Structural => false,
        };
        if in_value || (self.started && self.expect != Expect::CommaOrEnd && !self.stack.is_empty())
        {
            Closed::Value
        } else if self.started && !self.stack.is_empty() {
            Closed::Brackets
        } else {
            Closed::Nothing
        }
    }

    /// Ends the input: closes whatever is open, and says what that was.
    pub(crate) fn finish(&mut self, end: usize, sink: &mut impl Sink) -> Closed {
        let mut closed = Closed::Nothing;
        match std::mem::replace(&mut self.lex, Lex::Structural) {
            Lex::Str { key: false, escape, .. } => {
                if let (Escape::Token(k), Some(token)) = (escape, self.string_token.as_deref()) {
                    sink.str_part(token.get(..usize::from(k)).unwrap_or_default(), false);
                }
                self.flush_surrogate(false, sink);
                sink.str_end();
                closed = Closed::Value;
                self.expect = Expect::CommaOrEnd;
            }
            Lex::Scalar { key: false } => {
                // Only the end of the input ends a scalar here: it may have gone on.
                self.end_scalar(sink);
                closed = Closed::Value;
            }
            Lex::Str { key: true, .. } | Lex::Scalar { key: true } => {
                self.key.clear();
                closed = Closed::Value;
            }
            Lex::AfterNumber => self.end_scalar(sink),
            // Cut off: what there is may have gone on (`8 / 10` of `8 / 100`), so it is
            // not worked out; the key has no value.
            Lex::Expr { .. } => {
                self.scalar.clear();
                self.expect = Expect::CommaOrEnd;
                closed = Closed::Value;
            }
            Lex::TokenOpen { key, .. } => {
                if key {
                    self.key.clear();
                }
                closed = Closed::Value;
            }
            Lex::Slash | Lex::LineComment | Lex::BlockComment { .. } | Lex::Structural => {}
        }
        if !self.started {
            return closed;
        }
        if self.expect != Expect::CommaOrEnd && !self.stack.is_empty() {
            // After `{`, `[`, `:` or `,`: a key or a value was still to come.
            closed = Closed::Value;
        }
        while self.stack.pop().is_some() {
            sink.close(end);
            closed = closed.max(Closed::Brackets);
        }
        closed
    }

    /// Reads raw string text up to the string token at `input[i..]`; returns how many
    /// bytes it consumed. A token split across inputs is matched byte by byte.
    fn token_string(
        &mut self,
        input: &str,
        i: usize,
        key: bool,
        escape: Escape,
        sink: &mut impl Sink,
    ) -> usize {
        let Some(token) = self.string_token.clone() else {
            self.lex = Lex::Structural;
            return 0;
        };
        let tb = token.as_bytes();
        let bytes = input.as_bytes();
        let first = tb.first().copied().unwrap_or(b'<');
        let mut k = match escape {
            Escape::Token(k) => usize::from(k),
            _ => 0,
        };
        let mut at = i;
        if k == 0 {
            // Plain text up to the token's first byte.
            let rest = bytes.get(i..).unwrap_or_default();
            let run = memchr::memchr(first, rest).unwrap_or(rest.len());
            if run > 0 {
                self.str_text(input.get(i..i + run).unwrap_or_default(), false, key, sink);
                return run;
            }
        }
        while let Some(&b) = bytes.get(at) {
            if tb.get(k) != Some(&b) {
                // Not the token: what matched of it is text.
                if k == 0 {
                    self.str_text(input.get(at..at + 1).unwrap_or_default(), false, key, sink);
                    return at + 1 - i;
                }
                self.str_text(token.get(..k).unwrap_or_default(), false, key, sink);
                self.lex = Lex::Str { quote: Quote::Token, key, escape: Escape::None };
                return at - i;
            }
            k += 1;
            at += 1;
            if k == tb.len() {
                self.close_string(key, sink);
                return at - i;
            }
        }
        self.lex = Lex::Str {
            quote: Quote::Token,
            key,
            escape: Escape::Token(u8::try_from(k).unwrap_or(0)),
        };
        at - i
    }

    fn str_text(&mut self, text: &str, clean: bool, key: bool, sink: &mut impl Sink) {
        if self.high_surrogate.is_some() {
            self.flush_surrogate(key, sink);
        }
        if key {
            self.key.push_str(text);
        } else {
            sink.str_part(text, clean);
        }
    }

    fn str_char(&mut self, c: char, key: bool, sink: &mut impl Sink) {
        let mut tmp = [0u8; 4];
        let text: &str = c.encode_utf8(&mut tmp);
        let clean = !(c == '"' || c == '\\' || c < ' ');
        self.str_text(text, clean, key, sink);
    }

    fn flush_surrogate(&mut self, key: bool, sink: &mut impl Sink) {
        if self.high_surrogate.take().is_some() {
            sink.repaired("a lone UTF-16 surrogate escape became U+FFFD");
            self.str_text("\u{FFFD}", true, key, sink);
        }
    }

    /// Handles the byte at `i` that stopped the fast scan of a string body.
    /// Returns how many bytes it consumed.
    fn string_stop(
        &mut self,
        input: &str,
        i: usize,
        b: u8,
        quote: Quote,
        key: bool,
        sink: &mut impl Sink,
    ) -> usize {
        let closes = match (quote, b) {
            (Quote::Double, b'"') | (Quote::Single, b'\'') => Some(1),
            (Quote::SmartDouble | Quote::SmartSingle, b'"') => Some(1),
            (Quote::SmartDouble | Quote::SmartSingle, 0xE2) => {
                let c = input.get(i..).and_then(|rest| rest.chars().next());
                match (quote, c) {
                    (Quote::SmartDouble, Some(RIGHT_DOUBLE))
                    | (Quote::SmartSingle, Some(RIGHT_SINGLE)) => Some(3),
                    (_, Some(c)) => {
                        self.str_char(c, key, sink);
                        return c.len_utf8();
                    }
                    (_, None) => return 1,
                }
            }
            _ => None,
        };
        if let Some(n) = closes {
            self.close_string(key, sink);
            return n;
        }
        if b == b'\\' {
            self.lex = Lex::Str { quote, key, escape: Escape::Backslash };
            return 1;
        }
        // A `"` inside a single-quoted string, or a raw control character.
        if b < 0x20 {
            sink.repaired("a raw control character inside a string was escaped");
        }
        self.str_char(char::from(b), key, sink);
        1
    }

    fn escape_char(
        &mut self,
        c: char,
        quote: Quote,
        key: bool,
        escape: Escape,
        sink: &mut impl Sink,
    ) {
        let plain = Lex::Str { quote, key, escape: Escape::None };
        match escape {
            Escape::None | Escape::Token(_) => {}
            Escape::Backslash => {
                self.lex = plain;
                let decoded = match c {
                    '"' | '\\' | '/' | '\'' => c,
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'u' => {
                        self.lex = Lex::Str { quote, key, escape: Escape::Hex { n: 0, acc: 0 } };
                        return;
                    }
                    _ => {
                        // An unknown escape: keep the backslash and the character.
                        sink.repaired("an invalid escape kept its backslash");
                        self.str_char('\\', key, sink);
                        c
                    }
                };
                self.str_char(decoded, key, sink);
            }
            Escape::Hex { n, acc } => {
                let Some(digit) = c.to_digit(16) else {
                    // Not hex: drop the broken escape, then read the character as usual.
                    sink.repaired("an incomplete \\u escape was dropped");
                    self.lex = plain;
                    self.after_broken_escape(c, quote, key, sink);
                    return;
                };
                let acc = acc * 16 + digit;
                if n < 3 {
                    self.lex = Lex::Str { quote, key, escape: Escape::Hex { n: n + 1, acc } };
                    return;
                }
                self.lex = plain;
                self.code_unit(acc, key, sink);
            }
        }
    }

    fn after_broken_escape(&mut self, c: char, quote: Quote, key: bool, sink: &mut impl Sink) {
        let ends = matches!((quote, c), (Quote::Double, '"') | (Quote::Single, '\''))
            || matches!(
                (quote, c),
                (Quote::SmartDouble, '"' | RIGHT_DOUBLE) | (Quote::SmartSingle, RIGHT_SINGLE)
            );
        if ends {
            self.close_string(key, sink);
        } else if c == '\\' {
            self.lex = Lex::Str { quote, key, escape: Escape::Backslash };
        } else {
            self.str_char(c, key, sink);
        }
    }

    /// The string (a key, or a value) ends at its closing quote.
    fn close_string(&mut self, key: bool, sink: &mut impl Sink) {
        self.flush_surrogate(key, sink);
        self.lex = Lex::Structural;
        if key {
            self.expect = Expect::Colon;
        } else {
            sink.str_end();
            self.expect = Expect::CommaOrEnd;
        }
    }

    fn code_unit(&mut self, unit: u32, key: bool, sink: &mut impl Sink) {
        if (0xD800..0xDC00).contains(&unit) {
            self.flush_surrogate(key, sink);
            self.high_surrogate = u16::try_from(unit).ok();
            return;
        }
        if (0xDC00..0xE000).contains(&unit) {
            if let Some(high) = self.high_surrogate.take() {
                let c = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (unit - 0xDC00);
                let c = char::from_u32(c).unwrap_or('\u{FFFD}');
                self.str_char(c, key, sink);
            } else {
                sink.repaired("a lone UTF-16 surrogate escape became U+FFFD");
                self.str_char('\u{FFFD}', key, sink);
            }
            return;
        }
        self.flush_surrogate(key, sink);
        let c = char::from_u32(unit).unwrap_or('\u{FFFD}');
        self.str_char(c, key, sink);
    }

    fn structural(
        &mut self,
        input: &str,
        i: usize,
        b: u8,
        base: usize,
        sink: &mut impl Sink,
    ) -> Step {
        let in_object = self.stack.last() == Some(&Frame::Object);
        match (self.expect, b) {
            (_, b'/') if self.started => {
                self.lex = Lex::Slash;
                Step::Consumed(1)
            }
            (_, b'#') if self.started && self.expect != Expect::Value => {
                self.lex = Lex::LineComment;
                sink.repaired("a # comment was removed");
                Step::Consumed(1)
            }
            (Expect::FirstKey | Expect::Key, b'}')
            | (Expect::CommaOrEnd, b'}')
            | (Expect::FirstValue | Expect::CommaOrEnd, b']')
            | (Expect::Value, b']')
                if self.closes(b) =>
            {
                if self.expect == Expect::Key || (self.expect == Expect::Value && b == b']') {
                    sink.repaired("a trailing comma was removed");
                }
                self.stack.pop();
                sink.close(base + i + 1);
                self.expect = Expect::CommaOrEnd;
                if self.stack.is_empty() { Step::Done(1) } else { Step::Consumed(1) }
            }
            (Expect::CommaOrEnd, b',') if self.started && !self.stack.is_empty() => {
                self.expect = if in_object { Expect::Key } else { Expect::Value };
                Step::Consumed(1)
            }
            (Expect::CommaOrEnd, b'"' | b'\'') if in_object => {
                sink.repaired("a missing comma was inserted");
                self.expect = Expect::Key;
                self.structural(input, i, b, base, sink)
            }
            (Expect::CommaOrEnd, b'{' | b'[' | b'"')
                if self.stack.last() == Some(&Frame::Array) =>
            {
                sink.repaired("a missing comma was inserted");
                self.expect = Expect::Value;
                self.structural(input, i, b, base, sink)
            }
            (Expect::Colon, b':') => {
                self.expect = Expect::Value;
                sink.key(&self.key);
                self.key.clear();
                Step::Consumed(1)
            }
            (Expect::FirstKey | Expect::Key, _) => self.start_key(input, i, b, sink),
            (Expect::Value | Expect::FirstValue, _) => self.start_value(input, i, b, base, sink),
            _ => Step::Invalid,
        }
    }

    fn closes(&self, b: u8) -> bool {
        match self.stack.last() {
            Some(Frame::Object) => b == b'}',
            Some(Frame::Array) => b == b']',
            None => false,
        }
    }

    fn start_key(&mut self, input: &str, i: usize, b: u8, sink: &mut impl Sink) -> Step {
        if self.string_token.as_deref().is_some_and(|t| t.as_bytes().first() == Some(&b)) {
            self.lex = Lex::TokenOpen { key: true, k: 1 };
            return Step::Consumed(1);
        }
        let quote = match b {
            b'"' => Some((Quote::Double, 1)),
            b'\'' => Some((Quote::Single, 1)),
            0xE2 => match input.get(i..).and_then(|rest| rest.chars().next()) {
                Some(LEFT_DOUBLE) | Some(RIGHT_DOUBLE) => Some((Quote::SmartDouble, 3)),
                Some(LEFT_SINGLE) => Some((Quote::SmartSingle, 3)),
                _ => None,
            },
            _ => None,
        };
        if let Some((quote, n)) = quote {
            if quote != Quote::Double {
                sink.repaired("a key was quoted with other quotes than \"");
            }
            self.key.clear();
            self.lex = Lex::Str { quote, key: true, escape: Escape::None };
            return Step::Consumed(n);
        }
        if b.is_ascii_alphabetic() || b == b'_' || b == b'$' {
            if self.string_token.is_none() {
                sink.repaired("an unquoted key was quoted");
            }
            self.scalar.clear();
            self.lex = Lex::Scalar { key: true };
            return Step::Consumed(0);
        }
        Step::Invalid
    }

    fn end_unquoted_key(&mut self, _sink: &mut impl Sink) {
        self.key.clear();
        self.key.push_str(self.scalar.trim_end_matches(' '));
        self.scalar.clear();
        self.expect = Expect::Colon;
    }

    fn start_value(
        &mut self,
        input: &str,
        i: usize,
        b: u8,
        base: usize,
        sink: &mut impl Sink,
    ) -> Step {
        if !self.started && b != b'{' && b != b'[' {
            let scalar_start =
                matches!(b, b'"' | b'\'' | 0xE2 | b'-' | b'+' | b'.') || b.is_ascii_alphanumeric();
            if !self.top_scalar || !scalar_start {
                return Step::Invalid;
            }
            self.started = true;
        }
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= self.max_depth {
                    self.too_deep = true;
                    sink.too_deep(self.max_depth);
                    return Step::Invalid;
                }
                self.started = true;
                let frame = if b == b'{' { Frame::Object } else { Frame::Array };
                self.stack.push(frame);
                sink.open(frame, base + i);
                self.expect = if b == b'{' { Expect::FirstKey } else { Expect::FirstValue };
                Step::Consumed(1)
            }
            b'"' | b'\'' => {
                if b == b'\'' {
                    sink.repaired("a single-quoted string was requoted");
                }
                let quote = if b == b'"' { Quote::Double } else { Quote::Single };
                self.lex = Lex::Str { quote, key: false, escape: Escape::None };
                sink.str_start();
                Step::Consumed(1)
            }
            0xE2 => match input.get(i..).and_then(|rest| rest.chars().next()) {
                Some(c @ (LEFT_DOUBLE | RIGHT_DOUBLE | LEFT_SINGLE)) => {
                    sink.repaired("a string in typographic quotes was requoted");
                    let quote =
                        if c == LEFT_SINGLE { Quote::SmartSingle } else { Quote::SmartDouble };
                    self.lex = Lex::Str { quote, key: false, escape: Escape::None };
                    sink.str_start();
                    Step::Consumed(3)
                }
                _ => Step::Invalid,
            },
            _ if self.string_token.as_deref().is_some_and(|t| t.as_bytes().first() == Some(&b)) => {
                self.lex = Lex::TokenOpen { key: false, k: 1 };
                Step::Consumed(1)
            }
            _ if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.') => {
                self.scalar.clear();
                self.lex = Lex::Scalar { key: false };
                Step::Consumed(0)
            }
            _ => Step::Invalid,
        }
    }

    fn end_scalar(&mut self, sink: &mut impl Sink) {
        let text = std::mem::take(&mut self.scalar);
        match canonical_scalar(&text) {
            Scalar::Json(json) => sink.scalar(json),
            Scalar::Repaired(json, what) => {
                sink.repaired(what);
                sink.scalar(&json);
            }
            Scalar::Word => {
                sink.repaired("an unquoted word was read as a string");
                sink.str_start();
                sink.str_part(&text, true);
                sink.str_end();
            }
        }
        self.scalar = text;
        self.scalar.clear();
        self.expect = Expect::CommaOrEnd;
    }
}

enum Step {
    Consumed(usize),
    Done(usize),
    Invalid,
}
