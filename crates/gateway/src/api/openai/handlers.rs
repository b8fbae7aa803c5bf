//! Thin handlers: read the wire request, run the pipeline (or pass through), encode.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::api::openai::sse::{Collector, Encoder};
use crate::api::openai::{error, wire};
use crate::chat;
use crate::config::Mode;
use crate::error::ApiError;
use crate::state::AppState;

/// Checks the gateway key (`Authorization: Bearer <key>`), when keys are configured.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.config.api_keys.is_empty() {
        return Ok(());
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match bearer {
        Some(key) if state.config.api_keys.iter().any(|k| k == key) => Ok(()),
        Some(_) => Err(ApiError::Auth(crate::error::AuthFailure::BadBearer)),
        None => Err(ApiError::Auth(crate::error::AuthFailure::Missing)),
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn completion_id() -> String {
    let mut id = String::from("chatcmpl-");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(29));
    id
}

/// `POST /v1/chat/completions`
pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(_) => {
            return error::response(ApiError::BodyTooLarge {
                limit: state.config.body_limit_bytes,
            });
        }
    };
    match handle(state, &headers, &body).await {
        Ok(response) => response,
        Err(err) => error::response(err),
    }
}

async fn handle(state: AppState, headers: &HeaderMap, body: &Bytes) -> Result<Response, ApiError> {
    authorize(&state, headers)?;
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        ApiError::invalid(
            format!("We could not parse the JSON body of your request. ({err}) The OpenAI API expects a JSON payload."),
            None,
        )
    })?;
    let parsed = wire::from_wire(&value)?;
    let (upstream_model, mode) = state.config.route(&parsed.chat.model);
    // An Anthropic upstream cannot take OpenAI requests as they are: always emulate.
    let mode = if state.upstream.is_anthropic() { Mode::Emulate } else { mode };
    tracing::info!(model = %parsed.chat.model, upstream_model = %upstream_model, ?mode, stream = parsed.stream,
        tools = parsed.chat.tools.len(), "chat completion");
    match mode {
        Mode::Native => return passthrough(&state, value, &upstream_model).await,
        Mode::Auto if !parsed.chat.tools.is_empty() => {
            if let Some(response) = try_native(&state, &value, &upstream_model).await? {
                return Ok(response);
            }
            tracing::info!("the upstream rejected native tools; emulating");
        }
        Mode::Auto if value.get("tools").is_none() => {
            return passthrough(&state, value, &upstream_model).await;
        }
        Mode::Auto | Mode::Emulate => {}
    }
    emulate(state, parsed).await
}

async fn emulate(state: AppState, parsed: wire::Parsed) -> Result<Response, ApiError> {
    let started = Instant::now();
    let id = completion_id();
    let created = now();
    let model = parsed.chat.model.clone();
    let mut events = Box::pin(chat::run(state.clone(), parsed.chat, parsed.stream));
    if !parsed.stream {
        let mut collector = Collector::default();
        while let Some(event) = events.next().await {
            collector.push(event?);
        }
        let completion = collector.finish(id, created, model, parsed.legacy);
        return Ok((StatusCode::OK, axum::Json(completion)).into_response());
    }
    let encoder = Encoder::new(id, created, model, parsed.include_usage, parsed.legacy);
    crate::api::stream_response(&state, started, events, encoder).await
}

/// Native mode: the request goes upstream as it is (with the upstream model name).
async fn passthrough(
    state: &AppState,
    mut value: Value,
    upstream_model: &str,
) -> Result<Response, ApiError> {
    value["model"] = Value::String(upstream_model.to_owned());
    let response = state.upstream.send(&value).await?;
    Ok(relay(response))
}

/// Auto mode: native first; `None` when the upstream rejects the tools (then emulate).
async fn try_native(
    state: &AppState,
    value: &Value,
    upstream_model: &str,
) -> Result<Option<Response>, ApiError> {
    let mut value = value.clone();
    value["model"] = Value::String(upstream_model.to_owned());
    match state.upstream.send(&value).await {
        Ok(response) => Ok(Some(relay(response))),
        Err(ApiError::Upstream { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

fn relay(response: reqwest::Response) -> Response {
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let stream = response.bytes_stream().map(|chunk| chunk.map_err(std::io::Error::other));
    let mut out = Response::new(Body::from_stream(stream));
    *out.status_mut() = status;
    if let Some(value) = content_type.and_then(|v| HeaderValue::from_str(&v).ok()) {
        out.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    out
}

/// `GET /v1/models`: the configured models, or else the upstream's list.
pub(crate) async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error::response(err);
    }
    let created = now();
    let mut ids: Vec<String> = state.config.models.keys().cloned().collect();
    if ids.is_empty() {
        ids = state.upstream.model_ids().await;
    }
    let data: Vec<Value> = ids
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "toolshim"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}
