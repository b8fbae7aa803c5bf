//! `native` passes requests through; `auto` tries native and falls back to emulation when the
//! upstream rejects tools.

use axum::http::StatusCode;
use serde_json::json;
use toolshim_gateway::{Mode, ModelConfig};

use crate::common::{MODEL, Reply, args, hermes, request, spawn_gateway, sse_data};

/// The content deltas of a relayed stream, joined.
fn content(body: &str) -> String {
    sse_data(body)
        .iter()
        .filter(|data| data.as_str() != "[DONE]")
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn native_mode_passes_tools_through_and_relays_the_reply() {
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Native;
        config.models.insert(
            MODEL.into(),
            ModelConfig { upstream: Some("up-model".into()), mode: None, call_format: None },
        );
    })
    .await;
    gw.upstream.push(Reply::text("native answer"));
    let mut body = request("Weather in Paris?");
    body["stream"] = json!(true);
    let (status, _, text) = gw.chat_stream(&body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content(&text), "native answer", "the upstream's stream is relayed: {text}");
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["model"], "up-model", "the model is renamed for the upstream");
    assert_eq!(sent["tools"], body["tools"], "tools go upstream untouched");
    assert!(
        sent["messages"].as_array().unwrap().iter().all(|m| m["role"] != "system"),
        "no tool prompt"
    );
}

#[tokio::test]
async fn auto_mode_falls_back_to_emulation_when_the_upstream_rejects_tools() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::error(
        400,
        json!({"error": {"message": "tools are not supported", "type": "invalid_request_error"}}),
    ));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].get("tools").is_some(), "native first: {:#}", requests[0]);
    assert!(requests[1].get("tools").is_none(), "then emulated: {:#}", requests[1]);
}

#[tokio::test]
async fn auto_mode_passes_plain_chat_through() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::text("hello"));
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true, "temperature": 0});
    let (status, _, text) = gw.chat_stream(&body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content(&text), "hello", "{text}");
    assert_eq!(gw.upstream.requests()[0]["temperature"], 0);
}

#[tokio::test]
async fn auto_mode_keeps_upstream_failures_that_are_not_about_tools() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::error(429, json!({"error": {"message": "slow down"}})));
    let (status, body) = gw.chat(&request("Weather in Paris?")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(gw.upstream.requests().len(), 1);
}

#[tokio::test]
async fn the_call_format_is_chosen_per_model_and_replies_parse_in_any_dialect() {
    let gw = spawn_gateway(|config| {
        config.models.insert(
            MODEL.into(),
            ModelConfig {
                upstream: None,
                mode: None,
                call_format: Some(toolshim_gateway::CallFormat::Json),
            },
        );
    })
    .await;
    // The model was taught bare JSON but answers with a <tool_call> block: still a call.
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(completion["choices"][0]["message"]["tool_calls"].as_array().unwrap().len(), 1);
    let system = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("a JSON object on a line of its own"), "{system}");
    assert!(!system.contains("<tool_call>"), "{system}");
}
