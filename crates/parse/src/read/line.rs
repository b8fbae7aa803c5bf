//! Dialects that start at the beginning of a line: labelled calls (ReAct
//! `Action:`/`Action Input:`, `function.name:`/`function.arguments:`) and Python
//! calls alone on a line.

use std::ops::Range;

use crate::engine::step::{Look, Need};
use crate::read::python;
use crate::rows::label::{LABELS, Labels};
use crate::{Builtin, Config};

/// The most indentation before a line dialect.
const MAX_INDENT: usize = 16;
/// The longest tool name after a label.
const MAX_LABEL_NAME: usize = 128;

/// What a line starts.
pub(crate) enum LineOpen {
    /// A Python call alone on the line.
    Python,
    /// A labelled call: the name is at `name` (relative to the line content); the
    /// labels end after `len` bytes.
    Labelled { name: Range<usize>, len: usize },
}

/// Decides what the line starting at `rest` holds. Returns the indentation length
/// (which stays text) and the decision.
pub(crate) fn line_open(rest: &str, eof: bool, config: &Config) -> (usize, Look<LineOpen>) {
    let b = rest.as_bytes();
    let indent = b.iter().take(MAX_INDENT + 1).take_while(|&&c| c == b' ' || c == b'\t').count();
    if indent > MAX_INDENT {
        return (indent, Ok(None));
    }
    let line = rest.get(indent..).unwrap_or_default();
    if line.is_empty() {
        return (indent, if eof { Ok(None) } else { Err(Need) });
    }
    // Every line dialect starts with a letter or `_`; most lines are decided here.
    let first = line.as_bytes().first().copied().unwrap_or(b' ');
    if !first.is_ascii_alphabetic() && first != b'_' {
        return (indent, Ok(None));
    }
    let mut need_more = false;
    for labels in &LABELS {
        if labels.name.as_bytes().first() != Some(&first) || !config.dialects.has(labels.dialect) {
            continue;
        }
        match labelled(line, labels, eof) {
            Ok(None) => {}
            Err(Need) => need_more = true,
            found => return (indent, found),
        }
    }
    if config.dialects.has(Builtin::Python) {
        match python::call_ahead(line, eof, config, true) {
            Ok(Some(())) if !need_more => return (indent, Ok(Some(LineOpen::Python))),
            Ok(Some(())) | Err(Need) => need_more = true,
            Ok(None) => {}
        }
    }
    (indent, if need_more { Err(Need) } else { Ok(None) })
}

/// `LABEL NAME\nARGS_LABEL`.
fn labelled(line: &str, labels: &Labels, eof: bool) -> Look<LineOpen> {
    let b = line.as_bytes();
    let label = labels.name;
    if !line.starts_with(label) {
        let partial = line.len() < label.len() && label.starts_with(line);
        return if partial && !eof { Err(Need) } else { Ok(None) };
    }
    let mut i = label.len();
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t') && i < label.len() + 8 {
        i += 1;
    }
    let name_start = i;
    while b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
        i += 1;
        if i - name_start > MAX_LABEL_NAME {
            return Ok(None);
        }
    }
    let name_end = i;
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r') && i < name_end + 8 {
        i += 1;
    }
    match b.get(i) {
        None if !eof => return Err(Need),
        Some(b'\n') if name_end > name_start => i += 1,
        _ => return Ok(None),
    }
    let indent_start = i;
    while b.get(i).is_some_and(|&c| c == b' ' || c == b'\t') && i < indent_start + MAX_INDENT {
        i += 1;
    }
    let next = line.get(i..).unwrap_or_default();
    for args in labels.args {
        if next.starts_with(args) {
            return Ok(Some(LineOpen::Labelled {
                name: name_start..name_end,
                len: i + args.len(),
            }));
        }
        if next.len() < args.len() && args.starts_with(next) && !eof {
            return Err(Need);
        }
    }
    Ok(None)
}

/// The tool name a label gave, without quotes or backticks around it.
pub(crate) fn clean_name(raw: &str) -> String {
    raw.trim().trim_matches(['`', '"', '\'', '*']).trim_end_matches([',', '.', ';']).to_owned()
}
