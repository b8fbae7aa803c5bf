//! An OpenAI-compatible gateway that gives chat-only models tool calling.
//!
//! Requests come in as OpenAI Chat Completions. For an upstream without native tool calling
//! the gateway describes the tools in the prompt, renders earlier calls and results as text,
//! parses calls out of the reply with `toolshim-parse`, enforces `tool_choice`, retries bad
//! replies while nothing has reached the client, and answers with real `tool_calls`,
//! streaming included.
//!
//! Data flow: `handler → chat::run (prompt → upstream → StreamParser → policy) → encoder → client`.
//!
//! Layers, outermost first: catch-panic, request id, trace span, metrics and error log,
//! body limit; then the routes.

mod api;
mod chat;
mod config;
mod error;
mod metrics;
mod prompt;
mod state;
mod upstream;

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tracing::Instrument;

pub use crate::config::{
    CallFormat, Config, Mode, ModelConfig, Overrides, UpstreamApi, UpstreamConfig,
};
pub use crate::error::{ApiError, AuthFailure};
pub use crate::state::AppState;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[derive(Clone, Copy)]
struct MakeId;

impl MakeRequestId for MakeId {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        let mut id = String::from("req_");
        id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
        HeaderValue::from_str(&id).ok().map(RequestId::new)
    }
}

/// The gateway's routes and layers.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.body_limit_bytes;
    Router::new()
        .route("/v1/chat/completions", post(api::openai::handlers::chat_completions))
        .route("/chat/completions", post(api::openai::handlers::chat_completions))
        .route("/v1/messages", post(api::anthropic::handlers::messages))
        .route("/v1/messages/count_tokens", post(api::anthropic::handlers::count_tokens))
        .route("/v1/models", get(api::models))
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeId))
        .layer(CatchPanicLayer::new())
        .with_state(state)
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(),
    )
        .into_response()
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_owned();
    api::openai::error::response(ApiError::NotFound(format!("Unknown request URL: {path}.")))
}

/// The one place requests are logged and counted; errors are read from the response.
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let request_id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let span = tracing::info_span!("request", request_id = %request_id, route = %route);
    let mut response = next.run(request).instrument(span.clone()).await;
    // Anthropic clients read `request-id`; OpenAI clients read `x-request-id`.
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(HeaderName::from_static("request-id"), value);
    }
    let status = response.status();
    if let Some(err) = response.extensions().get::<ApiError>() {
        state.metrics.error(err.kind());
        let _enter = span.enter();
        if status.is_server_error() {
            tracing::warn!(kind = err.kind(), status = status.as_u16(), "request failed");
        } else {
            tracing::info!(kind = err.kind(), status = status.as_u16(), "request rejected");
        }
    }
    state.metrics.request(&route, status.as_u16(), started.elapsed());
    response
}

/// Binds `config.listen`, calls `on_listen` with the bound address, and serves until
/// `shutdown` is cancelled; in-flight requests then get `drain_timeout_secs` to finish.
pub async fn serve(
    config: Config,
    shutdown: CancellationToken,
    on_listen: impl FnOnce(SocketAddr),
) -> Result<(), String> {
    config.validate().map_err(|problems| problems.join("\n"))?;
    let drain = Config::secs(config.drain_timeout_secs);
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", config.listen))?;
    let addr = listener.local_addr().map_err(|err| err.to_string())?;
    let state = AppState::new(config)?;
    on_listen(addr);
    let app = router(state);
    let graceful = shutdown.clone();
    // Streamed replies are many small writes; without TCP_NODELAY, Nagle's algorithm
    // holds each one until the client's delayed ACK (40 ms on Linux) releases it.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "cannot set TCP_NODELAY on a client connection");
        }
    });
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(async move { graceful.cancelled().await });
    tokio::select! {
        result = server => result.map_err(|err| err.to_string()),
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(drain).await;
        } => {
            tracing::warn!("drain timeout reached; closing remaining connections");
            Ok(())
        }
    }
}
