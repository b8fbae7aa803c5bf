//! Free text: a call guessed from prose ("I'll call get_weather with city Paris").
//!
//! The last resort, off by default: it runs when the whole output is over, only
//! with a tool list, and only when the output held no other call. A call is found
//! where a sentence names a declared tool and gives a value for each of its
//! required parameters (`city Paris`, `city = "Paris"`, `city: Paris`). The prose
//! stays visible.

use std::sync::Arc;

use crate::engine::call::CallState;
use crate::json::reader::{Frame, Sink};
use crate::read::value::write_param_value;
use crate::tools::Tool;
use crate::{ToolSet, WarningCode};

/// Parameter names and the raw values found for them.
type Values = Vec<(String, String)>;

/// The longest stretch after a tool name searched for its parameters.
const WINDOW: usize = 300;

/// Looks for one call in `prose`. `end` is the absolute end of the input: the call
/// starts there and its span is empty (its text stays visible).
pub(crate) fn extract(
    prose: &str,
    tools: &Arc<ToolSet>,
    end: usize,
    max_depth: usize,
) -> Option<Box<CallState>> {
    let mut best: Option<(usize, &Tool, Values)> = None;
    for tool in tools.tools() {
        let Some((at, values)) = find_call(prose, tool) else { continue };
        if best.as_ref().is_none_or(|(best_at, ..)| at < *best_at) {
            best = Some((at, tool, values));
        }
    }
    let (_, tool, values) = best?;
    let mut call = Box::new(CallState::new(end, max_depth));
    call.name = Some(tool.name().to_owned());
    if let Some(tool) = ToolSet::resolve_shared(tools, tool.name().trim()) {
        call.args.set_tool(tool);
    }
    call.args.open(Frame::Object, end);
    call.args_seen = true;
    let mut pairs = Vec::new();
    for (key, value) in &values {
        write_param_value(&mut call, key, value);
        pairs.push(format!("{key}={value:?}"));
    }
    if call.args.canon.depth() > 0 {
        call.args.close(end);
    }
    call.extra_notes.push((
        WarningCode::FreeText,
        format!("the call was guessed from prose ({}); its text stays visible", pairs.join(", ")),
    ));
    Some(call)
}

/// The first sentence that names `tool` and gives all its required parameters.
fn find_call(prose: &str, tool: &Tool) -> Option<(usize, Values)> {
    let name = tool.name();
    if name.is_empty() {
        return None;
    }
    for at in words(prose, name) {
        let from = at + name.len();
        let window = sentence(prose.get(from..).unwrap_or_default());
        let mut values = Vec::new();
        for param in tool.param_names() {
            if let Some(value) = value_of(window, param) {
                values.push((param.clone(), value));
            }
        }
        let complete = tool.required().iter().all(|r| values.iter().any(|(k, _)| k == r));
        if !values.is_empty() && complete {
            return Some((at, values));
        }
    }
    None
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where `word` stands in `text` as a whole word, in order. An empty word stands nowhere
/// (a parameter named `""` cannot be named in prose).
fn words<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        if word.is_empty() {
            return None;
        }
        while let Some(found) = text.get(from..).and_then(|rest| rest.find(word)) {
            let at = from + found;
            from = at + word.len();
            if word_bounded(text, at, word.len()) {
                return Some(at);
            }
        }
        None
    })
}

fn word_bounded(text: &str, at: usize, len: usize) -> bool {
    let bytes = text.as_bytes();
    let before = at.checked_sub(1).and_then(|i| bytes.get(i)).is_none_or(|&b| !is_word_byte(b));
    let after = bytes.get(at + len).is_none_or(|&b| !is_word_byte(b));
    before && after
}

/// The text up to the end of the sentence (or line), at most [`WINDOW`] bytes.
fn sentence(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut end = text.len().min(WINDOW);
    for (i, &b) in bytes.iter().enumerate().take(WINDOW) {
        let next_blank = bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace);
        if b == b'\n' || (matches!(b, b'.' | b'!' | b'?') && next_blank) {
            end = i;
            break;
        }
    }
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// The value written after `param` in `window`: `param value`, `param = value`,
/// `param: value`, `param is value`, quoted or a single token.
fn value_of(window: &str, param: &str) -> Option<String> {
    for at in words(window, param) {
        let mut rest = window.get(at + param.len()..).unwrap_or_default().trim_start();
        for joiner in ["=", ":", "is ", "of ", "as "] {
            if let Some(after) = rest.strip_prefix(joiner) {
                rest = after.trim_start();
                break;
            }
        }
        let quoted = [('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’'), ('`', '`')];
        for (open, close) in quoted {
            if let Some(body) = rest.strip_prefix(open) {
                if let Some(stop) = body.find(close) {
                    return body.get(..stop).map(str::to_owned);
                }
            }
        }
        let token: &str = rest
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '!' | '?' | ')'))
            .next()
            .unwrap_or_default();
        let token = token.trim_end_matches('.');
        if !token.is_empty() && token.chars().next().is_some_and(char::is_alphanumeric) {
            return Some(token.to_owned());
        }
    }
    None
}
