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

/// A client API's request endpoint.
pub(crate) trait Family: Send + Sync + 'static {
    /// The request as the family reads it.
    type Request: Send;
    /// The key check and the headers the family requires, before any byte of the body.
    fn admit(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError>;
    /// What a body that is not JSON is told, in the family's words.
    fn not_json(err: &serde_json::Error) -> ApiError;
    /// The JSON body read as the family's request.
    fn parse(body: Value) -> Result<Self::Request, ApiError>;
    /// The request served: native, emulated or passed through, as its route says.
    fn serve(
        state: AppState,
        request: Self::Request,
    ) -> impl Future<Output = Result<Response, ApiError>> + Send;
    /// An error as the family's response (`headers` are the request's).
    fn error(err: ApiError, headers: &HeaderMap) -> Response;
}

/// The handler of a family's `POST` endpoint.
pub(crate) async fn handle<F: Family>(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        F::admit(&state, &headers)?;
        let body = crate::api::read_body(&state, &headers, body).await?;
        let value: Value = serde_json::from_slice(&body).map_err(|err| F::not_json(&err))?;
        F::serve(state, F::parse(value)?).await
    };
    result.await.unwrap_or_else(|err| F::error(err, &headers))
}

/// A neutral request served as `dispatch::serve` plans it (native in the upstream's own API,
/// or emulated), and answered through the family's `render`.
pub(crate) async fn serve<R: Render>(
    state: &AppState,
    chat: ChatRequest,
    stream: bool,
    render: R,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let events = crate::dispatch::serve(state, chat, stream).await?;
    crate::api::reply(state, started, events, stream, render).await
}
