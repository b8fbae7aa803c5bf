//! Faults: what the gateway does when the upstream or the client misbehaves, on both API
//! surfaces. Every case must end in the family's own error shape (an HTTP error before the
//! first byte, an in-band error event after it), without a hang or a panic, and without
//! losing model output that could have reached the client.
//!
//! Cases already covered elsewhere are not repeated here: `errors.rs` has the OpenAI side of
//! an unreachable upstream, 429 with `retry-after`, 500, a stall before the first byte, a
//! break or stall after streaming began, client disconnects, oversize and malformed bodies;
//! `anthropic.rs` has the Anthropic statuses for 503/429/500 and a break after streaming
//! began; `shutdown.rs` has cancellation of the in-process server.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use bytes::Bytes;
use futures::future::join_all;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::api::{APIS, Api, text_frames, within};
use crate::common::{
    DEADLINE, Reply, TestGateway, closed_port, content_frame, finish_frames, hermes,
    read_first_event, role_frame, spawn_gateway,
};

/// Short upstream timeouts, so a timeout case takes a fraction of a second.
const TIMEOUT_SECS: f64 = 0.3;

/// Prose longer than the gateway's refusal window, so with tools it is streamed (committed)
/// before the reply ends.
const LONG_PROSE: &str = "Paris in spring is mild and often sunny, with chestnut trees in \
    bloom along the boulevards and cafe terraces full from late morning on. Evenings stay \
    light until nine, and a short shower rarely lasts long enough to matter.";

/// A gateway whose upstream timeouts are all `TIMEOUT_SECS`.
async fn impatient_gateway() -> TestGateway {
    spawn_gateway(|config| {
        config.upstream.first_byte_timeout_secs = TIMEOUT_SECS;
        config.upstream.idle_timeout_secs = TIMEOUT_SECS;
    })
    .await
}

// ---------------------------------------------------------------------------------------
// Upstream faults
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn anthropic_refused_upstream_is_a_502_api_error() {
    let port = closed_port().await;
    let gw = spawn_gateway(|config| config.upstream.url = format!("http://{port}")).await;
    for stream in [false, true] {
        let err = Api::Anthropic.fails(&gw, &Api::Anthropic.request("Hi", true, stream)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "stream: {stream}");
        assert_eq!(err.kind, "api_error", "stream: {stream}");
        assert!(err.message.contains("could not be reached"), "{}", err.message);
    }
}

/// A rate limit keeps the upstream's `retry-after` on both surfaces, and invents none.
#[tokio::test]
async fn rate_limits_pass_retry_after_on_when_there_is_one() {
    let gw = spawn_gateway(|_| {}).await;
    let body = json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}});
    for api in APIS {
        for retry_after in [Some("7"), None] {
            let mut reply = Reply::error(429, body.clone());
            if let Some(value) = retry_after {
                reply = reply.retry_after(value);
            }
            gw.upstream.push(reply);
            let err = api.fails(&gw, &api.request("Hi", true, true)).await;
            assert_eq!(err.status, StatusCode::TOO_MANY_REQUESTS, "{api:?}");
            assert_eq!(err.kind, api.pick("requests", "rate_limit_error"), "{api:?}");
            assert_eq!(err.retry_after.as_deref(), retry_after, "{api:?}");
        }
    }
    assert_eq!(gw.upstream.requests().len(), 4, "the gateway itself does not retry a 429");
}

/// 5xx statuses map to the family's status and type; an overloaded upstream's `retry-after`
/// reaches the client (the SDKs honour it), and no upstream body leaks. (Guards a fix: the
/// header used to be kept for 429 only.)
#[tokio::test]
async fn server_errors_with_and_without_retry_after() {
    let gw = spawn_gateway(|_| {}).await;
    let secret = json!({"error": {"message": "secret trace at /srv/model.py:12"}});
    for api in APIS {
        // (upstream status, retry-after, client status, OpenAI type, Anthropic type, retry-after kept)
        let cases = [
            (500, None, 502, "server_error", "api_error", false),
            (500, Some("2"), 502, "server_error", "api_error", false),
            (502, Some("2"), 502, "server_error", "api_error", false),
            (503, None, 503, "server_error", "overloaded_error", false),
            (503, Some("5"), 503, "server_error", "overloaded_error", true),
            (529, Some("5"), 503, "server_error", "overloaded_error", true),
        ];
        for (upstream, retry_after, status, openai, anthropic, kept) in cases {
            let mut reply = Reply::error(upstream, secret.clone());
            if let Some(value) = retry_after {
                reply = reply.retry_after(value);
            }
            gw.upstream.push(reply);
            let err = api.fails(&gw, &api.request("Hi", true, false)).await;
            let case = format!("{api:?} upstream {upstream} retry-after {retry_after:?}");
            let status = match (api, status) {
                (Api::Anthropic, 503) => 529,
                _ => status,
            };
            assert_eq!(err.status.as_u16(), status, "{case}");
            assert_eq!(err.kind, api.pick(openai, anthropic), "{case}");
            assert_eq!(err.retry_after.as_deref(), retry_after.filter(|_| kept), "{case}");
            assert!(!err.body.to_string().contains("secret"), "{case}: {}", err.body);
        }
    }
}

