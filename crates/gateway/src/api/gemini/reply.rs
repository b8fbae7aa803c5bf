//! Gemini's replies: a `GenerateContentResponse`, or a stream of them, as SSE (`alt=sse`, what
//! the SDKs and the Gemini CLI ask for) or as one JSON array written as it goes (without
//! `alt`). Calls go out whole, as `functionCall` parts with their `args` as objects.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::api::StreamEncoder;
use crate::chat::reply::{Part, Reply};
use crate::chat::{ChatEvent, Finish, Outcome};
use crate::error::ApiError;

/// What a reply needs beyond the chat events.
pub(crate) struct Render {
    pub(crate) model: String,
    pub(crate) response_id: String,
    /// Stream as SSE (`alt=sse`); otherwise as a JSON array.
    pub(crate) sse: bool,
}

/// An error as Gemini writes one: `{"error": {"code", "message", "status"}}`.
pub(crate) fn error_body(err: &ApiError) -> Value {
    let code = err.status().as_u16();
    let status = match code {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "UNIMPLEMENTED",
        408 | 504 => "DEADLINE_EXCEEDED",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    json!({"error": {"code": code, "message": err.message(), "status": status}})
}

pub(crate) fn error(err: ApiError) -> Response {
    let mut response = (err.status(), axum::Json(error_body(&err))).into_response();
    if let Some(value) = err.retry_after().and_then(|v| axum::http::HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
    }
    response.extensions_mut().insert(err);
    response
}

/// A call as a `functionCall` part. A call's arguments are always an object (the parser's
/// calls, and native ones after `chat::native`'s fold); were one ever not, it is said in the
/// log with its text, and goes out with `{}`.
fn function_call(id: &str, name: &str, arguments: &str) -> Value {
    let args = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(args)) => Value::Object(args),
        _ => {
            tracing::warn!(arguments = %arguments, "a call's arguments are not a JSON object; sent as {{}}");
            Value::Object(Map::new())
        }
    };
    json!({"functionCall": {"id": id, "name": name, "args": args}})
}

impl Render {
    /// A response holding `parts`; with `outcome`, the last one (its finish and usage).
    fn response(&self, parts: Vec<Value>, outcome: Option<&Outcome>) -> Value {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        let mut response =
            json!({"candidates": [], "modelVersion": self.model, "responseId": self.response_id});
        if let Some(outcome) = outcome {
            let reason = match outcome.finish {
                Finish::Length => "MAX_TOKENS",
                Finish::Stop | Finish::ToolCalls { .. } => "STOP",
            };
            candidate["finishReason"] = json!(reason);
            let usage = outcome.usage;
            response["usageMetadata"] = json!({
                "promptTokenCount": usage.prompt_tokens,
                "candidatesTokenCount": usage.completion_tokens,
                "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
                "cachedContentTokenCount": usage.cached_tokens,
            });
        }
        response["candidates"] = json!([candidate]);
        response
    }
}

impl crate::api::Render for Render {
    type Encoder = Encoder;

    async fn complete(self, events: crate::dispatch::EventStream) -> Result<Response, ApiError> {
        let reply = Reply::collect(events).await?;
        let mut parts = Vec::new();
        if !reply.reasoning.is_empty() {
            parts.push(json!({"text": reply.reasoning, "thought": true}));
        }
        for part in &reply.parts {
            match part {
                Part::Text(text) => parts.push(json!({"text": text})),
                Part::Call(call) => {
                    parts.push(function_call(&call.id, &call.name, &call.arguments))
                }
            }
        }
        let response = self.response(parts, Some(&reply.outcome));
        Ok((StatusCode::OK, axum::Json(response)).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder { render: self, calls: Vec::new(), written: 0 }
    }
}

/// Writes the stream.
pub(crate) struct Encoder {
    render: Render,
    /// The calls being written: id, name and arguments so far, by index.
    calls: Vec<(String, String, String)>,
    /// Responses written (a JSON array puts a comma before each but the first).
    written: usize,
}

impl Encoder {
    fn frame(&mut self, response: &Value) -> Bytes {
        self.written += 1;
        if self.render.sse {
            return Bytes::from(format!("data: {response}\r\n\r\n"));
        }
        let separator = if self.written == 1 { "[" } else { ",\r\n" };
        Bytes::from(format!("{separator}{response}"))
    }
}

impl StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        let parts = match event {
            ChatEvent::Text(text) => vec![json!({"text": text})],
            ChatEvent::Reasoning(text) => vec![json!({"text": text, "thought": true})],
            ChatEvent::CallStart { index, id, name } => {
                if self.calls.len() <= *index {
                    self.calls.resize_with(index + 1, Default::default);
                }
                if let Some(slot) = self.calls.get_mut(*index) {
                    *slot = (id.clone(), name.clone(), String::new());
                }
                return;
            }
            ChatEvent::CallArgs { index, json } => {
                if let Some((_, _, arguments)) = self.calls.get_mut(*index) {
                    arguments.push_str(json);
                }
                return;
            }
            ChatEvent::CallEnd { index, .. } => {
                let Some((id, name, arguments)) = self.calls.get(*index) else { return };
                vec![function_call(id, name, arguments)]
            }
            ChatEvent::Done(outcome) => {
                let response = self.render.response(Vec::new(), Some(outcome));
                out.push(self.frame(&response));
                return;
            }
        };
        let response = self.render.response(parts, None);
        out.push(self.frame(&response));
    }

    fn error(&mut self, err: &ApiError) -> Bytes {
        let body = error_body(err);
        if self.render.sse {
            return Bytes::from(format!("data: {body}\r\n\r\n"));
        }
        let separator = if self.written == 0 { "[" } else { ",\r\n" };
        Bytes::from(format!("{separator}{body}]"))
    }

    fn keepalive(&self) -> Bytes {
        // An SSE comment; a JSON array has none (an empty frame writes no byte).
        if self.render.sse { Bytes::from_static(b": keep-alive\r\n\r\n") } else { Bytes::new() }
    }

    fn end(&mut self, out: &mut Vec<Bytes>) {
        if !self.render.sse {
            out.push(Bytes::from_static(if self.written == 0 { b"[]" } else { b"]" }));
        }
    }

    fn content_type(&self) -> &'static str {
        if self.render.sse {
            "text/event-stream; charset=utf-8"
        } else {
            "application/json; charset=utf-8"
        }
    }
}
