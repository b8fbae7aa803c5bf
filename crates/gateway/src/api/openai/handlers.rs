//! Thin handlers: read the wire request, run the pipeline (or pass through), encode.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::api::openai::sse::{Collector, Encoder};
use crate::api::openai::{error, wire};
use crate::config::Mode;
use crate::error::ApiError;
use crate::state::{AppState, Chain};
use crate::upstream::client::PayloadStream;
use crate::upstream::reply::Payload;

/// Checks the gateway key (`Authorization: Bearer <key>`), when keys are configured.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.config.api_keys.is_empty() {
        return Ok(());
    }
    match crate::api::bearer(headers) {
        Some(key) if crate::api::is_gateway_key(state, key) => Ok(()),
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
    body: Body,
) -> Response {
    match handle(state, &headers, body).await {
        Ok(response) => response,
        Err(err) => error::response(err),
    }
}

async fn handle(state: AppState, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
    // The key first: an unauthenticated body is never read.
    authorize(&state, headers)?;
    let body = crate::api::read_body(&state, headers, body).await?;
    let value: Value = serde_json::from_slice(&body).map_err(|err| {
        ApiError::invalid(
            format!("We could not parse the JSON body of your request. ({err}) The OpenAI API expects a JSON payload."),
            None,
        )
    })?;
    let parsed = wire::from_wire(&value)?;
    let routed = state.route(&parsed.chat.model)?;
    let Some((first, client, upstream_model)) = routed.chain.first().cloned() else {
        return Err(ApiError::Internal("a route without upstreams".into()));
    };
    // An Anthropic upstream cannot take OpenAI requests as they are: always emulate.
    let mode = if client.is_anthropic() { Mode::Emulate } else { routed.mode };
    tracing::info!(model = %parsed.chat.model, upstream = %first, upstream_model = %upstream_model, ?mode,
        stream = parsed.stream, tools = parsed.chat.tools.len(), "chat completion");
    match mode {
        Mode::Native => return passthrough(&state, &routed.chain, value, parsed.stream).await,
        // An upstream that refused native tools lately is not asked again until
        // native_refusal_secs have passed: each refusal costs a round trip.
        Mode::Auto
            if !parsed.chat.tools.is_empty() && state.refused_native(&first, &upstream_model) =>
        {
            tracing::debug!(upstream = %first, "this upstream refused native tools lately; emulating");
        }
        Mode::Auto if !parsed.chat.tools.is_empty() => {
            if let Some(response) = try_native(&state, &routed.chain, &value, parsed.stream).await?
            {
                return Ok(response);
            }
            state.remember_native_refusal(&first, &upstream_model);
            tracing::info!(upstream = %first, "the upstream rejected native tools; emulating");
        }
        Mode::Auto if value.get("tools").is_none() => {
            return passthrough(&state, &routed.chain, value, parsed.stream).await;
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
    let mut events = Box::pin(state.emulate(parsed.chat, parsed.stream));
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

/// Native mode: the request goes upstream as it is (with the upstream model name), and the
/// reply comes back through the same checks and limits as an emulated one.
async fn passthrough(
    state: &AppState,
    chain: &Chain,
    value: Value,
    stream: bool,
) -> Result<Response, ApiError> {
    let payloads = chain.relay(&value).await?;
    relay(state, chain, payloads, stream).await
}

/// Auto mode: native first; `None` when the upstream rejects the request (then emulate).
async fn try_native(
    state: &AppState,
    chain: &Chain,
    value: &Value,
    stream: bool,
) -> Result<Option<Response>, ApiError> {
    match chain.relay(value).await {
        Ok(payloads) => relay(state, chain, payloads, stream).await.map(Some),
        Err(ApiError::Upstream { .. } | ApiError::UpstreamRejected { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// A passthrough reply for the client: a JSON completion, or an SSE stream that ends with
/// `[DONE]` only when the upstream's did (else with an in-band error).
async fn relay(
    state: &AppState,
    chain: &Chain,
    mut payloads: PayloadStream,
    stream: bool,
) -> Result<Response, ApiError> {
    if !stream {
        return match payloads.next().await {
            Some(Ok(Payload::Body(value))) => {
                Ok((StatusCode::OK, axum::Json(value)).into_response())
            }
            Some(Ok(Payload::Event(_))) => Err(ApiError::Upstream {
                message:
                    "The upstream streamed its reply although the request asked for one JSON body."
                        .into(),
                detail: format!(
                    "{}: streamed a reply to stream=false",
                    chain.first().map_or("upstream", |(_, client, _)| client.shown())
                ),
            }),
            Some(Err(err)) => Err(err),
            None => Err(ApiError::Internal("the upstream reply ended without a payload".into())),
        };
    }
    let events = payloads.flat_map(|item| {
        let values = match item {
            Ok(Payload::Event(value)) => vec![Ok(value)],
            // The upstream answered a streaming request with one body: stream it as one chunk.
            Ok(Payload::Body(value)) => vec![Ok(body_as_chunk(value))],
            Err(err) => vec![Err(err)],
        };
        futures::stream::iter(values)
    });
    crate::api::stream_response(state, Instant::now(), Box::pin(events), RelayEncoder).await
}

/// A whole completion as the one chunk of a stream.
fn body_as_chunk(mut value: Value) -> Value {
    value["object"] = json!("chat.completion.chunk");
    if let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices {
            if let Some(message) = choice.as_object_mut().and_then(|c| c.remove("message")) {
                choice["delta"] = message;
            }
        }
    }
    value
}

/// Writes relayed chunks as they came, and `[DONE]` after a complete reply.
struct RelayEncoder;

impl crate::api::StreamEncoder for RelayEncoder {
    type Event = Value;

    fn encode(&mut self, event: &Value, out: &mut Vec<Bytes>) {
        out.push(Bytes::from(format!("data: {event}\n\n")));
    }

    fn error(&mut self, err: &ApiError) -> Bytes {
        error::chunk(err)
    }

    fn keepalive(&self) -> Bytes {
        Bytes::from_static(b": keepalive\n\n")
    }

    fn end(&mut self, out: &mut Vec<Bytes>) {
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
}

/// `GET /v1/models`: the configured models, or else the upstream's list.
pub(crate) async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(err) = authorize(&state, &headers) {
        return error::response(err);
    }
    let created = now();
    let ids = match state.model_ids().await {
        Ok(ids) => ids,
        Err(err) => return error::response(err),
    };
    let data: Vec<Value> = ids
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": created, "owned_by": "toolshim"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}
