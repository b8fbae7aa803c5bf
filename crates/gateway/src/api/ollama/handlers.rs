//! Thin handlers for the Ollama API.

use std::time::Instant;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::family::{Family, Front};
use crate::api::ollama::reply::{Kind, Render};
use crate::api::ollama::wire::{self, Parsed};
use crate::api::openai::handlers::authorize;
use crate::error::ApiError;
use crate::state::AppState;

/// The Ollama version the gateway reports: clients check it before they use tools and
/// structured outputs, which Ollama has had since 0.5.
pub(crate) const VERSION: &str = "0.12.6";

/// An error as Ollama writes one: `{"error": "…"}` with the status.
pub(crate) fn error(err: ApiError) -> Response {
    let mut response = (err.status(), axum::Json(json!({"error": err.message()}))).into_response();
    if let Some(value) = err.retry_after().and_then(|v| axum::http::HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
    }
    response.extensions_mut().insert(err);
    response
}

const FRONT: Front = Front {
    admit: authorize,
    not_json: |err| ApiError::invalid(format!("invalid JSON in the request body: {err}"), None),
    error: |err, _| error(err),
};

/// `POST /api/chat`; with `GENERATE`, `POST /api/generate`.
pub(crate) struct Ollama<const GENERATE: bool = false>;

/// `POST /api/generate`.
pub(crate) type Generate = Ollama<true>;

impl<const GENERATE: bool> Family for Ollama<GENERATE> {
    const FRONT: Front = FRONT;
    const NAME: &'static str = if GENERATE { "ollama_generate" } else { "ollama_chat" };
    type Request = Parsed;

    fn parse(body: Value) -> Result<Parsed, ApiError> {
        if GENERATE { wire::generate(&body) } else { wire::chat(&body) }
    }

    fn model(parsed: &Parsed) -> &str {
        &parsed.chat.model
    }

    async fn serve(
        state: AppState,
        _headers: &HeaderMap,
        parsed: Parsed,
    ) -> Result<Response, ApiError> {
        let kind = if GENERATE { Kind::Generate } else { Kind::Chat };
        // Nothing to answer (no message, or an empty prompt) is how Ollama's clients load a
        // model: Ollama answers at once with `done_reason: "load"`, and so does the gateway.
        let empty =
            |m: &crate::chat::Message| matches!(m, crate::chat::Message::User(t) if t.is_empty());
        if parsed.chat.messages.iter().all(empty) {
            let line = crate::api::ollama::reply::loaded(kind, &parsed.chat.model);
            return Ok(if parsed.stream {
                let mut text = line.to_string();
                text.push('\n');
                ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], text).into_response()
            } else {
                axum::Json(line).into_response()
            });
        }
        let render = Render { kind, model: parsed.chat.model.clone(), started: Instant::now() };
        let api = if GENERATE { "ollama generate" } else { "ollama chat" };
        crate::api::family::serve(&state, api, parsed.chat, parsed.stream, &[], render).await
    }
}

/// What Ollama says of a model; the gateway knows only its name.
fn details() -> Value {
    json!({"parent_model": "", "format": "", "family": "", "families": null,
        "parameter_size": "", "quantization_level": ""})
}

/// `GET /api/tags`: the models the routes name (else the first upstream's list).
pub(crate) async fn tags(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error(err);
    }
    match state.model_ids().await {
        Ok(ids) => {
            let models: Vec<Value> = ids
                .iter()
                .map(|id| {
                    json!({"name": id, "model": id, "modified_at": "2025-01-01T00:00:00Z",
                    "size": 0, "digest": "", "details": details()})
                })
                .collect();
            axum::Json(json!({"models": models})).into_response()
        }
        Err(err) => error(err),
    }
}

/// `POST /api/show`: a model the gateway routes, with what it can do through the gateway
/// (completion, tools); a 404 for one it does not.
pub(crate) async fn show(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    // The key first: an unauthenticated body is never read.
    if let Err(err) = authorize(&state, &headers) {
        return error(err);
    }
    let body = match crate::api::read_body(&state, &headers, body).await {
        Ok(body) => body,
        Err(err) => return error(err),
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let name =
        body.get("model").or_else(|| body.get("name")).and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        return error(ApiError::invalid("model is required", None));
    }
    if let Err(err) = state.route(name) {
        return error(err);
    }
    axum::Json(json!({
        "modelfile": "", "parameters": "", "template": "", "details": details(),
        "model_info": {}, "capabilities": ["completion", "tools", "thinking"],
        "modified_at": "2025-01-01T00:00:00Z",
    }))
    .into_response()
}

/// `GET /api/version`.
pub(crate) async fn version() -> Response {
    axum::Json(json!({"version": VERSION})).into_response()
}

/// `GET /api/ps`: the models loaded in memory; a gateway loads none.
pub(crate) async fn ps(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error(err);
    }
    axum::Json(json!({"models": []})).into_response()
}

/// `GET /` and `HEAD /`: what Ollama answers, which clients probe to find a server.
pub(crate) async fn root() -> &'static str {
    "Ollama is running"
}
