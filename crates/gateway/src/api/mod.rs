//! The API families. Only this module knows their JSON.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::chat::ChatEvent;
use crate::dispatch::EventStream;
use crate::error::ApiError;
use crate::state::AppState;

pub(crate) mod admin;
pub(crate) mod anthropic;
pub(crate) mod family;
pub(crate) mod fields;
pub(crate) mod gemini;
pub(crate) mod inspect;
pub(crate) mod ollama;
pub(crate) mod openai;
pub(crate) mod responses;

/// How a family writes its reply from the chat events: whole, or as a stream. Each family
/// holds here only what its reply needs; `reply` does the rest for all of them.
pub(crate) trait Render: Send + 'static {
    type Encoder: StreamEncoder<Event = ChatEvent>;
    /// The reply as one JSON body (a `200`).
    fn complete(
        self,
        events: EventStream,
    ) -> impl Future<Output = Result<Response, ApiError>> + Send;
    /// The encoder of the streamed reply.
    fn encoder(self) -> Self::Encoder;
}

/// The one way every family answers: the chat events as one body or as a stream, as the
/// client asked; `started` is when the request began, for the time to the first token.
pub(crate) async fn reply<R: Render>(
    state: &AppState,
    started: Instant,
    events: EventStream,
    stream: bool,
    render: R,
) -> Result<Response, ApiError> {
    // What the reply cost, for its key's usage and limits (`keys::Ticket`).
    let spent = crate::keys::Spent::new();
    let tap = spent.clone();
    let span = tracing::Span::current();
    let mut calls = 0u64;
    let capture = crate::inspect::current();
    let events: EventStream = Box::pin(events.inspect(move |event| match event {
        Ok(ChatEvent::CallStart { .. }) => calls += 1,
        Ok(ChatEvent::Done(outcome)) => {
            if let Some(capture) = &capture {
                let finish = outcome.finish.label().to_owned();
                capture.note(|record| record.outcome = Some(finish));
            }
            tap.set(outcome.usage, outcome.retried);
            let finish = crate::traces::Value::Strs(vec![outcome.finish.label().to_owned()]);
            crate::traces::set(&span, "gen_ai.response.finish_reasons", finish);
            crate::traces::set(&span, "toolshim.calls", calls);
        }
        _ => {}
    }));
    let mut response = if stream {
        stream_response(state, started, events, render.encoder()).await?
    } else {
        render.complete(events).await?
    };
    response.extensions_mut().insert(spent);
    Ok(response)
}

/// `GET /v1/models`: Anthropic's list shape when the request carries `anthropic-version`,
/// Gemini's when it carries Gemini's key, OpenAI's otherwise.
pub(crate) async fn models(
    State(state): State<AppState>,
    axum::extract::Query(params): axum::extract::Query<gemini::handlers::Params>,
    headers: HeaderMap,
) -> Response {
    if gemini::handlers::asks(&headers, &params) {
        gemini::handlers::list(&state, headers, &params).await
    } else if headers.contains_key("anthropic-version") {
        anthropic::handlers::models(&state, &headers).await
    } else {
        openai::handlers::models(State(state), headers).await
    }
}

/// `GET /v1/models/{model}`: Gemini's model when the request carries Gemini's key, else
/// OpenAI's (`client.models.retrieve`); a 404 in the caller's shape for a model no route serves.
pub(crate) async fn model(
    State(state): State<AppState>,
    axum::extract::Path(name): axum::extract::Path<String>,
    axum::extract::Query(params): axum::extract::Query<gemini::handlers::Params>,
    headers: HeaderMap,
) -> Response {
    if gemini::handlers::asks(&headers, &params) {
        return gemini::handlers::model(
            State(state),
            axum::extract::Path(name),
            axum::extract::Query(params),
            headers,
        )
        .await;
    }
    if let Err(err) = openai::handlers::authorize(&state, &headers) {
        return openai::error::response(err);
    }
    match state.route(&name) {
        Ok(_) => axum::Json(serde_json::json!({"id": name, "object": "model", "created": 0, "owned_by": "toolshim"})).into_response(),
        Err(err) => openai::error::response(err),
    }
}

/// The token of an `Authorization: Bearer <token>` header; the scheme in any case.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim_start();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether `key` is one of the gateway's keys (`Keys::find`: in constant time).
pub(crate) fn is_gateway_key(state: &AppState, key: &str) -> bool {
    state.keys.find(key).is_some()
}

/// Reads a request body: at most `body_limit_bytes` (a larger `content-length` is refused
/// before any byte is read), and all of it within `body_read_timeout_secs`.
pub(crate) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, ApiError> {
    let limit = state.config.body_limit_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let deadline = crate::config::Config::secs(state.config.body_read_timeout_secs);
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(deadline, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => Err(ApiError::RequestTimeout),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::BodyTooLarge { limit })
        }
        Ok(Err(_)) => Err(ApiError::invalid(
            "The request body could not be read: the connection broke off before it ended.",
            None,
        )),
    }
}

/// Where a stream reports the error that ended it after its head was sent; `observe` takes
/// it from the response's extensions when the body ends, and logs and counts it.
#[derive(Debug, Clone, Default)]
pub(crate) struct InBandError(Arc<Mutex<Option<ApiError>>>);

