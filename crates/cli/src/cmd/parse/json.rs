//! A JSON writer that keeps object keys in the order given, so the output contract holds
//! without a serializer. Its output is byte-identical to `serde_json`'s compact and pretty
//! printers (tested).

use std::fmt::Write;

use serde_json::value::RawValue;

/// Whitespace in the printed JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One line, no spaces.
    Compact,
    /// Two-space indentation, like `serde_json::to_string_pretty`. Raw values are re-indented
    /// the same way; their text (numbers, escapes, key order) is kept verbatim.
    Pretty,
}

/// A JSON value to print.
#[derive(Debug)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Index(usize),
    Str(&'a str),
    /// A string built for the output, such as an error message.
    OwnedStr(String),
    /// Valid JSON text, printed verbatim.
    Raw(&'a RawValue),
    Array(Vec<Json<'a>>),
    /// Keys are printed in this order.
    Object(Vec<(&'static str, Json<'a>)>),
}

impl<'a> Json<'a> {
    pub(crate) fn optional_str(text: Option<&'a str>) -> Json<'a> {
        text.map_or(Json::Null, Json::Str)
    }

    pub(crate) fn render(&self, layout: Layout) -> String {
        let mut out = String::new();
        self.write(layout, 0, &mut out);
        out
    }

    fn write(&self, layout: Layout, depth: usize, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(value) => out.push_str(if *value { "true" } else { "false" }),
            Json::Index(value) => {
                let _ = write!(out, "{value}");
            }
            Json::Str(text) => write_str(text, out),
            Json::OwnedStr(text) => write_str(text, out),
            Json::Raw(raw) => match layout {
                Layout::Compact => out.push_str(raw.get()),
                Layout::Pretty => indent_raw(raw.get(), depth, out),
            },
            Json::Array(items) => {
                write_seq(('[', ']'), items, layout, depth, out, |item, out| {
                    item.write(layout, depth + 1, out);
                });
            }
            Json::Object(entries) => {
                write_seq(('{', '}'), entries, layout, depth, out, |(key, value), out| {
                    write_str(key, out);
                    out.push_str(match layout {
                        Layout::Compact => ":",
                        Layout::Pretty => ": ",
                    });
                    value.write(layout, depth + 1, out);
                });
            }
        }
    }
}

fn write_seq<T>(
    (open, close): (char, char),
    items: &[T],
    layout: Layout,
    depth: usize,
    out: &mut String,
    mut write_item: impl FnMut(&T, &mut String),
) {
    out.push(open);
    for (idx, item) in items.iter().enumerate() {
        if idx > 0 {
            out.push(',');
        }
        if layout == Layout::Pretty {
            newline(depth + 1, out);
        }
        write_item(item, out);
    }
    if layout == Layout::Pretty && !items.is_empty() {
        newline(depth, out);
    }
    out.push(close);
}

fn newline(depth: usize, out: &mut String) {
    out.push('\n');
    out.extend(std::iter::repeat_n("  ", depth));
}

/// Writes `text` as a JSON string, escaping exactly what `serde_json` escapes.
fn write_str(text: &str, out: &mut String) {
    out.push('"');
    let mut rest = text;
    while let Some(idx) = rest.find(|c: char| c == '"' || c == '\\' || c < ' ') {
        let (plain, tail) = rest.split_at(idx);
        out.push_str(plain);
        let mut tail = tail.chars();
        match tail.next() {
            Some('"') => out.push_str("\\\""),
            Some('\\') => out.push_str("\\\\"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some('\u{8}') => out.push_str("\\b"),
            Some('\u{c}') => out.push_str("\\f"),
            Some(control) => {
                let _ = write!(out, "\\u{:04x}", u32::from(control));
            }
            None => {}
        }
        rest = tail.as_str();
    }
    out.push_str(rest);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strings_are_escaped_like_serde_json() {
        let mut all_ascii: String = (0u8..=0x7f).map(char::from).collect();
        all_ascii.push_str("é 日本 🦀 \u{2028} \"quoted\" back\\slash");
        for text in [all_ascii.as_str(), "", "plain", "\"", "\\", "\n\n", "a\u{1}b"] {
            let mut ours = String::new();
            write_str(text, &mut ours);
            assert_eq!(ours, serde_json::to_string(text).unwrap(), "for {text:?}");
        }
    }

    #[test]
    fn layouts_match_serde_json() {
        let value = Json::Object(vec![
            ("a", Json::Array(vec![Json::Index(1), Json::Null, Json::Bool(true), Json::Str("x")])),
            ("b", Json::Array(vec![])),
            ("c", Json::Object(vec![])),
            ("d", Json::Object(vec![("e", Json::Object(vec![("f", Json::Bool(false))]))])),
        ]);
        // Keys are sorted here because serde_json sorts them without `preserve_order`.
        let expected =
            json!({"a": [1, null, true, "x"], "b": [], "c": {}, "d": {"e": {"f": false}}});
        assert_eq!(value.render(Layout::Compact), serde_json::to_string(&expected).unwrap());
        assert_eq!(value.render(Layout::Pretty), serde_json::to_string_pretty(&expected).unwrap());
    }

    #[test]
    fn keys_keep_their_order_and_raw_values_keep_their_text() {
        let raw =
            serde_json::from_str::<&RawValue>(r#" {"z":1,"a":123456789012345678901234567890} "#)
                .unwrap();
        let value = Json::Object(vec![("z", Json::Raw(raw)), ("a", Json::Null)]);
        let raw_text = r#"{"z":1,"a":123456789012345678901234567890}"#;
        assert_eq!(value.render(Layout::Compact), format!(r#"{{"z":{raw_text},"a":null}}"#));
        assert_eq!(
            value.render(Layout::Pretty),
            "{\n  \"z\": {\n    \"z\": 1,\n    \"a\": 123456789012345678901234567890\n  },\n  \"a\": null\n}"
        );
    }
}

/// Re-indents compact JSON text with two spaces per level, as `serde_json`'s pretty printer
/// would lay it out, without parsing it into values (so numbers and key order are kept).
fn indent_raw(text: &str, depth: usize, out: &mut String) {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    let mut depth = depth;
    let mut in_str = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                if matches!(chars.peek(), Some('}' | ']')) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    depth += 1;
                    newline(out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod indent_tests {
    use super::*;

    #[test]
    fn raw_json_is_indented_like_serde_json() {
        let compact = r#"{"a":[1,{"b":"x,y:{z}\"q"}],"c":{},"d":[],"n":12345678901234567890123}"#;
        let mut got = String::new();
        indent_raw(compact, 0, &mut got);
        let value: serde_json::Value =
            serde_json::from_str(r#"{"a":[1,{"b":"x,y:{z}\"q"}],"c":{},"d":[],"n":1}"#).unwrap();
        let want = serde_json::to_string_pretty(&value)
            .unwrap()
            .replace(": 1\n}", ": 12345678901234567890123\n}");
        assert_eq!(got, want);
    }
}
