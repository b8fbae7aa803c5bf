//! Thin handlers for the Gemini API. The model and the method are in the path
//! (`models/NAME:generateContent`), the key in `x-goog-api-key` or `?key=`.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::family::{Family, Front, Target, handle_at};
use crate::api::gemini::reply::{Render, error};
use crate::api::gemini::wire::{self, Parsed};
use crate::error::ApiError;
use crate::state::AppState;

/// The query a Gemini request may carry.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct Params {
    alt: Option<String>,
    pub(crate) key: Option<String>,
}

/// Gemini's key (`x-goog-api-key`, or `?key=`) as the `x-api-key` the gateway reads.
fn with_key(mut headers: HeaderMap, params: &Params) -> HeaderMap {
    let key = headers
        .get("x-goog-api-key")
        .cloned()
        .or_else(|| params.key.as_deref().and_then(|key| HeaderValue::from_str(key).ok()));
    if let Some(key) = key {
        headers.insert("x-api-key", key);
    }
    headers
}

const FRONT: Front = Front {
    admit: crate::api::anthropic::handlers::authorize,
    not_json: |err| ApiError::invalid(format!("Invalid JSON payload received. {err}"), None),
    error: |err, _| error(err),
};

/// `models/NAME:generateContent` and `:streamGenerateContent`; with `COUNT`, `:countTokens`.
pub(crate) struct Gemini<const COUNT: bool = false>;

impl<const COUNT: bool> Family for Gemini<COUNT> {
    const FRONT: Front = FRONT;
    const NAME: &'static str = if COUNT { "gemini_count_tokens" } else { "gemini" };
    const METERED: bool = !COUNT;
    type Request = (Parsed, bool);

    fn parse(_body: Value) -> Result<(Parsed, bool), ApiError> {
        Err(ApiError::NotFound(
            "The model is named in the path: models/NAME:generateContent.".into(),
        ))
    }

    fn parse_at(body: Value, target: Option<&Target>) -> Result<(Parsed, bool), ApiError> {
        let Some(target) = target else { return Self::parse(body) };
        Ok((wire::from_wire(&body, target)?, target.sse))
    }

    fn model((parsed, _): &(Parsed, bool)) -> &str {
        &parsed.chat.model
    }

    async fn serve(
        state: AppState,
        _headers: &HeaderMap,
        (parsed, sse): (Parsed, bool),
    ) -> Result<Response, ApiError> {
        if COUNT {
            let tokens = state.estimate_input_tokens(&parsed.chat);
            return Ok(axum::Json(json!({"totalTokens": tokens})).into_response());
        }
        let render = Render {
            model: parsed.chat.model.clone(),
            response_id: crate::api::responses::sse::response_id(""),
            sse,
        };
        let (chat, hosted) = (parsed.chat, &parsed.hosted);
        crate::api::family::serve(&state, "gemini", chat, parsed.stream, hosted, render).await
    }
}

/// `POST /{v1,v1beta}/models/{NAME:METHOD}`.
pub(crate) async fn post(
    State(state): State<AppState>,
    Path(rest): Path<String>,
    Query(params): Query<Params>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let headers = with_key(headers, &params);
    let Some((model, method)) = rest.rsplit_once(':') else {
        return error(ApiError::NotFound(format!(
            "`models/{rest}` names no method: use models/NAME:generateContent."
        )));
    };
    let sse = params.alt.as_deref() == Some("sse");
    let target = |stream| Some(Target { model: model.to_owned(), stream, sse });
    match method {
        "generateContent" => handle_at::<Gemini>(state, headers, body, target(false)).await,
        "streamGenerateContent" => handle_at::<Gemini>(state, headers, body, target(true)).await,
        "countTokens" => handle_at::<Gemini<true>>(state, headers, body, target(false)).await,
        other => error(ApiError::NotFound(format!(
            "The method `{other}` is not served here: generateContent, streamGenerateContent and countTokens are."
        ))),
    }
}

fn model_entry(id: &str) -> Value {
    json!({"name": format!("models/{id}"), "baseModelId": id, "version": "001", "displayName": id,
        "description": "", "inputTokenLimit": 1_048_576, "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]})
}

/// `GET /{v1,v1beta}/models`: the models the routes name (else the first upstream's list).
pub(crate) async fn list(state: &AppState, headers: HeaderMap, params: &Params) -> Response {
    let headers = with_key(headers, params);
    if let Err(err) = crate::api::anthropic::handlers::authorize(state, &headers) {
        return error(err);
    }
    match state.model_ids().await {
        Ok(ids) => {
            axum::Json(json!({"models": ids.iter().map(|id| model_entry(id)).collect::<Vec<_>>()}))
                .into_response()
        }
        Err(err) => error(err),
    }
}

/// `GET /v1beta/models`.
pub(crate) async fn models(
    State(state): State<AppState>,
    Query(params): Query<Params>,
    headers: HeaderMap,
) -> Response {
    list(&state, headers, &params).await
}

/// `GET /{v1,v1beta}/models/NAME`: a model the gateway routes; a 404 for one it does not.
pub(crate) async fn model(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(params): Query<Params>,
    headers: HeaderMap,
) -> Response {
    let headers = with_key(headers, &params);
    if let Err(err) = crate::api::anthropic::handlers::authorize(&state, &headers) {
        return error(err);
    }
    let id = wire::model_name(&name);
    match state.route(id) {
        Ok(_) => axum::Json(model_entry(id)).into_response(),
        Err(err) => error(err),
    }
}

/// Whether a `GET /v1/models` is Gemini's (it carries Gemini's key).
pub(crate) fn asks(headers: &HeaderMap, params: &Params) -> bool {
    headers.contains_key("x-goog-api-key") || params.key.is_some()
}
