//! An upstream reply read with every limit: the first-byte and idle timeouts, the line, body
//! and reply caps, and the checks that it is readable and complete. Nothing the upstream
//! sent is skipped: an event that cannot be read ends the reply with an error.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio::time::Instant;

use crate::error::{ApiError, UpstreamFault};
use crate::upstream::sse_decode::{SseDecoder, decode_lossy};
use crate::upstream::wire::Wire;

/// A fault in an upstream reply that the gateway repairs rather than refuse, each counted
/// (`toolshim_upstream_repairs_total{kind}`) and logged with a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    /// A lone UTF-16 surrogate escape (`"\ud83d"`), replaced with U+FFFD.
    LoneSurrogate,
    /// A byte sequence that is not UTF-8, replaced with U+FFFD.
    InvalidUtf8,
}

impl Repair {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Repair::LoneSurrogate => "lone_surrogate",
            Repair::InvalidUtf8 => "invalid_utf8",
        }
    }

    /// What was repaired, for the log.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Repair::LoneSurrogate => {
                "the upstream sent lone UTF-16 surrogate escapes; replaced with U+FFFD"
            }
            Repair::InvalidUtf8 => {
                "the upstream sent bytes that are not UTF-8; replaced with U+FFFD"
            }
        }
    }
}

/// One unit of an upstream reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    /// One streamed event's JSON.
    Event(Value),
    /// A whole reply as one JSON body (an upstream that did not stream).
    Body(Value),
}

/// The limits a reply is read with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplyLimits {
    pub(crate) first_byte: Duration,
    pub(crate) idle: Duration,
    /// The most bytes a JSON body may have (the text of a streamed reply is counted by the
    /// caller, against the same number).
    pub(crate) max_reply: usize,
    pub(crate) max_line: usize,
}

impl ReplyLimits {
    /// Bytes on the wire at most: a backstop against a stream of events without text.
    fn max_wire(&self) -> usize {
        self.max_reply.saturating_mul(16)
    }
}

/// What the body is, from its content type or, without a usable one, its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Sse,
    Json,
}

fn framing_of(content_type: &str) -> Option<Framing> {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence == "text/event-stream" {
        Some(Framing::Sse)
    } else if essence == "application/json" || essence.ends_with("+json") {
        Some(Framing::Json)
    } else {
        None
    }
}

/// Guesses the framing from the first bytes, for an upstream that labels its body wrongly
/// or not at all; `None` while only white space has come.
fn sniff(start: &[u8]) -> Option<Result<Framing, ()>> {
    let text = start.trim_ascii_start();
    let first = *text.first()?;
    if first == b'{' {
        return Some(Ok(Framing::Json));
    }
    for field in [&b"data:"[..], b"event:", b":", b"id:", b"retry:"] {
        if text.starts_with(field) {
            return Some(Ok(Framing::Sse));
        }
        if field.starts_with(text) {
            return None;
        }
    }
    Some(Err(()))
}

/// An upstream failure described for the log: the upstream, then what happened.
pub(crate) fn broken(what: &str, upstream: &str) -> ApiError {
    ApiError::Upstream {
        fault: UpstreamFault::BrokeOff,
        message: format!("The upstream model's reply {what}."),
        detail: format!("{upstream}: the reply {what}"),
    }
}

/// `payload` as JSON; a lone UTF-16 surrogate escape (which some servers write when a token
/// splits an emoji) becomes U+FFFD, counted in `repaired`.
pub(crate) fn read_json(payload: &str, repaired: &mut usize) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(payload) {
        Ok(value) => Ok(value),
        Err(err) => match replace_lone_surrogates(payload) {
            Some((fixed, n)) => {
                let value = serde_json::from_str(&fixed)?;
                *repaired += n;
                Ok(value)
            }
            None => Err(err),
        },
    }
}

