//! An upstream reply read with every limit: the first-byte and idle timeouts, the line, body
//! and reply caps, and the checks that it is readable and complete. Nothing the upstream
//! sent is skipped: an event that cannot be read ends the reply with an error.

use std::time::Duration;

use bytes::Bytes;
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

/// Reads `response` into payloads with every check. `upstream` names the upstream in logs;
/// `content_type` is the response's; `on_repair` is told of each repair and how many.
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
    async_stream::stream! {
        let mut framing = framing_of(&declared);
        let mut start: Vec<u8> = Vec::new();
        let mut body: Vec<u8> = Vec::new();
        let mut decoder = SseDecoder::new(limits.max_line);
        let mut data = Vec::new();
        let mut wire_bytes = 0usize;
        let mut finished = false;
        // Only data counts as progress, not SSE comments or pings (an upstream could send
        // those forever): the first event must come within the first-byte timeout of the
        // request, and each later one within the idle timeout of the one before. A JSON
        // body must come whole within the idle timeout of its head.
        let mut deadline = sent_at + limits.first_byte;
        let mut ended = false;
        while !ended {
            let chunk: Bytes = match tokio::time::timeout_at(deadline, bytes.next()).await {
                Err(_) => {
                    yield Err(ApiError::UpstreamTimeout {
                        detail: format!("{upstream}: no data within the timeout while the reply was being read"),
                    });
                    return;
                }
                Ok(None) => { ended = true; Bytes::new() }
                Ok(Some(Err(err))) => {
                    yield Err(ApiError::Upstream {
                        fault: UpstreamFault::BrokeOff,
                        message: "The connection to the upstream model broke off.".into(),
                        detail: format!("{upstream}: the reply broke off: {}", crate::upstream::client::cause(&err)),
                    });
                    return;
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            wire_bytes += chunk.len();
            if wire_bytes > limits.max_wire() {
                yield Err(too_large(&upstream, "on the wire", limits.max_wire(), "upstream.max_reply_bytes"));
                return;
            }
            let framing_now = match framing {
                Some(framing) => framing,
                None => {
                    start.extend_from_slice(&chunk);
                    match sniff(&start) {
                        Some(Ok(found)) => { framing = Some(found); found }
                        Some(Err(())) => {
                            yield Err(not_a_reply(&upstream, &declared, &start));
                            return;
                        }
                        None if ended => {
                            yield Err(broken("was empty", &upstream));
                            return;
                        }
                        None => continue,
                    }
                }
            };
            let fresh: &[u8] = if start.is_empty() { &chunk } else { &start };
            match framing_now {
                Framing::Json => {
                    if body.is_empty() {
                        // A JSON body comes at once: all of it must come within the idle
                        // timeout of its first bytes (a trickle cannot extend it).
                        deadline = Instant::now() + limits.idle;
                    }
                    body.extend_from_slice(fresh);
                    start.clear();
                    if body.len() > limits.max_reply {
                        yield Err(too_large(&upstream, "as a JSON body", limits.max_reply, "upstream.max_reply_bytes"));
                        return;
                    }
                    if !ended { continue; }
                    let mut repaired = 0;
                    let (text, invalid) = decode_lossy(&body);
                    if invalid > 0 { on_repair(Repair::InvalidUtf8, invalid); }
                    let value = match read_json(&text, &mut repaired) {
                        Ok(value) => value,
                        Err(err) => {
                            yield Err(ApiError::Upstream {
                                fault: UpstreamFault::Unreadable,
                                message: "The upstream model sent an invalid JSON body.".into(),
                                detail: format!("{upstream}: invalid JSON body ({err}): {}", crate::upstream::client::first_bytes(&body)),
                            });
                            return;
                        }
                    };
                    if repaired > 0 { on_repair(Repair::LoneSurrogate, repaired); }
                    if let Some(message) = wire.error_of(&value) {
                        yield Err(upstream_error(&upstream, &message));
                        return;
                    }
                    if !wire.body_complete(&value) {
                        yield Err(broken("has no finish reason: it was cut off, or is not a chat reply", &upstream));
                        return;
                    }
                    yield Ok(Payload::Body(value));
                    return;
                }
                Framing::Sse => {
                    let fed = decoder.feed(fresh, &mut data);
                    if ended && fed.is_ok() {
                        decoder.finish(&mut data);
                    }
                    start.clear();
                    let invalid = decoder.take_replaced();
                    if invalid > 0 { on_repair(Repair::InvalidUtf8, invalid); }
                    if fed.is_err() {
                        yield Err(too_large(&upstream, "in one event line", limits.max_line, "upstream.max_line_bytes"));
                        return;
                    }
                    if data.iter().any(|payload| !is_ping(payload)) {
                        deadline = Instant::now() + limits.idle;
                    }
                    for payload in data.drain(..) {
                        if payload.trim() == "[DONE]" {
                            finished = true;
                            ended = true;
                            break;
                        }
                        let mut repaired = 0;
                        let value = match read_json(&payload, &mut repaired) {
                            Ok(value) => value,
                            Err(err) => {
                                yield Err(ApiError::Upstream {
                                    fault: UpstreamFault::Unreadable,
                                    message: "The upstream model sent an invalid JSON event.".into(),
                                    detail: format!("{upstream}: unreadable event ({err}): {}", crate::upstream::client::first_bytes(payload.as_bytes())),
                                });
                                return;
                            }
                        };
                        if repaired > 0 { on_repair(Repair::LoneSurrogate, repaired); }
                        if let Some(message) = wire.error_of(&value) {
                            yield Err(upstream_error(&upstream, &message));
                            return;
                        }
                        let last = wire.completes(&value);
                        yield Ok(Payload::Event(value));
                        if last {
                            finished = true;
                            if wire.ends_when_complete() { ended = true; break; }
                        }
                    }
                }
            }
        }
        if !finished {
            yield Err(broken("ended before it was complete", &upstream));
        }
    }
}

fn too_large(upstream: &str, what: &str, limit: usize, key: &str) -> ApiError {
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
}
