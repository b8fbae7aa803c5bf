//! Ollama's replies: one JSON object, or NDJSON (a JSON object a line) ending with a line that
//! has `"done": true`, `done_reason` and the counts. Calls go out whole, their arguments as
//! objects, in a line of their own when their call ends.

use std::time::Instant;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::api::StreamEncoder;
use crate::chat::reply::{Part, Reply};
use crate::chat::{ChatEvent, Finish, Outcome};
use crate::error::ApiError;

/// Which endpoint the reply answers: `/api/chat` writes a `message`, `/api/generate` a
/// `response`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Chat,
    Generate,
}

/// What a reply needs beyond the chat events.
pub(crate) struct Render {
    pub(crate) kind: Kind,
    pub(crate) model: String,
    pub(crate) started: Instant,
}

/// The time now as Ollama writes it (RFC 3339, UTC).
fn created_at() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    format!("{}Z", crate::inspect::page::time(ms).replacen(' ', "T", 1))
}

/// A call's arguments as an object. They always are one (the parser's calls, and native ones
/// after `chat::native`'s fold); were they ever not, it is said in the log with their text, and
/// `{}` goes out.
fn arguments(json: &str) -> Value {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => {
            tracing::warn!(arguments = %json, "a call's arguments are not a JSON object; sent as {{}}");
            Value::Object(Map::new())
        }
    }
}

fn call(name: &str, index: usize, json: &str) -> Value {
    json!({"function": {"index": index, "name": name, "arguments": arguments(json)}})
}

impl Render {
    /// A line (or the whole reply) with these message fields.
    fn object(&self, text: &str, thinking: &str, calls: Vec<Value>) -> Map<String, Value> {
        let mut object = Map::new();
        object.insert("model".into(), json!(self.model));
        object.insert("created_at".into(), json!(created_at()));
        match self.kind {
            Kind::Chat => {
                let mut message = json!({"role": "assistant", "content": text});
                if !thinking.is_empty() {
                    message["thinking"] = json!(thinking);
                }
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                object.insert("message".into(), message);
            }
            Kind::Generate => {
                object.insert("response".into(), json!(text));
                if !thinking.is_empty() {
                    object.insert("thinking".into(), json!(thinking));
                }
            }
        }
        object
    }

    /// The last line's (or the whole reply's) ending and counts. Durations are in
    /// nanoseconds; a gateway loads nothing, so `load_duration` is 0, and it does not see
    /// the upstream's prompt and generation times apart, so those are 0 too.
    fn done(&self, object: &mut Map<String, Value>, outcome: &Outcome) {
        let reason = match outcome.finish {
            Finish::Length => "length",
            Finish::Stop | Finish::ToolCalls { .. } => "stop",
        };
        let total = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        object.insert("done".into(), json!(true));
        object.insert("done_reason".into(), json!(reason));
        object.insert("total_duration".into(), json!(total));
        object.insert("load_duration".into(), json!(0));
        object.insert("prompt_eval_count".into(), json!(outcome.usage.prompt_tokens));
        object.insert("prompt_eval_duration".into(), json!(0));
        object.insert("eval_count".into(), json!(outcome.usage.completion_tokens));
        object.insert("eval_duration".into(), json!(0));
    }
}

/// The answer to a request with nothing to answer: the model is "loaded".
pub(crate) fn loaded(kind: Kind, model: &str) -> Value {
    let render = Render { kind, model: model.to_owned(), started: Instant::now() };
    let mut object = render.object("", "", Vec::new());
    object.insert("done".into(), json!(true));
    object.insert("done_reason".into(), json!("load"));
    Value::Object(object)
}

impl crate::api::Render for Render {
    type Encoder = Encoder;