/// A `what` (a JSON body, an event's data) read as JSON, its lone surrogates repaired and
/// counted in `repairs`; an unreadable one is the upstream's fault, shown by its first bytes.
fn value_of(
    upstream: &str,
    text: &str,
    what: &str,
    repairs: &mut Vec<(Repair, usize)>,
) -> Result<Value, ApiError> {
    let mut repaired = 0;
    let value = read_json(text, &mut repaired).map_err(|err| ApiError::Upstream {
        fault: UpstreamFault::Unreadable,
        message: format!("The upstream model sent an invalid {what}."),
        detail: format!(
            "{upstream}: invalid {what} ({err}): {}",
            crate::upstream::client::first_bytes(text.as_bytes())
        ),
    })?;
    if repaired > 0 {
        repairs.push((Repair::LoneSurrogate, repaired));
    }
    Ok(value)
}

/// `text` with each `\uXXXX` escape of a surrogate that has no partner replaced by
/// `\uFFFD`, and how many were replaced; `None` when there is none. Backslashes stand only
/// inside JSON strings, so escapes are found without parsing.
fn replace_lone_surrogates(text: &str) -> Option<(String, usize)> {
    fn escape_at(bytes: &[u8], at: usize) -> Option<u16> {
        let digits = bytes.get(at..at + 6)?;
        if digits.first() != Some(&b'\\') || digits.get(1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(digits.get(2..)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    }
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut replaced = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes.get(i) != Some(&b'\\') {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(bytes, i) else {
            // Any other escape: skip it whole, so `\\u` is not read as an escape.
            i += 2;
            continue;
        };
        let high = (0xD800..0xDC00).contains(&unit);
        let low = (0xDC00..0xE000).contains(&unit);
        if high && escape_at(bytes, i + 6).is_some_and(|next| (0xDC00..0xE000).contains(&next)) {
            i += 12;
            continue;
        }
        if high || low {
            out.push_str(text.get(copied..i).unwrap_or_default());
            out.push_str("\\uFFFD");
            replaced += 1;
            copied = i + 6;
        }
        i += 6;
    }
    if replaced == 0 {
        return None;
    }
    out.push_str(text.get(copied..).unwrap_or_default());
    Some((out, replaced))
}

/// Reads `response` into payloads with every check: a `ReplyReader` fed the body's chunks
/// as they come, under the first-byte and idle deadlines it moves. `upstream` names the
/// upstream in logs; `on_repair` is told of each repair and how many.
pub(crate) fn payloads(
    response: reqwest::Response,
    sent_at: Instant,
    limits: ReplyLimits,
    wire: Wire,
    upstream: String,
    on_repair: impl Fn(Repair, usize) + Send + 'static,
) -> impl Stream<Item = Result<Payload, ApiError>> + Send {
    let declared = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .unwrap_or_default();
    let mut bytes = response.bytes_stream();
    let mut reader = ReplyReader::new(&declared, limits, wire, upstream);
    async_stream::stream! {
        // Only data counts as progress, not SSE comments or pings (an upstream could send
        // those forever): the first event must come within the first-byte timeout of the
        // request, and each later one within the idle timeout of the one before. A JSON
        // body must come whole within the idle timeout of its head.
        let mut deadline = sent_at + limits.first_byte;
        loop {
            let mut out = Vec::new();
            let flow = match tokio::time::timeout_at(deadline, bytes.next()).await {
                Err(_) => Err(ApiError::UpstreamTimeout {
                    detail: format!("{}: no data within the timeout while the reply was being read", reader.upstream),
                }),
                Ok(None) => reader.end(&mut out),
                Ok(Some(Err(err))) => Err(ApiError::Upstream {
                    fault: UpstreamFault::BrokeOff,
                    message: "The connection to the upstream model broke off.".into(),
                    detail: format!("{}: the reply broke off: {}", reader.upstream, crate::upstream::client::cause(&err)),
                }),
                Ok(Some(Ok(chunk))) => reader.feed(&chunk, &mut out),
            };
            for (repair, n) in reader.repairs.drain(..) {
                on_repair(repair, n);
            }
            for payload in out {
                yield Ok(payload);
            }
            match flow {
                Ok(Flow::More) => {}
                Ok(Flow::Progress) => deadline = Instant::now() + limits.idle,
                Ok(Flow::Done) => return,
                Err(err) => {
                    yield Err(err);
                    return;
                }
            }
        }
    }
}

/// What reading a chunk came to: how the reply goes on, or the error that ends it.
type Read = Result<Flow, ApiError>;

/// What a reader made of a chunk, besides its payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Read on; the deadline stays.
    More,
    /// Read on; data came (or a JSON body began): the next must come within the idle timeout.
    Progress,
    /// The reply is complete: nothing more is read.
    Done,
}

/// An upstream reply's body read into payloads, chunk by chunk: a plain state machine (no
/// I/O). It finds the framing (from the content type, or the first bytes), holds a JSON body
/// until it ends, decodes an event stream line by line, repairs what it may (counted in
/// `repairs`), and ends the reply with an error on anything too large, unreadable,
/// reported as an error, or incomplete.
pub(crate) struct ReplyReader {
    declared: String,
    framing: Option<Framing>,
    limits: ReplyLimits,
    wire: Wire,
    pub(crate) upstream: String,
    /// The first bytes, while the framing is unknown.
    start: Vec<u8>,
    body: Vec<u8>,
    decoder: SseDecoder,
    data: Vec<String>,
    wire_bytes: usize,
    /// The reply said it was complete (a finish reason, `[DONE]`, `message_stop`).
    finished: bool,
    /// Repairs made since they were last taken, and how many of each.
    pub(crate) repairs: Vec<(Repair, usize)>,
}

impl ReplyReader {
    pub(crate) fn new(
        content_type: &str,
        limits: ReplyLimits,
        wire: Wire,
        upstream: String,
    ) -> ReplyReader {
        ReplyReader {
            declared: content_type.to_owned(),
            framing: framing_of(content_type),
            limits,
            wire,
            upstream,
            start: Vec::new(),
            body: Vec::new(),
            decoder: SseDecoder::new(limits.max_line),
            data: Vec::new(),
            wire_bytes: 0,
            finished: false,
            repairs: Vec::new(),
        }
    }

    /// Reads the next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Payload>) -> Result<Flow, ApiError> {
        self.read(chunk, false, out)
    }

    /// The body ended: what it still held, and whether the reply was complete.
    pub(crate) fn end(&mut self, out: &mut Vec<Payload>) -> Result<Flow, ApiError> {
        match self.read(&[], true, out)? {
            Flow::Done => Ok(Flow::Done),
            Flow::More | Flow::Progress if self.finished => Ok(Flow::Done),
            Flow::More | Flow::Progress => {
                Err(broken("ended before it was complete", &self.upstream))
            }
        }
    }

    fn read(&mut self, chunk: &[u8], ended: bool, out: &mut Vec<Payload>) -> Read {
        let upstream = &self.upstream;
        self.wire_bytes += chunk.len();
        if self.wire_bytes > self.limits.max_wire() {
            return Err(too_large(upstream, WIRE, self.limits.max_wire()));
        }
        let framing = match self.framing {
            Some(framing) => framing,
            None => {
                self.start.extend_from_slice(chunk);
                match sniff(&self.start) {
                    Some(Ok(found)) => {
                        self.framing = Some(found);
                        found
                    }
                    Some(Err(())) => {
                        return Err(not_a_reply(upstream, &self.declared, &self.start));
                    }
                    None if ended => return Err(broken("was empty", upstream)),
                    None => return Ok(Flow::More),
                }
            }
        };
        let start = std::mem::take(&mut self.start);
        let fresh: &[u8] = if start.is_empty() { chunk } else { &start };
        match framing {
            Framing::Json => self.json(fresh, ended, out),
            Framing::Sse => self.events(fresh, ended, out),
        }
    }

    /// A JSON body: held until it ends, then read whole.
    fn json(&mut self, fresh: &[u8], ended: bool, out: &mut Vec<Payload>) -> Read {
        let upstream = &self.upstream;
        // A JSON body comes at once: all of it must come within the idle timeout of its
        // first bytes (a trickle cannot extend it).
        let began = self.body.is_empty() && !fresh.is_empty();
        self.body.extend_from_slice(fresh);
        if self.body.len() > self.limits.max_reply {
            return Err(too_large(upstream, BODY, self.limits.max_reply));
        }
        if !ended {
            return Ok(if began { Flow::Progress } else { Flow::More });
        }
        let (text, invalid) = decode_lossy(&self.body);
        if invalid > 0 {
            self.repairs.push((Repair::InvalidUtf8, invalid));
        }
        let value = value_of(upstream, &text, "JSON body", &mut self.repairs)?;
        if let Some(message) = self.wire.error_of(&value) {
            return Err(upstream_error(upstream, &message));
        }
        if !self.wire.body_complete(&value) {
            return Err(broken(
                "has no finish reason: it was cut off, or is not a chat reply",
                upstream,
            ));
        }
        out.push(Payload::Body(value));
        self.finished = true;
        Ok(Flow::Done)
    }

    /// An event stream: each event's data read as it completes.
    fn events(&mut self, fresh: &[u8], ended: bool, out: &mut Vec<Payload>) -> Read {
        let upstream = &self.upstream;
        let fed = self.decoder.feed(fresh, &mut self.data);
        if ended && fed.is_ok() {
            self.decoder.finish(&mut self.data);
        }
        let invalid = self.decoder.take_replaced();
        if invalid > 0 {
            self.repairs.push((Repair::InvalidUtf8, invalid));
        }
        if fed.is_err() {
            return Err(too_large(upstream, LINE, self.limits.max_line));
        }
        let progress = self.data.iter().any(|payload| !is_ping(payload));
        for payload in self.data.drain(..) {
            if payload.trim() == "[DONE]" {
                self.finished = true;
                return Ok(Flow::Done);
            }
            let value = value_of(upstream, &payload, "JSON event", &mut self.repairs)?;
            if let Some(message) = self.wire.error_of(&value) {
                return Err(upstream_error(upstream, &message));
            }
            let last = self.wire.completes(&value);
            out.push(Payload::Event(value));
            if last {
                self.finished = true;
                if self.wire.ends_when_complete() {
                    return Ok(Flow::Done);
                }
            }
        }
        Ok(if progress { Flow::Progress } else { Flow::More })
    }
}

