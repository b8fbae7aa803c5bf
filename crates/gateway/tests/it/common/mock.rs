//! The scripted mock upstream: a chat-only server on `127.0.0.1:0` that answers from a
//! script, records what it was sent, and can show a chat template at `GET /props` as
//! llama.cpp's server does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
// ---------------------------------------------------------------------------------------
// Mock upstream
// ---------------------------------------------------------------------------------------

/// One scripted answer of the mock upstream.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    kind: ReplyKind,
}

#[derive(Debug, Clone)]
enum ReplyKind {
    Stream(StreamReply),
    Error {
        status: u16,
        body: Value,
        retry_after: Option<String>,
    },
    /// Never sends the response head.
    Stall,
    /// Status 200 and these bytes as they are, for byte-level faults.
    Bytes(BytesReply),
    /// Streams back, as the model's text, what the last user message of the request says
    /// (a model quoting its prompt).
    Echo,
}

#[derive(Debug, Clone)]
struct BytesReply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    parts: Vec<Bytes>,
    then: Then,
}

/// What a byte-level reply does after its parts.
#[derive(Debug, Clone)]
enum Then {
    /// Ends the body cleanly.
    End,
    /// Breaks the connection.
    Break,
    /// Sends `part` every `every`, forever.
    Repeat { part: Bytes, every: Duration },
    /// Sends nothing more and never ends.
    Stall,
}

#[derive(Debug, Clone)]
struct StreamReply {
    text: String,
    chunk_chars: usize,
    finish_reason: String,
    delay: Duration,
    /// Abort the body (connection error) after this many SSE events.
    disconnect_after: Option<usize>,
    /// Go silent, connection open, after this many SSE events.
    stall_after: Option<usize>,
}

impl Reply {
    /// `text` streamed as content deltas of 4 characters, then `finish_reason: "stop"`.
    pub(crate) fn text(text: impl Into<String>) -> Reply {
        Reply {
            kind: ReplyKind::Stream(StreamReply {
                text: text.into(),
                chunk_chars: 4,
                finish_reason: "stop".into(),
                delay: Duration::ZERO,
                disconnect_after: None,
                stall_after: None,
            }),
        }
    }

    /// An error status with a JSON body.
    pub(crate) fn error(status: u16, body: Value) -> Reply {
        Reply { kind: ReplyKind::Error { status, body, retry_after: None } }
    }

    /// Accepts the request and never answers.
    pub(crate) fn stall() -> Reply {
        Reply { kind: ReplyKind::Stall }
    }

    /// A 200 reply with this content type whose body is `parts`, sent one by one as they are.
    pub(crate) fn bytes<P: Into<Bytes>>(
        content_type: &'static str,
        parts: impl IntoIterator<Item = P>,
    ) -> Reply {
        let parts = parts.into_iter().map(Into::into).collect();
        Reply {
            kind: ReplyKind::Bytes(BytesReply {
                status: 200,
                content_type,
                headers: Vec::new(),
                parts,
                then: Then::End,
            }),
        }
    }

    /// A reply that streams the request's last user message back as the model's text.
    pub(crate) fn echo() -> Reply {
        Reply { kind: ReplyKind::Echo }
    }

    /// The byte-level reply's status.
    pub(crate) fn status(mut self, status: u16) -> Reply {
        self.bytes_mut().status = status;
        self
    }

