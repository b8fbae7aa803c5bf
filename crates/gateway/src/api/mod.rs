//! The API families. Only this module knows their JSON.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

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
