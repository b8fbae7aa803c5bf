//! The one shared HTTP client for the upstream, with connect, first-byte and idle timeouts.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::chat::Usage;
use crate::config::{Config, UpstreamApi, UpstreamConfig};
use crate::error::ApiError;
use crate::upstream::sse_decode::SseDecoder;

/// What the upstream's reply is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamEvent {
    Text(String),
    Finish(String),
    Usage(Usage),
}

pub(crate) type UpstreamStream =
    Pin<Box<dyn Stream<Item = Result<UpstreamEvent, ApiError>> + Send>>;

/// Talks to the upstream chat endpoint.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamClient {
    http: reqwest::Client,
    api: UpstreamApi,
    url: String,
    key: Option<String>,
    first_byte: Duration,
    idle: Duration,
}

impl UpstreamClient {
    /// Builds the shared client. The key is read from the environment variable the config names.
    pub(crate) fn new(config: &UpstreamConfig) -> Result<UpstreamClient, String> {
        #[expect(
            clippy::disallowed_methods,
            reason = "this is the one place the upstream client is built"
        )]
        let builder = reqwest::Client::builder();
        let http = builder
            .connect_timeout(Config::secs(config.connect_timeout_secs))
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        let base = config.url.trim().trim_end_matches('/');
        let path = match config.api {
            UpstreamApi::OpenAi => "chat/completions",
            UpstreamApi::Anthropic => "messages",
        };
        let url = if base.ends_with("/v1") {
            format!("{base}/{path}")
        } else {
            format!("{base}/v1/{path}")
        };
        let key = std::env::var(&config.api_key_env).ok().filter(|k| !k.is_empty());
        Ok(UpstreamClient {
            http,
            api: config.api,
            url,
            key,
            first_byte: Config::secs(config.first_byte_timeout_secs),
            idle: Config::secs(config.idle_timeout_secs),
        })
    }

    /// Whether the upstream speaks the Anthropic Messages API.
    pub(crate) fn is_anthropic(&self) -> bool {
        self.api == UpstreamApi::Anthropic
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match (self.api, &self.key) {
            (UpstreamApi::OpenAi, Some(key)) => request.bearer_auth(key),
            (UpstreamApi::OpenAi, None) => request,
            (UpstreamApi::Anthropic, key) => {
                let request = request.header("anthropic-version", "2023-06-01");
                match key {
                    Some(key) => request.header("x-api-key", key),
                    None => request,
                }
            }
        }
    }

    /// Sends a raw request body and returns the response once its status is known.
    pub(crate) async fn send(&self, body: &Value) -> Result<reqwest::Response, ApiError> {
        let mut request = self.http.post(&self.url).json(body);
        request = self.authorize(request);
        let response = match tokio::time::timeout(self.first_byte, request.send()).await {
            Err(_) => return Err(ApiError::UpstreamTimeout),
            Ok(Err(err)) if err.is_timeout() => return Err(ApiError::UpstreamTimeout),
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "upstream request failed");
                return Err(ApiError::UpstreamUnavailable {
                    message: "The upstream model could not be reached.".into(),
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after =
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body = response.text().await.unwrap_or_default();
        tracing::debug!(status = status.as_u16(), body = %body, "upstream error");
        Err(match status.as_u16() {
            503 | 529 => ApiError::UpstreamOverloaded { retry_after },
            400 | 413 if is_context_overflow(&body) => {
                let numbers: Vec<u64> = body
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse().ok())
                    .filter(|n| *n >= 16)
                    .collect();
                let limit = numbers.iter().copied().min().unwrap_or(0);
                let tokens = numbers.iter().copied().max().unwrap_or(0).max(limit + 1);
                ApiError::ContextOverflow { tokens, limit }
            }
            429 => ApiError::UpstreamRateLimited {
                message: "The upstream model is rate limited; try again later.".into(),
                retry_after,
            },
            400..=499 => ApiError::Upstream {
                message: format!(
                    "The upstream model rejected the request (status {}).",
                    status.as_u16()
                ),
            },
            _ => ApiError::Upstream {
                message: format!("The upstream model failed (status {}).", status.as_u16()),
            },
        })
    }

    /// The upstream's model ids (`GET …/models`), or none when it has no such list.
    pub(crate) async fn model_ids(&self) -> Vec<String> {
        let url =
            self.url.trim_end_matches("/chat/completions").trim_end_matches("/messages").to_owned()
                + "/models";
        let request = self.authorize(self.http.get(url));
        let Ok(Ok(response)) = tokio::time::timeout(self.first_byte, request.send()).await else {
            return Vec::new();
        };
        let Ok(value) = response.json::<Value>().await else { return Vec::new() };
        value
            .get("data")
            .and_then(Value::as_array)
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sends a streaming chat request and decodes the reply into events.
    pub(crate) async fn chat_stream(&self, body: Value) -> Result<UpstreamStream, ApiError> {
        let anthropic = self.is_anthropic();
        let body = if anthropic { to_messages(&body) } else { body };
        let sent_at = tokio::time::Instant::now();
        let response = self.send(&body).await?;
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let (first_byte, idle) = (self.first_byte, self.idle);
        let mut bytes = response.bytes_stream();
        let stream = async_stream::stream! {
            if is_json {
                // An upstream that ignored `stream: true`. The body follows its head at once,
                // so all of it must come within the idle timeout (a trickle cannot extend it).
                let deadline = tokio::time::Instant::now() + idle;
                let mut body = Vec::new();
                loop {
                    match tokio::time::timeout_at(deadline, bytes.next()).await {
                        Err(_) => { yield Err(ApiError::UpstreamTimeout); return; }
                        Ok(None) => break,
                        Ok(Some(Err(_))) => { yield Err(broken()); return; }
                        Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
                    }
                }
                match serde_json::from_slice::<Value>(&body) {
                    Ok(value) if anthropic => for event in message_events(&value) { yield Ok(event); },
                    Ok(value) => for event in completion_events(&value) { yield Ok(event); },
                    Err(_) => yield Err(ApiError::Upstream { message: "The upstream model sent an invalid JSON body.".into() }),
                }
                return;
            }
            let mut decoder = SseDecoder::default();
            let mut payloads = Vec::new();
            let mut done = false;
            // The reply said it was complete: `[DONE]`, `message_stop` or a finish reason.
            // A body that ends without any of them was cut off (or never began).
            let mut finished = false;
            let mut input_tokens = 0;
            // Only data counts as progress, not SSE comments or pings (an upstream could send
            // those forever): the first event must come within the first-byte timeout of
            // the request, and each later one within the idle timeout of the one before.
            let mut deadline = sent_at + first_byte;
            while !done {
                let next = tokio::time::timeout_at(deadline, bytes.next()).await;
                let chunk = match next {
                    Err(_) => { yield Err(ApiError::UpstreamTimeout); return; }
                    Ok(None) => { decoder.finish(&mut payloads); done = true; None }
                    Ok(Some(Err(_))) => { yield Err(broken()); return; }
                    Ok(Some(Ok(chunk))) => Some(chunk),
                };
                if let Some(chunk) = chunk {
                    decoder.feed(&chunk, &mut payloads);
                }
                if payloads.iter().any(|payload| !is_ping(payload)) {
                    deadline = tokio::time::Instant::now() + idle;
                }
                for payload in payloads.drain(..) {
                    if payload.trim() == "[DONE]" {
                        done = true;
                        finished = true;
                        break;
                    }
                    let events = match serde_json::from_str::<Value>(&payload) {
                        Ok(value) if value.get("error").is_some_and(|e| !e.is_null()) => {
                            yield Err(ApiError::Upstream { message: "The upstream model reported an error mid-stream.".into() });
                            return;
                        }
                        Ok(value) if anthropic => {
                            if value.get("type").and_then(Value::as_str) == Some("message_stop") {
                                done = true;
                                finished = true;
                            }
                            stream_event(&value, &mut input_tokens)
                        }
                        Ok(value) => chunk_events(&value),
                        Err(_) => {
                            tracing::debug!(payload = %payload, "skipped an upstream SSE line that is not JSON");
                            Vec::new()
                        }
                    };
                    for event in events {
                        finished |= matches!(event, UpstreamEvent::Finish(_));
                        yield Ok(event);
                    }
                }
            }
            if !finished {
                yield Err(ApiError::Upstream { message: "The upstream model's reply ended before it was complete.".into() });
            }
        };
        Ok(Box::pin(stream))
    }
}

/// The rendered chat as an Anthropic Messages request: system text apart, roles alternating.
fn to_messages(body: &Value) -> Value {
    let mut system = String::new();
    let mut messages: Vec<Value> = Vec::new();
    for message in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = message.get("content").and_then(Value::as_str).unwrap_or_default();
        if role == "system" {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(content);
            continue;
        }
        let role = if role == "assistant" { "assistant" } else { "user" };
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                let merged =
                    format!("{}\n\n{content}", last["content"].as_str().unwrap_or_default());
                last["content"] = Value::String(merged);
            }
            _ => messages.push(serde_json::json!({"role": role, "content": content})),
        }
    }
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(4096);
    let mut out = serde_json::json!({"model": body["model"], "max_tokens": max_tokens, "messages": messages, "stream": true});
    if !system.is_empty() {
        out["system"] = Value::String(system);
    }
    for key in ["temperature", "top_p", "top_k"] {
        if let Some(value) = body.get(key) {
            out[key] = value.clone();
        }
    }
    match body.get("stop") {
        Some(Value::String(stop)) => out["stop_sequences"] = serde_json::json!([stop]),
        Some(stops @ Value::Array(_)) => out["stop_sequences"] = stops.clone(),
        _ => {}
    }
    out
}

