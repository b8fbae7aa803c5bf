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
//! Layers, outermost first: catch-panic, then `observe` (request id, the request's span,
//! metrics and the error log, the shutdown cut); then the routes. Handlers check the key
//! before they read the body, and read it with a size limit and a deadline
//! (`api::read_body`). Connections are accepted and timed in `server`.

mod api;
mod body;
mod chat;
mod config;
mod dispatch;
mod error;
mod inspect;
mod keys;
mod metrics;
mod neutral;
mod observe;
mod routes;
mod server;
mod state;
mod store;
pub mod traces;
mod upstream;

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;

pub use crate::config::{
    CallFormat, Config, Engine, FormatFile, InspectConfig, KeyConfig, Layer, Mode, ModelConfig,
    NamedUpstream, Origin, Origins, Overrides, ReasoningCalls, StoreConfig, TracesConfig,
    UpstreamApi, UpstreamConfig,
};
pub use crate::error::{ApiError, AuthFailure, Refuser, UpstreamFault};
pub use crate::server::ServeReport;
pub use crate::state::AppState;

/// The gateway's routes and layers.
pub fn router(state: AppState) -> Router {
    use api::anthropic::handlers::{CountTokens, Messages};
    use api::family::handle;
    use api::openai::handlers::ChatCompletions;
    use api::responses::conversations;
    use api::responses::handlers::Responses;
    Router::new()
        .route("/v1/chat/completions", post(handle::<ChatCompletions>))
        .route("/chat/completions", post(handle::<ChatCompletions>))
        .route("/v1/responses", post(handle::<Responses>).get(api::responses::handlers::websocket))
        .route("/responses", post(handle::<Responses>))
        .route(
            "/v1/responses/{id}",
            get(api::responses::stored::get).delete(api::responses::stored::delete),
        )
        .route("/v1/responses/{id}/input_items", get(api::responses::stored::input_items_of))
        .route("/v1/conversations", post(conversations::create))
        .route(
            "/v1/conversations/{id}",
            get(conversations::get).post(conversations::update).delete(conversations::delete),
        )
        .route(
            "/v1/conversations/{id}/items",
            get(conversations::list_items).post(conversations::add_items),
        )
        .route(
            "/v1/conversations/{id}/items/{item_id}",
            get(conversations::get_item).delete(conversations::delete_item),
        )
        .route("/v1/messages", post(handle::<Messages>))
        .route("/v1/messages/count_tokens", post(handle::<CountTokens>))
        .route("/admin/usage", get(api::admin::usage))
        .route("/v1beta/models", get(api::gemini::handlers::models))
        .route(
            "/v1beta/models/{*rest}",
            post(api::gemini::handlers::post).get(api::gemini::handlers::model),
        )
        .route("/v1/models/{*rest}", post(api::gemini::handlers::post).get(api::model))
        .route("/api/chat", post(handle::<api::ollama::handlers::Ollama>))
        .route("/api/generate", post(handle::<api::ollama::handlers::Generate>))
        .route("/api/tags", get(api::ollama::handlers::tags))
        .route("/api/show", post(api::ollama::handlers::show))
        .route("/api/version", get(api::ollama::handlers::version))
        .route("/api/ps", get(api::ollama::handlers::ps))
        .route("/", get(api::ollama::handlers::root))
        .route("/inspect", get(api::inspect::list))
        .route("/inspect/{id}", get(api::inspect::show))
        .route("/v1/models", get(api::models))
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), observe::observe))
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