    /// A header on the byte-level reply.
    pub(crate) fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.bytes_mut().headers.push((name, value.into()));
        self
    }

    /// After its parts, the byte-level reply sends nothing more and never ends.
    pub(crate) fn then_stall(mut self) -> Reply {
        self.bytes_mut().then = Then::Stall;
        self
    }

    fn bytes_mut(&mut self) -> &mut BytesReply {
        match &mut self.kind {
            ReplyKind::Bytes(bytes) => bytes,
            other => panic!("only a byte-level reply has this option, not {other:?}"),
        }
    }

    /// After its parts, the byte-level reply breaks the connection.
    pub(crate) fn then_break(mut self) -> Reply {
        self.bytes_mut().then = Then::Break;
        self
    }

    /// After its parts, the byte-level reply sends `part` every `every`, and never ends.
    pub(crate) fn then_repeat(mut self, part: impl Into<Bytes>, every: Duration) -> Reply {
        self.bytes_mut().then = Then::Repeat { part: part.into(), every };
        self
    }

    fn stream_mut(&mut self) -> &mut StreamReply {
        match &mut self.kind {
            ReplyKind::Stream(stream) => stream,
            other => panic!("only a streamed reply has this option, not {other:?}"),
        }
    }

    /// Content deltas of `n` characters (at least 1).
    pub(crate) fn chunks(mut self, n: usize) -> Reply {
        self.stream_mut().chunk_chars = n.max(1);
        self
    }

    /// The upstream's `finish_reason`.
    pub(crate) fn finish(mut self, reason: &str) -> Reply {
        self.stream_mut().finish_reason = reason.into();
        self
    }

    /// A pause before every SSE event.
    pub(crate) fn delay(mut self, delay: Duration) -> Reply {
        self.stream_mut().delay = delay;
        self
    }

    /// Break the connection after `k` SSE events (the role chunk counts).
    pub(crate) fn disconnect_after(mut self, k: usize) -> Reply {
        self.stream_mut().disconnect_after = Some(k);
        self
    }

    /// Stop sending, connection open, after `k` SSE events.
    pub(crate) fn stall_after(mut self, k: usize) -> Reply {
        self.stream_mut().stall_after = Some(k);
        self
    }

    /// A `retry-after` header on an error reply.
    pub(crate) fn retry_after(mut self, value: &str) -> Reply {
        match &mut self.kind {
            ReplyKind::Error { retry_after, .. } => *retry_after = Some(value.into()),
            other => panic!("only an error reply has retry-after, not {other:?}"),
        }
        self
    }
}

/// The SSE events of a streamed reply, in OpenAI's chunk format.
fn stream_frames(reply: &StreamReply) -> Vec<String> {
    let chunk = |choices: Value| {
        json!({"id": "chatcmpl-upstream", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": MODEL, "choices": choices})
    };
    let mut frames =
        vec![chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
        "logprobs": null, "finish_reason": null}]))];
    let chars: Vec<char> = reply.text.chars().collect();
    for piece in chars.chunks(reply.chunk_chars) {
        let piece: String = piece.iter().collect();
        frames.push(chunk(json!([{"index": 0, "delta": {"content": piece}, "logprobs": null,
            "finish_reason": null}])));
    }
    frames.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reply.finish_reason}]),
    ));
    let mut usage = chunk(json!([]));
    usage["usage"] = json!({"prompt_tokens": UPSTREAM_PROMPT_TOKENS,
        "completion_tokens": UPSTREAM_COMPLETION_TOKENS,
        "total_tokens": UPSTREAM_PROMPT_TOKENS + UPSTREAM_COMPLETION_TOKENS});
    frames.push(usage);
    let mut out: Vec<String> = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    out.push("data: [DONE]\n\n".into());
    out
}

