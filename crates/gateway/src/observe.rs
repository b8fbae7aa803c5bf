//! The request id, the one place requests are logged and counted, and the one place an
//! error response gets its `x-should-retry` header.
//!
//! A request is counted when its response body ends (or is dropped), not when its head is
//! sent, so a stream's duration is the real one and an error reported in-band after
//! streaming began is counted and logged like any other. Everything that runs while the
//! body is polled (the pipeline of a stream) runs inside the request's span, so every log
//! line of a request carries its id.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::api;
use crate::api::InBandError;
use crate::body::OnEnd;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::state::AppState;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Whether the client should retry an error response (`ApiError::should_retry`).
const SHOULD_RETRY: HeaderName = HeaderName::from_static("x-should-retry");

/// A client's `x-request-id` is kept only when it is this short and printable ASCII.
const MAX_CLIENT_ID: usize = 128;

/// A fresh request id: `req_` and 24 letters and digits.
fn new_request_id() -> String {
    let mut id = String::from("req_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

/// The client's request id if it is usable in logs and headers, else a fresh one.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| {
            !id.is_empty() && id.len() <= MAX_CLIENT_ID && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(new_request_id, str::to_owned)
}

/// Assigns the request id, runs the request in its span (cut off with a 503 when the
/// shutdown's drain timeout passes first), and counts it when its body ends.
pub(crate) async fn observe(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let id = request_id(&request);
    let id_value = HeaderValue::from_str(&id).ok();
    if let Some(value) = &id_value {
        request.headers_mut().insert(REQUEST_ID, value.clone());
    }
    let anthropic = route.starts_with("/v1/messages");
    let span = tracing::info_span!("request", request_id = %id, route = %route);
    // A client's trace is continued (traces on: docs/operations.md).
    if let Some(parent) = request.headers().get("traceparent").and_then(|v| v.to_str().ok()) {
        crate::traces::continue_from(&span, parent);
    }
    let run = next.run(request).instrument(span.clone());
    let mut response = tokio::select! {
        response = run => response,
        () = state.cut.cancelled() => {
            let err = ApiError::ShuttingDown;
            if anthropic {
                api::anthropic::error::response(err, Some(&id))
            } else {
                api::openai::error::response(err)
            }
        }
    };
    if let Some(value) = id_value {
        response.headers_mut().insert(REQUEST_ID, value.clone());
        // Anthropic clients read `request-id`; OpenAI clients read `x-request-id`.
        response.headers_mut().insert(HeaderName::from_static("request-id"), value);
    }
    let status = response.status().as_u16();
    let head_error = response.extensions().get::<ApiError>().cloned();
    // Whether a client retry may help, for every family's errors alike (`should_retry`).
    if let Some(retry) = head_error.as_ref().and_then(ApiError::should_retry) {
        let value = HeaderValue::from_static(if retry { "true" } else { "false" });
        response.headers_mut().insert(SHOULD_RETRY, value);
    }
    let in_band = response.extensions().get::<InBandError>().cloned();
    let done =
        Done { metrics: Arc::clone(&state.metrics), route, status, started, head_error, in_band };
    response.map(|inner| Body::new(OnEnd::hook(inner, span, move || done.record())))
}

/// What is recorded when a response body ends.
struct Done {
    metrics: Arc<Metrics>,
    route: String,
    status: u16,
    started: Instant,
    head_error: Option<ApiError>,
    in_band: Option<InBandError>,
}

impl Done {
    /// Runs in the request's span (`OnEnd` enters it).
    fn record(self) {
        let elapsed = self.started.elapsed();
        let span = tracing::Span::current();
        crate::traces::set(&span, "http.response.status_code", u64::from(self.status));
        if let Some(err) = &self.head_error {
            crate::traces::fail(&span, err.kind(), &err.message());
        }
        if let Some(err) = &self.head_error {
            self.metrics.error(err.kind());
            if self.status >= 500 {
                tracing::warn!(kind = err.kind(), status = self.status, detail = %err.detail(), "request failed");
            } else {
                tracing::info!(kind = err.kind(), status = self.status, "request rejected");
                // The upstream's own words, when it refused the request.
                tracing::debug!(kind = err.kind(), detail = %err.detail(), "request rejected: detail");
            }
        }
        if let Some(err) = self.in_band.as_ref().and_then(InBandError::take) {
            self.metrics.error(err.kind());
            crate::traces::fail(&span, err.kind(), &err.message());
            tracing::warn!(
                kind = err.kind(),
                status = err.status().as_u16(),
                detail = %err.detail(),
                seconds = elapsed.as_secs_f64(),
                "request failed after streaming began"
            );
        }
        self.metrics.request(&self.route, self.status, elapsed);
    }
}
