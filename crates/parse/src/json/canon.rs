//! Canonical JSON output, written as tokens arrive.
//!
//! `Canon` writes compact JSON. It defers every separator and key until the value
//! after it begins, so `out` is a prefix of valid JSON at every moment, and a value
//! cut off by the end of the input can be closed without leaving a dangling key.

use crate::json::reader::{Frame, Reader, Sink, Status};
use crate::tools::{ParamType, Tool, ToolRef};

/// Writes canonical JSON. Invariant: `out` is always a prefix of valid JSON, and
/// `open.len()` is the number of containers opened in `out` and not yet closed.
#[derive(Debug, Default)]
pub(crate) struct Canon {
    pub(crate) out: String,
    /// Per open container: its kind and whether it already has an item.
    open: Vec<(Frame, bool)>,
    /// The key of the next object member; written when its value begins. Reused, so
    /// keys cost no allocation.
    key: String,
    /// Inside a string value.
    in_str: bool,
}

impl Canon {
    pub(crate) fn depth(&self) -> usize {
        self.open.len()
    }

    fn begin_value(&mut self) {
        if let Some((frame, has_items)) = self.open.last_mut() {
            if *has_items {
                self.out.push(',');
            }
            *has_items = true;
            if *frame == Frame::Object {
                write_str(&mut self.out, &self.key, false);
                self.key.clear();
                self.out.push(':');
            }
        }
    }

    /// Closes everything still open (a string, then containers).
    pub(crate) fn close_all(&mut self) {
        if self.in_str {
            self.str_end();
        }
        while !self.open.is_empty() {
            self.close(0);
        }
    }
}

impl Sink for Canon {
    fn open(&mut self, frame: Frame, _at: usize) {
        if self.out.capacity() == 0 {
            // Most call arguments are short: one allocation instead of a chain of growths.
            self.out = String::with_capacity(64);
        }
        self.begin_value();
        self.out.push(if frame == Frame::Object { '{' } else { '[' });
        self.open.push((frame, false));
    }

    fn close(&mut self, _end: usize) {
        if let Some((frame, _)) = self.open.pop() {
            self.key.clear();
            self.out.push(if frame == Frame::Object { '}' } else { ']' });
        }
    }

    fn key(&mut self, key: &str) {
        self.key.clear();
        self.key.push_str(key);
    }

    fn str_start(&mut self) {
        self.begin_value();
        self.out.push('"');
        self.in_str = true;
    }

    fn str_part(&mut self, text: &str, clean: bool) {
        if clean {
            self.out.push_str(text);
        } else {
            escape_into(&mut self.out, text);
        }
    }

    fn str_escaped(&mut self, json: &str) {
        self.out.push_str(json);
    }

    fn str_end(&mut self) {
        self.out.push('"');
        self.in_str = false;
    }

    fn scalar(&mut self, json: &str) {
        self.begin_value();
        self.out.push_str(json);
    }

    fn repaired(&mut self, _what: &'static str) {}

    fn too_deep(&mut self, _max_depth: usize) {}
}

/// Writes `text` as a JSON string literal.
pub(crate) fn write_str(out: &mut String, text: &str, _ascii: bool) {
    out.push('"');
    escape_into(out, text);
    out.push('"');
}

/// Appends `text` escaped for the inside of a JSON string.
pub(crate) fn escape_into(out: &mut String, text: &str) {
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(text.get(start..i).unwrap_or_default());
        if escaped.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(text.get(start..).unwrap_or_default());
}

/// A note from the argument writer, turned into a warning by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgsNote {
    Repaired(&'static str),
    /// The value stopped at a bracket nested deeper than this `max_depth`.
    TooDeep(usize),
    /// The JSON in the string value of `key` nests deeper than `max_depth`: the string
    /// was kept as it is.
    KeptAsString {
        key: String,
        max_depth: usize,
    },
    /// `from_string`: a string became another type; else a number or boolean became a string.
    Coerced {
        key: String,
        to: ParamType,
        from_string: bool,
    },
}

/// A string value held back because the schema asks for another type.
#[derive(Debug)]
struct Held {
    key: String,
    to: ParamType,
    text: String,
}

/// Writes a call's arguments object, coercing top-level values to the types the
/// tool's schema declares. Everything but a held value is in `canon.out` at once.
#[derive(Debug)]
pub(crate) struct ArgsWriter {
    pub(crate) canon: Canon,
    /// The current top-level key (empty below the top level).
    key: String,
    held: Option<Held>,
    pub(crate) notes: Vec<ArgsNote>,
    tool: Option<ToolRef>,
    /// The deepest nesting read from the text of a value ([`crate::Config::max_depth`]).
    max_depth: usize,
}

impl ArgsWriter {
    pub(crate) fn new(max_depth: usize) -> ArgsWriter {
        ArgsWriter {
            canon: Canon::default(),
            key: String::new(),
            held: None,
            notes: Vec::new(),
            tool: None,
            max_depth,
        }
    }

    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Makes this writer a new one, keeping the allocations it still has (not `canon.out`,
    /// which went into a call).
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.max_depth = max_depth;
        self.canon.out.clear();
        self.canon.open.clear();
        self.canon.key.clear();
        self.canon.in_str = false;
        self.key.clear();
        self.held = None;
        self.notes.clear();
        self.tool = None;
    }