    async fn complete(self, events: crate::dispatch::EventStream) -> Result<Response, ApiError> {
        let reply = Reply::collect(events).await?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for part in &reply.parts {
            match part {
                Part::Text(piece) => text.push_str(piece),
                Part::Call(c) => calls.push(call(&c.name, calls.len(), &c.arguments)),
            }
        }
        let mut object = self.object(&text, &reply.reasoning, calls);
        self.done(&mut object, &reply.outcome);
        Ok((StatusCode::OK, axum::Json(Value::Object(object))).into_response())
    }

    fn encoder(self) -> Encoder {
        Encoder { render: self, calls: Vec::new() }
    }
}

/// Writes the NDJSON stream.
pub(crate) struct Encoder {
    render: Render,
    /// The calls being written: name and arguments so far, by index.
    calls: Vec<(String, String)>,
}

fn line(object: Map<String, Value>) -> Bytes {
    let mut line = Value::Object(object).to_string();
    line.push('\n');
    Bytes::from(line)
}

impl StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        let render = &self.render;
        let mut object = match event {
            ChatEvent::Text(text) => render.object(text, "", Vec::new()),
            ChatEvent::Reasoning(text) => render.object("", text, Vec::new()),
            ChatEvent::CallStart { index, name, .. } => {
                if self.calls.len() <= *index {
                    self.calls.resize_with(index + 1, Default::default);
                }
                if let Some(slot) = self.calls.get_mut(*index) {
                    *slot = (name.clone(), String::new());
                }
                return;
            }
            ChatEvent::CallArgs { index, json } => {
                if let Some((_, arguments)) = self.calls.get_mut(*index) {
                    arguments.push_str(json);
                }
                return;
            }
            ChatEvent::CallEnd { index, .. } => {
                let Some((name, arguments)) = self.calls.get(*index) else { return };
                render.object("", "", vec![call(name, *index, arguments)])
            }
            ChatEvent::Done(outcome) => {
                let mut object = render.object("", "", Vec::new());
                render.done(&mut object, outcome);
                out.push(line(object));
                return;
            }
        };
        object.insert("done".into(), json!(false));
        out.push(line(object));
    }

    fn error(&mut self, err: &ApiError) -> Bytes {
        let mut object = Map::new();
        object.insert("error".into(), json!(err.message()));
        line(object)
    }

    /// NDJSON has no comment: a client reads every line as JSON, so nothing keeps a silent
    /// stream alive (an empty frame writes no byte).
    fn keepalive(&self) -> Bytes {
        Bytes::new()
    }

    fn content_type(&self) -> &'static str {
        "application/x-ndjson"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Usage;

    #[test]
    fn a_streamed_call_is_one_line_with_its_arguments_as_an_object() {
        let render = Render { kind: Kind::Chat, model: "m".into(), started: Instant::now() };
        let mut encoder = crate::api::Render::encoder(render);
        let mut out = Vec::new();
        let mut events = vec![ChatEvent::Text("Let me check.".into())];
        events.extend(ChatEvent::call(0, "call_1", "get_weather", &["{\"city\":", "\"Paris\"}"]));
        let usage = Usage { prompt_tokens: 12, completion_tokens: 5, cached_tokens: 0 };
        let finish = Finish::ToolCalls { forced: false };
        events.push(ChatEvent::Done(Outcome { finish, usage, retried: Usage::default() }));
        for event in &events {
            encoder.encode(event, &mut out);
        }
        let lines: Vec<Value> = out
            .iter()
            .map(|b| serde_json::from_slice(b.strip_suffix(b"\n").unwrap()).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0]["message"]["content"], "Let me check.");
        assert_eq!(lines[1]["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
        assert_eq!(lines[1]["done"], false);
        assert_eq!(lines[2]["done"], true);
        assert_eq!(lines[2]["done_reason"], "stop");
        assert_eq!(lines[2]["prompt_eval_count"], 12);
        assert_eq!(lines[2]["eval_count"], 5);
        assert!(lines[2]["created_at"].as_str().unwrap().ends_with('Z'));
    }
}