/// No first byte within the timeout: a 504 in the family's shape, also for a stream (the
/// status is not sent before the first event), and the upstream request is abandoned.
#[tokio::test]
async fn no_first_byte_is_a_504_for_streams_too() {
    join_all(APIS.map(|api| async move {
        let gw = impatient_gateway().await;
        gw.upstream.push(Reply::stall());
        let started = Instant::now();
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?}");
        assert_eq!(err.kind, api.pick("server_error", "timeout_error"), "{api:?}");
        let code = (api == Api::OpenAi).then_some("upstream_timeout");
        assert_eq!(err.code.as_deref(), code, "{api:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert!(gw.upstream.wait_dropped(DEADLINE).await, "the stalled request is abandoned");
    }))
    .await;
}

/// The response head arrives, then nothing: the same 504.
#[tokio::test]
async fn head_then_silence_is_a_504() {
    let cases = APIS.into_iter().flat_map(|api| [false, true].map(move |stream| (api, stream)));
    join_all(cases.map(|(api, stream)| async move {
        let gw = impatient_gateway().await;
        gw.upstream.push(Reply::text("Never sent.").stall_after(0));
        let err = api.fails(&gw, &api.request("Hi", true, stream)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?} stream: {stream}");
        assert_eq!(err.kind, api.pick("server_error", "timeout_error"));
    }))
    .await;
}

/// A stall between chunks while the reply is still held back (with tools, short text could
/// still be a refusal) is a 504 like any failure before the first byte.
#[tokio::test]
async fn stall_while_the_reply_is_held_is_a_504() {
    join_all(APIS.map(|api| async move {
        let gw = impatient_gateway().await;
        gw.upstream.push(Reply::text("Let me check that for you.").chunks(4).stall_after(3));
        let err = api.fails(&gw, &api.request("Weather?", true, true)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?}");
    }))
    .await;
}

/// Anthropic: a stall after text went out is an in-band `timeout_error` event, after the text.
#[tokio::test]
async fn anthropic_stall_after_text_is_an_in_band_timeout_error() {
    let gw = impatient_gateway().await;
    gw.upstream.push(Reply::text("Hello world, how are you today?").chunks(4).stall_after(4));
    let folded = Api::Anthropic.streams(&gw, &Api::Anthropic.request("Hi", false, true)).await;
    assert_eq!(folded.text, "Hello world,");
    assert!(!folded.finished);
    assert_eq!(folded.error.unwrap()["type"], "timeout_error");
}

/// Anthropic: after a break mid-text, the text sent so far has reached the client, then an
/// `api_error` event ends the stream.
#[tokio::test]
async fn anthropic_break_mid_text_keeps_the_text_then_errors() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Hello world, how are you today?").chunks(4).disconnect_after(4));
    let folded = Api::Anthropic.streams(&gw, &Api::Anthropic.request("Hi", false, true)).await;
    assert_eq!(folded.text, "Hello world,");
    assert!(!folded.finished);
    assert_eq!(folded.error.unwrap()["type"], "api_error");
}

/// With tools, the parser holds back the first word of a line (it could name a Python-style
/// call). When the upstream breaks there, that word is still model output and must reach the
/// client before the error. (Guards a fix: the held text used to be dropped.)
#[tokio::test]
async fn text_held_by_the_parser_at_a_break_reaches_the_client() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!("{LONG_PROSE}\nAnyway");
    for api in APIS {
        gw.upstream.push(Reply::bytes("text/event-stream", text_frames(&text, 16)).then_break());
        let folded = api.streams(&gw, &api.request("Paris?", true, true)).await;
        assert!(folded.error.is_some(), "{api:?}: {folded:?}");
        assert_eq!(folded.text, text, "{api:?}");
    }
}

/// A break in the middle of a call's arguments: the text and the call went out, then the
/// in-band error; without streaming, a 502.
#[tokio::test]
async fn break_in_the_middle_of_a_tool_call() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
    let text = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa";
    for api in APIS {
        gw.upstream.push(Reply::bytes("text/event-stream", text_frames(text, 5)).then_break());
        let folded = api.streams(&gw, &api.request("Weather in Paris?", true, true)).await;
        assert_eq!(folded.text.trim(), "Checking.", "{api:?}");
        assert_eq!(folded.calls.len(), 1, "{api:?}: {folded:?}");
        assert_eq!(folded.calls[0].0, "get_weather");
        // The call ends with the arguments it had, as a JSON object, before the error.
        assert_eq!(folded.calls[0].1, "{\"city\":\"Pa\"}", "{api:?}");
        assert!(!folded.finished, "{api:?}");
        let error = folded.error.unwrap();
        assert_eq!(error["type"], api.pick("server_error", "api_error"), "{api:?}");

        gw.upstream.push(Reply::bytes("text/event-stream", text_frames(text, 5)).then_break());
        let err = api.fails(&gw, &api.request("Weather in Paris?", true, false)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?}");
    }
}

