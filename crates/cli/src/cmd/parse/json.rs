//! The output's layout: compact, as `serde_json` writes it, or re-indented by two spaces
//! the way `serde_json`'s pretty printer lays values out, without parsing the text back
//! into values (so big numbers, key order and escapes stay exactly as written).

/// Whitespace in the printed JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One line, no spaces.
    Compact,
    /// Two-space indentation, like `serde_json::to_string_pretty`.
    Pretty,
}

/// Compact JSON text re-indented with two spaces per level.
pub(crate) fn pretty(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() + compact.len() / 2);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    let mut depth = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
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
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_serde_json_pretty_with_numbers_and_key_order_kept() {
        let compact =
            r#"{"a":[1,{"b":"x,y:{z}\"q"}],"c":{},"d":[],"z":null,"n":12345678901234567890123}"#;
        let value: serde_json::Value =
            serde_json::from_str(r#"{"a":[1,{"b":"x,y:{z}\"q"}],"c":{},"d":[],"z":null,"n":1}"#)
                .unwrap();
        let want = serde_json::to_string_pretty(&value)
            .unwrap()
            .replace(": 1\n}", ": 12345678901234567890123\n}");
        assert_eq!(pretty(compact), want);
    }
}
