//! One handler for every family's `POST`: the key first (an unauthenticated body is never
//! read), then the body under its limits, the family's parse and the family's serving; an
//! error at any step is answered in the family's shape. A family holds only those steps.

use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::Value;

use crate::api::Render;
use crate::chat::ChatRequest;
use crate::error::ApiError;
use crate::state::AppState;

/// How a client API receives a request and words a failure: shared by the endpoints of one
/// API (`/v1/messages` and its `count_tokens`).
pub(crate) struct Front {
    /// The key check and the headers the API requires, before any byte of the body.
    pub(crate) admit: fn(&AppState, &HeaderMap) -> Result<(), ApiError>,
    /// What a body that is not JSON is told, in the API's words.
    pub(crate) not_json: fn(&serde_json::Error) -> ApiError,
    /// An error as the API's response (`headers` are the request's).
    pub(crate) error: fn(ApiError, &HeaderMap) -> Response,
}

/// A client API's request endpoint.
pub(crate) trait Family: Send + Sync + 'static {
    /// How its requests are received and its errors worded.
    const FRONT: Front;
    /// The request as the family reads it.
    type Request: Send;
    /// Whether a request counts against its key's limits and usage, and is kept by the
    /// inspector (`count_tokens` is neither).
    const METERED: bool = true;
    /// The API's name in the inspector.
    const NAME: &'static str;
    /// The JSON body read as the family's request.
    fn parse(body: Value) -> Result<Self::Request, ApiError>;
    /// The same, for a family that names the model and the method in the path (Gemini's).
    fn parse_at(body: Value, target: Option<&Target>) -> Result<Self::Request, ApiError> {
        let _ = target;
        Self::parse(body)
    }
    /// The client model the request names.
    fn model(request: &Self::Request) -> &str;
    /// The request served: native, emulated or passed through, as its route says
    /// (`headers` are the request's).
    fn serve(
        state: AppState,
        headers: &HeaderMap,
        request: Self::Request,
    ) -> impl Future<Output = Result<Response, ApiError>> + Send;
}

/// What a family that names its model and method in the path (Gemini's) read from it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) model: String,
    /// The method streams (`streamGenerateContent`).
    pub(crate) stream: bool,
    /// The stream is SSE (`alt=sse`), not a JSON array.
    pub(crate) sse: bool,
}

/// The handler of a family's `POST` endpoint.
pub(crate) async fn handle<F: Family>(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    handle_at::<F>(state, headers, body, None).await
}

/// `handle`, for a request whose path named its `target`.
pub(crate) async fn handle_at<F: Family>(
    state: AppState,
    headers: HeaderMap,
    body: Body,
    target: Option<Target>,
) -> Response {
    let front = F::FRONT;
    let mut capture = None;
    let result = async {
        (front.admit)(&state, &headers)?;
        let key = state.keys.of(&headers).cloned();
        // Admitted with a key: it is the one whose models and limits apply, never none.
        if key.is_none() && state.config.auth_on() {
            return Err(ApiError::Auth(crate::error::AuthFailure::BadKey));
        }
        // Kept from here on (an unauthenticated request is never kept: it could push out
        // the others).
        capture = match &state.inspector {
            Some(inspector) if F::METERED => {
                inspector.begin(F::NAME, key.as_ref().map(|k| &*k.name))
            }
            _ => None,
        };
        let body = crate::api::read_body(&state, &headers, body).await?;
        if let Some(capture) = &capture {
            let text = capture.keep(&String::from_utf8_lossy(&body));
            capture.note(|record| record.request = text);
        }
        let value: Value = serde_json::from_slice(&body).map_err(|err| (front.not_json)(&err))?;
        // Read for the inspector only, before the body is consumed.
        let stream = capture.as_ref().map(|_| match &target {
            Some(target) => target.stream,
            None => value.get("stream").and_then(Value::as_bool).unwrap_or(false),
        });
        let request = F::parse_at(value, target.as_ref())?;
        if let (Some(capture), Some(stream)) = (&capture, stream) {
            let model = F::model(&request).to_owned();
            capture.note(|record| (record.model, record.stream) = (model, stream));
        }
        let span = tracing::Span::current();
        crate::traces::set(&span, "gen_ai.operation.name", "chat");
        crate::traces::set(&span, "gen_ai.request.model", F::model(&request));
        if let Some(key) = &key {
            crate::traces::set(&span, "toolshim.key", &*key.name);
        }
        // The key's models and limits, once the model is known (issue 27).
        let ticket = match &key {
            Some(key) if F::METERED => Some(state.keys.admit(key, F::model(&request))?),
            Some(key) => {
                state.keys.allow(key, F::model(&request))?;
                None
            }
            None => None,
        };
        let response =
            crate::inspect::scope(capture.clone(), F::serve(state, &headers, request)).await?;
        Ok(match ticket {
            Some(ticket) => ticket.settle_with(response),
            None => response,
        })
    };
    let response = result.await.unwrap_or_else(|err| {
        if let Some(capture) = &capture {
            let outcome = format!("{}: {}", err.kind(), err.message());
            capture.note(|record| record.outcome = Some(outcome));
        }
        (front.error)(err, &headers)
    });
    match capture {
        Some(capture) => crate::inspect::Tee::wrap(response, capture),
        None => response,
    }
}

/// A neutral request served as `dispatch::serve` plans it (native in the upstream's own API,
/// or emulated), and answered through the family's `render`; `api` names the request in the
/// log, `left_out` are the hosted (server) tools it declared, which are counted.
pub(crate) async fn serve<R: Render>(
    state: &AppState,
    api: &'static str,
    chat: ChatRequest,
    stream: bool,
    left_out: &[String],
    render: R,
) -> Result<Response, ApiError> {
    for kind in left_out {
        state.metrics.hosted_tool_left_out(kind);
    }
    tracing::info!(model = %chat.model, stream, tools = chat.tools.len(),
        hosted_tools_left_out = left_out.len(), "{api}");
    let started = Instant::now();
    let events = crate::dispatch::serve(state, chat, stream).await?;
    crate::api::reply(state, started, events, stream, render).await
}
