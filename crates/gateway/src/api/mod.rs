//! The API families. Only this module knows their JSON.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

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

/// A JSON type a request field may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl JsonType {
    fn matches(self, value: &Value) -> bool {
        match self {
            JsonType::String => value.is_string(),
            JsonType::Integer => value.is_i64() || value.is_u64(),
            JsonType::Number => value.is_number(),
            JsonType::Boolean => value.is_boolean(),
            JsonType::Array => value.is_array(),
            JsonType::Object => value.is_object(),
        }
    }

    /// The type of a value; `None` for `null`.
    pub(crate) fn of(value: &Value) -> Option<JsonType> {
        match value {
            Value::Null => None,
            Value::Bool(_) => Some(JsonType::Boolean),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(JsonType::Integer),
            Value::Number(_) => Some(JsonType::Number),
            Value::String(_) => Some(JsonType::String),
            Value::Array(_) => Some(JsonType::Array),
            Value::Object(_) => Some(JsonType::Object),
        }
    }
}

/// The fields an API defines on one object, each with the types it may have.
pub(crate) type Fields = &'static [(&'static str, &'static [JsonType])];

/// The first field of `object` listed in `fields` whose value has none of its types, with
/// those types and the value. `null` counts as absent: required fields are checked where
/// they are read.
pub(crate) fn mistyped(
    object: &serde_json::Map<String, Value>,
    fields: Fields,
) -> Option<(&'static str, &'static [JsonType], &Value)> {
    fields.iter().find_map(|&(key, types)| {
        let value = object.get(key).filter(|v| !v.is_null())?;
        (!types.iter().any(|t| t.matches(value))).then_some((key, types, value))
    })
}

/// The items of an array field, with their indices (none when it is absent or not an array).
pub(crate) fn items<'a>(
    object: &'a serde_json::Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Value)> {
    object.get(key).and_then(Value::as_array).into_iter().flatten().enumerate()
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
