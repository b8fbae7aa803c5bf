//! What the JSON reader reports to: the [`Sink`] of its tokens, the containers it opens,
//! and what it had to close when its input ended.

use crate::json::scalar::decode_escaped;

/// What a container is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame {
    Object,
    Array,
}

/// Receives the tokens of one JSON value. Offsets are absolute input offsets.
pub(crate) trait Sink {
    /// A container opens; `at` is the offset of its bracket.
    fn open(&mut self, frame: Frame, at: usize);
    /// The innermost container closes; `end` is the offset just past its bracket
    /// (or where the input ended, when it was closed by a repair).
    fn close(&mut self, end: usize);
    /// An object key, decoded.
    fn key(&mut self, key: &str);
    /// A string value begins.
    fn str_start(&mut self);
    /// Decoded string text. `clean` promises it holds no `"`, `\` or control character.
    fn str_part(&mut self, text: &str, clean: bool);
    /// String text still escaped, as canonical JSON escapes it: only `\"`, `\\`, `\n`,
    /// `\r`, `\t`, `\b` and `\f` occur. A canonical writer copies it as it is.
    fn str_escaped(&mut self, json: &str) {
        self.str_part(&decode_escaped(json), false);
    }
    /// The string value ends.
    fn str_end(&mut self);
    /// A number or literal, already in canonical JSON form.
    fn scalar(&mut self, json: &str);
    /// Something was repaired.
    fn repaired(&mut self, what: &'static str);
    /// A bracket would have nested deeper than `max_depth`; the value stops before it.
    fn too_deep(&mut self, max_depth: usize);
}

/// What [`Reader::finish`] had to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Closed {
    /// Nothing: the value was whole.
    Nothing,
    /// Only closing brackets: every value in the object was whole.
    Brackets,
    /// A value, a key, or what a `:` or `,` promised: the value was cut off.
    Value,
}

impl Closed {
    /// Whether anything had to be closed.
    pub(crate) fn any(self) -> bool {
        self != Closed::Nothing
    }
}
