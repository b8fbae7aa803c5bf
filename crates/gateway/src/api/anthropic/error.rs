//! `ApiError` in Anthropic's shape: `{"type":"error","error":{"type","message"},"request_id"}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use crate::error::{ApiError, AuthFailure};

/// Anthropic's status for an error (529 for an overloaded upstream).
fn status(err: &ApiError) -> StatusCode {
    match err {
        ApiError::UpstreamOverloaded { .. } => {
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
        }
        other => other.status(),
    }
}

fn kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 => "timeout_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

fn message(err: &ApiError) -> String {
    match err {
        ApiError::Auth(AuthFailure::Missing) => "x-api-key header is required".into(),
        ApiError::Auth(AuthFailure::BadKey) => "invalid x-api-key".into(),
        ApiError::Auth(AuthFailure::BadBearer) => "Invalid bearer token".into(),
        ApiError::UpstreamOverloaded { .. } => "Overloaded".into(),
        // The wording Claude Code matches to compact its context.
        ApiError::ContextOverflow { tokens, limit } => {
            format!("prompt is too long: {tokens} tokens > {limit} maximum")
        }
        other => other.message(),
    }
}

fn body(err: &ApiError, request_id: Option<&str>) -> serde_json::Value {
    let mut value =
        json!({"type": "error", "error": {"type": kind(status(err)), "message": message(err)}});
    if let ApiError::InvalidRequest { code: Some(code), param: Some(param), .. } = err {
        if code == crate::api::anthropic::wire::THREAD_UNSUPPORTED {
            value["error"]["details"] = json!({"error_code": code, "unsupported": [param]});
        }
    }
    if let Some(id) = request_id {
        value["request_id"] = json!(id);
    }
    value
}

/// The HTTP response for an error raised before streaming began.
pub(crate) fn response(err: ApiError, request_id: Option<&str>) -> Response {
    let mut response = (status(&err), axum::Json(body(&err, request_id))).into_response();
    if let Some(value) = err.retry_after().and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response.extensions_mut().insert(err);
    response
}

/// The in-band `error` event for a failure after streaming began.
pub(crate) fn event(err: &ApiError) -> Bytes {
    Bytes::from(format!("event: error\ndata: {}\n\n", body(err, None)))
}
