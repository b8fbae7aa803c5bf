//! Graceful shutdown: cancelling the token stops new connections while in-flight streams
//! run to their end (within `drain_timeout_secs`).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use futures::StreamExt;
use serde_json::json;

use crate::common::{
    DEADLINE, Reply, check_stream, plain_request, read_first_event, spawn_gateway,
};

/// Tries to connect until the gateway refuses, or the deadline passes.
async fn refused(addr: std::net::SocketAddr) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        match tokio::net::TcpStream::connect(addr).await {
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => return true,
            _ => tokio::task::yield_now().await,
        }
    }
    false
}

#[tokio::test]
async fn in_flight_stream_completes_and_new_connections_are_refused() {
    let mut gw = spawn_gateway(|config| config.drain_timeout_secs = 10.0).await;
    let text = "one two three four five six seven eight nine ten";
    gw.upstream.push(Reply::text(text).chunks(4).delay(Duration::from_millis(40)));
    let mut body = plain_request("Count to ten.");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let response = gw.post(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut bytes = response.bytes_stream();
    let mut received = read_first_event(&mut bytes).await;

    gw.token.cancel();
    assert!(refused(gw.addr).await, "the gateway still accepts connections after shutdown");

    while let Some(chunk) = tokio::time::timeout(DEADLINE, bytes.next()).await.unwrap() {
        received.extend_from_slice(&chunk.unwrap());
    }
    let body = String::from_utf8(received).unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let streamed = check_stream(&body, true);
    assert_eq!(streamed.content, text);

    let started = Instant::now();
    assert_eq!(gw.stopped(DEADLINE).await.map(|r| r.cut_requests), Ok(0));
    assert!(started.elapsed() < Duration::from_secs(2), "serve returns once the stream is done");
}

#[tokio::test]
async fn idle_gateway_stops_at_once() {
    let mut gw = spawn_gateway(|config| config.drain_timeout_secs = 10.0).await;
    let response = gw.http().get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    gw.token.cancel();
    let started = Instant::now();
    assert_eq!(gw.stopped(DEADLINE).await.map(|r| r.cut_requests), Ok(0));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(refused(gw.addr).await);
}

#[tokio::test]
async fn serve_returns_after_the_drain_timeout() {
    let mut gw = spawn_gateway(|config| config.drain_timeout_secs = 0.3).await;
    let text = "a reply much slower than the drain timeout allows";
    gw.upstream.push(Reply::text(text).chunks(1).delay(Duration::from_millis(100)));
    let mut body = plain_request("Talk slowly.");
    body["stream"] = json!(true);
    let response = gw.post(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut bytes = response.bytes_stream();
    tokio::time::timeout(DEADLINE, bytes.next()).await.unwrap().unwrap().unwrap();
    let started = Instant::now();
    gw.token.cancel();
    assert_eq!(gw.stopped(DEADLINE).await.map(|r| r.cut_requests), Ok(1));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
}