/// `GET /readyz`: whether the upstreams answer (liveness is `/healthz`). 200 `ready` when all
/// do, 200 `degraded` when some do, 503 `unavailable` when none does; each upstream is listed
/// with its own status, and the first failure's kind and message are repeated at the top.
/// The probe is shared and reused for `readyz_cache_secs` (`AppState::readiness`).
async fn ready(State(state): State<AppState>) -> Response {
    let readiness = state.readiness().await;
    let mut upstreams = serde_json::Map::new();
    let mut first_failure = None;
    let answering = readiness.upstreams.iter().filter(|(_, _, result)| result.is_ok()).count();
    for (name, shown, result) in readiness.upstreams.iter() {
        let entry = match result {
            Ok(()) => serde_json::json!({"url": shown, "status": "ready"}),
            Err(err) => {
                let entry = serde_json::json!({
                    "url": shown, "status": "unavailable", "kind": err.kind(), "error": err.message(),
                });
                first_failure.get_or_insert((err.kind(), err.message()));
                entry
            }
        };
        upstreams.insert(name.clone(), entry);
    }
    let (status, code) = match first_failure {
        None => ("ready", axum::http::StatusCode::OK),
        Some(_) if answering > 0 => ("degraded", axum::http::StatusCode::OK),
        Some(_) => ("unavailable", axum::http::StatusCode::SERVICE_UNAVAILABLE),
    };
    let mut body = serde_json::json!({"status": status, "upstreams": upstreams});
    if let Some((kind, message)) = first_failure {
        body["kind"] = kind.into();
        body["error"] = message.into();
    }
    // The store: stored responses fail without it, everything else still works.
    if let Some(store) = &state.store {
        body["store"] = match store.check() {
            Ok(()) => serde_json::json!({"url": store.shown, "status": "ready"}),
            Err(err) => {
                if status == "ready" {
                    body["status"] = "degraded".into();
                }
                serde_json::json!({"url": store.shown, "status": "unavailable", "error": err.0})
            }
        };
    }
    (code, axum::Json(body)).into_response()
}

/// Warns at startup about each upstream that cannot be reached (the gateway serves anyway:
/// an upstream may come up later). The probe is `/readyz`'s, so a `/readyz` call meanwhile
/// shares it.
async fn probe_upstream(state: AppState) {
    let readiness = state.readiness().await;
    for (name, upstream, result) in readiness.upstreams.iter() {
        match result {
            Ok(()) => tracing::info!(upstream = %name, url = %upstream, "the upstream answers"),
            Err(err) => tracing::warn!(
                upstream = %name,
                url = %upstream,
                kind = err.kind(),
                detail = %err.detail(),
                "the upstream cannot be reached now; requests for it will fail until it can (GET /readyz checks it)"
            ),
        }
    }
}

/// A known path asked with another method: a 405 in the path's family's error shape.
async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let err = ApiError::MethodNotAllowed(format!(
        "{} is not served at {path}; see the API reference for the methods it takes.",
        request.method()
    ));
    if path.starts_with("/v1/messages") {
        api::anthropic::error::response(err, None)
    } else if path.starts_with("/v1/responses") || path.starts_with("/responses") {
        api::responses::error::response(err)
    } else {
        api::openai::error::response(err)
    }
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_owned();
    api::openai::error::response(ApiError::NotFound(format!("Unknown request URL: {path}.")))
}

/// Binds `config.listen`, calls `on_listen` with the bound address, and serves until
/// `shutdown` is cancelled; in-flight requests then get `drain_timeout_secs` to finish, and
/// those still running after that are cut off (the report counts them).
pub async fn serve(
    config: Config,
    shutdown: CancellationToken,
    on_listen: impl FnOnce(SocketAddr),
) -> Result<ServeReport, String> {
    config.validate().map_err(|problems| problems.join("\n"))?;
    let drain = Config::secs(config.drain_timeout_secs);
    let limits = server::ConnLimits {
        max_connections: server::connection_cap(config.max_connections),
        header_read: Config::secs(config.header_read_timeout_secs),
        keep_alive: Config::secs(config.keep_alive_timeout_secs),
    };
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", config.listen))?;
    let addr = listener.local_addr().map_err(|err| err.to_string())?;
    let state = AppState::new(config)?;
    let cut = state.cut.clone();
    if !state.config.auth_on() && !addr.ip().is_loopback() {
        tracing::warn!(
            listen = %addr,
            "no gateway API keys are set and the gateway listens beyond loopback: anyone who can reach it can use the upstream; set api_keys (--api-key, TOOLSHIM_API_KEYS)"
        );
    }
    on_listen(addr);
    let probe = probe_upstream(state.clone());
    let app = router(state);
    let (report, ()) =
        tokio::join!(server::serve(listener, app, limits, shutdown, drain, cut), probe);
    Ok(report)
}
