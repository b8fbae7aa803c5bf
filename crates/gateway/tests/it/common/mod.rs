//! Shared test helpers: a scripted mock upstream, an in-process gateway, an HTTP client,
//! request builders and a checker for the Chat Completions SSE grammar (protocols.md §2C).
//!
//! Nothing here waits with `sleep`: servers report their address through channels, and
//! waits for background effects (a dropped connection) watch a channel with a deadline.
//! The only sleeps are the mock upstream's scripted delays (between chunks, before a model
//! list).

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolshim_gateway::{CallFormat, Config, Mode, ModelConfig, ServeReport, UpstreamConfig};

pub(crate) mod api;
pub(crate) mod corpus;

/// The model name the tests send; the gateway forwards it unchanged.
pub(crate) const MODEL: &str = "mock-model";

/// Usage the mock upstream reports on every streamed reply.
pub(crate) const UPSTREAM_PROMPT_TOKENS: u64 = 42;
pub(crate) const UPSTREAM_COMPLETION_TOKENS: u64 = 7;

/// Upper bound for any wait in a test; a hang fails instead of blocking the run.
pub(crate) const DEADLINE: Duration = Duration::from_secs(5);

/// A client-visible model entry: its upstream name and call format.
pub(crate) fn model(upstream: Option<&str>, call_format: Option<CallFormat>) -> ModelConfig {
    ModelConfig { upstream: upstream.map(str::to_owned), call_format, ..ModelConfig::default() }
}

/// Reads a streamed body until its first complete SSE event; returns the bytes read.
pub(crate) async fn read_first_event(
    bytes: &mut (impl Stream<Item = reqwest::Result<Bytes>> + Unpin),
) -> Vec<u8> {
    let mut received = Vec::new();
    while !received.windows(2).any(|w| w == b"\n\n") {
        let chunk = tokio::time::timeout(DEADLINE, bytes.next()).await.unwrap().unwrap().unwrap();
        received.extend_from_slice(&chunk);
    }
    received
}

/// The one place the tests start background tasks (the mock upstream and the gateway).
#[expect(clippy::disallowed_methods, reason = "test servers run in the background")]
pub(crate) fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(future)
}

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
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(mock_chat))
            // The same script for an upstream configured with `api = "anthropic"` (the test
            // scripts its bytes in the Messages event format).
            .route("/v1/messages", post(mock_chat))
            .route("/v1/models", get(mock_models))
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

// ---------------------------------------------------------------------------------------
// Gateway
// ---------------------------------------------------------------------------------------

/// A gateway served in-process on `127.0.0.1:0`; its token is cancelled on drop.
#[derive(Debug)]
pub(crate) struct TestGateway {
    pub(crate) addr: SocketAddr,
    pub(crate) token: CancellationToken,
    pub(crate) upstream: MockUpstream,
    server: Option<JoinHandle<Result<ServeReport, String>>>,
    http: reqwest::Client,
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// The config every test starts from: emulation against `upstream_url`, short timeouts.
pub(crate) fn base_config(upstream_url: &str) -> Config {
    Config {
        listen: "127.0.0.1:0".into(),
        mode: Mode::Emulate,
        upstream: UpstreamConfig {
            url: upstream_url.into(),
            api: toolshim_gateway::UpstreamApi::OpenAi,
            api_key_env: "TOOLSHIM_IT_UNSET_UPSTREAM_KEY".into(),
            connect_timeout_secs: 2.0,
            first_byte_timeout_secs: 5.0,
            idle_timeout_secs: 5.0,
            ..UpstreamConfig::default()
        },
        drain_timeout_secs: 5.0,
        max_retries: 1,
        ..Config::default()
    }
}

/// Starts a mock upstream and a gateway in emulate mode pointing at it; `tweak` edits the config.
pub(crate) async fn spawn_gateway(tweak: impl FnOnce(&mut Config)) -> TestGateway {
    let upstream = MockUpstream::start().await;
    let mut config = base_config(&upstream.url());
    tweak(&mut config);
    serve_config(upstream, config).await
}

/// Serves `config` in-process; `upstream` is the mock the returned gateway's helpers inspect.
pub(crate) async fn serve_config(upstream: MockUpstream, config: Config) -> TestGateway {
    let token = CancellationToken::new();
    let (tx, rx) = oneshot::channel();
    let server = spawn(toolshim_gateway::serve(config, token.clone(), move |addr| {
        let _ = tx.send(addr);
    }));
    let addr = match rx.await {
        Ok(addr) => addr,
        Err(_) => panic!("the gateway did not start: {:?}", server.await),
    };
    TestGateway { addr, token, upstream, server: Some(server), http: client() }
}

/// A plain HTTP client for talking to the gateway (no proxy, no connection reuse).
pub(crate) fn client() -> reqwest::Client {
    #[expect(clippy::disallowed_methods, reason = "the test client, not the upstream client")]
    let builder = reqwest::Client::builder();
    builder.no_proxy().pool_max_idle_per_host(0).timeout(Duration::from_secs(10)).build().unwrap()
}

impl TestGateway {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Sends a JSON request to `path` and returns the raw response.
    pub(crate) async fn post_to(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http.post(self.url(path)).json(body).send().await.unwrap()
    }

