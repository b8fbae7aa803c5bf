//! Thin handlers for the Responses API.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use crate::api::family::{Family, Front};
use crate::api::openai::handlers::authorize;
use crate::api::responses::error;
use crate::api::responses::sse::{Builder, Encoder, Shape, now, response_id};
use crate::api::responses::stored::{self, Keep};
use crate::api::responses::wire;
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /v1/responses`.
pub(crate) struct Responses;

impl Family for Responses {
    const NAME: &'static str = "responses";
    const FRONT: Front = Front {
        admit: authorize,
        not_json: crate::api::openai::handlers::not_json,
        error: |err, _| error::response(err),
    };
    type Request = Value;

    /// The body as it came: its references are resolved from the store before it is read.
    fn parse(body: Value) -> Result<Value, ApiError> {
        Ok(body)
    }

    fn model(body: &Value) -> &str {
        body.get("model").and_then(Value::as_str).unwrap_or_default()
    }

    async fn serve(
        state: AppState,
        headers: &HeaderMap,
        mut body: Value,
    ) -> Result<Response, ApiError> {
        let resolved = stored::resolve(&state, headers, &mut body)?;
        let mut parsed = wire::from_wire(&body)?;
        parsed.echo.previous_response_id = resolved.previous.map_or(Value::Null, Value::String);
        parsed.echo.conversation =
            resolved.conversation.map_or(Value::Null, |id| serde_json::json!({"id": id}));
        let shape = Shape {
            id: response_id("resp_"),
            created_at: now(),
            model: parsed.chat.model.clone(),
            echo: parsed.echo,
            tools: parsed.tools,
            input_tokens: state.estimate_input_tokens(&parsed.chat),
        };
        let render = Render { shape, keep: resolved.keep };
        let (chat, left_out) = (parsed.chat, &parsed.hosted);
        crate::api::family::serve(&state, "responses", chat, parsed.stream, left_out, render).await
    }
}

/// What a Responses reply needs beyond the chat events: its shape, and how it is kept.
struct Render {
    shape: Shape,
    keep: Option<Keep>,
}

impl crate::api::Render for Render {
    type Encoder = Encoder;

    async fn complete(
        self,
        mut events: crate::dispatch::EventStream,
    ) -> Result<Response, ApiError> {
        let mut builder = Builder::new(self.shape, false);
        while let Some(event) = events.next().await {
            builder.push(&event?);
        }
        let response = builder.finish();
        if let Some(keep) = &self.keep {
            keep.put(&response);
        }
        Ok((StatusCode::OK, axum::Json(response)).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder { builder: Builder::new(self.shape, true), keep: self.keep }
    }
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
