//! The one shared HTTP client for the upstream: its endpoints, its credentials (never sent
//! through a redirect, never logged), its timeouts, and how its errors reach clients.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::Url;
use serde_json::Value;
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::{CallFormat, Config, Engine, UpstreamConfig, endpoints};
use crate::error::{ApiError, UpstreamFault};
use crate::metrics::Metrics;
use crate::upstream::constrain::{self, Dialect};
use crate::upstream::direct::{self, Direct};
use crate::upstream::reply::{self, Payload, ReplyLimits};
use crate::upstream::wire::Wire;
use crate::upstream::{Unreadable, Upstream, UpstreamEvent, UpstreamRequest, UpstreamStream};

/// A stream of checked reply payloads (see `reply::payloads`).
pub(crate) type PayloadStream = Pin<Box<dyn Stream<Item = Result<Payload, ApiError>> + Send>>;

/// An error body is read up to this many bytes (the rest is not needed to report it).
const MAX_ERROR_BODY: usize = 64 << 10;

/// Talks to the upstream chat endpoint.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamClient {
    http: reqwest::Client,
    /// Connections driven by the request that uses them, for a plain-HTTP upstream reached
    /// without a proxy (`upstream::direct`); otherwise every request goes through `http`.
    direct: Option<Direct>,
    wire: Wire,
    /// Where chat requests go.
    endpoint: Url,
    /// Where the model list is (`…/models` beside the endpoint).
    models: Url,
    /// The upstream as logs name it: no credentials, no query.
    shown: String,
    key: Option<String>,
    key_env: String,
    limits: ReplyLimits,
    /// How long the probe, and the model list, may take in all.
    probe_within: Duration,
    /// How long an error status's body may take (the idle timeout too, if shorter).
    error_body_within: Duration,
    metrics: Arc<Metrics>,
    /// Constrained decoding as configured (`upstream.constrain`).
    constrain: Engine,
    /// Continuing a final assistant message as configured (`upstream.prefill`).
    prefill: Engine,
    /// What the upstream's `GET /props` said (asked before the first request that needs to
    /// know): whether it is llama.cpp's server, for `auto` engine settings, and the call
    /// syntax its chat template teaches, for `call_format = "auto"`.
    detected: Arc<tokio::sync::OnceCell<Props>>,
}

/// What an answer to `GET /props` tells.
#[derive(Debug, Clone, Copy, Default)]
struct Props {
    /// llama.cpp's server answered.
    llama_cpp: Option<Dialect>,
    /// The call syntax its chat template teaches (`neutral::family::by_template`).
    template_format: Option<CallFormat>,
}

/// A URL as logs show it: no user, password or query (which may carry a key).
fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// The start of a body for a log line: at most 200 bytes, on one line.
pub(crate) fn first_bytes(body: &[u8]) -> String {
    let end = body.len().min(200);
    let mut text: String = String::from_utf8_lossy(body.get(..end).unwrap_or_default())
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > end {
        text.push('…');
    }
    text
}

/// What went wrong with a request that got no answer: refused, DNS, TLS, timeout, … with
/// the chain of causes (reqwest's own message names the URL, which may carry credentials,
/// so it is left out).
pub(crate) fn cause(err: &reqwest::Error) -> String {
    let mut chain = Vec::new();
    let mut source = std::error::Error::source(err);
    while let Some(next) = source {
        chain.push(next.to_string());
        source = next.source();
    }
    let text = chain.join(": ");
    let class =
        classify(&text, err.is_timeout(), err.is_connect(), err.is_body() || err.is_decode());
    if text.is_empty() { class.to_owned() } else { format!("{class}: {text}") }
}

/// What kind of failure an error's text and flags tell.
fn classify(text: &str, timeout: bool, connect: bool, reading: bool) -> &'static str {
    let lower = text.to_ascii_lowercase();
    if timeout {
        "timeout"
    } else if lower.contains("dns error") || lower.contains("failed to lookup") {
        "DNS lookup failed"
    } else if lower.contains("connection refused") {
        "connection refused"
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        "TLS failed"
    } else if connect {
        "cannot connect"
    } else if reading {
        "reading the reply failed"
    } else {
        "request failed"
    }
}

