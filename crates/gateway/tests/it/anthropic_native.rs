//! Issue 25: native tools toward an Anthropic upstream. In `native` and `auto` modes every
//! family's request goes to a Messages upstream with its tools declared (`input_schema`), the
//! history as `tool_use` and `tool_result` blocks, and the reply's `tool_use` blocks come back
//! as the family's calls, streamed and not; `emulate` still writes the contract.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use toolshim_gateway::{Mode, UpstreamApi};

use crate::common::api::{Api, within};
use crate::common::{TestGateway, spawn_gateway};
use crate::native_families::FAMILIES;

/// A Messages upstream with native tool use: to a request that declares tools it streams a
/// thinking block, a text block and one `tool_use` of the first tool (its input in three
/// pieces); to one without, a text answer. Every request body is kept.
struct Upstream {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

async fn upstream() -> Upstream {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = Arc::clone(&seen);
    let app = Router::new().route(
        "/v1/messages",
        post(move |axum::Json(body): axum::Json<Value>| {
            let record = Arc::clone(&record);
            async move {
                let tool = body["tools"][0]["name"].as_str().map(str::to_owned);
                let calls = tool.is_some() && body["tool_choice"]["type"] != "none";
                record.lock().unwrap().push(body);
                let mut sse = String::new();
                let mut push = |data: Value| {
                    let kind = data["type"].as_str().unwrap().to_owned();
                    sse.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
                };
                push(json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                    "role": "assistant", "content": [], "usage": {"input_tokens": 40, "output_tokens": 1}}}));
                let delta = |index: u64, delta: Value| {
                    json!({"type": "content_block_delta", "index": index, "delta": delta})
                };
                push(json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "thinking", "thinking": ""}}));
                push(delta(0, json!({"type": "thinking_delta", "thinking": "The user wants weather."})));
                push(delta(0, json!({"type": "signature_delta", "signature": "c2ln"})));
                push(json!({"type": "content_block_stop", "index": 0}));
                push(json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "text", "text": ""}}));
                let text = if calls { "Let me check." } else { "It is sunny." };
                push(delta(1, json!({"type": "text_delta", "text": text})));
                push(json!({"type": "content_block_stop", "index": 1}));
                if let (true, Some(tool)) = (calls, tool) {
                    push(json!({"type": "content_block_start", "index": 2, "content_block":
                        {"type": "tool_use", "id": "toolu_01", "name": tool, "input": {}}}));
                    for piece in ["{\"ci", "ty\": \"Pa", "ris\"}"] {
                        push(delta(2, json!({"type": "input_json_delta", "partial_json": piece})));
                    }
                    push(json!({"type": "content_block_stop", "index": 2}));
                }
                let stop = if calls { "tool_use" } else { "end_turn" };
                push(json!({"type": "message_delta", "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": 21}}));
                push(json!({"type": "message_stop"}));
                ([("content-type", "text/event-stream")], sse)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    crate::common::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Upstream { url, seen }
}

async fn gateway(upstream: &Upstream, mode: Mode) -> TestGateway {
    let url = upstream.url.clone();
    spawn_gateway(move |config| {
        config.upstream.url = url;
        config.upstream.api = UpstreamApi::Anthropic;
        config.mode = mode;
    })
    .await
}

#[tokio::test]
async fn issue_25_every_family_calls_natively_through_an_anthropic_upstream() {
    let weather = vec![("get_weather".to_owned(), json!({"city": "Paris"}))];
    for mode in [Mode::Native, Mode::Auto] {
        let upstream = upstream().await;
        let gw = gateway(&upstream, mode).await;
        for family in FAMILIES {
            for stream in [false, true] {
                let body = family.request("Weather in Paris?", stream);
                let (calls, text) = family.calls(&gw, &body).await;
                assert_eq!(calls, weather, "{mode:?} {family:?} stream={stream}");
                assert_eq!(text, "Let me check.", "{mode:?} {family:?} stream={stream}");
            }
        }
        for sent in upstream.seen.lock().unwrap().iter() {
            assert_eq!(sent["tools"][0]["name"], "get_weather", "{mode:?}: {sent:#}");
            assert_eq!(sent["tools"][0]["input_schema"]["type"], "object", "{sent:#}");
            assert_eq!(sent["tool_choice"]["type"], "auto", "{sent:#}");
            let system = sent["system"].as_str().unwrap_or_default();
            assert!(!system.contains("# Tools"), "no contract natively: {sent:#}");
        }
    }
    // Emulated, the tools are in the prompt and not declared.
    let upstream = upstream().await;
    let gw = gateway(&upstream, Mode::Emulate).await;
    let response = within(Api::OpenAi.send(&gw, &Api::OpenAi.request("Hi", true, false))).await;
    assert!(response.status().is_success());
    let sent = upstream.seen.lock().unwrap()[0].clone();
    assert!(sent.get("tools").is_none(), "{sent:#}");
    assert!(sent["system"].as_str().unwrap().contains("# Tools"), "{sent:#}");
}

/// A second turn natively: the earlier call goes back as a `tool_use` block and its result as
/// a `tool_result` block in the next user turn, and the answer comes back as text.
#[tokio::test]
async fn issue_25_a_tool_loop_round_trips_through_an_anthropic_upstream() {
    let upstream = upstream().await;
    let gw = gateway(&upstream, Mode::Native).await;
    let mut body = Api::OpenAi.request("Weather in Paris?", true, false);
    let first: Value = within(Api::OpenAi.send(&gw, &body)).await.json().await.unwrap();
    let message = first["choices"][0]["message"].clone();
    assert_eq!(message["reasoning_content"], Value::Null, "reasoning is shown only when asked");
    let id = message["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(id, "toolu_01", "the upstream's call id is kept");
    body["messages"]
        .as_array_mut()
        .unwrap()
        .extend([message, json!({"role": "tool", "tool_call_id": id, "content": "sunny, 24 C"})]);
    body["tool_choice"] = json!("none");
    let second: Value = within(Api::OpenAi.send(&gw, &body)).await.json().await.unwrap();
    assert_eq!(second["choices"][0]["message"]["content"], "It is sunny.", "{second:#}");
    assert_eq!(second["usage"]["prompt_tokens"], 40);
    assert_eq!(second["usage"]["completion_tokens"], 21);
    let sent = upstream.seen.lock().unwrap()[1].clone();
    let messages = sent["messages"].as_array().unwrap();
    let assistant = &messages[1]["content"];
    assert!(
        assistant.as_array().unwrap().iter().any(|b| b["type"] == "tool_use"
            && b["id"] == "toolu_01"
            && b["input"] == json!({"city": "Paris"})),
        "{sent:#}"
    );
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sent:#}");
    assert_eq!(result["tool_use_id"], "toolu_01");
    assert_eq!(result["content"][0]["text"], "sunny, 24 C");
    assert_eq!(sent["tool_choice"]["type"], "none");
}
