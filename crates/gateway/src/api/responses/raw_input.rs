//! A freeform (custom) tool's raw input, decoded as the model writes it. The model writes such
//! a call as JSON arguments with one string argument, `input` (`wire::custom_parameters`);
//! `RawInput` reads the fragments of those arguments as they arrive and gives back the decoded
//! text of that string, piece by piece, so that `custom_tool_call_input.delta`s carry raw text
//! that concatenates to the call's `input`. An escape split across fragments is held until
//! it is whole.

/// Where the reader is in the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Before the value: `{"input":"` has not been read whole yet.
    #[default]
    Head,
    /// Inside the string value, at byte `at` of the arguments.
    Value { at: usize },
    /// The string ended.
    Closed,
    /// The arguments do not begin with an `input` string: nothing is decoded as it arrives.
    Off,
}

/// Decodes the `input` string of a custom call's JSON arguments incrementally.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawInput {
    state: State,
    /// Everything decoded so far.
    text: String,
}

/// The first bytes of arguments whose first key is `input` with a string value, as tokens
/// between which whitespace may stand.
const HEAD: [&[u8]; 4] = [b"{", b"\"input\"", b":", b"\""];

impl RawInput {
    /// Reads the arguments written so far (all of them, not only the new fragment) and
    /// returns the text decoded since the last call.
    pub(crate) fn feed(&mut self, arguments: &str) -> String {
        let bytes = arguments.as_bytes();
        if self.state == State::Head {
            self.state = head(bytes);
        }
        let State::Value { at } = self.state else { return String::new() };
        let (decoded, state) = decode(arguments, at);
        self.state = state;
        self.text.push_str(&decoded);
        decoded
    }

    /// The input decoded so far, if the arguments began with an `input` string (whole or
    /// cut off); `None` when they did not, and the input is to be read from them whole.
    pub(crate) fn decoded(&self) -> Option<&str> {
        match self.state {
            State::Value { .. } | State::Closed => Some(&self.text),
            State::Head | State::Off => None,
        }
    }
}

/// Matches `{"input":"` (with any whitespace between tokens) at the start of `bytes`.
fn head(bytes: &[u8]) -> State {
    let mut at = 0;
    for token in HEAD {
        while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        let available = bytes.get(at..).unwrap_or_default();
        let n = token.len().min(available.len());
        if available.get(..n) != token.get(..n) {
            return State::Off;
        }
        if n < token.len() {
            return State::Head;
        }
        at += n;
    }
    State::Value { at }
}

/// Decodes the string from byte `at` as far as the arguments allow; returns the text and
/// the state after it. `at` is always at a character boundary: it only ever moves past
/// whole escapes and runs of text that end before a quote or a backslash.
fn decode(arguments: &str, mut at: usize) -> (String, State) {
    let bytes = arguments.as_bytes();
    let mut out = String::new();
    loop {
        let rest = bytes.get(at..).unwrap_or_default();
        let Some(stop) = rest.iter().position(|b| *b == b'"' || *b == b'\\') else {
            out.push_str(arguments.get(at..).unwrap_or_default());
            return (out, State::Value { at: bytes.len() });
        };
        out.push_str(arguments.get(at..at + stop).unwrap_or_default());
        at += stop;
        if rest.get(stop) == Some(&b'"') {
            return (out, State::Closed);
        }
        match escape(bytes.get(at..).unwrap_or_default()) {
            Some((c, used)) => {
                out.push(c);
                at += used;
            }
            None => return (out, State::Value { at }),
        }
    }
}

/// The character an escape at the start of `bytes` stands for, and its length in bytes;
/// `None` while the escape is not whole yet. A lone surrogate becomes U+FFFD.
fn escape(bytes: &[u8]) -> Option<(char, usize)> {
    let c = match *bytes.get(1)? {
        b'n' => '\n',
        b't' => '\t',
        b'r' => '\r',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'u' => return unicode(bytes),
        other => char::from(other),
    };
    Some((c, 2))
}