    /// Sends a Chat Completions request and returns the raw response.
    pub(crate) async fn post(&self, body: &Value) -> reqwest::Response {
        self.http.post(self.url("/v1/chat/completions")).json(body).send().await.unwrap()
    }

    /// A non-streaming request: status and JSON body.
    pub(crate) async fn chat(&self, body: &Value) -> (StatusCode, Value) {
        let response = self.post(body).await;
        let status = response.status();
        let text = response.text().await.unwrap();
        let value =
            serde_json::from_str(&text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
        (status, value)
    }

    /// A successful non-streaming request: the completion.
    pub(crate) async fn complete(&self, body: &Value) -> Value {
        let (status, value) = self.chat(body).await;
        assert_eq!(status, StatusCode::OK, "{value:#}");
        assert_completion_shape(&value);
        value
    }

    /// A streaming request: status, content type and the whole body.
    pub(crate) async fn chat_stream(&self, body: &Value) -> (StatusCode, String, String) {
        let mut body = body.clone();
        body["stream"] = json!(true);
        let response = self.post(&body).await;
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (status, content_type, response.text().await.unwrap())
    }

    /// A successful streaming request: the raw SSE body.
    pub(crate) async fn stream_ok(&self, body: &Value) -> String {
        let (status, content_type, text) = self.chat_stream(body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(content_type, "text/event-stream; charset=utf-8");
        text
    }

    /// Waits for `serve` to return after the token was cancelled.
    pub(crate) async fn stopped(&mut self, within: Duration) -> Result<ServeReport, String> {
        let server = self.server.take().expect("serve is awaited once");
        tokio::time::timeout(within, server)
            .await
            .map_err(|_| "serve did not return in time".to_owned())?
            .map_err(|err| err.to_string())?
    }
}

/// A port on 127.0.0.1 that nothing listens on.
pub(crate) async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

// ---------------------------------------------------------------------------------------
// Requests and upstream texts
// ---------------------------------------------------------------------------------------

/// `get_weather(city, unit?, days?: integer)` and `get_time(timezone)`.
pub(crate) fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather",
            "description": "Get the current weather and an optional forecast for a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time",
            "description": "Get the current local time in an IANA timezone.",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"]}}}
    ])
}

/// A one-message request with the two tools.
pub(crate) fn request(user: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": user}], "tools": tools()})
}

/// A one-message request without tools.
pub(crate) fn plain_request(user: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": user}]})
}

/// A Hermes `<tool_call>` block, as the gateway's prompt asks for (`name` first, as models
/// write it; `json!` would sort `arguments` first).
pub(crate) fn hermes(name: &str, arguments: Value) -> String {
    format!("<tool_call>\n{{\"name\": {}, \"arguments\": {arguments}}}\n</tool_call>", json!(name))
}

/// Checks `call_` + 24 ASCII letters and digits.
pub(crate) fn assert_call_id(id: &str) {
    let rest = id.strip_prefix("call_").unwrap_or_else(|| panic!("call id {id:?}"));
    assert_eq!(rest.len(), 24, "call id {id:?}");
    assert!(rest.bytes().all(|b| b.is_ascii_alphanumeric()), "call id {id:?}");
}

/// Parses a `function.arguments` string; it must be a JSON object.
pub(crate) fn args(call: &Value) -> Value {
    let text = call["function"]["arguments"].as_str().unwrap_or_else(|| panic!("{call}"));
    let value: Value =
        serde_json::from_str(text).unwrap_or_else(|err| panic!("arguments {text:?}: {err}"));
    assert!(value.is_object(), "arguments {text:?}");
    value
}