/// Lines an SSE reader must skip (comments, other fields, lines without a field) and events
/// that carry no model output (a role-only chunk, a usage chunk with no choices, an object
/// without `choices`) do not disturb the reply: every piece of text around them arrives, in
/// order. An event that may carry output but cannot be read is never skipped: see
/// `integrity::an_unreadable_event_ends_the_reply_with_an_error` and
/// `integrity::output_in_an_unreadable_shape_ends_the_reply_with_an_error`.
#[tokio::test]
async fn sse_lines_without_text_are_skipped_and_the_text_survives() {
    let gw = spawn_gateway(|_| {}).await;
    let split = content_frame("Vérité").into_bytes();
    let at = split.iter().position(|&b| b == 0xC3).unwrap() + 1; // inside the `é`
    let parts: Vec<Bytes> = vec![
        Bytes::from(role_frame()),
        Bytes::from(": a comment line\n\n"),
        Bytes::from(format!("event: whatever\nid: 7\nretry: 100\n{}", content_frame("One, "))),
        Bytes::from("a line without a colon\n\n"),
        Bytes::from("data: {\"choices\": [], \"usage\": null}\n\n"),
        Bytes::from("data: {\"id\": \"x\", \"object\": \"chat.completion.chunk\"}\n\n"),
        Bytes::from(
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"role\": \"assistant\"}}]}\n\n",
        ),
        Bytes::from(content_frame("two, ").replace("\n\n", "\r\n\r\n")),
        Bytes::from(
            "data: {\"choices\": [{\"index\": 0, \"delta\":\ndata: {\"content\": \"three, \"}}]}\n\n",
        ),
        Bytes::from("data:{\"choices\":[{\"delta\":{\"content\":\"four. \"}}]}\n\n"),
        Bytes::copy_from_slice(&split[..at]),
        Bytes::copy_from_slice(&split[at..]),
        Bytes::from(finish_frames("stop")),
    ];
    let expected = "One, two, three, four. Vérité";
    for api in APIS {
        for stream in [true, false] {
            gw.upstream.push(Reply::bytes("text/event-stream", parts.clone()));
            let body = api.request("Count.", false, stream);
            let (text, finish) = api.answers(&gw, &body, stream).await;
            assert_eq!(text, expected, "{api:?} stream: {stream}");
            assert_eq!(finish, api.pick("stop", "end_turn"));
        }
    }
}

/// A JSON reply (the upstream ignored `stream: true`) that is not valid JSON: a 502.
#[tokio::test]
async fn invalid_json_body_is_a_502() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for stream in [true, false] {
            for body in ["{\"choices\": [{\"message\": {\"content\": \"Hi", ""] {
                gw.upstream.push(Reply::bytes("application/json", [body]));
                let err = api.fails(&gw, &api.request("Hi", true, stream)).await;
                let case = format!("{api:?} stream: {stream} body: {body:?}");
                assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{case}");
                assert_eq!(err.kind, api.pick("server_error", "api_error"), "{case}");
                assert!(err.message.contains("invalid JSON"), "{case}: {}", err.message);
            }
        }
    }
}

/// An empty 200 (no events at all) is not a successful empty answer: the upstream never
/// finished its reply, so the client gets a 502 it can retry. (Guards a fix: any end of the
/// body used to count as a finished reply, so this was an empty successful answer.)
#[tokio::test]
async fn empty_reply_is_a_502() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for stream in [true, false] {
            gw.upstream.push(Reply::bytes("text/event-stream", Vec::<Bytes>::new()));
            let err = api.fails(&gw, &api.request("Hi", true, stream)).await;
            assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?} stream: {stream}");
            assert_eq!(err.kind, api.pick("server_error", "api_error"));
        }
    }
}

/// A reply that ends properly but says nothing is a well-formed empty answer, not a hang.
#[tokio::test]
async fn finished_reply_without_text_is_an_empty_answer() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        gw.upstream.push(Reply::text(""));
        let folded = api.streams(&gw, &api.request("Hi", false, true)).await;
        assert!(folded.finished && folded.error.is_none(), "{api:?}: {folded:?}");
        assert_eq!(folded.text, "");
        assert_eq!(folded.finish.as_deref(), Some(api.pick("stop", "end_turn")));
    }
}

/// The body ends cleanly after some text but without a finish reason or `[DONE]`: the reply
/// was cut off, which is an in-band error after the text, not a normal end. (Guards the same
/// fix: this used to end with `stop`/`end_turn` as if the reply were complete.)
#[tokio::test]
async fn clean_close_mid_reply_is_an_in_band_error() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        gw.upstream.push(Reply::bytes("text/event-stream", text_frames(LONG_PROSE, 20)));
        let folded = api.streams(&gw, &api.request("Paris?", false, true)).await;
        assert_eq!(folded.text, LONG_PROSE, "{api:?}");
        assert!(!folded.finished, "{api:?}: a cut-off reply must not look finished");
        assert_eq!(folded.error.unwrap()["type"], api.pick("server_error", "api_error"));
    }
}

