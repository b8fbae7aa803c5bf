//! Scalars: numbers and literals in canonical form (with the repairs models need), and
//! decoding the escapes a reader passes through.

pub(crate) enum Scalar<'a> {
    Json(&'a str),
    Repaired(String, &'static str),
    Word,
}

pub(crate) fn canonical_scalar(text: &str) -> Scalar<'_> {
    match text {
        "true" | "false" | "null" => return Scalar::Json(text),
        "True" | "TRUE" => return Scalar::Repaired("true".into(), "a Python literal became JSON"),
        "False" | "FALSE" => {
            return Scalar::Repaired("false".into(), "a Python literal became JSON");
        }
        "None" | "NULL" | "Null" | "undefined" | "nil" => {
            return Scalar::Repaired("null".into(), "a Python literal became JSON");
        }
        "NaN" | "Infinity" | "-Infinity" | "+Infinity" => {
            return Scalar::Repaired("null".into(), "a non-finite number became null");
        }
        _ => {}
    }
    if is_json_number(text) {
        return Scalar::Json(text);
    }
    // Repairable numbers: a leading `+`, a leading or trailing `.`, leading zeros.
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    let (sign, digits) = match unsigned.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", unsigned),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let mut fixed = String::from(sign);
        let trimmed = digits.trim_start_matches('0');
        if trimmed.is_empty() || trimmed.starts_with('.') {
            fixed.push('0');
        }
        fixed.push_str(trimmed.trim_end_matches('.'));
        if is_json_number(&fixed) {
            return Scalar::Repaired(fixed, "a malformed number was normalized");
        }
    }
    Scalar::Word
}

/// Decodes text in the form [`Sink::str_escaped`] receives.
pub(crate) fn decode_escaped(json: &str) -> String {
    let mut decoded = String::with_capacity(json.len());
    let mut chars = json.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            decoded.push(c);
            continue;
        }
        decoded.push(match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some(other) => other,
            None => '\\',
        });
    }
    decoded
}

pub(crate) fn is_json_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(b.get(i..).unwrap_or_default()),
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let n = digits(b.get(i..).unwrap_or_default());
        if n == 0 {
            return false;
        }
        i += n;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(b.get(i..).unwrap_or_default());
        if n == 0 {
            return false;
        }
        i += n;
    }
    i == b.len()
}

/// How many ASCII digits `b` starts with.
fn digits(b: &[u8]) -> usize {
    b.iter().take_while(|d| d.is_ascii_digit()).count()
}