/// The first OpenAI SSE event of a reply: the role, with empty content.
pub(crate) fn role_frame() -> String {
    let chunk = json!({"id": "chatcmpl-upstream", "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": MODEL,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
        "logprobs": null, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// One OpenAI SSE event carrying `content` as a delta, as the mock upstream sends it.
pub(crate) fn content_frame(content: &str) -> String {
    let chunk = json!({"id": "chatcmpl-upstream", "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": content}, "logprobs": null, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// The OpenAI SSE events that end a reply: the finish reason, then `[DONE]`.
pub(crate) fn finish_frames(reason: &str) -> String {
    let chunk = json!({"id": "chatcmpl-upstream", "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": MODEL,
        "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reason}]});
    format!("data: {chunk}\n\ndata: [DONE]\n\n")
}

#[derive(Debug)]
struct Inner {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    /// The headers of every request, in order.
    headers: Mutex<Vec<axum::http::HeaderMap>>,
    /// How many requests arrived.
    received: watch::Sender<usize>,
    /// How many replies were abandoned by the client (the gateway) before they were complete.
    dropped: watch::Sender<usize>,
    /// Body bytes handed to the server so far, over all replies.
    sent: watch::Sender<usize>,
    /// How many `GET /v1/models` arrived.
    models_requests: watch::Sender<usize>,
    /// How long `GET /v1/models` takes to answer.
    models_delay: Mutex<Duration>,
    /// What `GET /props` answers (llama.cpp's server properties); none: 404.
    props: Mutex<Option<Value>>,
    /// How many `GET /props` arrived.
    props_requests: watch::Sender<usize>,
}

/// Counts a reply as dropped unless it is marked complete first.
struct DropGuard {
    inner: Arc<Inner>,
    complete: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.complete {
            self.inner.dropped.send_modify(|n| *n += 1);
        }
    }
}

/// A chat-only upstream on `127.0.0.1:0` answering `POST /v1/chat/completions` from a script.
#[derive(Debug, Clone)]
pub(crate) struct MockUpstream {
    inner: Arc<Inner>,
    pub(crate) addr: SocketAddr,
}

impl MockUpstream {
    pub(crate) async fn start() -> MockUpstream {
        let inner = Arc::new(Inner {
            script: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            headers: Mutex::new(Vec::new()),
            received: watch::channel(0).0,
            dropped: watch::channel(0).0,
            sent: watch::channel(0).0,
            models_requests: watch::channel(0).0,
            models_delay: Mutex::new(Duration::ZERO),
            props: Mutex::new(None),
            props_requests: watch::channel(0).0,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(mock_chat))
            // The same script for an upstream configured with `api = "anthropic"` (the test
            // scripts its bytes in the Messages event format).
            .route("/v1/messages", post(mock_chat))
            .route("/v1/models", get(mock_models))
            .route("/props", get(mock_props))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        spawn(async move { axum::serve(listener, app).await });
        MockUpstream { inner, addr }
    }

    /// Base URL for the gateway's `upstream.url`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply; replies are used in order, one per request.
    pub(crate) fn push(&self, reply: Reply) -> &MockUpstream {
        self.inner.script.lock().unwrap().push_back(reply);
        self
    }

    /// Every request body received so far.
    pub(crate) fn requests(&self) -> Vec<Value> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// The headers of every request received so far.
    pub(crate) fn request_headers(&self) -> Vec<axum::http::HeaderMap> {
        self.inner.headers.lock().unwrap().clone()
    }

    /// How many `GET /v1/models` (model lists and readiness probes) arrived.
    pub(crate) fn models_requests(&self) -> usize {
        *self.inner.models_requests.borrow()
    }

    /// Makes `GET /props` answer as llama.cpp's server does, showing `template` as the
    /// model's chat template.
    pub(crate) fn show_template(&self, template: &str) -> &MockUpstream {
        *self.inner.props.lock().unwrap() = Some(json!({
            "default_generation_settings": {"n_ctx": 4096},
            "chat_template": template,
        }));
        self
    }

    /// How many `GET /props` arrived.
    pub(crate) fn props_requests(&self) -> usize {
        *self.inner.props_requests.borrow()
    }

    /// Makes `GET /v1/models` answer only after `delay` (a scripted delay, like a stream's).
    pub(crate) fn delay_models(&self, delay: Duration) -> &MockUpstream {
        *self.inner.models_delay.lock().unwrap() = delay;
        self
    }

    /// Replies not yet used.
    pub(crate) fn pending(&self) -> usize {
        self.inner.script.lock().unwrap().len()
    }

    /// Waits (up to `within`) until `n` requests have arrived.
    pub(crate) async fn wait_requests(&self, n: usize, within: Duration) -> bool {
        let mut rx = self.inner.received.subscribe();
        tokio::time::timeout(within, rx.wait_for(|got| *got >= n)).await.is_ok_and(|r| r.is_ok())
    }

    /// Body bytes handed to the HTTP server so far; a server only takes more once it could
    /// write the earlier ones, so this follows what the gateway read.
    pub(crate) fn sent_bytes(&self) -> watch::Receiver<usize> {
        self.inner.sent.subscribe()
    }

    /// Waits (up to `within`) until a reply was abandoned before it was complete.
    pub(crate) async fn wait_dropped(&self, within: Duration) -> bool {
        self.wait_dropped_n(1, within).await
    }

    /// Waits (up to `within`) until `n` replies were abandoned before they were complete.
    pub(crate) async fn wait_dropped_n(&self, n: usize, within: Duration) -> bool {
        let mut rx = self.inner.dropped.subscribe();
        tokio::time::timeout(within, rx.wait_for(|got| *got >= n)).await.is_ok_and(|r| r.is_ok())
    }
}

async fn mock_props(State(inner): State<Arc<Inner>>) -> Response {
    inner.props_requests.send_modify(|n| *n += 1);
    match inner.props.lock().unwrap().clone() {
        Some(props) => axum::Json(props).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn mock_models(State(inner): State<Arc<Inner>>) -> axum::Json<Value> {
    inner.models_requests.send_modify(|n| *n += 1);
    let delay = *inner.models_delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    axum::Json(json!({"object": "list", "data": [
        {"id": "upstream-a", "object": "model", "created": 0, "owned_by": "mock"},
        {"id": "upstream-b", "object": "model", "created": 0, "owned_by": "mock"}]}))
}

async fn mock_chat(
    State(inner): State<Arc<Inner>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let value: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    inner.headers.lock().unwrap().push(headers);
    let last_user = value["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    inner.requests.lock().unwrap().push(value);
    inner.received.send_modify(|n| *n += 1);
    let reply = inner.script.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "mock upstream: the script has no reply left",
                "type": "server_error", "param": null, "code": null}})),
        )
            .into_response();
    };
    let mut guard = DropGuard { inner: inner.clone(), complete: false };
    match reply.kind {
        ReplyKind::Error { status, body, retry_after } => {
            guard.complete = true;
            let mut response =
                (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
            if let Some(value) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_str(&value).unwrap());
            }
            response
        }
        ReplyKind::Stall => {
            std::future::pending::<()>().await;
            guard.complete = true;
            StatusCode::NO_CONTENT.into_response()
        }
        ReplyKind::Bytes(reply) => {
            let body = async_stream::stream! {
                let mut guard = guard;
                for part in reply.parts {
                    guard.inner.sent.send_modify(|n| *n += part.len());
                    yield Ok::<_, std::io::Error>(part);
                }
                match reply.then {
                    Then::End => guard.complete = true,
                    Then::Break => {
                        tokio::task::yield_now().await;
                        guard.complete = true;
                        yield Err(std::io::Error::other("scripted disconnect"));
                    }
                    Then::Repeat { part, every } => loop {
                        tokio::time::sleep(every).await;
                        guard.inner.sent.send_modify(|n| *n += part.len());
                        yield Ok(part.clone());
                    },
                    Then::Stall => std::future::pending::<()>().await,
                }
            };
            let mut response = Response::new(Body::from_stream(body));
            *response.status_mut() = StatusCode::from_u16(reply.status).unwrap();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
            for (name, value) in reply.headers {
                response.headers_mut().insert(name, HeaderValue::from_str(&value).unwrap());
            }
            response
        }
        ReplyKind::Echo => {
            guard.complete = true;
            let frames = stream_frames(&StreamReply {
                text: last_user,
                chunk_chars: 16,
                finish_reason: "stop".into(),
                delay: Duration::ZERO,
                disconnect_after: None,
                stall_after: None,
            });
            let mut response = Response::new(Body::from(frames.concat()));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            response
        }
        ReplyKind::Stream(stream) => {
            let frames = stream_frames(&stream);
            let body = async_stream::stream! {
                let mut guard = guard;
                for (sent, frame) in frames.into_iter().enumerate() {
                    if stream.disconnect_after == Some(sent) {
                        // Let hyper flush what was sent: an aborted body discards its
                        // write buffer, and the client should see the events first.
                        tokio::task::yield_now().await;
                        guard.complete = true;
                        yield Err(std::io::Error::other("scripted disconnect"));
                        return;
                    }
                    if stream.stall_after == Some(sent) {
                        std::future::pending::<()>().await;
                    }
                    if !stream.delay.is_zero() {
                        tokio::time::sleep(stream.delay).await;
                    }
                    guard.inner.sent.send_modify(|n| *n += frame.len());
                    yield Ok::<_, std::io::Error>(Bytes::from(frame));
                }
                guard.complete = true;
            };
            let mut response = Response::new(Body::from_stream(body));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            response
        }
    }
}
