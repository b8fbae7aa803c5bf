//! The API families. Only this module knows their JSON.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::chat::ChatEvent;
use crate::error::ApiError;
use crate::state::AppState;

pub(crate) mod anthropic;
pub(crate) mod openai;

/// `GET /v1/models`: Anthropic's list shape when the request carries `anthropic-version`,
/// OpenAI's otherwise.
pub(crate) async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if headers.contains_key("anthropic-version") {
        anthropic::handlers::models(&state, &headers).await
    } else {
        openai::handlers::models(State(state), headers).await
    }
}

/// How one API family writes a stream.
pub(crate) trait StreamEncoder: Send + 'static {
    /// The frames for one event.
    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>);
    /// The in-band error that ends a stream after it began.
    fn error(&self, err: &ApiError) -> Bytes;
    /// A frame that keeps a silent connection alive.
    fn keepalive(&self) -> Bytes;
}

/// Silence after which a keep-alive frame goes out.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

/// Turns the pipeline's events into an SSE response. The status waits for the first event,
/// so an error before any output is an ordinary HTTP error; after that, errors are in-band.
pub(crate) async fn stream_response<S>(
    state: &AppState,
    started: Instant,
    mut events: std::pin::Pin<Box<S>>,
    mut encoder: impl StreamEncoder,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<ChatEvent, ApiError>> + Send + ?Sized + 'static,
{
    let first = match events.next().await {
        Some(Ok(event)) => event,
        Some(Err(err)) => return Err(err),
        None => return Err(ApiError::Internal("the pipeline ended without an outcome".into())),
    };
    state.metrics.first_token(started.elapsed());
    let body = async_stream::stream! {
        let mut frames = Vec::new();
        let mut next: Option<ChatEvent> = Some(first);
        loop {
            if let Some(event) = next.take() {
                encoder.encode(&event, &mut frames);
                for frame in frames.drain(..) {
                    yield Ok::<Bytes, Infallible>(frame);
                }
            }
            match tokio::time::timeout(KEEPALIVE_EVERY, events.next()).await {
                Err(_) => yield Ok(encoder.keepalive()),
                Ok(Some(Ok(event))) => next = Some(event),
                Ok(Some(Err(err))) => {
                    tracing::warn!(kind = err.kind(), "error after streaming began");
                    yield Ok(encoder.error(&err));
                    return;
                }
                Ok(None) => return,
            }
        }
    };
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
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