/// An upstream that sends only keep-alive comments (or Anthropic-style pings), forever:
/// they are not progress, so the first-byte timeout still applies (504), and after text the
/// idle timeout does (in-band error). A JSON body that trickles in forever times out too.
/// (Guards a fix: any byte used to reset the idle timer, so these replies never ended.)
#[tokio::test]
async fn never_ending_keepalives_time_out() {
    join_all(APIS.map(keepalives_time_out)).await;
}

/// The cases of `never_ending_keepalives_time_out` for one surface, each on its own gateway
/// so that their timeouts run at once.
async fn keepalives_time_out(api: Api) {
    let every = Duration::from_millis(20);
    let comment = ": keep-alive\n\n";
    let comments_only = async {
        let gw = impatient_gateway().await;
        gw.upstream
            .push(Reply::bytes("text/event-stream", [role_frame()]).then_repeat(comment, every));
        let started = Instant::now();
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    };
    let comments_after_text = async {
        let gw = impatient_gateway().await;
        let text = "Hello there, general.";
        gw.upstream.push(
            Reply::bytes("text/event-stream", text_frames(text, 6)).then_repeat(comment, every),
        );
        let folded = api.streams(&gw, &api.request("Hi", false, true)).await;
        assert_eq!(folded.text, text, "{api:?}");
        assert_eq!(folded.error.unwrap()["type"], api.pick("server_error", "timeout_error"));
    };
    let pings_only = async {
        let gw = impatient_gateway().await;
        let ping = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
        gw.upstream
            .push(Reply::bytes("text/event-stream", [role_frame()]).then_repeat(ping, every));
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?}");
    };
    let json_trickle = async {
        let gw = impatient_gateway().await;
        let head = "{\"choices\": [";
        gw.upstream.push(Reply::bytes("application/json", [head]).then_repeat(" ", every));
        let err = api.fails(&gw, &api.request("Hi", true, false)).await;
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{api:?}");
    };
    tokio::join!(comments_only, comments_after_text, pings_only, json_trickle);
}

/// A reply whose text never ends, to a non-streaming client: when the client gives up, the
/// upstream request is cancelled (no task keeps reading and buffering it).
#[tokio::test]
async fn never_ending_text_stops_when_the_client_gives_up() {
    let gw = spawn_gateway(|_| {}).await;
    for (i, api) in APIS.into_iter().enumerate() {
        gw.upstream.push(
            Reply::bytes("text/event-stream", [role_frame()])
                .then_repeat(content_frame("and on "), Duration::from_millis(2)),
        );
        let mut sent = gw.upstream.sent_bytes();
        let start = *sent.borrow_and_update();
        let body = api.request("Go on.", false, false);
        let mut post = Box::pin(api.send(&gw, &body));
        tokio::select! {
            response = &mut post => panic!("answered a reply that never ends: {response:?}"),
            more = sent.wait_for(|n| *n > start + 2_000) => { more.unwrap(); }
        }
        drop(post);
        assert!(
            gw.upstream.wait_dropped_n(i + 1, DEADLINE).await,
            "{api:?}: the upstream kept going"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Client faults
// ---------------------------------------------------------------------------------------

/// Anthropic: a client that hangs up mid-stream cancels the upstream request.
#[tokio::test]
async fn anthropic_client_disconnect_cancels_the_upstream() {
    let gw = spawn_gateway(|_| {}).await;
    let text = "a slow and steady reply that would take several seconds to finish ".repeat(2);
    gw.upstream.push(Reply::text(text).chunks(1).delay(Duration::from_millis(20)));
    let response = Api::Anthropic.send(&gw, &Api::Anthropic.request("Talk.", false, true)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut bytes = response.bytes_stream();
    let received = read_first_event(&mut bytes).await;
    assert!(
        received.starts_with(b"event: message_start"),
        "{}",
        String::from_utf8_lossy(&received)
    );
    drop(bytes);
    assert!(gw.upstream.wait_dropped(DEADLINE).await, "the upstream request was not cancelled");
}

/// Waits until `sent` has not moved for `quiet`; returns its value then.
async fn settled(sent: &mut tokio::sync::watch::Receiver<usize>, quiet: Duration) -> usize {
    within(async {
        while let Ok(changed) = tokio::time::timeout(quiet, sent.changed()).await {
            changed.unwrap();
        }
        *sent.borrow()
    })
    .await
}

/// The body of a `Transfer-Encoding: chunked` HTTP/1.1 response, as far as its chunks are
/// complete; checks the status is 200.
fn chunked_body(response: &[u8]) -> Vec<u8> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut rest = &response[head_end..];
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..line_end]).unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        let Some(chunk) = rest.get(line_end + 2..line_end + 2 + size) else { break };
        body.extend_from_slice(chunk);
        rest = &rest[(line_end + 4 + size).min(rest.len())..];
    }
    body
}