/// A `\uXXXX` escape, or a surrogate pair of two.
fn unicode(bytes: &[u8]) -> Option<(char, usize)> {
    let Some(unit) = hex4(bytes.get(2..6)?) else {
        return Some((char::REPLACEMENT_CHARACTER, 2));
    };
    if !(0xD800..0xDC00).contains(&unit) {
        return Some((char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER), 6));
    }
    // A high surrogate: its low half follows as a second escape, or it stands alone.
    let next = bytes.get(6..).unwrap_or_default();
    if next.len() < 6 {
        let may_pair = next.iter().zip(b"\\u").all(|(a, b)| a == b);
        return if may_pair { None } else { Some((char::REPLACEMENT_CHARACTER, 6)) };
    }
    let low = match next.get(..2) {
        Some(b"\\u") => next.get(2..6).and_then(hex4).filter(|u| (0xDC00..0xE000).contains(u)),
        _ => None,
    };
    match low {
        Some(low) => {
            let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            Some((char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER), 12))
        }
        None => Some((char::REPLACEMENT_CHARACTER, 6)),
    }
}

fn hex4(digits: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(digits).ok()?;
    if text.len() != 4 {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `arguments` in pieces of `step` characters; returns the deltas and the reader.
    fn feed_in(arguments: &str, step: usize) -> (Vec<String>, RawInput) {
        let mut raw = RawInput::default();
        let mut written = String::new();
        let mut out = Vec::new();
        let chars: Vec<char> = arguments.chars().collect();
        for piece in chars.chunks(step) {
            written.extend(piece);
            let delta = raw.feed(&written);
            if !delta.is_empty() {
                out.push(delta);
            }
        }
        (out, raw)
    }

    #[test]
    fn escapes_split_anywhere_decode_to_the_same_text() {
        let expected = "*** Begin Patch\n\t\"quoted\" back\\slash é 😀 \u{1}end";
        let arguments = r#"{"input":"*** Begin Patch\n\t\"quoted\" back\\slash \u00e9 \ud83d\ude00 \u0001end"}"#;
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(arguments).unwrap()["input"],
            expected
        );
        for step in 1..=arguments.len() {
            let (deltas, raw) = feed_in(arguments, step);
            assert_eq!(deltas.concat(), expected, "step {step}");
            assert_eq!(raw.decoded(), Some(expected));
            if step < 8 {
                assert!(deltas.len() > 1, "step {step}: {deltas:?}");
            }
        }
    }

    #[test]
    fn whitespace_between_tokens_and_text_with_multibyte_characters() {
        let (deltas, raw) = feed_in("{ \"input\" :\n \"naïve ünïcode\" }", 2);
        assert_eq!(deltas.concat(), "naïve ünïcode");
        assert_eq!(raw.decoded(), Some("naïve ünïcode"));
    }

    #[test]
    fn other_arguments_are_not_decoded_as_they_arrive() {
        for arguments in [r#"{"patch":"x"}"#, r#"["input"]"#, r#"{"input":1}"#, "not json"] {
            let (deltas, raw) = feed_in(arguments, 1);
            assert!(deltas.is_empty(), "{arguments}: {deltas:?}");
            assert_eq!(raw.decoded(), None, "{arguments}");
        }
    }

    #[test]
    fn a_cut_off_value_keeps_what_was_whole_and_lone_surrogates_are_replaced() {
        let (deltas, raw) = feed_in(r#"{"input":"ab\u00"#, 1);
        assert_eq!((deltas.concat(), raw.decoded()), ("ab".to_owned(), Some("ab")));
        let (deltas, _) = feed_in(r#"{"input":"a\ud83dz\udc00b"}"#, 1);
        assert_eq!(deltas.concat(), "a\u{fffd}z\u{fffd}b");
    }
}
