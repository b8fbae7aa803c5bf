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
    /// Two-space indentation, like `serde_json::to_string_pretty`. Raw values stay as they are.
    Pretty,
}

/// A JSON value to print.
#[derive(Debug)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Index(usize),
    Str(&'a str),
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
            Json::Raw(raw) => out.push_str(raw.get()),
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
    fn keys_keep_their_order_and_raw_values_stay_verbatim() {
        let raw =
            serde_json::from_str::<&RawValue>(r#" {"z":1,"a":123456789012345678901234567890} "#)
                .unwrap();
        let value = Json::Object(vec![("z", Json::Raw(raw)), ("a", Json::Null)]);
        let raw_text = r#"{"z":1,"a":123456789012345678901234567890}"#;
        assert_eq!(value.render(Layout::Compact), format!(r#"{{"z":{raw_text},"a":null}}"#));
        assert_eq!(
            value.render(Layout::Pretty),
            format!("{{\n  \"z\": {raw_text},\n  \"a\": null\n}}")
        );
    }
}