/// The shape of a non-streamed completion (protocols.md 2.8, 2.9, 2.11).
pub(crate) fn assert_completion_shape(value: &Value) {
    let id = value["id"].as_str().unwrap_or_default();
    assert!(id.starts_with("chatcmpl-"), "{value}");
    assert_eq!(value["object"], "chat.completion");
    assert!(value["created"].is_u64(), "{value}");
    assert!(value["model"].is_string(), "{value}");
    let choices = value["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1, "{value}");
    let choice = &choices[0];
    for key in ["index", "message", "logprobs", "finish_reason"] {
        assert!(choice.get(key).is_some(), "choice lacks {key}: {value}");
    }
    let message = &choice["message"];
    assert_eq!(message["role"], "assistant");
    for key in ["content", "refusal"] {
        assert!(message.get(key).is_some(), "message lacks {key}: {value}");
    }
    if let Some(calls) = message.get("tool_calls") {
        for call in calls.as_array().unwrap() {
            assert_call_id(call["id"].as_str().unwrap());
            assert_eq!(call["type"], "function");
            args(call);
        }
    }
    let usage = &value["usage"];
    let (p, c, t) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap(),
    );
    assert_eq!(p + c, t, "{usage}");
}

/// The four keys of OpenAI's error body (protocols.md 2.15).
pub(crate) fn assert_error_shape(value: &Value) -> &Value {
    let error = value.get("error").unwrap_or_else(|| panic!("no `error`: {value}"));
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{value}");
    assert!(error["type"].is_string(), "{value}");
    for key in ["param", "code"] {
        let field = error.get(key).unwrap_or_else(|| panic!("no error.{key}: {value}"));
        assert!(field.is_string() || field.is_null(), "{value}");
    }
    error
}

// ---------------------------------------------------------------------------------------
// SSE
// ---------------------------------------------------------------------------------------

/// The `data:` payloads of an SSE body, checking the framing on the way: every event is
/// exactly one `data: ` line followed by a blank line, and the body ends after an event.
pub(crate) fn sse_data(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "the body does not end with a blank line: {body:?}");
    let events = body.strip_suffix("\n\n").unwrap_or(body).split("\n\n");
    events
        // Keep-alive comments, which SSE readers skip.
        .filter(|event| *event != ": keepalive")
        .map(|event| {
            assert!(!event.contains('\n'), "an event with more than one line: {event:?}");
            assert!(!event.contains('\r'), "a carriage return in {event:?}");
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a `data: ` event: {event:?}"))
                .to_owned()
        })
        .collect()
}

/// Text that reveals the tool-call protocol to the client.
pub(crate) const MARKERS: [&str; 3] = ["<tool_call", "</tool_call", "{\"name\""];

/// What a streamed completion added up to.
#[derive(Debug, Default)]
pub(crate) struct Streamed {
    pub(crate) chunks: Vec<Value>,
    pub(crate) content: String,
    pub(crate) content_deltas: Vec<String>,
    /// (id, name, concatenated arguments) per call, in index order.
    pub(crate) calls: Vec<(String, String, String)>,
    pub(crate) finish_reason: String,
    pub(crate) usage: Option<Value>,
}

impl Streamed {
    pub(crate) fn call_args(&self, i: usize) -> Value {
        serde_json::from_str(&self.calls[i].2).unwrap()
    }

    pub(crate) fn names(&self) -> Vec<&str> {
        self.calls.iter().map(|c| c.1.as_str()).collect()
    }
}

