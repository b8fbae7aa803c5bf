//! Issue 14, on the connection level: what a gateway exposed to a network must withstand
//! without a key, through raw sockets where a client library would hide the problem:
//! half-sent heads, idle and slow connections, too many connections, large unauthenticated
//! bodies, request ids, and a shutdown whose drain timeout passes.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::api::{APIS, Api, within};
use crate::common::{DEADLINE, Reply, plain_request, spawn_gateway};

/// Reads until the server closes the connection (or `within` passes); what was read and
/// when it closed (`None`: still open at the deadline).
async fn until_closed(stream: &mut TcpStream, within: Duration) -> (Vec<u8>, Option<Duration>) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0; 4096];
    loop {
        let left = within.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return (received, None),
            Ok(Ok(0) | Err(_)) => return (received, Some(started.elapsed())),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends `bytes` on a fresh connection and reads the whole answer (the server closes).
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let (received, closed) = until_closed(&mut stream, DEADLINE).await;
    assert!(closed.is_some(), "the server did not close: {}", String::from_utf8_lossy(&received));
    String::from_utf8_lossy(&received).into_owned()
}

/// The status code of a raw HTTP/1.1 response.
fn status_of(response: &str) -> u16 {
    response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

/// `GET /healthz` on a fresh connection: its status, and how long it took.
async fn health(addr: SocketAddr) -> (u16, Duration) {
    let started = Instant::now();
    let response =
        exchange(addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await;
    (status_of(&response), started.elapsed())
}

const HALF_HEAD: &[u8] = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: appl";

/// 300 connections that each send half a request head are closed once the header-read
/// timeout passes, and `/healthz` answers all along.
#[tokio::test]
async fn half_sent_heads_are_closed_after_the_header_read_timeout() {
    let gw = spawn_gateway(|config| config.header_read_timeout_secs = 0.5).await;
    let mut streams = Vec::new();
    for _ in 0..300 {
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(HALF_HEAD).await.unwrap();
        streams.push(stream);
    }
    let (status, took) = health(gw.addr).await;
    assert_eq!(status, 200);
    assert!(took < Duration::from_millis(400), "/healthz took {took:?} beside 300 half heads");
    let closed = join_all(streams.iter_mut().map(|s| until_closed(s, DEADLINE))).await;
    for (received, closed) in closed {
        let closed = closed.expect("a half-sent head keeps its connection past the deadline");
        assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
        assert!(received.is_empty() || received.starts_with(b"HTTP/1.1 408"), "{received:?}");
    }
}

/// A connection with nothing in flight is closed after the keep-alive timeout: one that
/// never sent a byte, and one after a finished keep-alive request.
#[tokio::test]
async fn idle_connections_are_closed_after_the_keep_alive_timeout() {
    let gw = spawn_gateway(|config| {
        config.keep_alive_timeout_secs = 0.4;
        config.header_read_timeout_secs = 5.0;
    })
    .await;
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let mut reused = TcpStream::connect(gw.addr).await.unwrap();
    reused.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut buf = [0; 1024];
    let n = within(reused.read(&mut buf)).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&buf[..n]));
    let closed = join_all([&mut silent, &mut reused].map(|s| until_closed(s, DEADLINE))).await;
    for (_, closed) in closed {
        let closed = closed.expect("an idle connection stays open past the deadline");
        assert!(closed >= Duration::from_millis(200), "closed too early: {closed:?}");
        assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
    }
}

