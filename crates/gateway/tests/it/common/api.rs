//! Requests and replies on both API surfaces, for tests that run a case on each.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{
    DEADLINE, TestGateway, assert_error_shape, content_frame, role_frame, sse_data,
};

/// The two API surfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    OpenAi,
    Anthropic,
}

pub(crate) const APIS: [Api; 2] = [Api::OpenAi, Api::Anthropic];

/// An error response, read in the family's shape.
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: StatusCode,
    /// OpenAI `error.type`, or Anthropic `error.type`.
    pub(crate) kind: String,
    /// OpenAI `error.code` (always `None` for Anthropic).
    pub(crate) code: Option<String>,
    pub(crate) message: String,
    pub(crate) retry_after: Option<String>,
    pub(crate) body: Value,
}

/// A streamed reply folded, whether it finished or ended in an in-band error.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    pub(crate) text: String,
    /// (name, concatenated arguments) per call.
    pub(crate) calls: Vec<(String, String)>,
    /// OpenAI `finish_reason` or Anthropic `stop_reason`.
    pub(crate) finish: Option<String>,
    /// `[DONE]` or `message_stop` came.
    pub(crate) finished: bool,
    /// The error object of an in-band error (always the last event).
    pub(crate) error: Option<Value>,
}

impl Api {
    pub(crate) fn request(self, user: &str, with_tools: bool, stream: bool) -> Value {
        let mut body = match (self, with_tools) {
            (Api::OpenAi, true) => crate::common::request(user),
            (Api::OpenAi, false) => crate::common::plain_request(user),
            (Api::Anthropic, true) => crate::anthropic::request(user),
            (Api::Anthropic, false) => {
                let mut body = crate::anthropic::request(user);
                body.as_object_mut().unwrap().remove("tools");
                body
            }
        };
        body["stream"] = json!(stream);
        body
    }

    /// How many calls a whole (not streamed) reply in the family's shape makes.
    pub(crate) fn n_calls(self, value: &Value) -> usize {
        match self {
            Api::OpenAi => {
                value["choices"][0]["message"]["tool_calls"].as_array().map_or(0, Vec::len)
            }
            Api::Anthropic => value["content"]
                .as_array()
                .map_or(0, |blocks| blocks.iter().filter(|b| b["type"] == "tool_use").count()),
        }
    }

