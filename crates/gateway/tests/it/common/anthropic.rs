//! The scripted Messages upstream (`api = "anthropic"`): every request's headers and body
//! kept, the reply streamed as Anthropic streams it.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use toolshim_gateway::{Mode, UpstreamApi};

use crate::common::TestGateway;

/// How the upstream answers.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// This text, in 5-byte deltas of one text block (usage: 77 in, 12 out).
    Text(&'static str),
    /// As a model with native tool use (usage: 40 in, 21 out): to a request that declares
    /// tools (and does not say `tool_choice: none`), a thinking block, "Let me check." and one
    /// `tool_use` of the first tool, id `toolu_01`, input `{"city": "Paris"}` in three pieces;
    /// to any other, a thinking block and "It is sunny.".
    Native,
}

pub(crate) struct AnthropicUpstream {
    pub(crate) url: String,
    pub(crate) seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

impl AnthropicUpstream {
    /// A gateway whose upstream this is (`api = "anthropic"`), with `mode`.
    pub(crate) async fn gateway(&self, mode: Mode) -> TestGateway {
        let url = self.url.clone();
        crate::common::spawn_gateway(move |config| {
            config.upstream.url = url;
            config.upstream.api = UpstreamApi::Anthropic;
            config.mode = mode;
        })
        .await
    }

    /// The bodies of the requests so far.
    pub(crate) fn bodies(&self) -> Vec<Value> {
        self.seen.lock().unwrap().iter().map(|(_, body)| body.clone()).collect()
    }
}

pub(crate) async fn start(answer: Answer) -> AnthropicUpstream {
    let seen: Arc<Mutex<Vec<(HeaderMap, Value)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let app = Router::new().route(
        "/v1/messages",
        post(move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
            let record = Arc::clone(&record);
            let answer = answer.clone();
            async move {
                let sse = events(&answer, &body);
                record.lock().unwrap().push((headers, body));
                ([("content-type", "text/event-stream")], sse)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    crate::common::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    AnthropicUpstream { url, seen }
}

/// The whole event stream of the answer to `body`.
fn events(answer: &Answer, body: &Value) -> String {
    let mut sse = String::new();
    let mut push = |data: Value| {
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        sse.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    };
    let delta = |index: u64, delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
    let block = |index: u64, block: Value| json!({"type": "content_block_start", "index": index, "content_block": block});
    let stop = |index: u64| json!({"type": "content_block_stop", "index": index});
    let (input, output) = if matches!(answer, Answer::Text(_)) { (77, 12) } else { (40, 21) };
    push(json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "usage": {"input_tokens": input, "output_tokens": 1}}}));
    let mut reason = "end_turn";
    match answer {
        Answer::Text(text) => {
            push(block(0, json!({"type": "text", "text": ""})));
            for piece in text.as_bytes().chunks(5) {
                let text = String::from_utf8_lossy(piece);
                push(delta(0, json!({"type": "text_delta", "text": text})));
            }
            push(stop(0));
        }
        Answer::Native => {
            let tool =
                body["tools"][0]["name"].as_str().filter(|_| body["tool_choice"]["type"] != "none");
            push(block(0, json!({"type": "thinking", "thinking": ""})));
            push(delta(
                0,
                json!({"type": "thinking_delta", "thinking": "The user wants weather."}),
            ));
            push(delta(0, json!({"type": "signature_delta", "signature": "c2ln"})));
            push(stop(0));
            push(block(1, json!({"type": "text", "text": ""})));
            let text = if tool.is_some() { "Let me check." } else { "It is sunny." };
            push(delta(1, json!({"type": "text_delta", "text": text})));
            push(stop(1));
            if let Some(tool) = tool {
                push(block(
                    2,
                    json!({"type": "tool_use", "id": "toolu_01", "name": tool, "input": {}}),
                ));
                for piece in ["{\"ci", "ty\": \"Pa", "ris\"}"] {
                    push(delta(2, json!({"type": "input_json_delta", "partial_json": piece})));
                }
                push(stop(2));
                reason = "tool_use";
            }
        }
    }
    push(json!({"type": "message_delta", "delta": {"stop_reason": reason},
        "usage": {"output_tokens": output}}));
    push(json!({"type": "message_stop"}));
    sse
}
