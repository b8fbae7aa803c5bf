//! Dialects that start at the beginning of a line: labelled calls (ReAct
//! `Action:`/`Action Input:`, `function.name:`/`function.arguments:`) and Python
//! calls alone on a line.

use std::ops::Range;

use crate::read::python::{self, Ahead};
use crate::{Builtin, Config};

/// A pair of labels: the first names the tool, the second (on the next line)
/// introduces its arguments.
struct Labels {
    dialect: Builtin,
    name: &'static str,
    args: &'static [&'static str],
}

const LABELS: &[Labels] = &[
    Labels { dialect: Builtin::React, name: "Action:", args: &["Action Input:", "Action input:"] },
    Labels {
        dialect: Builtin::KeyValue,
        name: "function.name:",
        args: &["function.arguments:", "function.parameters:"],
    },
];

/// The most indentation before a line dialect.
const MAX_INDENT: usize = 16;
/// The longest tool name after a label.
const MAX_LABEL_NAME: usize = 128;

/// What a line starts.
pub(crate) enum LineOpen {
    No,
    NeedMore,
    /// A Python call alone on the line.
    Python,
    /// A labelled call: the name is at `name` (relative to the line content); the
    /// labels end after `len` bytes.
    Labelled {
        name: Range<usize>,
        len: usize,
    },
}

/// Decides what the line starting at `rest` holds. Returns the indentation length
/// (which stays text) and the decision.
pub(crate) fn line_open(rest: &str, eof: bool, config: &Config) -> (usize, LineOpen) {
    let b = rest.as_bytes();
    let indent = b.iter().take(MAX_INDENT + 1).take_while(|&&c| c == b' ' || c == b'\t').count();
    if indent > MAX_INDENT {
        return (indent, LineOpen::No);
    }
    let line = rest.get(indent..).unwrap_or_default();
    if line.is_empty() {
        return (indent, if eof { LineOpen::No } else { LineOpen::NeedMore });
    }
    // Every line dialect starts with a letter or `_`; most lines are decided here.
    let first = line.as_bytes().first().copied().unwrap_or(b' ');
    if !first.is_ascii_alphabetic() && first != b'_' {
        return (indent, LineOpen::No);
    }
    let mut need_more = false;
    for labels in LABELS {
        if labels.name.as_bytes().first() != Some(&first) || !config.dialects.has(labels.dialect) {
            continue;
        }
        match labelled(line, labels, eof) {
            LineOpen::No => {}
            LineOpen::NeedMore => need_more = true,
            found => return (indent, found),
        }
    }
    if config.dialects.has(Builtin::Python) {
        match python::call_ahead(line, eof, config, true) {
            Ahead::Yes if !need_more => return (indent, LineOpen::Python),
            Ahead::Yes | Ahead::NeedMore => need_more = true,
            Ahead::No => {}
        }
    }
    (indent, if need_more { LineOpen::NeedMore } else { LineOpen::No })
}

/// `LABEL NAME\nARGS_LABEL`.
fn labelled(line: &str, labels: &Labels, eof: bool) -> LineOpen {
    let b = line.as_bytes();
    let label = labels.name;
    if !line.starts_with(label) {
        let partial = line.len() < label.len() && label.starts_with(line);
        return if partial && !eof { LineOpen::NeedMore } else { LineOpen::No };
    }
    let mut i = label.len();
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t') && i < label.len() + 8 {
        i += 1;
    }
    let name_start = i;
    while b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
        i += 1;
        if i - name_start > MAX_LABEL_NAME {
            return LineOpen::No;
        }
    }
    let name_end = i;
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r') && i < name_end + 8 {
        i += 1;
    }
    match b.get(i) {
        None if !eof => return LineOpen::NeedMore,
        Some(b'\n') if name_end > name_start => i += 1,
        _ => return LineOpen::No,
    }
    let indent_start = i;
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t') && i < indent_start + MAX_INDENT {
        i += 1;
    }
    let next = line.get(i..).unwrap_or_default();
    for args in labels.args {
        if next.starts_with(args) {
            return LineOpen::Labelled { name: name_start..name_end, len: i + args.len() };
        }
        if next.len() < args.len() && args.starts_with(next) && !eof {
            return LineOpen::NeedMore;
        }
    }
    LineOpen::No
}

/// The tool name a label gave, without quotes or backticks around it.
pub(crate) fn clean_name(raw: &str) -> String {
    raw.trim().trim_matches(['`', '"', '\'', '*']).trim_end_matches([',', '.', ';']).to_owned()
}