    pub(crate) fn path(self) -> &'static str {
        match self {
            Api::OpenAi => "/v1/chat/completions",
            Api::Anthropic => "/v1/messages",
        }
    }

    /// The family's own request headers on a request builder.
    pub(crate) fn headers(self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Api::OpenAi => builder,
            Api::Anthropic => builder.header("anthropic-version", "2023-06-01"),
        }
    }

    pub(crate) async fn send(self, gw: &TestGateway, body: &Value) -> reqwest::Response {
        let builder = self.headers(gw.http().post(gw.url(self.path())));
        builder.json(body).send().await.unwrap()
    }

    /// Sends a raw body (any bytes) with `content-type: application/json`.
    pub(crate) async fn send_raw(
        self,
        gw: &TestGateway,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        let builder = self.headers(gw.http().post(gw.url(self.path())));
        builder.header("content-type", "application/json").body(body).send().await.unwrap()
    }

    /// `openai` or `anthropic`, whichever belongs to this family.
    pub(crate) fn pick<'a>(self, openai: &'a str, anthropic: &'a str) -> &'a str {
        match self {
            Api::OpenAi => openai,
            Api::Anthropic => anthropic,
        }
    }

    /// Reads an error response, checking it is JSON in the family's shape.
    pub(crate) async fn error(self, response: reqwest::Response) -> HttpError {
        let status = response.status();
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let retry_after = header("retry-after");
        let text = response.text().await.unwrap();
        assert!(!status.is_success(), "{self:?}: expected an error, got {status}: {text}");
        assert!(content_type.starts_with("application/json"), "{status} {content_type}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let error = match self {
            Api::OpenAi => assert_error_shape(&body).clone(),
            Api::Anthropic => {
                assert_eq!(body["type"], "error", "{body}");
                assert!(body["error"]["type"].is_string(), "{body}");
                assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
                body["error"].clone()
            }
        };
        HttpError {
            status,
            kind: error["type"].as_str().unwrap().to_owned(),
            code: error.get("code").and_then(Value::as_str).map(str::to_owned),
            message: error["message"].as_str().unwrap().to_owned(),
            retry_after,
            body,
        }
    }

    /// Sends a request that must fail before streaming began.
    pub(crate) async fn fails(self, gw: &TestGateway, body: &Value) -> HttpError {
        let response = within(self.send(gw, body)).await;
        within(self.error(response)).await
    }

    /// Sends a streaming request that must start (200) and folds what arrives.
    pub(crate) async fn streams(self, gw: &TestGateway, body: &Value) -> Folded {
        let response = within(self.send(gw, body)).await;
        assert_eq!(response.status(), StatusCode::OK, "{self:?}");
        let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(content_type.starts_with("text/event-stream"), "{content_type}");
        let text = within(response.text()).await.unwrap();
        self.fold(&text)
    }

    /// Sends a request that must succeed, streamed (which must end cleanly) or not: its
    /// text and finish reason.
    pub(crate) async fn answers(
        self,
        gw: &TestGateway,
        body: &Value,
        stream: bool,
    ) -> (String, String) {
        if stream {
            let folded = self.streams(gw, body).await;
            assert!(folded.finished && folded.error.is_none(), "{self:?}: {folded:?}");
            (folded.text, folded.finish.unwrap())
        } else {
            self.completes(gw, body).await
        }
    }

    /// Sends a non-streaming request that must succeed: its text and finish reason.
    pub(crate) async fn completes(self, gw: &TestGateway, body: &Value) -> (String, String) {
        let response = within(self.send(gw, body)).await;
        assert_eq!(response.status(), StatusCode::OK, "{self:?}");
        let value: Value = within(response.json()).await.unwrap();
        match self {
            Api::OpenAi => {
                let choice = &value["choices"][0];
                let text = choice["message"]["content"].as_str().unwrap_or_default().to_owned();
                (text, choice["finish_reason"].as_str().unwrap().to_owned())
            }
            Api::Anthropic => {
                let text = value["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<String>();
                (text, value["stop_reason"].as_str().unwrap().to_owned())
            }
        }
    }

    /// Folds a streamed body, checking the framing and that an error is the last event.
    pub(crate) fn fold(self, body: &str) -> Folded {
        let mut out = Folded::default();
        match self {
            Api::OpenAi => {
                let payloads = sse_data(body);
                for (i, payload) in payloads.iter().enumerate() {
                    let last = i + 1 == payloads.len();
                    if payload == "[DONE]" {
                        assert!(last, "[DONE] is last: {body}");
                        out.finished = true;
                        continue;
                    }
                    let chunk: Value = serde_json::from_str(payload).unwrap();
                    if chunk.get("error").is_some() {
                        assert!(last, "nothing after an in-band error: {body}");
                        out.error = Some(assert_error_shape(&chunk).clone());
                        continue;
                    }
                    assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
                    let Some(choice) = chunk["choices"].get(0) else { continue };
                    let delta = &choice["delta"];
                    if let Some(text) = delta["content"].as_str() {
                        out.text.push_str(text);
                    }
                    for call in delta["tool_calls"].as_array().into_iter().flatten() {
                        let fragment = call["function"]["arguments"].as_str().unwrap_or_default();
                        match call["function"]["name"].as_str() {
                            Some(name) => out.calls.push((name.to_owned(), fragment.to_owned())),
                            None => out.calls.last_mut().unwrap().1.push_str(fragment),
                        }
                    }
                    if let Some(reason) = choice["finish_reason"].as_str() {
                        out.finish = Some(reason.to_owned());
                    }
                }
            }
            Api::Anthropic => {
                assert!(body.ends_with("\n\n"), "the body ends after an event: {body:?}");
                let frames: Vec<&str> = body.trim_end().split("\n\n").collect();
                for (i, frame) in frames.iter().enumerate() {
                    let last = i + 1 == frames.len();
                    let (name, data) = frame
                        .strip_prefix("event: ")
                        .and_then(|rest| rest.split_once("\ndata: "))
                        .unwrap_or_else(|| panic!("not an `event:` + `data:` frame: {frame:?}"));
                    assert!(!data.contains('\n'), "one data line: {frame:?}");
                    let value: Value = serde_json::from_str(data).unwrap();
                    assert_eq!(value["type"], name, "{frame}");
                    match name {
                        "error" => {
                            assert!(last, "nothing after an error event: {body}");
                            let error = value["error"].clone();
                            assert!(error["type"].is_string() && error["message"].is_string());
                            out.error = Some(error);
                        }
                        "message_stop" => {
                            assert!(last, "message_stop is last: {body}");
                            out.finished = true;
                        }
                        "content_block_start" if value["content_block"]["type"] == "tool_use" => {
                            let name = value["content_block"]["name"].as_str().unwrap();
                            out.calls.push((name.to_owned(), String::new()));
                        }
                        "content_block_delta" => {
                            let delta = &value["delta"];
                            if let Some(text) = delta["text"].as_str() {
                                out.text.push_str(text);
                            }
                            if let Some(json) = delta["partial_json"].as_str() {
                                out.calls.last_mut().unwrap().1.push_str(json);
                            }
                        }
                        "message_delta" => {
                            out.finish = value["delta"]["stop_reason"].as_str().map(str::to_owned);
                        }
                        _ => {}
                    }
                }
            }
        }
        out
    }
}

/// Awaits `future`, failing the test instead of hanging past `DEADLINE`.
pub(crate) async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(DEADLINE, future).await.expect("no answer within the deadline")
}

/// The start of an OpenAI SSE reply carrying `text`: the role chunk, then content deltas of
/// `n` characters (no finish, no `[DONE]`: callers add what the case needs).
pub(crate) fn text_frames(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut frames = vec![role_frame()];
    frames.extend(chars.chunks(n).map(|piece| content_frame(&piece.iter().collect::<String>())));
    frames
}