/// A client that stops reading holds the upstream back: the gateway reads the upstream only
/// as fast as the client reads, with bounded buffers in between (on loopback the kernel's
/// own socket buffers hold several MiB, so the reply is much larger than that). When the
/// client reads again the reply resumes, in order and without gaps, and when it hangs up
/// the upstream request is cancelled. The kernel sizes loopback buffers as it sees fit
/// (receive buffers grow to `tcp_rmem`'s maximum, 32 MiB on some hosts), so the reply is
/// larger than all of them together and the reply cap is out of the way.
#[tokio::test]
async fn slow_reader_holds_the_upstream_back() {
    let gw = spawn_gateway(|config| config.upstream.max_reply_bytes = 2 * SLOW_READER_BYTES).await;
    let piece: String = ('a'..='z').cycle().take(64 * 1024 - 1).chain(['\n']).collect();
    let frame = Bytes::from(content_frame(&piece));
    let mut parts = vec![Bytes::from(role_frame())];
    parts.extend(std::iter::repeat_n(frame, SLOW_READER_PIECES));
    parts.push(Bytes::from(finish_frames("stop")));
    let total: usize = parts.iter().map(Bytes::len).sum();
    gw.upstream.push(Reply::bytes("text/event-stream", parts));
    let mut sent = gw.upstream.sent_bytes();

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut stream = socket.connect(gw.addr).await.unwrap();
    let body = Api::OpenAi.request("Go.", false, true).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    let n = within(stream.read(&mut buf)).await.unwrap();
    received.extend_from_slice(&buf[..n]);

    let held_at = settled(&mut sent, Duration::from_millis(300)).await;
    assert!(
        held_at < total / 2,
        "the upstream sent {held_at} of {total} bytes to a stalled client"
    );

    // Read on: the upstream moves again, and the text is the reply's beginning, intact.
    while received.len() < held_at + (4 << 20) {
        let n = within(stream.read(&mut buf)).await.unwrap();
        assert!(n > 0, "the stream ended early");
        received.extend_from_slice(&buf[..n]);
    }
    assert!(*sent.borrow() > held_at, "the upstream did not resume");
    let body = String::from_utf8_lossy(&chunked_body(&received)).into_owned();
    let complete = &body[..body.rfind("\n\n").unwrap() + 2];
    let text = Api::OpenAi.fold(complete).text;
    assert!(text.len() > 4 << 20, "{} bytes of text", text.len());
    let mut expected = piece.repeat(text.len() / piece.len() + 1);
    expected.truncate(text.len());
    assert!(text == expected, "the text arrived changed");

    drop(stream);
    assert!(gw.upstream.wait_dropped(DEADLINE).await, "the upstream request was not cancelled");
}

/// 128 MiB of text in 64 KiB deltas.
const SLOW_READER_PIECES: usize = 2048;
const SLOW_READER_BYTES: usize = SLOW_READER_PIECES << 16;

/// Anthropic: a body over the limit is a 413 `request_too_large`, whether its length is
/// announced or it comes chunked; OpenAI's chunked case too (its announced case is in
/// `errors.rs`).
#[tokio::test]
async fn oversize_bodies_are_413_announced_or_chunked() {
    let gw = spawn_gateway(|config| config.body_limit_bytes = 2048).await;
    for api in APIS {
        let body = api.request(&"x".repeat(4096), false, false).to_string();
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            body.as_bytes().chunks(512).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let chunked = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
        let announced = api.send_raw(&gw, body.clone()).await;
        for (how, response) in
            [("announced", announced), ("chunked", api.send_raw(&gw, chunked).await)]
        {
            let err = api.error(response).await;
            assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE, "{api:?} {how}");
            assert_eq!(err.kind, api.pick("invalid_request_error", "request_too_large"));
        }
    }
    assert!(gw.upstream.requests().is_empty());
}

/// Bodies that are not JSON, or JSON but not an object: a 400 in the family's shape.
#[tokio::test]
async fn malformed_or_non_object_json_is_400() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for body in ["{\"model\": \"m\", \"messages\": [", "", "[1, 2]", "\"text\"", "null", "42"] {
            let err = api.error(api.send_raw(&gw, body).await).await;
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{api:?} {body:?}");
            assert_eq!(err.kind, "invalid_request_error", "{api:?} {body:?}");
        }
    }
    assert!(gw.upstream.requests().is_empty());
}