/// Why a request got no answer, from whichever client sent it.
enum Unanswered {
    Client(reqwest::Error),
    Direct(direct::Failure),
}

impl Unanswered {
    fn is_timeout(&self) -> bool {
        match self {
            Unanswered::Client(err) => err.is_timeout(),
            Unanswered::Direct(failure) => failure.is_timeout(),
        }
    }

    /// Whether the general client's request failed on a connection that was open but closed
    /// before any answer (a kept-alive connection the upstream had just closed): not a
    /// timeout, not a failure to connect, and no status. Whether it reached the model is
    /// judged by when it failed (`direct::STALE_WITHIN`). Direct connections judge that
    /// themselves and have sent the request again already.
    fn is_stale_connection(&self) -> bool {
        match self {
            Unanswered::Client(err) => {
                !err.is_timeout() && !err.is_connect() && err.status().is_none() && err.is_request()
            }
            Unanswered::Direct(_) => false,
        }
    }

    fn cause(&self) -> String {
        match self {
            Unanswered::Client(err) => cause(err),
            Unanswered::Direct(failure) => {
                let text = failure.chain();
                let class = classify(&text, failure.is_timeout(), failure.is_connect(), false);
                format!("{class}: {text}")
            }
        }
    }
}

/// The message of an error body: `error.message`, `message`, `detail` or `error` (a string),
/// else its first bytes.
fn message_of(body: &str) -> String {
    let value = serde_json::from_str::<Value>(body).ok();
    let found = value.as_ref().and_then(|v| {
        [v.pointer("/error/message"), v.get("message"), v.get("detail"), v.get("error")]
            .into_iter()
            .flatten()
            .find_map(Value::as_str)
            .map(str::to_owned)
    });
    let mut text = found.unwrap_or_else(|| first_bytes(body.as_bytes()));
    if text.len() > 1000 {
        let mut end = 1000;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Whether an upstream error body says the prompt is longer than the context window.
fn is_context_overflow(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    body.contains("context")
        && (body.contains("exceed") || body.contains("maximum") || body.contains("too long"))
}

fn context_overflow(body: &str) -> ApiError {
    let numbers: Vec<u64> = body
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .filter(|n| *n >= 16)
        .collect();
    let limit = numbers.iter().copied().min().unwrap_or(0);
    let tokens = numbers.iter().copied().max().unwrap_or(0).max(limit + 1);
    ApiError::ContextOverflow { tokens, limit }
}

impl UpstreamClient {
    /// Builds the shared client. The key is read from the environment variable the config
    /// names. Redirects are not followed: a redirected request would carry the key to
    /// wherever the upstream points.
    pub(crate) fn new(
        config: &UpstreamConfig,
        metrics: Arc<Metrics>,
    ) -> Result<UpstreamClient, String> {
        #[expect(
            clippy::disallowed_methods,
            reason = "this is the one place the upstream client is built"
        )]
        let builder = reqwest::Client::builder();
        let http = builder
            .connect_timeout(Config::secs(config.connect_timeout_secs))
            .pool_idle_timeout(Duration::from_secs(90))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        let (endpoint, models) = endpoints(&config.url, config.api)?;
        let key = std::env::var(&config.api_key_env).ok().filter(|k| !k.is_empty());
        let direct = Direct::for_url(&endpoint, Config::secs(config.connect_timeout_secs));
        Ok(UpstreamClient {
            http,
            direct,
            wire: Wire::of(config.api),
            shown: shown(&endpoint),
            endpoint,
            models,
            key,
            key_env: config.api_key_env.clone(),
            limits: ReplyLimits {
                first_byte: Config::secs(config.first_byte_timeout_secs),
                idle: Config::secs(config.idle_timeout_secs),
                max_reply: config.max_reply_bytes,
                max_line: config.max_line_bytes,
            },
            probe_within: Config::secs(config.probe_timeout_secs),
            error_body_within: Config::secs(config.error_body_timeout_secs),
            metrics,
            constrain: config.constrain,
            prefill: config.prefill,
            detected: Arc::default(),
        })
    }

    /// Whether the upstream takes a Chat Completions body (a passthrough, native tools).
    pub(crate) fn takes_chat_completions(&self) -> bool {
        self.wire.takes_chat_completions()
    }

    /// The API the upstream speaks.
    pub(crate) fn wire(&self) -> Wire {
        self.wire
    }

    /// The upstream chat endpoint as logs show it.
    /// The GenAI conventions' `gen_ai.provider.name` of the API it speaks.
    pub(crate) fn provider(&self) -> &'static str {
        self.wire.provider()
    }

    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// `text` with the upstream key, wherever it appears, replaced.
    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) if key.len() >= 4 => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_owned(),
        }
    }

    fn redact_err(&self, err: ApiError) -> ApiError {
        match err {
            ApiError::Upstream { fault, message, detail } => ApiError::Upstream {
                fault,
                message: self.redact(&message),
                detail: self.redact(&detail),
            },
            ApiError::UpstreamRejected { status, message, by } => {
                ApiError::UpstreamRejected { status, message: self.redact(&message), by }
            }
            ApiError::UpstreamTimeout { detail } => {
                ApiError::UpstreamTimeout { detail: self.redact(&detail) }
            }
            other => other,
        }
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        self.wire.authorize(request, self.key.as_deref())
    }

    /// A request that got no answer, as an error for the client and a cause for the log.
    fn unanswered(&self, err: &Unanswered, what: &str) -> ApiError {
        let cause = self.redact(&err.cause());
        if err.is_timeout() {
            return ApiError::UpstreamTimeout {
                detail: format!("{}: {what}: {cause}", self.shown),
            };
        }
        ApiError::UpstreamUnavailable {
            message: "The upstream model could not be reached.".into(),
            detail: format!("{}: {what}: {cause}", self.shown),
        }
    }

    /// Sends a request and waits for the head of its answer until `started + within`: on a
    /// direct connection when the request goes to a plain-HTTP upstream, else through the
    /// general client.
    async fn head(
        &self,
        request: reqwest::RequestBuilder,
        started: Instant,
        within: Duration,
    ) -> Result<Result<reqwest::Response, Unanswered>, tokio::time::error::Elapsed> {
        let deadline = started + within;
        let Some(direct) = &self.direct else {
            let sent = tokio::time::timeout_at(deadline, request.send()).await;
            return sent.map(|r| r.map_err(Unanswered::Client));
        };
        let request = match request.build() {
            Ok(request) if direct.serves(request.url()) => request,
            Ok(request) => {
                let sent = tokio::time::timeout_at(deadline, self.http.execute(request)).await;
                return sent.map(|r| r.map_err(Unanswered::Client));
            }
            Err(err) => return Ok(Err(Unanswered::Client(err))),
        };
        // Boxed: the exchange's state (a connection being opened) is large.
        let sent = tokio::time::timeout_at(deadline, Box::pin(direct.send(request))).await;
        sent.map(|r| r.map_err(Unanswered::Direct))
    }

    /// Sends a request and waits for the head of the answer (within the first-byte
    /// timeout); an error status is read (its body capped, within the idle timeout) and
    /// mapped for the client.
    async fn send_to(
        &self,
        request: reqwest::RequestBuilder,
        started: Instant,
        head_within: Duration,
    ) -> Result<reqwest::Response, ApiError> {
        let request = self.authorize(request);
        // A copy to send again on a new connection when a kept-alive one turns out closed.
        let again = request.try_clone();
        let sent = Instant::now();
        let response = match self.head(request, started, head_within).await {
            Ok(Err(err))
                if err.is_stale_connection()
                    && again.is_some()
                    && sent.elapsed() < direct::STALE_WITHIN =>
            {
                tracing::info!(upstream = %self.shown, cause = %self.redact(&err.cause()),
                    "the upstream closed the connection before answering; sending again on a new one");
                match again {
                    Some(again) => self.head(again, started, head_within).await,
                    None => Ok(Err(err)),
                }
            }
            other => other,
        };
        let response = match response {
            Err(_) => {
                return Err(ApiError::UpstreamTimeout {
                    detail: format!(
                        "{}: no answer within {:.1} s",
                        self.shown,
                        head_within.as_secs_f64()
                    ),
                });
            }
            Ok(Err(err)) => return Err(self.unanswered(&err, "no answer")),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after =
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| self.endpoint.join(v).ok())
                .map_or_else(|| "elsewhere".to_owned(), |to| shown(&to));
            return Err(ApiError::Upstream {
                fault: UpstreamFault::Redirect,
                message: format!(
                    "The upstream redirected the request (status {}); the gateway does not follow redirects with its credentials. Set upstream.url to where it points.",
                    status.as_u16()
                ),
                detail: format!(
                    "{}: redirected with status {} to {location}",
                    self.shown,
                    status.as_u16()
                ),
            });
        }
        let body = self.error_body(response).await;
        let body = self.redact(&body);
        let code = status.as_u16();
        let detail = format!("{}: status {code}: {}", self.shown, first_bytes(body.as_bytes()));
        Err(match code {
            503 | 529 => ApiError::UpstreamOverloaded { retry_after },
            429 => ApiError::UpstreamRateLimited {
                message: "The upstream model is rate limited; try again later.".into(),
                retry_after,
            },
            408 => ApiError::UpstreamTimeout { detail },
            401 | 403 | 407 => ApiError::Upstream {
                fault: UpstreamFault::Credentials,
                message: format!(
                    "The upstream refused the gateway's own credentials (status {code}): set a valid upstream key in the environment variable {} (upstream.api_key_env).",
                    self.key_env
                ),
                detail,
            },
            400 | 413 if is_context_overflow(&body) => context_overflow(&body),
            400..=499 => {
                ApiError::UpstreamRejected { status: code, message: message_of(&body), by: None }
            }
            _ => ApiError::Upstream {
                fault: UpstreamFault::Failed,
                message: format!("The upstream model failed (status {code})."),
                detail,
            },
        })
    }

    /// The start of an error body: up to `MAX_ERROR_BODY` bytes, within
    /// `error_body_timeout_secs` or the idle timeout, whichever is shorter (an upstream that
    /// never finishes its error body does not hold the client).
    async fn error_body(&self, response: reqwest::Response) -> String {
        let mut bytes = response.bytes_stream();
        let deadline = Instant::now() + self.limits.idle.min(self.error_body_within);
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match tokio::time::timeout_at(deadline, bytes.next()).await {
                Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
                Ok(None) | Ok(Some(Err(_))) | Err(_) => break,
            }
        }
        body.truncate(MAX_ERROR_BODY);
        String::from_utf8_lossy(&body).into_owned()
    }

    /// Sends a chat request body and reads the reply with every check but the count of
    /// model output (the caller counts it).
    async fn send_chat(&self, body: &Value) -> Result<PayloadStream, ApiError> {
        let started = Instant::now();
        // A `CLIENT` span for the request when traces are on; it ends with the reply.
        let span = tracing::debug_span!("upstream");
        let model = body.get("model").and_then(Value::as_str).unwrap_or_default();
        crate::traces::set(&span, "gen_ai.operation.name", "chat");
        crate::traces::set(&span, "gen_ai.request.model", model);
        crate::traces::set(&span, "gen_ai.provider.name", self.provider());
        crate::traces::set(&span, "server.address", self.endpoint.host_str().unwrap_or_default());
        let mut request = self.http.post(self.endpoint.clone()).json(body);
        if let Some(traceparent) = crate::traces::traceparent(&span) {
            request = request.header("traceparent", traceparent);
        }
        let sent = self.send_to(request, started, self.limits.first_byte).instrument(span.clone());
        let response = match sent.await {
            Ok(response) => response,
            Err(err) => {
                crate::traces::fail(&span, err.kind(), &err.detail());
                return Err(err);
            }
        };
        crate::traces::set(
            &span,
            "http.response.status_code",
            u64::from(response.status().as_u16()),
        );
        let payloads = self.payloads(response, started);
        if span.is_disabled() {
            return Ok(payloads);
        }
        Ok(Box::pin(payloads.map(move |item| {
            let _open_until_the_reply_ends = &span;
            item
        })))
    }

    /// Sends a Chat Completions body as it is but for its `model` (passthrough, to an
    /// OpenAI-kind upstream: the chain skips Anthropic ones) and reads the reply with every
    /// check, the model output of a streamed reply (text, reasoning, call arguments) counted
    /// against `upstream.max_reply_bytes` as in emulation.
    pub(crate) async fn relay(&self, body: &Value, model: &str) -> Result<PayloadStream, ApiError> {
        let mut body = body.clone();
        body["model"] = Value::String(model.to_owned());
        let mut payloads = self.send_chat(&body).await?;
        let mut cap = OutputCap::new(self.limits.max_reply, &self.shown);
        let wire = self.wire;
        Ok(Box::pin(async_stream::stream! {
            while let Some(item) = payloads.next().await {
                if let Ok(Payload::Event(value)) = &item {
                    if let Err(err) = cap.add(wire.output_bytes(value)) {
                        yield Err(err);
                        return;
                    }
                }
                yield item;
            }
        }))
    }

    fn payloads(&self, response: reqwest::Response, started: Instant) -> PayloadStream {
        if let Some(encoding) = response
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.eq_ignore_ascii_case("identity"))
        {
            // reqwest decodes gzip and deflate and removes the header; anything left is an
            // encoding the gateway cannot read.
            let err = ApiError::Upstream {
                fault: UpstreamFault::Unreadable,
                message: format!(
                    "The upstream sent its reply with content-encoding `{encoding}`, which the gateway cannot decode."
                ),
                detail: format!("{}: unsupported content-encoding {encoding}", self.shown),
            };
            return Box::pin(futures::stream::once(async move { Err(err) }));
        }
        let metrics = Arc::clone(&self.metrics);
        let shown = self.shown.clone();
        let on_repair = move |repair: reply::Repair, n: usize| {
            metrics.upstream_repair(repair.label(), n);
            tracing::warn!(upstream = %shown, replaced = n, "{}", repair.what());
        };
        let this = self.clone();
        Box::pin(
            reply::payloads(
                response,
                started,
                self.limits,
                self.wire,
                self.shown.clone(),
                on_repair,
            )
            .map(move |item| item.map_err(|err| this.redact_err(err))),
        )
    }

    /// The upstream's model ids (`GET …/models`); none when it has no such list (404). A
    /// failure is an error, not an empty list. The whole list must come within
    /// `probe_timeout_secs` (a client waits for it), and be at most `max_reply_bytes`.
    pub(crate) async fn model_ids(&self) -> Result<Vec<String>, ApiError> {
        let started = Instant::now();
        let request = self.http.get(self.models.clone());
        let deadline = started + self.probe_within;
        // Within its time, reading an error body included.
        let sent =
            tokio::time::timeout_at(deadline, self.send_to(request, started, self.probe_within));
        let response = match sent.await {
            Ok(Ok(response)) => response,
            Ok(Err(ApiError::UpstreamRejected { status: 404 | 405, .. })) => return Ok(Vec::new()),
            Ok(Err(err)) => return Err(err),
            Err(_) => {
                return Err(ApiError::UpstreamTimeout {
                    detail: format!("{}: the model list did not arrive in time", self.shown),
                });
            }
        };
        let mut bytes = response.bytes_stream();
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, bytes.next()).await {
                Err(_) => {
                    return Err(ApiError::UpstreamTimeout {
                        detail: format!("{}: the model list did not arrive in time", self.shown),
                    });
                }
                Ok(None) => break,
                Ok(Some(Err(err))) => {
                    return Err(self.unanswered(&Unanswered::Client(err), "model list broke off"));
                }
                Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            }
            if body.len() > self.limits.max_reply {
                return Err(reply::broken(
                    &format!(
                        "is a model list over {} bytes (upstream.max_reply_bytes)",
                        self.limits.max_reply
                    ),
                    &self.shown,
                ));
            }
        }
        let value: Value = serde_json::from_slice(&body).map_err(|_| ApiError::Upstream {
            fault: UpstreamFault::Unreadable,
            message: "The upstream's model list is not valid JSON.".into(),
            detail: format!("{}: model list: {}", self.shown, first_bytes(&body)),
        })?;
        Ok(value
            .get("data")
            .and_then(Value::as_array)
            .map(|models| {
                models
                    .iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Whether this upstream decodes under the contract's grammar (`upstream.constrain`).
    pub(crate) async fn takes_grammar(&self) -> bool {
        self.dialect().await.is_some()
    }

    /// How this upstream takes a grammar, if it does.
    async fn dialect(&self) -> Option<Dialect> {
        self.engine(self.constrain).await
    }

    /// How this upstream continues a final assistant message, if it does
    /// (`upstream.prefill`).
    pub(crate) async fn prefill_dialect(&self) -> Option<Dialect> {
        self.engine(self.prefill).await
    }

    /// The engine a setting says the upstream is, for what only some engines do: as
    /// configured, or for `auto` whether it answers `GET /props` as llama.cpp's server does.
    /// An answer (any status) is kept; no answer is asked again next time. An upstream of
    /// the Anthropic kind is none of these.
    async fn engine(&self, setting: Engine) -> Option<Dialect> {
        if !self.takes_chat_completions() {
            return None;
        }
        match setting {
            Engine::Off => None,
            Engine::Auto => self.props().await.and_then(|props| props.llama_cpp),
            named => Dialect::named(named),
        }
    }

    /// The call syntax the chat template of the model behind this upstream teaches, as
    /// llama.cpp's server shows it at `GET /props`; `None` from any other server.
    pub(crate) async fn template_format(&self) -> Option<CallFormat> {
        if !self.takes_chat_completions() {
            return None;
        }
        self.props().await.and_then(|props| props.template_format)
    }

    /// The upstream's answer to `GET /props`. An answer (any status) is kept; no answer is
    /// asked again next time.
    async fn props(&self) -> Option<Props> {
        let found = self
            .detected
            .get_or_try_init(|| async {
                let started = Instant::now();
                let request = self.http.get(constrain::props_url(&self.endpoint));
                let answer = tokio::time::timeout(
                    self.probe_within,
                    self.send_to(request, started, self.probe_within),
                )
                .await;
                let response = match answer {
                    Ok(Ok(response)) => response,
                    Ok(Err(ApiError::UpstreamRejected { .. })) => return Ok(Props::default()),
                    _ => return Err(()),
                };
                // Read within the probe's time and up to the reply cap; past either, it is
                // not llama.cpp's answer.
                let mut chunks = response.bytes_stream();
                let mut bytes = Vec::new();
                let deadline = started + self.probe_within;
                while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, chunks.next()).await {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() > self.limits.max_reply {
                        bytes.clear();
                        break;
                    }
                }
                let props = serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null);
                let found = Props {
                    llama_cpp: constrain::is_llama_cpp(&props).then_some(Dialect::LlamaCpp),
                    template_format: constrain::chat_template(&props)
                        .and_then(crate::neutral::family::by_template),
                };
                tracing::info!(upstream = %self.shown, dialect = ?found.llama_cpp, template_format = ?found.template_format, "the upstream's engine (GET /props)");
                Ok(found)
            })
            .await;
        found.ok().copied()
    }

    /// Whether the upstream answers at all, with its own credentials accepted: any answer to
    /// `GET …/models` but a server error, 401 or 403 (an upstream without a model list
    /// answers 404, and is up: a 404 says only that something answers at that address).
    /// Bounded by `probe_timeout_secs`.
    pub(crate) async fn probe(&self) -> Result<(), ApiError> {
        let started = Instant::now();
        let request = self.http.get(self.models.clone());
        // The whole probe, reading an error body included, within its time.
        let sent = tokio::time::timeout(
            self.probe_within,
            self.send_to(request, started, self.probe_within),
        )
        .await;
        match sent {
            Ok(Ok(_) | Err(ApiError::UpstreamRejected { .. })) => Ok(()),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(ApiError::UpstreamTimeout {
                detail: format!("{}: no answer to the probe in time", self.shown),
            }),
        }
    }
}