/// A limit on a reply: what it bounds, and the setting that sets it.
#[derive(Clone, Copy)]
struct Cap {
    what: &'static str,
    key: &'static str,
}

const WIRE: Cap = Cap { what: "on the wire", key: "upstream.max_reply_bytes" };
const BODY: Cap = Cap { what: "as a JSON body", key: "upstream.max_reply_bytes" };
const LINE: Cap = Cap { what: "in one event line", key: "upstream.max_line_bytes" };

fn too_large(upstream: &str, cap: Cap, limit: usize) -> ApiError {
    let Cap { what, key } = cap;
    ApiError::Upstream {
        fault: UpstreamFault::TooLarge,
        message: format!(
            "The upstream model's reply is larger than the gateway's limit of {limit} bytes {what} ({key})."
        ),
        detail: format!("{upstream}: the reply passed {limit} bytes {what} ({key})"),
    }
}

fn not_a_reply(upstream: &str, content_type: &str, start: &[u8]) -> ApiError {
    let shown = if content_type.is_empty() { "no content type" } else { content_type };
    ApiError::Upstream {
        fault: UpstreamFault::Unreadable,
        message: format!(
            "The upstream answered with {shown}, not a JSON body or an event stream; check upstream.url."
        ),
        detail: format!(
            "{upstream}: the reply is {shown}: {}",
            crate::upstream::client::first_bytes(start)
        ),
    }
}

