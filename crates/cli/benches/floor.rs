//! The floor under the gateway's cost: a bare relay built from the same HTTP stack (axum
//! and hyper in front, reqwest behind, tokio's multi-thread runtime) that passes each request
//! to the upstream and the reply back byte for byte, reading nothing. What it spends per
//! request is what any gateway on this stack spends before it does any work of its own.
//!
//! It runs as a child process (this bench binary again, `--relay-floor URL`), so that its
//! CPU time is read the way the gateway's is.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use futures::StreamExt;

use crate::loadgen::Gateway;

/// Starts the relay in front of `upstream` as a child process of `bench` (this binary).
pub(crate) fn start(bench: &Path, upstream: &str) -> std::io::Result<Gateway> {
    let mut command = Command::new(bench);
    command.args(["--relay-floor", upstream]);
    Gateway::spawn(command)
}

#[derive(Clone)]
struct Relay {
    client: reqwest::Client,
    url: String,
}

/// The child's whole life: serve on `127.0.0.1:0`, report the address as `toolshim serve`
/// does, relay until killed.
pub(crate) fn serve(upstream: &str) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    #[expect(clippy::disallowed_methods, reason = "the bare relay's own client")]
    let client = reqwest::Client::builder().build()?;
    let relay =
        Relay { client, url: format!("{}/v1/chat/completions", upstream.trim_end_matches('/')) };
    runtime.block_on(async move {
        let app = Router::new().route("/v1/chat/completions", post(relay_one)).with_state(relay);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        // As the gateway does: small writes go out at once.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        writeln!(std::io::stderr().lock(), "toolshim: listening on http://{addr}")?;
        axum::serve(listener, app).await?;
        Ok(())
    })
}

async fn relay_one(State(relay): State<Relay>, body: Bytes) -> Response {
    let sent = relay
        .client
        .post(&relay.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let Ok(reply) = sent else {
        return Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::empty())
            .unwrap_or_default();
    };
    let mut response = Response::builder().status(reply.status().as_u16());
    if let Some(kind) = reply.headers().get(header::CONTENT_TYPE) {
        response = response.header(header::CONTENT_TYPE, kind.clone());
    }
    response
        .body(Body::from_stream(
            reply.bytes_stream().map(|chunk| chunk.map_err(std::io::Error::other)),
        ))
        .unwrap_or_default()
}