/// A `tool_choice` (or legacy `function_call`) naming a tool that was not declared is a 400
/// that names the field, before anything goes upstream.
#[tokio::test]
async fn unknown_tool_choice_names_are_400() {
    let gw = spawn_gateway(|_| {}).await;
    let mut named = Api::OpenAi.request("Hi", true, false);
    named["tool_choice"] = json!({"type": "function", "function": {"name": "get_stock_price"}});
    let mut legacy = Api::OpenAi.request("Hi", false, false);
    legacy["functions"] = json!([{"name": "get_weather", "parameters": {"type": "object"}}]);
    legacy["function_call"] = json!({"name": "get_stock_price"});
    for (param, body) in [("tool_choice", named), ("function_call", legacy)] {
        let err = Api::OpenAi.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{param}");
        assert_eq!(err.body["error"]["param"], param);
        assert!(err.message.contains("get_stock_price"), "{}", err.message);
    }
    let mut body = Api::Anthropic.request("Hi", true, false);
    body["tool_choice"] = json!({"type": "tool", "name": "get_stock_price"});
    let err = Api::Anthropic.fails(&gw, &body).await;
    assert_eq!(err.status, StatusCode::BAD_REQUEST);
    assert_eq!(err.kind, "invalid_request_error");
    assert!(err.message.starts_with("tool_choice.name: "), "{}", err.message);
    assert!(err.message.contains("get_stock_price"), "{}", err.message);
    assert!(gw.upstream.requests().is_empty());
}

/// OpenAI: a tool result whose id answers no call of the assistant message before it (the
/// case with no assistant message at all is in `errors.rs`).
#[tokio::test]
async fn openai_tool_result_for_another_call_is_400() {
    let gw = spawn_gateway(|_| {}).await;
    let call = json!({"id": "call_a", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}});
    let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "18C"});
    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [call]});
    let user = json!({"role": "user", "content": "Weather?"});
    for (at, messages) in [
        (2, json!([user, assistant, result("call_zzz")])),
        (3, json!([user, assistant, result("call_a"), result("call_zzz")])),
    ] {
        let mut body = Api::OpenAi.request("", true, false);
        body["messages"] = messages;
        let err = Api::OpenAi.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{err:?}");
        assert_eq!(err.kind, "invalid_request_error");
        assert_eq!(err.body["error"]["param"], format!("messages.[{at}].role"), "{err:?}");
    }
    assert!(gw.upstream.requests().is_empty());
}

