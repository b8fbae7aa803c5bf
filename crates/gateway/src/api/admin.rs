//! The admin endpoints (issue 27; docs/operations.md), for a key with `admin = true`:
//! `GET /admin/usage`, usage per key and model with each key's limits and counts now.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use crate::api::openai::error;
use crate::error::{ApiError, AuthFailure};
use crate::state::AppState;

/// A key with `admin = true`, or the 401 that says what is missing.
pub(crate) fn admit(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    match state.keys.of(headers) {
        Some(key) if key.admin => Ok(()),
        Some(_) => Err(ApiError::Auth(AuthFailure::NotAdmin)),
        None if crate::api::bearer(headers).is_some() || headers.contains_key("x-api-key") => {
            Err(ApiError::Auth(AuthFailure::BadBearer))
        }
        None => Err(ApiError::Auth(AuthFailure::Missing)),
    }
}

/// `GET /admin/usage`.
pub(crate) async fn usage(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match admit(&state, &headers) {
        Ok(()) => axum::Json(state.keys.usage()).into_response(),
        Err(err) => error::response(err),
    }
}
