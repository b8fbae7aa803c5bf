//! Deterministic benchmark inputs, built in code so every run and every machine sees
//! the same bytes. Shared by `benches/parse.rs` and by `compare/` (which includes this
//! file with `#[path]`), so both measure exactly the same inputs.
//!
//! - [`many_calls`]: prose and a small `<tool_call>` repeated up to the size.
//! - [`long_call`]: one `<tool_call>` whose `content` string fills the size with JSON
//!   escapes (`\n`, `\"`, `\\`, `\uXXXX`, surrogate pairs) and raw é, 東京, 😀.

use std::fmt;

/// An input size, shown as `2 KB` (1 KB = 1024 bytes) in bench and table output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Size(pub(crate) usize);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} KB", self.0 / 1024)
    }
}

/// The three sizes every workload is measured at.
pub(crate) const SIZES: [Size; 3] = [Size(2 * 1024), Size(20 * 1024), Size(200 * 1024)];

/// One repetition of the many-calls workload (105 bytes).
pub(crate) const MANY_CALLS_UNIT: &str = "some prose <tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"celsius\"}}\n</tool_call>\n";

/// [`MANY_CALLS_UNIT`] repeated as often as it fits in `size` bytes (at least once).
pub(crate) fn many_calls(size: Size) -> String {
    MANY_CALLS_UNIT.repeat((size.0 / MANY_CALLS_UNIT.len()).max(1))
}

const LONG_CALL_HEAD: &str =
    "<tool_call>\n{\"name\":\"write_file\",\"arguments\":{\"path\":\"a.txt\",\"content\":\"";
const LONG_CALL_TAIL: &str = "\"}}\n</tool_call>";

/// Pieces of the long call's `content`, already JSON-escaped, cycled in order.
const CONTENT_PIECES: [&str; 10] = [
    "# Notes\\n\\nThe caf\\u00e9 near the station opens at 7; ",
    "we met in 東京 and she said \\\"bonjour\\\" twice. ",
    "Plain ASCII makes up most real files: code, prose, lists and tables. ",
    "\\tindented line with a backslash \\\\ and a slash \\/\\n",
    "Emoji as a character 😀 and as an escape \\ud83d\\ude00.\\n",
    "Accents: é è ê ë, escaped \\u00e9\\u00e8, and CJK \\u6771\\u4eac.\\n",
    "fn main() {\\n    println!(\\\"héllo, 東京 😀\\\");\\n}\\n",
    "- item one\\n- item two\\n- item \\\"three\\\"\\n",
    "Line with a carriage return\\r\\n and a form feed \\f. ",
    "More ordinary words to keep the ratio of escapes realistic for a text file.\\n",
];

/// One `write_file` call of exactly `size` bytes (for sizes above ~100 bytes).
pub(crate) fn long_call(size: Size) -> String {
    let budget = size.0.saturating_sub(LONG_CALL_HEAD.len() + LONG_CALL_TAIL.len());
    let mut content = String::with_capacity(budget);
    for piece in CONTENT_PIECES.iter().cycle() {
        if content.len() + piece.len() > budget {
            break;
        }
        content.push_str(piece);
    }
    while content.len() < budget {
        content.push('.');
    }
    let mut input = String::with_capacity(size.0);
    input.push_str(LONG_CALL_HEAD);
    input.push_str(&content);
    input.push_str(LONG_CALL_TAIL);
    input
}

/// The JSON objects of an input: every text between `<tool_call>\n` and `\n</tool_call>`.
pub(crate) fn json_payloads(input: &str) -> Vec<&str> {
    input
        .split("<tool_call>\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n</tool_call>").map(|(json, _)| json))
        .collect()
}

/// Splits `input` into chunks of `target` bytes, each extended to the next char
/// boundary so that no UTF-8 character is split (chunks are `target` to
/// `target + 3` bytes; the last may be shorter).
pub(crate) fn chunks(input: &str, target: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(input.len() / target.max(1) + 1);
    let mut rest = input;
    while !rest.is_empty() {
        let mut end = target.max(1).min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
    }
    out
}