    pub(crate) fn set_tool(&mut self, tool: ToolRef) {
        self.tool = Some(tool);
    }

    pub(crate) fn tool(&self) -> Option<&Tool> {
        self.tool.as_ref().and_then(ToolRef::get)
    }

    pub(crate) fn started(&self) -> bool {
        !self.canon.out.is_empty()
    }

    /// At the top level of the arguments object.
    fn at_top(&self) -> bool {
        self.canon.depth() == 1
    }

    fn top_type(&self) -> ParamType {
        match self.tool() {
            Some(tool) if self.at_top() => tool.param_type(&self.key),
            _ => ParamType::Any,
        }
    }

    /// Closes what is open; returns the finished arguments object text.
    pub(crate) fn finish(&mut self) -> &str {
        if let Some(held) = self.held.take() {
            self.release(held);
        }
        if !self.canon.started_object() {
            self.canon.out.clear();
            self.canon.out.push_str("{}");
        }
        self.canon.close_all();
        &self.canon.out
    }

    /// Writes a held string as the type its schema asks for, or as a string.
    fn release(&mut self, held: Held) {
        let trimmed = held.text.trim();
        let converted: Option<String> = match held.to {
            ParamType::Integer | ParamType::Number => {
                let number = trimmed.strip_prefix('+').unwrap_or(trimmed);
                let integral = number.strip_suffix(".0").unwrap_or(number);
                if held.to == ParamType::Integer
                    && crate::json::scalar::is_json_number(integral)
                    && !integral.contains(['.', 'e', 'E'])
                {
                    Some(integral.to_owned())
                } else if held.to == ParamType::Number
                    && crate::json::scalar::is_json_number(number)
                {
                    Some(number.to_owned())
                } else {
                    None
                }
            }
            ParamType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Some("true".to_owned()),
                "false" => Some("false".to_owned()),
                _ => None,
            },
            ParamType::Array | ParamType::Object => match canonical_json(trimmed, self.max_depth) {
                Canonical::Json(v) => Some(v).filter(|v| {
                    (held.to == ParamType::Array && v.starts_with('['))
                        || (held.to == ParamType::Object && v.starts_with('{'))
                }),
                Canonical::TooDeep => {
                    let key = held.key.clone();
                    self.notes.push(ArgsNote::KeptAsString { key, max_depth: self.max_depth });
                    None
                }
                Canonical::Not => None,
            },
            ParamType::String | ParamType::Any => None,
        };
        self.canon.key(&held.key);
        match converted {
            Some(json) => {
                self.canon.scalar(&json);
                self.notes.push(ArgsNote::Coerced {
                    key: held.key,
                    to: held.to,
                    from_string: true,
                });
            }
            None => {
                self.canon.str_start();
                self.canon.str_part(&held.text, false);
                self.canon.str_end();
            }
        }
    }
}

impl Canon {
    fn started_object(&self) -> bool {
        self.out.starts_with('{')
    }
}

