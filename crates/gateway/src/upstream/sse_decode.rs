//! Incremental decoding of an OpenAI-style SSE body into `data:` payloads.
//!
//! Network chunks may split lines and UTF-8 characters anywhere; bytes are buffered
//! until a line is complete, so each payload is decoded whole.

/// Collects bytes and returns complete `data:` payloads.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    /// `data:` lines of the event being read, joined by `\n`.
    data: Option<String>,
    /// The longest line, and the most data one event may carry.
    max_line: usize,
    /// Invalid UTF-8 sequences replaced with U+FFFD in `data:` lines since the last
    /// `take_replaced`.
    replaced: usize,
}

/// `bytes` as text, each invalid UTF-8 sequence replaced with U+FFFD, and how many were.
pub(crate) fn decode_lossy(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, usize) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (std::borrow::Cow::Borrowed(text), 0),
        Err(_) => {
            let invalid = bytes.utf8_chunks().filter(|chunk| !chunk.invalid().is_empty()).count();
            (String::from_utf8_lossy(bytes), invalid)
        }
    }
}

/// A line (or an event's data) longer than the decoder's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineTooLong;

impl SseDecoder {
    /// A decoder whose lines, and events' data, may be at most `max_line` bytes.
    pub(crate) fn new(max_line: usize) -> SseDecoder {
        SseDecoder { buf: Vec::new(), data: None, max_line, replaced: 0 }
    }

    /// Feeds bytes; pushes each finished event's data to `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), LineTooLong> {
        // What is buffered is the start of a line, with no newline in it: search only
        // the new bytes, so a long line that arrives in many reads is scanned once.
        let mut from = self.buf.len();
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) =
            self.buf.get(from..).and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        {
            let end = from + offset;
            let line = self.buf.get(start..end).unwrap_or_default();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let (line, replaced) = decode_lossy(line);
            let line = line.into_owned();
            self.count(&line, replaced);
            self.line(&line, out);
            start = end + 1;
            from = start;
        }
        self.buf.drain(..start);
        let data = self.data.as_ref().map_or(0, String::len);
        if self.buf.len() > self.max_line || data > self.max_line {
            return Err(LineTooLong);
        }
        Ok(())
    }

    /// Ends the body: an event without its blank line still counts.
    pub(crate) fn finish(&mut self, out: &mut Vec<String>) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let (rest, replaced) = decode_lossy(&rest);
            let rest = rest.into_owned();
            self.count(&rest, replaced);
            self.line(rest.trim_end_matches('\r'), out);
        }
        if let Some(data) = self.data.take() {
            out.push(data);
        }
    }

    /// Invalid UTF-8 sequences replaced in `data:` lines since the last call.
    pub(crate) fn take_replaced(&mut self) -> usize {
        std::mem::take(&mut self.replaced)
    }

    /// Counts replacements in a data line (elsewhere, in comments or other fields, they
    /// change nothing the reply is made of).
    fn count(&mut self, line: &str, replaced: usize) {
        if replaced > 0 && line.starts_with("data") {
            self.replaced += replaced;
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<String>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(data);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_decode_whole() {
        let body = "data: {\"a\":\"東京\"}\n\n: keepalive\n\ndata: [DONE]\n\n".as_bytes();
        for split in 1..body.len() {
            let mut decoder = SseDecoder::new(1 << 20);
            let mut out = Vec::new();
            for piece in body.chunks(split) {
                decoder.feed(piece, &mut out).unwrap();
            }
            decoder.finish(&mut out);
            assert_eq!(out, ["{\"a\":\"東京\"}", "[DONE]"], "split {split}");
        }
    }

    /// Issue 8: a character cut by a read boundary, at every byte of it, and a long line
    /// that arrives in small reads, come out whole (no U+FFFD).
    #[test]
    fn issue_8_characters_and_long_lines_split_across_reads_decode_whole() {
        let text = format!("é東😀{}", "ü 東京 😀 ".repeat(2_000));
        let body = format!("data: {text}\r\n\r\ndata: [DONE]\n\n");
        let body = body.as_bytes();
        for cut in 1..16 {
            let mut decoder = SseDecoder::new(1 << 20);
            let mut out = Vec::new();
            decoder.feed(&body[..cut], &mut out).unwrap();
            for piece in body[cut..].chunks(13) {
                decoder.feed(piece, &mut out).unwrap();
            }
            decoder.finish(&mut out);
            assert!(out.len() == 2 && out[0] == text && out[1] == "[DONE]", "cut at {cut}");
        }
    }

    /// Issue 14: bytes that are not UTF-8 in a data line become U+FFFD and are counted, one
    /// per invalid sequence; in a comment they are not counted.
    #[test]
    fn issue_14_invalid_utf8_is_replaced_and_counted() {
        let mut decoder = SseDecoder::new(1 << 20);
        let mut out = Vec::new();
        decoder.feed(b": caf\xe9\n\ndata: a\xffb\xc3(\n\n", &mut out).unwrap();
        assert_eq!(out, ["a\u{FFFD}b\u{FFFD}("]);
        assert_eq!((decoder.take_replaced(), decoder.take_replaced()), (2, 0));
        decoder.feed(b"data: \xf0\x9f", &mut out).unwrap();
        decoder.finish(&mut out);
        assert_eq!((out[1].as_str(), decoder.take_replaced()), ("\u{FFFD}", 1));
        assert_eq!(decode_lossy("ok é".as_bytes()), ("ok é".into(), 0));
    }

    /// Issue 14: a line that never ends, and an event whose data lines add up past the
    /// limit, are refused once they pass it, without buffering the rest.
    #[test]
    fn issue_14_lines_and_events_past_the_limit_are_refused() {
        let mut decoder = SseDecoder::new(1024);
        let mut out = Vec::new();
        assert_eq!(decoder.feed(b"data: ", &mut out), Ok(()));
        assert_eq!(decoder.feed(&[b'x'; 1000], &mut out), Ok(()));
        assert_eq!(decoder.feed(&[b'x'; 100], &mut out), Err(LineTooLong));
        let mut decoder = SseDecoder::new(1024);
        let many = "data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n".repeat(30);
        assert_eq!(decoder.feed(many.as_bytes(), &mut out), Err(LineTooLong));
        assert!(out.is_empty());
    }
}
