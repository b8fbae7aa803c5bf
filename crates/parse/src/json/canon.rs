//! Canonical JSON output, written as tokens arrive.
//!
//! `Canon` writes compact JSON. It defers every separator and key until the value
//! after it begins, so `out` is a prefix of valid JSON at every moment, and a value
//! cut off by the end of the input can be closed without leaving a dangling key.
//! [`crate::json::args::ArgsWriter`] writes a call's arguments through one.

use crate::json::reader::{Frame, Reader, Sink, Status};

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

    /// The kinds of the open containers, outermost first.
    pub(crate) fn frames(&self) -> impl Iterator<Item = Frame> + '_ {
        self.open.iter().map(|(frame, _)| *frame)
    }

    /// Empties it, keeping its allocations.
    pub(crate) fn clear(&mut self) {
        self.out.clear();
        self.open.clear();
        self.key.clear();
        self.in_str = false;
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

impl Canon {
    pub(crate) fn started_object(&self) -> bool {
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