/// The top-level keys of a JSON object, decoded, in order.
pub(crate) fn top_level_keys(json: &str) -> Vec<String> {
    struct Keys {
        depth: usize,
        keys: Vec<String>,
    }
    impl Sink for Keys {
        fn open(&mut self, _frame: Frame, _at: usize) {
            self.depth += 1;
        }
        fn close(&mut self, _end: usize) {
            self.depth = self.depth.saturating_sub(1);
        }
        fn key(&mut self, key: &str) {
            if self.depth == 1 {
                self.keys.push(key.to_owned());
            }
        }
        fn str_start(&mut self) {}
        fn str_part(&mut self, _text: &str, _clean: bool) {}
        fn str_end(&mut self) {}
        fn scalar(&mut self, _json: &str) {}
        fn repaired(&mut self, _what: &'static str) {}
        fn too_deep(&mut self, _max_depth: usize) {}
    }
    let mut sink = Keys { depth: 0, keys: Vec::new() };
    let _ = Reader::new(usize::MAX).feed(json, 0, &mut sink);
    sink.keys
}

/// What [`canonical_json`] made of a text.
pub(crate) enum Canonical {
    /// One JSON value, in canonical form.
    Json(String),
    /// JSON nested deeper than the limit.
    TooDeep,
    /// Not one JSON value.
    Not,
}

/// Parses complete JSON text, nested at most `max_depth` deep, into canonical form.
pub(crate) fn canonical_json(text: &str, max_depth: usize) -> Canonical {
    let mut reader = Reader::new(max_depth);
    let mut canon = Canon::default();
    match reader.feed(text, 0, &mut canon) {
        Status::Done(n) if text.get(n..).is_some_and(|rest| rest.trim().is_empty()) => {
            Canonical::Json(canon.out)
        }
        Status::Invalid(_) if reader.too_deep() => Canonical::TooDeep,
        _ => Canonical::Not,
    }
}

impl Sink for ArgsWriter {
    fn open(&mut self, frame: Frame, at: usize) {
        self.canon.open(frame, at);
    }

    fn close(&mut self, end: usize) {
        self.canon.close(end);
        if self.at_top() {
            self.key.clear();
        }
    }

    fn key(&mut self, key: &str) {
        // The key matters only for coercion, which needs a schema.
        if self.at_top() && self.tool.is_some() {
            self.key.clear();
            self.key.push_str(key);
        }
        self.canon.key(key);
    }

    fn str_start(&mut self) {
        let to = self.top_type();
        if matches!(to, ParamType::Integer | ParamType::Number | ParamType::Boolean)
            || matches!(to, ParamType::Array | ParamType::Object)
        {
            let key = self.key.clone();
            self.held = Some(Held { key, to, text: String::new() });
            return;
        }
        self.canon.str_start();
    }

    fn str_part(&mut self, text: &str, clean: bool) {
        match &mut self.held {
            Some(held) => held.text.push_str(text),
            None => self.canon.str_part(text, clean),
        }
    }

    fn str_escaped(&mut self, json: &str) {
        match &mut self.held {
            Some(held) => held.text.push_str(&crate::json::scalar::decode_escaped(json)),
            None => self.canon.str_escaped(json),
        }
    }

    fn str_end(&mut self) {
        match self.held.take() {
            Some(held) => self.release(held),
            None => self.canon.str_end(),
        }
    }

    fn scalar(&mut self, json: &str) {
        let to = self.top_type();
        if to == ParamType::String && json != "null" {
            self.canon.str_start();
            self.canon.str_part(json, true);
            self.canon.str_end();
            let key = self.key.clone();
            self.notes.push(ArgsNote::Coerced { key, to, from_string: false });
            return;
        }
        self.canon.scalar(json);
    }

    fn repaired(&mut self, what: &'static str) {
        self.notes.push(ArgsNote::Repaired(what));
    }

    fn too_deep(&mut self, max_depth: usize) {
        self.notes.push(ArgsNote::TooDeep(max_depth));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Option<String> {
        match canonical_json(text, 128) {
            Canonical::Json(json) => Some(json),
            Canonical::TooDeep | Canonical::Not => None,
        }
    }

    #[test]
    fn depth_past_the_limit_is_told_apart_from_text_that_is_not_json() {
        assert!(matches!(canonical_json("[[[1]]]", 3), Canonical::Json(_)));
        assert!(matches!(canonical_json("[[[[1]]]]", 3), Canonical::TooDeep));
        assert!(matches!(canonical_json("[[[1]]] x", 3), Canonical::Not));
    }

    #[test]
    fn canonical_form_is_compact_and_exact() {
        let got = json(
            r#" { "a" : [1, 2.50, -0.1e5] , "b": "caf\u00e9 \ud83d\ude00 東京", "c": 12345678901234567890123 } "#,
        );
        assert_eq!(
            got.as_deref(),
            Some(r#"{"a":[1,2.50,-0.1e5],"b":"café 😀 東京","c":12345678901234567890123}"#)
        );
    }

    #[test]
    fn repairs_apply() {
        let got = json(
            "{city: 'Paris', 'ok': True, n: None, \u{201C}x\u{201D}: \u{201C}y\u{201D}, // c\n /* d */ list: [1,2,],}",
        );
        assert_eq!(
            got.as_deref(),
            Some(r#"{"city":"Paris","ok":true,"n":null,"x":"y","list":[1,2]}"#)
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        let got = json("{\"a\": \"line1\nline2\ttab\"}");
        assert_eq!(got.as_deref(), Some(r#"{"a":"line1\nline2\ttab"}"#));
    }
}