fn upstream_error(upstream: &str, message: &str) -> ApiError {
    ApiError::Upstream {
        fault: UpstreamFault::Reported,
        message: "The upstream model reported an error instead of a reply.".into(),
        detail: format!("{upstream}: error in the reply: {message}"),
    }
}

/// Whether an SSE payload is an Anthropic keep-alive `ping` (not progress).
fn is_ping(payload: &str) -> bool {
    payload.contains("\"ping\"")
        && serde_json::from_str::<Value>(payload)
            .is_ok_and(|value| value.get("type").and_then(Value::as_str) == Some("ping"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_14_lone_surrogates_become_replacement_characters() {
        let mut n = 0;
        let value = read_json(r#"{"t":"a\ud83d b"}"#, &mut n).unwrap();
        assert_eq!((value["t"].as_str().unwrap(), n), ("a\u{FFFD} b", 1));
        let mut n = 0;
        let value = read_json(r#"{"t":"\ud83d\ude00 \ude00\ud83d"}"#, &mut n).unwrap();
        assert_eq!((value["t"].as_str().unwrap(), n), ("😀 \u{FFFD}\u{FFFD}", 2));
        let mut n = 0;
        let value = read_json(r#"{"t":"\\ud83d"}"#, &mut n).unwrap();
        assert_eq!((value["t"].as_str().unwrap(), n), ("\\ud83d", 0), "an escaped backslash");
        assert!(read_json(r#"{"t":"\ud83d"#, &mut n).is_err(), "other faults stay faults");
    }

    #[test]
    fn framing_comes_from_the_type_or_the_first_bytes() {
        assert_eq!(framing_of("text/event-stream; charset=utf-8"), Some(Framing::Sse));
        assert_eq!(framing_of("application/json"), Some(Framing::Json));
        assert_eq!(framing_of("text/html"), None);
        assert_eq!(sniff(b"  "), None);
        assert_eq!(sniff(b"da"), None);
        assert_eq!(sniff(b"data: {}"), Some(Ok(Framing::Sse)));
        assert_eq!(sniff(b"\n{\"a\":1}"), Some(Ok(Framing::Json)));
        assert_eq!(sniff(b"<!doctype html>"), Some(Err(())));
    }

    fn limits() -> ReplyLimits {
        ReplyLimits {
            first_byte: Duration::from_secs(1),
            idle: Duration::from_secs(1),
            max_reply: 1 << 16,
            max_line: 1 << 12,
        }
    }

    fn reader(content_type: &str, wire: Wire) -> ReplyReader {
        ReplyReader::new(content_type, limits(), wire, "up".into())
    }

    /// Feeds `body` in chunks of `size` bytes, then ends it: the payloads, and the error
    /// that ended the reply, if any.
    fn read_all(
        mut reader: ReplyReader,
        body: &str,
        size: usize,
    ) -> (Vec<Payload>, Option<ApiError>) {
        let mut out = Vec::new();
        for chunk in body.as_bytes().chunks(size) {
            match reader.feed(chunk, &mut out) {
                Ok(Flow::Done) => return (out, None),
                Ok(_) => {}
                Err(err) => return (out, Some(err)),
            }
        }
        match reader.end(&mut out) {
            Ok(_) => (out, None),
            Err(err) => (out, Some(err)),
        }
    }

    const STREAM: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n: ping\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\ndata: {\"after\": 1}\n\n";

    /// The reader is a state machine: any chunking of a reply gives the same payloads, and
    /// nothing after `[DONE]` is read.
    #[test]
    fn issue_25_every_chunking_of_a_stream_reads_the_same() {
        for size in [1, 2, 3, 7, 64, STREAM.len()] {
            let (payloads, err) = read_all(reader("text/event-stream", Wire::OpenAi), STREAM, size);
            assert!(err.is_none(), "{size}: {err:?}");
            assert_eq!(payloads.len(), 2, "{size}: {payloads:?}");
            assert!(
                matches!(&payloads[0], Payload::Event(v) if v["choices"][0]["delta"]["content"] == "Hi")
            );
        }
        // Without a content type, the first bytes tell.
        let (payloads, err) = read_all(reader("", Wire::OpenAi), STREAM, 5);
        assert!(err.is_none() && payloads.len() == 2, "{err:?}");
    }

    /// Data moves the deadline; a ping or a comment does not.
    #[test]
    fn issue_25_only_data_is_progress() {
        let mut r = reader("text/event-stream", Wire::OpenAi);
        let mut out = Vec::new();
        assert_eq!(r.feed(b": keep-alive\n\n", &mut out).unwrap(), Flow::More);
        assert_eq!(
            r.feed(b"event: ping\ndata: {\"type\": \"ping\"}\n\n", &mut out).unwrap(),
            Flow::More
        );
        let event =
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n";
        assert_eq!(r.feed(event, &mut out).unwrap(), Flow::Progress);
    }

    /// A reply that ends before it is complete, an unreadable event, an error event, and a
    /// body that is neither JSON nor events each end the reply with an error, after the
    /// payloads before it.
    #[test]
    fn issue_25_broken_replies_end_with_an_error() {
        let cut = STREAM.split("data: {\"choices\":[{\"delta\":{},").next().unwrap();
        let (payloads, err) = read_all(reader("text/event-stream", Wire::OpenAi), cut, 4);
        assert_eq!(payloads.len(), 1);
        assert!(err.unwrap().detail().contains("ended before it was complete"));
        let bad = "data: {\"choices\":[]}\n\ndata: {not json\n\n";
        let (payloads, err) = read_all(reader("text/event-stream", Wire::OpenAi), bad, 3);
        assert_eq!(payloads.len(), 1);
        assert!(err.unwrap().detail().contains("invalid JSON event"));
        let reported = "event: error\ndata: {\"type\": \"error\", \"error\": {\"message\": \"Overloaded\"}}\n\n";
        let (_, err) = read_all(reader("text/event-stream", Wire::Anthropic), reported, 10);
        assert!(matches!(err, Some(ApiError::Upstream { fault: UpstreamFault::Reported, .. })));
        let (_, err) = read_all(reader("text/html", Wire::OpenAi), "<html>hi</html>", 4);
        assert!(err.unwrap().detail().contains("text/html"));
        let (_, err) = read_all(reader("", Wire::OpenAi), "  ", 1);
        assert!(err.unwrap().detail().contains("was empty"));
    }

    /// A JSON body is read whole when it ends; its first bytes are progress; lone
    /// surrogates are repaired and counted; a body without a finish reason is an error.
    #[test]
    fn issue_25_a_json_body_is_read_whole() {
        let body = r#"{"choices":[{"message":{"content":"a\ud83d"},"finish_reason":"stop"}]}"#;
        let mut r = reader("application/json", Wire::OpenAi);
        let mut out = Vec::new();
        assert_eq!(r.feed(&body.as_bytes()[..10], &mut out).unwrap(), Flow::Progress);
        assert_eq!(r.feed(&body.as_bytes()[10..], &mut out).unwrap(), Flow::More);
        assert!(out.is_empty());
        assert_eq!(r.end(&mut out).unwrap(), Flow::Done);
        assert_eq!(r.repairs, [(Repair::LoneSurrogate, 1)]);
        assert!(
            matches!(&out[0], Payload::Body(v) if v["choices"][0]["message"]["content"] == "a\u{FFFD}")
        );
        let unfinished = r#"{"choices":[{"message":{"content":"a"},"finish_reason":null}]}"#;
        let (_, err) = read_all(reader("application/json", Wire::OpenAi), unfinished, 8);
        assert!(err.unwrap().detail().contains("no finish reason"));
    }
}