fn anthropic_finish(reason: &str) -> String {
    if reason == "max_tokens" { "length".into() } else { "stop".into() }
}

/// Events of one Anthropic stream event.
fn stream_event(value: &Value, input_tokens: &mut u64) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    match value.get("type").and_then(Value::as_str) {
        Some("message_start") => {
            *input_tokens =
                value.pointer("/message/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0);
        }
        Some("content_block_delta") => {
            if let Some(text) = value.pointer("/delta/text").and_then(Value::as_str) {
                if !text.is_empty() {
                    events.push(UpstreamEvent::Text(text.to_owned()));
                }
            }
        }
        Some("message_delta") => {
            if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                events.push(UpstreamEvent::Finish(anthropic_finish(reason)));
            }
            let output = value.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0);
            events.push(UpstreamEvent::Usage(Usage {
                prompt_tokens: *input_tokens,
                completion_tokens: output,
            }));
        }
        _ => {}
    }
    events
}

/// Events of a whole (non-streamed) Anthropic message.
fn message_events(value: &Value) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    for block in value.get("content").and_then(Value::as_array).into_iter().flatten() {
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            events.push(UpstreamEvent::Text(text.to_owned()));
        }
    }
    if let Some(reason) = value.get("stop_reason").and_then(Value::as_str) {
        events.push(UpstreamEvent::Finish(anthropic_finish(reason)));
    }
    if let Some(usage) = value.get("usage") {
        events.push(UpstreamEvent::Usage(Usage {
            prompt_tokens: usage.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            completion_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        }));
    }
    events
}

