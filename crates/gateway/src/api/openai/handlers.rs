//! Thin handlers: read the wire request, run the pipeline (or pass through), encode.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::api::family::{Family, Front};
use crate::api::openai::repair::{Repair, repaired};
use crate::api::openai::sse::{self, Encoder};
use crate::api::openai::{error, wire};
use crate::chat::reply::Reply;
use crate::chat::{ChatEvent, ToolChoice};
use crate::dispatch::Plan;
use crate::error::ApiError;
use crate::state::{AppState, Chain};
use crate::upstream::client::PayloadStream;
use crate::upstream::reply::Payload;

/// Checks the gateway key (`Authorization: Bearer <key>`), when keys are configured.
pub(crate) fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if !state.config.auth_on() {
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

/// `POST /v1/chat/completions`: passed through to an upstream that takes Chat Completions
/// (native or auto), else served from the neutral request.
pub(crate) struct ChatCompletions;

impl Family for ChatCompletions {
    /// The body as it came (for a passthrough) and as read.
    const FRONT: Front = Front { admit: authorize, not_json, error: |err, _| error::response(err) };
    type Request = (Value, wire::Parsed);
    const NAME: &'static str = "chat_completions";

    fn parse(body: Value) -> Result<(Value, wire::Parsed), ApiError> {
        let parsed = wire::from_wire(&body)?;
        Ok((body, parsed))
    }

    fn model((_, parsed): &(Value, wire::Parsed)) -> &str {
        &parsed.chat.model
    }

    async fn serve(
        state: AppState,
        _headers: &HeaderMap,
        (value, parsed): (Value, wire::Parsed),
    ) -> Result<Response, ApiError> {
        handle(state, value, parsed).await
    }
}

/// A body that is not JSON, in OpenAI's words (Chat Completions, Responses).
pub(crate) fn not_json(err: &serde_json::Error) -> ApiError {
    ApiError::invalid(
        format!(
            "We could not parse the JSON body of your request. ({err}) The OpenAI API expects a JSON payload."
        ),
        None,
    )
}

async fn handle(state: AppState, value: Value, parsed: wire::Parsed) -> Result<Response, ApiError> {
    // A passthrough upstream sees only the tools `allowed_tools` allows, and the reply's
    // calls to any other are dropped.
    let (value, allowed) = match &parsed.allowed {
        Some(names) => {
            (wire::narrowed(value, names, &parsed.chat.tool_choice), Some(AllowedCalls::new(names)))
        }
        None => (value, None),
    };
    // A streamed reply relayed natively is asked for its usage (for the key's usage and token
    // limits, and the trace); the client gets it only when it asked (`relay`).
    let asked = Asked { stream: parsed.stream, usage: parsed.include_usage };
    let value = match value {
        Value::Object(mut object) if asked.stream && !asked.usage => {
            let options = object.entry("stream_options").or_insert_with(|| serde_json::json!({}));
            if let Some(options) = options.as_object_mut() {
                options.insert("include_usage".into(), Value::Bool(true));
            }
            Value::Object(object)
        }
        other => other,
    };
    let routed = state.route(&parsed.chat.model)?;
    let Some((first, client, upstream_model)) = routed.chain.first().cloned() else {
        return Err(ApiError::Internal("a route without upstreams".into()));
    };
    // An upstream of another API (Anthropic's) takes no passthrough: the request is served
    // from the neutral request, natively or emulated as the mode says.
    if !client.takes_chat_completions() {
        return neutral(state, parsed).await;
    }
    let plan = crate::dispatch::plan(&routed, &parsed.chat).await;
    tracing::info!(model = %parsed.chat.model, upstream = %first, upstream_model = %upstream_model, ?plan,
        stream = parsed.stream, tools = parsed.chat.tools.len(), "chat completion");
    // A native reply to a request with tools is read for calls its upstream left in the
    // text (issue 24), unless `native_repair` is off.
    let repair = (state.config.native_repair
        && !parsed.chat.tools.is_empty()
        && parsed.chat.tool_choice != ToolChoice::None)
        .then_some(Repair {
            parsed: &parsed,
            reasoning_calls: routed.settings.reasoning_calls,
            instead_of: None,
        });
    // A native request the model is unsure needs a call at all goes without its tools.
    let native = matches!(plan, Plan::Native | Plan::TryNative) && parsed.custom.is_empty();
    let wire = client.wire();
    let unsure = native && {
        let probe =
            crate::dispatch::unsure_of_calls(&state, &routed.chain, &parsed.chat, &value, wire);
        Box::pin(probe).await
    };
    if unsure {
        // Read back as any reply is (not relayed as the engine wrote it): without tools, its
        // text is text.
        crate::inspect::served(&routed.chain, "plain");
        let value_with_tools = value;
        let value = wire.without_calls(&value_with_tools);
        let mut plain = parsed.clone();
        plain.chat.tools.clear();
        plain.chat.tool_choice = ToolChoice::None;
        let repair = Repair {
            parsed: &plain,
            reasoning_calls: routed.settings.reasoning_calls,
            instead_of: Some((&value_with_tools, &parsed)),
        };
        return passthrough(&state, &routed.chain, value, asked, None, Some(repair)).await;
    }
    let mode = match plan {
        Plan::Native => "native",
        Plan::TryNative => "native",
        Plan::Plain if value.get("tools").is_none() => "passthrough",
        Plan::Plain => "plain",
        Plan::Emulate => "emulate",
    };
    crate::inspect::served(&routed.chain, mode);
    match plan {
        Plan::Native => {
            return passthrough(&state, &routed.chain, value, asked, allowed, repair).await;
        }
        // Custom tools are OpenAI's own: an upstream that serves another model seldom
        // takes them, and its refusal would be remembered against every native request.
        Plan::TryNative if !parsed.custom.is_empty() => {
            tracing::debug!(upstream = %first, "custom tools; emulating");
            crate::inspect::served(&routed.chain, "emulate");
        }
        Plan::TryNative => {
            let native = try_native(&state, &routed.chain, &value, asked, allowed, repair).await?;
            if let Some(response) = native {
                return Ok(response);
            }
        }
        Plan::Plain if value.get("tools").is_none() => {
            return passthrough(&state, &routed.chain, value, asked, allowed, None).await;
        }
        Plan::Plain | Plan::Emulate => {}
    }
    emulate(state, routed, parsed).await
}

async fn emulate(
    state: AppState,
    routed: crate::state::Routed,
    parsed: wire::Parsed,
) -> Result<Response, ApiError> {
    let stream = parsed.stream;
    let (model, include_usage, legacy) =
        (parsed.chat.model.clone(), parsed.include_usage, parsed.legacy);
    let name = crate::dispatch::naming_images(&parsed.chat);
    let events = crate::dispatch::emulated(&state, routed, parsed.chat, stream)
        .map(move |event| event.map_err(&name));
    let shape = Shape { stream, model, include_usage, legacy, custom: parsed.custom };
    respond(&state, events, shape).await
}

/// The request served from its neutral form as `dispatch::serve` plans it (native in the
/// upstream's own API, or emulated).
async fn neutral(state: AppState, parsed: wire::Parsed) -> Result<Response, ApiError> {
    let shape = Shape {
        stream: parsed.stream,
        model: parsed.chat.model.clone(),
        include_usage: parsed.include_usage,
        legacy: parsed.legacy,
        custom: parsed.custom,
    };
    crate::api::family::serve(&state, "chat completion", parsed.chat, parsed.stream, &[], shape)
        .await
}

/// How a reply is written.
pub(crate) struct Shape {
    pub(crate) stream: bool,
    pub(crate) model: String,
    pub(crate) include_usage: bool,
    /// `function_call` instead of `tool_calls`.
    pub(crate) legacy: bool,
    /// Custom tools, whose calls are written as custom calls.
    pub(crate) custom: std::collections::HashSet<String>,
}

/// Chat events as the client's reply: one completion, or a stream.
pub(crate) async fn respond(
    state: &AppState,
    events: impl futures::Stream<Item = Result<ChatEvent, ApiError>> + Send + 'static,
    shape: Shape,
) -> Result<Response, ApiError> {
    let stream = shape.stream;
    crate::api::reply(state, Instant::now(), Box::pin(events), stream, shape).await
}

impl crate::api::Render for Shape {
    type Encoder = Encoder;

    async fn complete(self, events: crate::dispatch::EventStream) -> Result<Response, ApiError> {
        let reply = Reply::collect(events).await?;
        let completion =
            sse::completion(reply, &self.custom, completion_id(), now(), self.model, self.legacy);
        Ok((StatusCode::OK, axum::Json(completion)).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder::new(completion_id(), now(), self.model, self.include_usage, self.legacy)
            .custom_tools(self.custom)
    }
}

/// Native mode: the request goes upstream as it is (with the upstream model name), and the
/// reply comes back through the same checks and limits as an emulated one.
async fn passthrough(
    state: &AppState,
    chain: &Chain,
    value: Value,
    asked: Asked,
    allowed: Option<AllowedCalls>,
    repair: Option<Repair<'_>>,
) -> Result<Response, ApiError> {
    crate::inspect::relayed("passthrough", &value);
    let payloads =
        chain.relay(&value).await.inspect_err(|err| crate::inspect::failed(err, None))?;
    match repair {
        Some(repair) => repaired(state, chain, &value, payloads, repair).await,
        None => relay(state, chain, payloads, asked, allowed).await,
    }
}

/// Auto mode: native first; `None` when the upstream refuses the request or fails (then
/// emulate; `dispatch::after_refusal` says which refusals are remembered).
async fn try_native(
    state: &AppState,
    chain: &Chain,
    value: &Value,
    asked: Asked,
    allowed: Option<AllowedCalls>,
    repair: Option<Repair<'_>>,
) -> Result<Option<Response>, ApiError> {
    crate::inspect::relayed("native", value);
    match chain.relay(value).await {
        Ok(payloads) => match repair {
            Some(repair) => repaired(state, chain, value, payloads, repair).await.map(Some),
            None => relay(state, chain, payloads, asked, allowed).await.map(Some),
        },
        Err(err) => match crate::dispatch::after_refusal(chain, err.clone()) {
            Some(err) => {
                crate::inspect::failed(&err, None);
                Err(err)
            }
            None => {
                crate::inspect::failed(&err, Some("emulate"));
                Ok(None)
            }
        },
    }
}

/// A passthrough reply for the client: a JSON completion, or an SSE stream that ends with
/// `[DONE]` only when the upstream's did (else with an in-band error).
async fn relay(
    state: &AppState,
    chain: &Chain,
    mut payloads: PayloadStream,
    asked: Asked,
    mut allowed: Option<AllowedCalls>,
) -> Result<Response, ApiError> {
    if !asked.stream {
        return match payloads.next().await {
            Some(Ok(Payload::Body(mut value))) => {
                if let Some(allowed) = &mut allowed {
                    allowed.completion(&mut value);
                }
                let spent = crate::keys::Spent::new();
                spent.reported(&value);
                let mut response = (StatusCode::OK, axum::Json(value)).into_response();
                response.extensions_mut().insert(spent);
                Ok(response)
            }
            Some(Ok(Payload::Event(_))) => Err(ApiError::Upstream {
                fault: crate::error::UpstreamFault::Unreadable,
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
    // What the reply cost, when the upstream says (`stream_options.include_usage`).
    let spent = crate::keys::Spent::new();
    let tap = spent.clone();
    let mut chunk = move |item| match item {
        Ok(Payload::Event(mut value)) => {
            if let Some(allowed) = &mut allowed {
                allowed.chunk(&mut value);
            }
            tap.reported(&value);
            // Usage the gateway asked for, and the client did not: the chunk that carries
            // it alone is left out, and the field of the others.
            if !asked.usage {
                if let Some(object) = value.as_object_mut() {
                    object.remove("usage");
                }
                if value["choices"].as_array().is_some_and(Vec::is_empty) {
                    return None;
                }
            }
            Some(Ok(value))
        }
        // The upstream answered a streaming request with one body: stream it as one chunk.
        Ok(Payload::Body(mut value)) => {
            if let Some(allowed) = &mut allowed {
                allowed.completion(&mut value);
            }
            Some(Ok(body_as_chunk(value)))
        }
        Err(err) => Some(Err(err)),
    };
    let events = payloads.filter_map(move |item| std::future::ready(chunk(item)));
    let mut response =
        crate::api::stream_response(state, Instant::now(), Box::pin(events), RelayEncoder).await?;
    response.extensions_mut().insert(spent);
    Ok(response)
}

/// A relayed call to a tool `allowed_tools` does not allow is dropped, and the log says so.
fn dropped_call(call: &Value) {
    let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("");
    tracing::warn!(
        tool = name,
        "a relayed call to a tool allowed_tools does not allow was dropped"
    );
}

/// The calls of a relayed reply kept to the tools `allowed_tools` allows (the upstream saw
/// only those, but a model may still name another): the others are dropped, the rest
/// renumbered, and a reply left without calls finishes with `stop`.
struct AllowedCalls {
    names: std::collections::HashSet<String>,
    /// The upstream's call index → the client's (`None`: dropped).
    slots: std::collections::HashMap<u64, Option<u64>>,
    kept: u64,
}

impl AllowedCalls {
    fn new(names: &[String]) -> AllowedCalls {
        AllowedCalls {
            names: names.iter().cloned().collect(),
            slots: std::collections::HashMap::new(),
            kept: 0,
        }
    }

    fn allows(&self, call: &Value) -> bool {
        call.pointer("/function/name")
            .and_then(Value::as_str)
            .is_some_and(|n| self.names.contains(n))
    }

    /// One streamed chunk: a call's first delta carries its name and decides its fate.
    fn chunk(&mut self, value: &mut Value) {
        for choice in value.get_mut("choices").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                    calls.retain_mut(|call| {
                        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                        let slot = match self.slots.get(&index) {
                            Some(slot) => *slot,
                            None => {
                                let slot = self.allows(call).then_some(self.kept);
                                if slot.is_none() {
                                    dropped_call(call);
                                }
                                self.kept += u64::from(slot.is_some());
                                self.slots.insert(index, slot);
                                slot
                            }
                        };
                        match (slot, call.as_object_mut()) {
                            (Some(slot), Some(call)) => {
                                call.insert("index".into(), Value::from(slot));
                                true
                            }
                            _ => false,
                        }
                    });
                    if calls.is_empty() {
                        delta.remove("tool_calls");
                    }
                }
            }
            self.finish(choice);
        }
    }

    /// A whole completion.
    fn completion(&mut self, value: &mut Value) {
        for choice in value.get_mut("choices").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) {
                if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                    calls.retain(|call| {
                        let allowed = self.allows(call);
                        if !allowed {
                            dropped_call(call);
                        }
                        allowed
                    });
                    self.kept += calls.len() as u64;
                    if calls.is_empty() {
                        message.remove("tool_calls");
                    }
                }
            }
            self.finish(choice);
        }
    }

    fn finish(&self, choice: &mut Value) {
        if let Some(reason) = choice.get_mut("finish_reason") {
            if self.kept == 0 && reason == "tool_calls" {
                *reason = Value::String("stop".into());
            }
        }
    }
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

/// How the client asked for its reply: streamed or not, with usage (`include_usage`) or not.
#[derive(Debug, Clone, Copy)]
struct Asked {
    stream: bool,
    usage: bool,
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
