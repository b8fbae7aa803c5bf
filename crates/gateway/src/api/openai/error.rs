//! `ApiError` in OpenAI's shape: `{"error":{"message","type","param","code"}}`.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use crate::error::ApiError;

/// The `{"error": …}` body for `err`.
pub(crate) fn body(err: &ApiError) -> serde_json::Value {
    let (kind, code, param): (&str, Option<String>, Option<String>) = match err {
        ApiError::InvalidRequest { param, code, .. } => {
            ("invalid_request_error", code.clone(), param.clone())
        }
        ApiError::Auth(crate::error::AuthFailure::NotAdmin) => {
            ("invalid_request_error", Some("insufficient_permissions".into()), None)
        }
        ApiError::Auth(_) => ("invalid_request_error", Some("invalid_api_key".into()), None),
        ApiError::ContextOverflow { .. } => (
            "invalid_request_error",
            Some("context_length_exceeded".into()),
            Some("messages".into()),
        ),
        ApiError::UpstreamOverloaded { .. } => ("server_error", Some("overloaded".into()), None),
        ApiError::NotFound(_) => ("invalid_request_error", Some("not_found".into()), None),
        ApiError::MethodNotAllowed(_) => {
            ("invalid_request_error", Some("method_not_allowed".into()), None)
        }
        ApiError::ModelNotFound(_) => {
            ("invalid_request_error", Some("model_not_found".into()), Some("model".into()))
        }
        ApiError::BodyTooLarge { .. } => {
            ("invalid_request_error", Some("request_too_large".into()), None)
        }
        ApiError::UpstreamRateLimited { .. } | ApiError::RateLimited { tokens: false, .. } => {
            ("requests", Some("rate_limit_exceeded".into()), None)
        }
        ApiError::RateLimited { tokens: true, .. } => {
            ("tokens", Some("rate_limit_exceeded".into()), None)
        }
        ApiError::UpstreamTimeout { .. } => ("server_error", Some("upstream_timeout".into()), None),
        ApiError::UpstreamRejected { .. } => ("invalid_request_error", None, None),
        ApiError::RequestTimeout => ("invalid_request_error", Some("request_timeout".into()), None),
        ApiError::ShuttingDown => ("server_error", Some("shutting_down".into()), None),
        ApiError::StoreUnavailable(_) => ("server_error", Some("store_unavailable".into()), None),
        ApiError::ToolCallMissing { .. } => {
            ("server_error", Some("tool_call_missing".into()), None)
        }
        ApiError::OutputInvalid { .. } => ("server_error", Some("output_invalid".into()), None),
        ApiError::CallIncomplete { .. } => ("server_error", Some("call_incomplete".into()), None),
        ApiError::Upstream { .. }
        | ApiError::UpstreamUnavailable { .. }
        | ApiError::Internal(_) => ("server_error", None, None),
    };
    json!({"error": {"message": err.message(), "type": kind, "param": param, "code": code}})
}

/// The HTTP response for an error raised before streaming began.
pub(crate) fn response(err: ApiError) -> Response {
    let body = body(&err);
    response_with(err, body)
}

/// The HTTP response for `err` with this body (a family that words some errors its own way
/// builds the body and keeps the status, `retry-after` and logging).
pub(crate) fn response_with(err: ApiError, body: serde_json::Value) -> Response {
    let mut response = (err.status(), axum::Json(body)).into_response();
    if let Some(value) = err.retry_after().and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response.extensions_mut().insert(err);
    response
}

/// The in-band error chunk for a failure after streaming began.
pub(crate) fn chunk(err: &ApiError) -> Bytes {
    Bytes::from(format!("data: {}\n\n", body(err)))
}