/// Anthropic: a `tool_result` whose id answers no `tool_use` of the message before it is a
/// 400 with the real API's wording. (Guards a fix: it used to go upstream as a result of a
/// call that never happened.)
#[tokio::test]
async fn anthropic_tool_result_matching_no_tool_use_is_400() {
    let gw = spawn_gateway(|_| {}).await;
    let tool_use = json!({"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "18C"});
    let user = json!({"role": "user", "content": "Weather?"});
    let assistant = json!({"role": "assistant", "content": [tool_use]});
    for (at, id, messages) in [
        (
            "messages.0.content.0",
            "toolu_zzz",
            json!([{"role": "user", "content": [result("toolu_zzz")]}]),
        ),
        (
            "messages.2.content.1",
            "toolu_zzz",
            json!([user, assistant,
            {"role": "user", "content": [result("toolu_a"), result("toolu_zzz")]}]),
        ),
    ] {
        let mut body = Api::Anthropic.request("", true, false);
        body["messages"] = messages;
        let err = Api::Anthropic.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{err:?}");
        assert_eq!(err.kind, "invalid_request_error");
        assert_eq!(
            err.message,
            format!(
                "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            )
        );
    }
    assert!(gw.upstream.requests().is_empty());
}

/// Sets `value` at a JSON pointer whose parent exists (adding the key if needed).
fn set(body: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match body.pointer_mut(parent).unwrap_or_else(|| panic!("no {parent} in the body")) {
        Value::Object(object) => {
            object.insert(key.to_owned(), value);
        }
        Value::Array(array) => array[key.parse::<usize>().unwrap()] = value,
        other => panic!("{parent} is {other}"),
    }
}

/// Sends `base` with each field set to a value of the wrong type; each must be a 400 that
/// names the field (OpenAI: `param`; Anthropic: the message's location), before anything
/// goes upstream.
async fn wrong_types_are_400(api: Api, base: &Value, cases: &[(&str, Value, &str)]) {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    assert_eq!(api.send(&gw, base).await.status(), StatusCode::OK, "the base request: {base}");
    for (pointer, value, path) in cases {
        let mut body = base.clone();
        set(&mut body, pointer, value.clone());
        let err = api.fails(&gw, &body).await;
        let case = format!("{api:?} {pointer} = {value}: {err:?}");
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{case}");
        assert_eq!(err.kind, "invalid_request_error", "{case}");
        match api {
            Api::OpenAi => {
                assert_eq!(err.body["error"]["param"], *path, "{case}");
                assert_eq!(err.code.as_deref(), Some("invalid_type"), "{case}");
                assert!(err.message.starts_with(&format!("Invalid type for '{path}': ")), "{case}");
            }
            Api::Anthropic => {
                assert!(err.message.starts_with(&format!("{path}: Input should be ")), "{case}");
            }
        }
    }
    assert_eq!(gw.upstream.requests().len(), 1, "only the base request went upstream");
}

/// OpenAI: a wrong type in any field the API defines is a 400 `invalid_type` naming it.
/// (Guards a fix: most of these used to be ignored or forwarded upstream, where a type error
/// came back as a 502.)
#[tokio::test]
async fn openai_wrong_types_are_400_naming_the_field() {
    let call = json!({"id": "call_a", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}});
    let mut base = Api::OpenAi.request("", true, false);
    base["messages"] = json!([
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"}
    ]);
    base["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    base["stream_options"] = json!({"include_usage": false});
    let mut cases: Vec<(&str, Value, &str)> = vec![
        ("/model", json!(5), "model"),
        ("/messages", json!({}), "messages"),
        ("/stream", json!("yes"), "stream"),
        ("/stream_options", json!("usage"), "stream_options"),
        ("/stream_options/include_usage", json!("yes"), "stream_options.include_usage"),
        ("/tools", json!({}), "tools"),
        ("/tool_choice", json!(5), "tool_choice"),
        ("/parallel_tool_calls", json!("no"), "parallel_tool_calls"),
        ("/functions", json!({}), "functions"),
        ("/function_call", json!(5), "function_call"),
        ("/max_tokens", json!("100"), "max_tokens"),
        ("/max_completion_tokens", json!(1.5), "max_completion_tokens"),
        ("/temperature", json!("hot"), "temperature"),
        ("/top_p", json!([1]), "top_p"),
        ("/n", json!("1"), "n"),
        ("/stop", json!(5), "stop"),
        ("/response_format", json!("json"), "response_format"),
        ("/seed", json!("7"), "seed"),
        ("/user", json!(5), "user"),
        ("/logprobs", json!("yes"), "logprobs"),
        ("/top_logprobs", json!("2"), "top_logprobs"),
        ("/reasoning_effort", json!(5), "reasoning_effort"),
        ("/modalities", json!("text"), "modalities"),
        ("/store", json!("yes"), "store"),
        ("/metadata", json!("x"), "metadata"),
        ("/prediction", json!("x"), "prediction"),
        ("/service_tier", json!(5), "service_tier"),
        ("/verbosity", json!(5), "verbosity"),
        ("/web_search_options", json!("x"), "web_search_options"),
        ("/prompt_cache_key", json!(5), "prompt_cache_key"),
        ("/safety_identifier", json!(5), "safety_identifier"),
        ("/presence_penalty", json!("x"), "presence_penalty"),
        ("/frequency_penalty", json!("x"), "frequency_penalty"),
        ("/logit_bias", json!([]), "logit_bias"),
        ("/audio", json!("x"), "audio"),
        ("/messages/0", json!(5), "messages[0]"),
        ("/messages/0/role", json!(5), "messages[0].role"),
        ("/messages/0/content", json!(5), "messages[0].content"),
        ("/messages/0/content/0", json!(5), "messages[0].content[0]"),
        ("/messages/0/content/0/type", json!(5), "messages[0].content[0].type"),
        ("/messages/0/content/0/text", json!(5), "messages[0].content[0].text"),
        ("/messages/0/name", json!(5), "messages[0].name"),
        ("/messages/1/refusal", json!(5), "messages[1].refusal"),
        ("/messages/1/audio", json!("x"), "messages[1].audio"),
        ("/messages/1/function_call", json!("x"), "messages[1].function_call"),
        ("/messages/1/tool_calls", json!({}), "messages[1].tool_calls"),
        ("/messages/1/tool_calls/0", json!("x"), "messages[1].tool_calls[0]"),
        ("/messages/1/tool_calls/0/id", json!(5), "messages[1].tool_calls[0].id"),
        ("/messages/1/tool_calls/0/type", json!(5), "messages[1].tool_calls[0].type"),
        ("/messages/1/tool_calls/0/function", json!("x"), "messages[1].tool_calls[0].function"),
        (
            "/messages/1/tool_calls/0/function/name",
            json!(5),
            "messages[1].tool_calls[0].function.name",
        ),
        (
            "/messages/1/tool_calls/0/function/arguments",
            json!([1]),
            "messages[1].tool_calls[0].function.arguments",
        ),
        ("/messages/2/tool_call_id", json!(5), "messages[2].tool_call_id"),
        ("/tools/0", json!("x"), "tools[0]"),
        ("/tools/0/type", json!(5), "tools[0].type"),
        ("/tools/0/function", json!("x"), "tools[0].function"),
        ("/tools/0/function/name", json!(5), "tools[0].function.name"),
        ("/tools/0/function/description", json!(5), "tools[0].function.description"),
        ("/tools/0/function/parameters", json!("x"), "tools[0].function.parameters"),
        ("/tools/0/function/strict", json!("yes"), "tools[0].function.strict"),
        ("/tool_choice/type", json!(5), "tool_choice.type"),
        ("/tool_choice/function", json!("x"), "tool_choice.function"),
        ("/tool_choice/function/name", json!(5), "tool_choice.function.name"),
        ("/tool_choice/allowed_tools", json!("x"), "tool_choice.allowed_tools"),
    ];
    wrong_types_are_400(Api::OpenAi, &base, &cases).await;

    // The legacy `functions` and `function_call`.
    let mut legacy = Api::OpenAi.request("Weather?", false, false);
    legacy["functions"] = json!([{"name": "get_weather", "parameters": {"type": "object"}}]);
    legacy["function_call"] = json!({"name": "get_weather"});
    cases = vec![
        ("/functions/0", json!("x"), "functions[0]"),
        ("/functions/0/name", json!(5), "functions[0].name"),
        ("/functions/0/description", json!(5), "functions[0].description"),
        ("/functions/0/parameters", json!("x"), "functions[0].parameters"),
        ("/function_call/name", json!(5), "function_call.name"),
    ];
    wrong_types_are_400(Api::OpenAi, &legacy, &cases).await;
}

/// Anthropic: a wrong type in any field the API defines is a 400 `invalid_request_error`
/// whose message starts with the field's location, as the API words it. (Guards a fix: most
/// of these used to be ignored.)
#[tokio::test]
async fn anthropic_wrong_types_are_400_naming_the_field() {
    let mut base = Api::Anthropic.request("", true, false);
    base["system"] =
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]);
    base["messages"] = json!([
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a",
            "content": [{"type": "text", "text": "18C"}], "is_error": false}]}
    ]);
    base["tool_choice"] = json!({"type": "tool", "name": "get_weather"});
    base["stop_sequences"] = json!(["\n\nHuman:"]);
    base["metadata"] = json!({"user_id": "u1"});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/model", json!(5), "model"),
        ("/max_tokens", json!("256"), "max_tokens"),
        ("/messages", json!({}), "messages"),
        ("/system", json!(5), "system"),
        ("/system/0", json!("x"), "system.0"),
        ("/system/0/text", json!(5), "system.0.text"),
        ("/system/0/cache_control", json!("x"), "system.0.cache_control"),
        ("/stream", json!("yes"), "stream"),
        ("/temperature", json!("hot"), "temperature"),
        ("/top_p", json!([1]), "top_p"),
        ("/top_k", json!(1.5), "top_k"),
        ("/stop_sequences", json!("stop"), "stop_sequences"),
        ("/stop_sequences/0", json!(5), "stop_sequences.0"),
        ("/tools", json!({}), "tools"),
        ("/tool_choice", json!("auto"), "tool_choice"),
        ("/metadata", json!("x"), "metadata"),
        ("/metadata/user_id", json!(5), "metadata.user_id"),
        ("/thinking", json!("on"), "thinking"),
        ("/service_tier", json!(5), "service_tier"),
        ("/container", json!(5), "container"),
        ("/context_management", json!("x"), "context_management"),
        ("/output_config", json!("x"), "output_config"),
        ("/inference_geo", json!(5), "inference_geo"),
        ("/cache_control", json!("x"), "cache_control"),
        ("/mcp_servers", json!({}), "mcp_servers"),
        ("/messages/0", json!("x"), "messages.0"),
        ("/messages/0/role", json!(5), "messages.0.role"),
        ("/messages/0/content", json!(5), "messages.0.content"),
        ("/messages/0/content/0", json!(5), "messages.0.content.0"),
        ("/messages/0/content/0/type", json!(5), "messages.0.content.0.type"),
        ("/messages/0/content/0/text", json!(5), "messages.0.content.0.text.text"),
        ("/messages/1/content/0/id", json!(5), "messages.1.content.0.tool_use.id"),
        ("/messages/1/content/0/name", json!(5), "messages.1.content.0.tool_use.name"),
        ("/messages/1/content/0/input", json!("x"), "messages.1.content.0.tool_use.input"),
        (
            "/messages/2/content/0/tool_use_id",
            json!(5),
            "messages.2.content.0.tool_result.tool_use_id",
        ),
        ("/messages/2/content/0/content", json!(5), "messages.2.content.0.tool_result.content"),
        ("/messages/2/content/0/content/0", json!(5), "messages.2.content.0.tool_result.content.0"),
        (
            "/messages/2/content/0/is_error",
            json!("no"),
            "messages.2.content.0.tool_result.is_error",
        ),
        ("/tools/0", json!("x"), "tools.0"),
        ("/tools/0/name", json!(5), "tools.0.name"),
        ("/tools/0/description", json!(5), "tools.0.description"),
        ("/tools/0/input_schema", json!("x"), "tools.0.input_schema"),
        ("/tools/0/type", json!(5), "tools.0.type"),
        ("/tool_choice/type", json!(5), "tool_choice.type"),
        ("/tool_choice/name", json!(5), "tool_choice.name"),
        (
            "/tool_choice/disable_parallel_tool_use",
            json!("yes"),
            "tool_choice.disable_parallel_tool_use",
        ),
    ];
    wrong_types_are_400(Api::Anthropic, &base, &cases).await;
}
