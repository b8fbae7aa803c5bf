//! The request inspector's endpoints (issue 27; docs/operations.md), for a key with
//! `admin = true`: `GET /inspect`, the kept requests, and `GET /inspect/{id}`, one of them
//! with its attempts. A browser gets HTML (and is asked for the key as a password: HTTP
//! Basic, any user name); a script gets JSON (`Accept: application/json`, or anything but
//! HTML, or `?format=json`).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;

use crate::api::openai::error;
use crate::error::{ApiError, AuthFailure};
use crate::inspect::page;
use crate::state::AppState;

/// `?format=json|html`.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Format {
    format: Option<String>,
}

/// Whether the client wants the page rather than JSON.
fn wants_html(headers: &HeaderMap, format: &Format) -> bool {
    match format.format.as_deref() {
        Some(format) => format.eq_ignore_ascii_case("html"),
        None => headers
            .get(header::ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html")),
    }
}

/// The key of an HTTP Basic `Authorization` header: its password.
fn basic_password(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim_start();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
    decoded.split_once(':').map(|(_, password)| password.to_owned())
}

/// Standard base64, padded or not; `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let text = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut n) = (0u32, 0u32);
    for &c in text {
        bits = (bits << 6) | u32::from(value(c)?);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push(u8::try_from((bits >> n) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// An admin key, from `Authorization: Bearer`, `x-api-key` or HTTP Basic (the password).
fn admit(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if let Some(password) = basic_password(headers) {
        return match state.keys.find(&password) {
            Some(key) if key.admin => Ok(()),
            Some(_) => Err(ApiError::Auth(AuthFailure::NotAdmin)),
            None => Err(ApiError::Auth(AuthFailure::BadBearer)),
        };
    }
    crate::api::admin::admit(state, headers)
}

/// A failure; a 401 asks a browser for the key.
fn refused(err: ApiError) -> Response {
    let unauthorized = matches!(err, ApiError::Auth(AuthFailure::Missing | AuthFailure::BadBearer));
    let mut response = error::response(err);
    if unauthorized {
        let ask = HeaderValue::from_static("Basic realm=\"toolshim inspector\", charset=\"UTF-8\"");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, ask);
    }
    response
}

/// The inspector, for an admin key; or the response that refuses.
fn inspector(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<std::sync::Arc<crate::inspect::Inspector>, Box<Response>> {
    admit(state, headers).map_err(|err| Box::new(refused(err)))?;
    state.inspector.clone().ok_or_else(|| {
        Box::new(error::response(ApiError::NotFound(
            "The request inspector is off: set `enabled = true` in the `[inspect]` table of the config file (docs/operations.md).".into(),
        )))
    })
}

/// A page that must not be cached or framed.
fn private(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // No script, style only inline, nothing fetched: text a model wrote stays text.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"),
    );
    response
}

/// `GET /inspect`.
pub(crate) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(format): Query<Format>,
) -> Response {
    let inspector = match inspector(&state, &headers) {
        Ok(inspector) => inspector,
        Err(response) => return *response,
    };
    let (summaries, totals) = inspector.list();
    private(if wants_html(&headers, &format) {
        Html(page::list(&summaries, &totals)).into_response()
    } else {
        axum::Json(json!({"object": "list", "inspector": totals, "data": summaries}))
            .into_response()
    })
}

/// `GET /inspect/{id}`.
pub(crate) async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(format): Query<Format>,
) -> Response {
    let inspector = match inspector(&state, &headers) {
        Ok(inspector) => inspector,
        Err(response) => return *response,
    };
    let Some(entry) = id.parse().ok().and_then(|id| inspector.get(id)) else {
        return error::response(ApiError::NotFound(format!(
            "No kept request has the id `{id}`: it may have been pushed out by newer ones."
        )));
    };
    let html = wants_html(&headers, &format);
    private(entry.read(|record| {
        if html {
            Html(page::detail(record)).into_response()
        } else {
            axum::Json(record).into_response()
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_browsers_send_it() {
        assert_eq!(base64_decode("YWRtaW46czNjcmV0").unwrap(), b"admin:s3cret");
        assert_eq!(base64_decode("Og==").unwrap(), b":");
        assert_eq!(base64_decode("YQ").unwrap(), b"a");
        assert!(base64_decode("a*b").is_none());
    }
}
