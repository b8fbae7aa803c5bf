//! Thin handlers for the Anthropic Messages API, on the same pipeline as OpenAI.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::anthropic::sse::{self, Encoder};
use crate::api::anthropic::{error, wire};
use crate::api::family::{Family, Front};
use crate::chat::ToolChoice;
use crate::chat::reply::Reply;
use crate::error::{ApiError, AuthFailure};
use crate::state::AppState;

/// `x-api-key` or `Authorization: Bearer`, when gateway keys are configured.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.config.auth_on() {
        return Ok(());
    }
    if let Some(key) = headers.get("x-api-key") {
        let known = key.to_str().is_ok_and(|key| crate::api::is_gateway_key(state, key));
        return if known { Ok(()) } else { Err(ApiError::Auth(AuthFailure::BadKey)) };
    }
    match crate::api::bearer(headers) {
        Some(token) if crate::api::is_gateway_key(state, token) => Ok(()),
        Some(_) => Err(ApiError::Auth(AuthFailure::BadBearer)),
        None => Err(ApiError::Auth(AuthFailure::Missing)),
    }
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    headers.get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// The Messages API's front: the key, then the version header it requires; its error shape.
const FRONT: Front = Front { admit, not_json, error };

fn admit(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    authorize(state, headers)?;
    if headers.get("anthropic-version").is_none() {
        return Err(ApiError::invalid("anthropic-version: header is required", None));
    }
    Ok(())
}

fn not_json(err: &serde_json::Error) -> ApiError {
    ApiError::invalid(format!("The request body is not valid JSON: {err}"), None)
}

/// An error in Anthropic's shape, echoing the request's `x-request-id`.
fn error(err: ApiError, headers: &HeaderMap) -> Response {
    error::response(err, request_id(headers).as_deref())
}

/// `POST /v1/messages`: served natively or emulated, as `dispatch::plan` decides; with
/// `COUNT`, `POST /v1/messages/count_tokens`: the same request read the same way, its prompt
/// counted.
pub(crate) struct Messages<const COUNT: bool = false>;

/// `POST /v1/messages/count_tokens`.
pub(crate) type CountTokens = Messages<true>;

impl<const COUNT: bool> Family for Messages<COUNT> {
    const FRONT: Front = FRONT;
    const NAME: &'static str = if COUNT { "count_tokens" } else { "messages" };
    type Request = wire::Parsed;

    const METERED: bool = !COUNT;

    fn parse(body: Value) -> Result<wire::Parsed, ApiError> {
        wire::from_wire(&body, COUNT)
    }

    fn model(parsed: &wire::Parsed) -> &str {
        &parsed.chat.model
    }

    async fn serve(
        state: AppState,
        _headers: &HeaderMap,
        parsed: wire::Parsed,
    ) -> Result<Response, ApiError> {
        let input_tokens = state.estimate_input_tokens(&parsed.chat);
        if COUNT {
            return Ok(axum::Json(json!({"input_tokens": input_tokens})).into_response());
        }
        let render = Render {
            model: parsed.chat.model.clone(),
            input_tokens,
            drop_text: matches!(
                parsed.chat.tool_choice,
                ToolChoice::Required | ToolChoice::Named(_)
            ),
        };
        let (chat, left_out) = (parsed.chat, &parsed.server_tools);
        crate::api::family::serve(&state, "messages", chat, parsed.stream, left_out, render).await
    }
}

/// What a Messages reply needs beyond the chat events.
struct Render {
    model: String,
    /// The prompt's estimated tokens, for an upstream that reports none.
    input_tokens: u64,
    /// A forced tool choice: text beside the calls is left out, as Anthropic does.
    drop_text: bool,
}

impl crate::api::Render for Render {
    type Encoder = Encoder;

    async fn complete(self, events: crate::dispatch::EventStream) -> Result<Response, ApiError> {
        let reply = Reply::collect(events).await?;
        let message = sse::message(reply, self.model, self.input_tokens, self.drop_text);
        Ok((StatusCode::OK, axum::Json(message)).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder::new(self.model, self.input_tokens, self.drop_text)
    }
}

/// `GET /v1/models` in Anthropic's shape.
pub(crate) async fn models(state: &AppState, headers: &HeaderMap) -> Response {
    if let Err(err) = authorize(state, headers) {
        return error(err, headers);
    }
    let ids = match state.model_ids().await {
        Ok(ids) => ids,
        Err(err) => return error(err, headers),
    };
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z", "lifecycle": "active"}))
        .collect();
    axum::Json(
        json!({"data": data, "has_more": false, "first_id": ids.first(), "last_id": ids.last()}),
    )
    .into_response()
}