/// A request body that trickles in slower than `body_read_timeout_secs` gets a 408 in the
/// family's shape, on both surfaces.
#[tokio::test]
async fn a_slow_body_gets_a_408() {
    let gw = spawn_gateway(|config| config.body_read_timeout_secs = 0.4).await;
    for api in APIS {
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: 100\r\n\r\n{{\"model\":",
            api.path()
        );
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = Instant::now();
        let mut buf = vec![0; 4096];
        let n = within(stream.read(&mut buf)).await.unwrap();
        let response = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert_eq!(status_of(&response), 408, "{api:?}: {response}");
        assert!(started.elapsed() < Duration::from_secs(3));
        let body: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        match api {
            Api::OpenAi => assert_eq!(body["error"]["code"], "request_timeout", "{body}"),
            Api::Anthropic => assert_eq!(body["error"]["type"], "timeout_error", "{body}"),
        }
    }
}

/// At `max_connections`, a new connection takes the place of the one that has waited
/// longest without a request in flight (idle, or sending its head slowly); when every
/// connection has a request in flight, the new one gets a 503 at once. A place freed by a
/// finished connection is used again.
#[tokio::test]
async fn connections_past_the_cap_take_a_waiting_place_or_get_a_503() {
    let gw = spawn_gateway(|config| {
        config.max_connections = 4;
        config.header_read_timeout_secs = 30.0;
    })
    .await;
    // Four slow heads: each waits, so each new connection takes the oldest one's place.
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        stream.write_all(HALF_HEAD).await.unwrap();
        slow.push(stream);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, took) = health(gw.addr).await;
    assert_eq!(status, 200, "a waiting connection made room");
    assert!(took < Duration::from_millis(500), "{took:?}");
    let (_, closed) = until_closed(&mut slow[0], DEADLINE).await;
    assert!(closed.is_some(), "the oldest slow head was closed to make room");

    // Four requests in flight (the upstream never answers): nothing can make room.
    for _ in 0..4 {
        gw.upstream.push(Reply::stall());
    }
    let body = serde_json::to_string(&plain_request("Hi")).unwrap();
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(gw.addr).await.unwrap();
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        busy.push(stream);
    }
    assert!(gw.upstream.wait_requests(4, DEADLINE).await);
    let started = Instant::now();
    let response = exchange(gw.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(status_of(&response), 503, "{response}");
    assert!(response.contains("too many open connections"), "{response}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    drop(busy.pop());
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (status, _) = health(gw.addr).await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "a closed connection never freed its place");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A burst of slow heads past the cap, sent without a pause: every connection that comes
/// after the cap gets the place its eviction frees, so the request that follows the burst is
/// served, not refused. (A place freed before its waiter was queued used to go to the next
/// connection accepted, and the last waiter, here `/healthz`, was answered 503. On a loaded
/// machine it could also be evicted by a burst connection whose task ran after it was placed,
/// or wait past the 100 ms a waiter had for its place; a waiter now evicts only connections
/// accepted before it and waits for them to close, not for a set time.) Each round ends when
/// the server has closed every connection of its burst, so rounds do not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_cap_leaves_room_for_the_next_request() {
    let gw = spawn_gateway(|config| {
        config.max_connections = 8;
        config.header_read_timeout_secs = 30.0;
    })
    .await;
    for round in 0..5 {
        let mut burst = Vec::new();
        for _ in 0..40 {
            let mut stream = TcpStream::connect(gw.addr).await.unwrap();
            stream.write_all(HALF_HEAD).await.unwrap();
            burst.push(stream);
        }
        let (status, took) = health(gw.addr).await;
        assert_eq!(status, 200, "round {round}: /healthz after the burst ({took:?})");
        for stream in &mut burst {
            stream.shutdown().await.unwrap();
        }
        let closed = join_all(burst.iter_mut().map(|s| until_closed(s, DEADLINE))).await;
        assert!(closed.iter().all(|(_, at)| at.is_some()), "round {round}: the burst stayed open");
    }
}

/// Without a valid key, a request is refused from its head: a 16 MiB body announced and
/// never sent gets its 401 at once, on both surfaces (the body was not waited for).
#[tokio::test]
async fn the_key_is_checked_before_the_body_is_read() {
    let gw = spawn_gateway(|config| config.api_keys = vec!["sk-gateway".into()]).await;
    for api in APIS {
        for auth in ["", "authorization: Bearer wrong\r\n", "x-api-key: wrong\r\n"] {
            let head = format!(
                "POST {} HTTP/1.1\r\nhost: x\r\n{auth}anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                api.path(),
                16 << 20
            );
            let mut stream = TcpStream::connect(gw.addr).await.unwrap();
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut buf = vec![0; 4096];
            let n = within(stream.read(&mut buf)).await.unwrap();
            let response = String::from_utf8_lossy(&buf[..n]).into_owned();
            assert_eq!(status_of(&response), 401, "{api:?} {auth:?}: {response}");
        }
    }
    // With the key, a body announced larger than the limit is refused before it is read too.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-gateway\r\ncontent-length: {}\r\n\r\n",
        (16 << 20) + 1
    );
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0; 4096];
    let n = within(stream.read(&mut buf)).await.unwrap();
    assert_eq!(status_of(&String::from_utf8_lossy(&buf[..n])), 413);
}

/// The Bearer scheme is matched in any case, as RFC 9110 says.
#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let gw = spawn_gateway(|config| config.api_keys = vec!["sk-a".into(), "sk-b".into()]).await;
    for (value, status) in [
        ("Bearer sk-a", StatusCode::OK),
        ("bearer sk-b", StatusCode::OK),
        ("BEARER sk-a", StatusCode::OK),
        ("Bearer sk-c", StatusCode::UNAUTHORIZED),
        ("Basic sk-a", StatusCode::UNAUTHORIZED),
        ("Bearer sk-ab", StatusCode::UNAUTHORIZED),
    ] {
        let response = gw
            .http()
            .get(gw.url("/v1/models"))
            .header("authorization", value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{value}");
    }
}