impl Upstream for UpstreamClient {
    /// Sends the rendered chat in the upstream's wire and decodes the reply into events.
    async fn chat(&self, request: UpstreamRequest) -> Result<UpstreamStream, ApiError> {
        // `dialect` and `prefill_dialect` ask nothing of an upstream that has no such engine.
        let grammar = if request.grammar.is_some() { self.dialect().await } else { None };
        let prefill = if request.prefill.is_some() { self.prefill_dialect().await } else { None };
        let body = self.wire.body(&request, grammar, prefill);
        let mut reader = self.wire.reader();
        let mut payloads = self.send_chat(&body).await?;
        let mut cap = OutputCap::new(self.limits.max_reply, &self.shown);
        let this = self.clone();
        let stream = async_stream::stream! {
            while let Some(item) = payloads.next().await {
                let payload = match item {
                    Ok(payload) => payload,
                    Err(err) => { yield Err(err); return; }
                };
                let events = match reader.read(&payload) {
                    Ok(events) => events,
                    Err(unreadable) => {
                        let value = match &payload { Payload::Event(v) | Payload::Body(v) => v };
                        yield Err(this.redact_err(unreadable_event(&this.shown, &unreadable, value)));
                        return;
                    }
                };
                for event in events {
                    if let UpstreamEvent::Text(text) | UpstreamEvent::Reasoning(text) = &event {
                        if let Err(err) = cap.add(text.len()) {
                            yield Err(err);
                            return;
                        }
                    }
                    yield Ok(event);
                }
            }
        };
        Ok(Box::pin(stream))
    }
}