/// Checks a whole Chat Completions stream against protocols.md 2.13/2.14 and folds it.
pub(crate) fn check_stream(body: &str, include_usage: bool) -> Streamed {
    let data = sse_data(body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "`[DONE]` must be last: {body}");
    assert_eq!(data.iter().filter(|d| *d == "[DONE]").count(), 1, "one `[DONE]`: {body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|err| panic!("chunk {d:?}: {err}")))
        .collect();
    assert!(!chunks.is_empty(), "no chunks: {body}");
    let first = &chunks[0];
    let id = first["id"].as_str().unwrap();
    assert!(
        id.strip_prefix("chatcmpl-")
            .is_some_and(|rest| rest.len() == 29 && rest.bytes().all(|b| b.is_ascii_alphanumeric())),
        "completion id {id:?}"
    );
    let mut out = Streamed::default();
    let mut finished_at = None;
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.iter().enumerate() {
        assert!(chunk.get("error").is_none(), "an error chunk in {body}");
        for key in ["id", "object", "created", "model", "choices"] {
            assert!(chunk.get(key).is_some(), "chunk {i} lacks {key}: {chunk}");
        }
        assert_eq!(chunk["object"], "chat.completion.chunk", "chunk {i}");
        assert_eq!(chunk["id"], first["id"], "chunk {i}");
        assert_eq!(chunk["created"], first["created"], "chunk {i}");
        assert_eq!(chunk["model"], first["model"], "chunk {i}");
        let choices = chunk["choices"].as_array().unwrap();
        if include_usage {
            let usage = chunk.get("usage").unwrap_or_else(|| panic!("chunk {i} lacks usage"));
            if i == last {
                assert!(choices.is_empty(), "the usage chunk has no choices: {chunk}");
                let (p, c, t) = (
                    usage["prompt_tokens"].as_u64().unwrap(),
                    usage["completion_tokens"].as_u64().unwrap(),
                    usage["total_tokens"].as_u64().unwrap(),
                );
                assert_eq!(p + c, t, "{usage}");
                out.usage = Some(usage.clone());
                continue;
            }
            assert!(usage.is_null(), "usage is null before the last chunk: {chunk}");
        } else {
            assert!(chunk.get("usage").is_none(), "usage not asked for: {chunk}");
        }
        assert_eq!(choices.len(), 1, "one choice per chunk: {chunk}");
        assert!(finished_at.is_none(), "a chunk after the finish chunk: {chunk}");
        let choice = &choices[0];
        assert_eq!(choice["index"], 0, "{chunk}");
        assert!(choice.get("logprobs").is_some_and(Value::is_null), "logprobs: {chunk}");
        let finish = choice.get("finish_reason").unwrap_or_else(|| panic!("{chunk}"));
        let delta = choice["delta"].as_object().unwrap_or_else(|| panic!("delta: {chunk}"));
        if i == 0 {
            assert_eq!(delta.get("role").and_then(Value::as_str), Some("assistant"), "{chunk}");
        } else {
            assert!(delta.get("role").is_none(), "role after the first chunk: {chunk}");
        }
        match delta.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => {
                for marker in MARKERS {
                    assert!(!text.contains(marker), "markup {marker:?} in content: {chunk}");
                }
                if !text.is_empty() {
                    out.content_deltas.push(text.clone());
                }
                out.content.push_str(text);
            }
            Some(other) => panic!("content {other}"),
        }
        if let Some(calls) = delta.get("tool_calls") {
            let calls = calls.as_array().unwrap();
            assert!(!calls.is_empty(), "{chunk}");
            for call in calls {
                let index = call["index"].as_u64().unwrap_or_else(|| panic!("no index: {chunk}"));
                let function =
                    call["function"].as_object().unwrap_or_else(|| panic!("no function: {chunk}"));
                let fragment = function.get("arguments").and_then(Value::as_str).unwrap_or("");
                let index = usize::try_from(index).unwrap();
                if index == out.calls.len() {
                    let id = call["id"].as_str().unwrap_or_else(|| panic!("start without id"));
                    assert_call_id(id);
                    assert_eq!(call["type"], "function", "{chunk}");
                    let name = function["name"].as_str().unwrap_or_else(|| panic!("{chunk}"));
                    assert!(out.calls.iter().all(|c| c.0 != id), "repeated id {id}");
                    out.calls.push((id.into(), name.into(), fragment.into()));
                } else {
                    assert_eq!(index + 1, out.calls.len(), "indices contiguous, no interleaving");
                    for key in ["id", "type"] {
                        assert!(call.get(key).is_none(), "{key} outside the start: {chunk}");
                    }
                    assert!(function.get("name").is_none(), "name outside the start: {chunk}");
                    out.calls[index].2.push_str(fragment);
                }
            }
        }
        if let Some(reason) = finish.as_str() {
            assert!(delta.is_empty(), "the finish chunk has an empty delta: {chunk}");
            out.finish_reason = reason.into();
            finished_at = Some(i);
        } else {
            assert!(finish.is_null(), "{chunk}");
        }
    }
    assert!(finished_at.is_some(), "no finish_reason: {body}");
    if include_usage {
        assert!(out.usage.is_some(), "no usage chunk: {body}");
    }
    for marker in MARKERS {
        assert!(!out.content.contains(marker), "markup {marker:?} in content {:?}", out.content);
    }
    for (id, name, arguments) in &out.calls {
        let value: Value = serde_json::from_str(arguments)
            .unwrap_or_else(|err| panic!("{name} ({id}) arguments {arguments:?}: {err}"));
        assert!(value.is_object(), "{arguments}");
    }
    out.chunks = chunks;
    out
}