impl InBandError {
    pub(crate) fn set(&self, err: &ApiError) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(err.clone());
    }

    pub(crate) fn take(&self) -> Option<ApiError> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// How one API family writes a stream.
pub(crate) trait StreamEncoder: Send + 'static {
    /// What the stream is made of.
    type Event: Send + 'static;
    /// The frames for one event.
    fn encode(&mut self, event: &Self::Event, out: &mut Vec<Bytes>);
    /// The in-band error that ends a stream after it began.
    fn error(&mut self, err: &ApiError) -> Bytes;
    /// A frame that keeps a silent connection alive.
    fn keepalive(&self) -> Bytes;
    /// The first frames of a stream whose head goes out before its first event.
    fn open(&mut self, out: &mut Vec<Bytes>) {
        out.push(self.keepalive());
    }
    /// The frames after the last event of a stream that ended well.
    fn end(&mut self, _out: &mut Vec<Bytes>) {}
    /// The stream's media type.
    fn content_type(&self) -> &'static str {
        "text/event-stream; charset=utf-8"
    }
    /// Whether an error that comes before the first event is still reported in-band, after
    /// the stream's first frames, instead of as an HTTP error (for errors a family's clients
    /// read only from the stream).
    fn in_band_before_start(&self, _err: &ApiError) -> bool {
        false
    }
}

/// What a stream begins with.
enum First<E> {
    /// Its first event.
    Event(E),
    /// Nothing within `stream_keepalive_secs`: the head goes out with the opening frames.
    Late,
    /// An error the encoder reports in-band from the start.
    Error(ApiError),
}

/// Turns a stream of events into an SSE response. The status waits for the first event, so
/// an error before any output is an ordinary HTTP error; after that, errors are in-band. A
/// first event that takes longer than `stream_keepalive_secs` (the pipeline holds its output
/// while it retries) does not leave the client without a byte: the head goes out with a
/// keep-alive, and later errors are in-band. An error before the first event that the
/// encoder reports in-band (`in_band_before_start`) gets a stream too: the opening frames,
/// then the error. When the shutdown's drain timeout passes, the stream ends with an in-band
/// error.
pub(crate) async fn stream_response<S, E>(
    state: &AppState,
    started: Instant,
    mut events: std::pin::Pin<Box<S>>,
    mut encoder: E,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<E::Event, ApiError>> + Send + ?Sized + 'static,
    E: StreamEncoder,
{
    let cut = state.cut.clone();
    let content_type = HeaderValue::from_static(encoder.content_type());
    let keepalive_every = crate::config::Config::secs(state.config.stream_keepalive_secs);
    let first = tokio::select! {
        next = tokio::time::timeout(keepalive_every, events.next()) => match next {
            Ok(Some(Ok(event))) => First::Event(event),
            Ok(Some(Err(err))) if encoder.in_band_before_start(&err) => First::Error(err),
            Ok(Some(Err(err))) => return Err(err),
            Ok(None) => return Err(ApiError::Internal("the pipeline ended without an outcome".into())),
            Err(_) => First::Late,
        },
        () = cut.cancelled() => return Err(ApiError::ShuttingDown),
    };
    let metrics = Arc::clone(&state.metrics);
    if matches!(first, First::Event(_)) {
        metrics.first_token(started.elapsed());
    }
    let in_band = InBandError::default();
    let slot = in_band.clone();
    let body = async_stream::stream! {
        let mut frames = Vec::new();
        let mut next = match first {
            First::Event(event) => Some(event),
            First::Late => None,
            First::Error(err) => {
                encoder.open(&mut frames);
                for frame in frames.drain(..) {
                    yield Ok::<Bytes, Infallible>(frame);
                }
                slot.set(&err);
                yield Ok(encoder.error(&err));
                return;
            }
        };
        if next.is_none() {
            encoder.open(&mut frames);
            for frame in frames.drain(..) {
                yield Ok::<Bytes, Infallible>(frame);
            }
        }
        let mut seen = next.is_some();
        loop {
            if let Some(event) = next.take() {
                encoder.encode(&event, &mut frames);
                for frame in frames.drain(..) {
                    yield Ok(frame);
                }
            }
            let polled = tokio::select! {
                polled = tokio::time::timeout(keepalive_every, events.next()) => polled,
                () = cut.cancelled() => Ok(Some(Err(ApiError::ShuttingDown))),
            };
            match polled {
                Err(_) => yield Ok(encoder.keepalive()),
                Ok(Some(Ok(event))) => {
                    if !seen {
                        seen = true;
                        metrics.first_token(started.elapsed());
                    }
                    next = Some(event);
                }
                Ok(Some(Err(err))) => {
                    slot.set(&err);
                    yield Ok(encoder.error(&err));
                    return;
                }
                Ok(None) => {
                    encoder.end(&mut frames);
                    for frame in frames.drain(..) {
                        yield Ok(frame);
                    }
                    return;
                }
            }
        }
    };
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response.extensions_mut().insert(in_band);
    Ok(response)
}

/// Joins the text pieces of a content array, one per line, skipping empty ones.
pub(crate) fn join_pieces(pieces: impl IntoIterator<Item = String>) -> String {
    let mut text = String::new();
    for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&piece);
    }
    text
}