/// A relayed reply to a Chat Completions request with native `tools`, read into events (its
/// calls too): for a native reply that is repaired (`chat::native`). The relay already holds
/// it to every limit; an event that cannot be read ends it with an error.
pub(crate) fn native_reply(
    mut payloads: PayloadStream,
    upstream: String,
    wire: Wire,
) -> UpstreamStream {
    let mut reader = wire.native_reader();
    let stream = async_stream::stream! {
        while let Some(item) = payloads.next().await {
            let payload = match item {
                Ok(payload) => payload,
                Err(err) => { yield Err(err); return; }
            };
            let read = reader.read(&payload);
            let value = match &payload { Payload::Event(v) | Payload::Body(v) => v };
            match read {
                Ok(events) => for event in events { yield Ok(event); },
                Err(unreadable) => { yield Err(unreadable_event(&upstream, &unreadable, value)); return; }
            }
        }
    };
    Box::pin(stream)
}

/// The model output of one reply, counted against `upstream.max_reply_bytes`.
struct OutputCap {
    limit: usize,
    seen: usize,
    upstream: String,
}

impl OutputCap {
    fn new(limit: usize, upstream: &str) -> OutputCap {
        OutputCap { limit, seen: 0, upstream: upstream.to_owned() }
    }

    /// Counts `n` more bytes; past the limit, the error that ends the reply.
    fn add(&mut self, n: usize) -> Result<(), ApiError> {
        self.seen = self.seen.saturating_add(n);
        if self.seen <= self.limit {
            return Ok(());
        }
        let (limit, upstream) = (self.limit, &self.upstream);
        Err(ApiError::Upstream {
            fault: UpstreamFault::TooLarge,
            message: format!(
                "The upstream model's reply is larger than the gateway's limit of {limit} bytes of text (upstream.max_reply_bytes)."
            ),
            detail: format!(
                "{upstream}: the reply passed {limit} bytes of text and reasoning (upstream.max_reply_bytes)"
            ),
        })
    }
}

/// The error for an event whose model output the gateway cannot read.
fn unreadable_event(upstream: &str, unreadable: &Unreadable, value: &Value) -> ApiError {
    let reason = &unreadable.0;
    ApiError::Upstream {
        fault: UpstreamFault::Unreadable,
        message: format!("The upstream model sent an event the gateway cannot read: {reason}."),
        detail: format!(
            "{upstream}: unreadable event ({reason}): {}",
            first_bytes(value.to_string().as_bytes())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_show_no_credentials() {
        let url = Url::parse("https://user:secret@h/v1/chat/completions?key=abc").unwrap();
        assert_eq!(shown(&url), "https://h/v1/chat/completions");
    }

    #[test]
    fn error_messages_come_from_the_body() {
        assert_eq!(
            message_of(r#"{"error":{"message":"model 'x' not found"}}"#),
            "model 'x' not found"
        );
        assert_eq!(message_of(r#"{"detail":"bad"}"#), "bad");
        assert_eq!(message_of("plain text"), "plain text");
    }
}
