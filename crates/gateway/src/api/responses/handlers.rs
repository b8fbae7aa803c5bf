//! Thin handlers for the Responses API.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use crate::api::family::{Family, Front};
use crate::api::openai::handlers::authorize;
use crate::api::responses::error;
use crate::api::responses::sse::{Builder, Encoder, Shape, now, response_id};
use crate::api::responses::wire;
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /v1/responses`.
pub(crate) struct Responses;

impl Family for Responses {
    const FRONT: Front = Front {
        admit: authorize,
        not_json: crate::api::openai::handlers::not_json,
        error: |err, _| error::response(err),
    };
    type Request = wire::Parsed;

    fn parse(body: Value) -> Result<wire::Parsed, ApiError> {
        wire::from_wire(&body)
    }

    async fn serve(state: AppState, parsed: wire::Parsed) -> Result<Response, ApiError> {
        let shape = Shape {
            id: response_id("resp_"),
            created_at: now(),
            model: parsed.chat.model.clone(),
            echo: parsed.echo,
            tools: parsed.tools,
            input_tokens: state.estimate_input_tokens(&parsed.chat),
        };
        let (chat, left_out) = (parsed.chat, &parsed.hosted);
        crate::api::family::serve(&state, "responses", chat, parsed.stream, left_out, shape).await
    }
}

impl crate::api::Render for Shape {
    type Encoder = Encoder;

    async fn complete(
        self,
        mut events: crate::dispatch::EventStream,
    ) -> Result<Response, ApiError> {
        let mut builder = Builder::new(self, false);
        while let Some(event) = events.next().await {
            builder.push(&event?);
        }
        Ok((StatusCode::OK, axum::Json(builder.finish())).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder { builder: Builder::new(self, true) }
    }
}

/// `GET` and `DELETE /v1/responses/{id}`: the gateway keeps no responses.
pub(crate) async fn stored(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error::response(err);
    }
    error::response(ApiError::NotFound(format!(
        "Response with id '{id}' not found. This gateway keeps no responses (it is stateless): send the whole conversation with each request."
    )))
}

/// `GET /v1/responses`, which is how a WebSocket upgrade arrives: not served. A 426 makes a
/// client that tries WebSockets first (Codex) use HTTP at once; after a 404 Codex kept
/// retrying the upgrade for six seconds before it did.
pub(crate) async fn websocket(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error::response(err);
    }
    let mut response = error::response(ApiError::NotFound(
        "WebSocket connections are not supported on /v1/responses; send POST /v1/responses with stream: true.".into(),
    ));
    *response.status_mut() = StatusCode::UPGRADE_REQUIRED;
    response
}
