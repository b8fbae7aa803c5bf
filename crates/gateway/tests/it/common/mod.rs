//! Shared test helpers: a scripted mock upstream, an in-process gateway, an HTTP client,
//! request builders and a checker for the Chat Completions SSE grammar.
//!
//! Nothing here waits with `sleep`: servers report their address through channels, and
//! waits for background effects (a dropped connection) watch a channel with a deadline.
//! The only sleeps are the mock upstream's scripted delays (between chunks, before a model
//! list).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolshim_gateway::{CallFormat, Config, Mode, ModelConfig, ServeReport, UpstreamConfig};

pub(crate) mod anthropic;
pub(crate) mod api;
pub(crate) mod corpus;
mod mock;

pub(crate) use mock::*;

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
        // Each gateway its own store, gone with it.
        store: toolshim_gateway::StoreConfig {
            url: "memory".into(),
            ..toolshim_gateway::StoreConfig::default()
        },
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

/// The shape of a non-streamed completion.
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

/// The four keys of OpenAI's error body.
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

/// Checks a whole Chat Completions stream against the chunk grammar and folds it.
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