/// A client's `x-request-id` is used when it is short and printable; otherwise the gateway
/// makes its own. Both headers carry the id used.
#[tokio::test]
async fn client_request_ids_are_used_only_when_short_and_printable() {
    let gw = spawn_gateway(|_| {}).await;
    let long = "a".repeat(200);
    for (sent, kept) in [("trace-42.abc", true), (long.as_str(), false), ("two words", false)] {
        let response =
            gw.http().get(gw.url("/healthz")).header("x-request-id", sent).send().await.unwrap();
        let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert_eq!(response.headers()["request-id"].to_str().unwrap(), id);
        if kept {
            assert_eq!(id, sent);
        } else {
            assert!(id.starts_with("req_") && id.len() == 28, "{sent:?} became {id:?}");
        }
    }
}

/// Past the drain timeout of a shutdown, a stream still running ends with an in-band error
/// and a request still waiting gets a 503, on both surfaces; `serve` reports them as cut.
#[tokio::test]
async fn a_shutdown_past_its_drain_cuts_streams_in_band_and_answers_the_rest_503() {
    let mut gw = spawn_gateway(|config| config.drain_timeout_secs = 0.5).await;
    let slow = "word ".repeat(200);
    for _ in 0..2 {
        gw.upstream.push(Reply::text(slow.clone()).chunks(5).delay(Duration::from_millis(30)));
    }
    gw.upstream.push(Reply::stall());
    gw.upstream.push(Reply::stall());
    let streaming: Vec<_> = APIS
        .into_iter()
        .map(|api| {
            let gw = &gw;
            async move {
                let response = api.send(gw, &api.request("Talk.", false, true)).await;
                assert_eq!(response.status(), StatusCode::OK);
                (api, response)
            }
        })
        .collect();
    let streaming = join_all(streaming).await;
    assert!(gw.upstream.wait_requests(2, DEADLINE).await);
    let waiting: Vec<_> = APIS
        .into_iter()
        .map(|api| {
            let http = gw.http().clone();
            let url = gw.url(api.path());
            let body = api.request("Wait.", false, false);
            crate::common::spawn(async move {
                let builder = match api {
                    Api::OpenAi => http.post(url),
                    Api::Anthropic => http.post(url).header("anthropic-version", "2023-06-01"),
                };
                (api, builder.json(&body).send().await.unwrap())
            })
        })
        .collect();
    assert!(gw.upstream.wait_requests(4, DEADLINE).await);
    gw.token.cancel();
    for (api, response) in streaming {
        let folded = api.fold(&within(response.text()).await.unwrap());
        let error = folded.error.unwrap_or_else(|| panic!("{api:?}: no in-band error"));
        assert!(error["message"].as_str().unwrap().contains("shutting down"), "{error}");
        assert!(!folded.finished, "{api:?}");
    }
    for handle in waiting {
        let (api, response) = within(handle).await.unwrap();
        let err = api.error(response).await;
        assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE, "{api:?}");
        assert!(err.message.contains("shutting down"), "{}", err.message);
    }
    assert_eq!(gw.stopped(DEADLINE).await.map(|r| r.cut_requests), Ok(4));
}

/// A connection that sent half a head is not a request in flight: it does not hold a
/// shutdown for the drain timeout.
#[tokio::test]
async fn a_half_sent_head_does_not_hold_shutdown() {
    let mut gw = spawn_gateway(|config| config.drain_timeout_secs = 10.0).await;
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    stream.write_all(HALF_HEAD).await.unwrap();
    let (status, _) = health(gw.addr).await;
    assert_eq!(status, 200);
    let started = Instant::now();
    gw.token.cancel();
    assert_eq!(gw.stopped(DEADLINE).await.map(|r| r.cut_requests), Ok(0));
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let (_, closed) = until_closed(&mut stream, DEADLINE).await;
    assert!(closed.is_some());
}

/// The value of a Prometheus sample line that starts with `prefix`.
fn sample(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

/// An error after streaming began is counted like any other, and its request's duration is
/// the whole stream's, not the time to its head.
#[tokio::test]
async fn errors_after_streaming_began_are_counted_with_their_duration() {
    let gw = spawn_gateway(|_| {}).await;
    let text = "word ".repeat(100);
    gw.upstream
        .push(Reply::text(text).chunks(5).delay(Duration::from_millis(15)).disconnect_after(40));
    let folded = Api::OpenAi.streams(&gw, &Api::OpenAi.request("Talk.", false, true)).await;
    assert!(folded.error.is_some(), "{folded:?}");
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert_eq!(
        sample(&metrics, "toolshim_errors_total{kind=\"upstream_broke_off\"}"),
        1.0,
        "{metrics}"
    );
    let seconds =
        sample(&metrics, "toolshim_request_duration_seconds_sum{route=\"/v1/chat/completions\"}");
    assert!(seconds >= 0.5, "the stream took 40 × 15 ms, recorded {seconds} s");
}