/// Whether an upstream error body says the prompt is longer than the context window.
fn is_context_overflow(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    body.contains("context")
        && (body.contains("exceed") || body.contains("maximum") || body.contains("too long"))
}

/// Whether an SSE payload is an Anthropic keep-alive `ping` (not progress).
fn is_ping(payload: &str) -> bool {
    serde_json::from_str::<Value>(payload)
        .is_ok_and(|value| value.get("type").and_then(Value::as_str) == Some("ping"))
}

fn broken() -> ApiError {
    ApiError::Upstream { message: "The connection to the upstream model broke off.".into() }
}

fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        prompt_tokens: usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        completion_tokens: usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    })
}

/// Events of one streamed chunk (`delta`) or of a whole completion (`message`).
fn events_of(value: &Value, part: &str) -> Vec<UpstreamEvent> {
    let mut events = Vec::new();
    if let Some(choice) = value.get("choices").and_then(Value::as_array).and_then(|c| c.first()) {
        if let Some(text) = choice.get(part).and_then(|p| p.get("content")).and_then(Value::as_str)
        {
            if !text.is_empty() {
                events.push(UpstreamEvent::Text(text.to_owned()));
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            events.push(UpstreamEvent::Finish(reason.to_owned()));
        }
    }
    if let Some(usage) = usage_of(value) {
        events.push(UpstreamEvent::Usage(usage));
    }
    events
}

fn chunk_events(value: &Value) -> Vec<UpstreamEvent> {
    events_of(value, "delta")
}

fn completion_events(value: &Value) -> Vec<UpstreamEvent> {
    events_of(value, "message")
}
