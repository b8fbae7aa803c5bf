//! The Responses API (issue 16) in process: the event grammar, function, custom and namespaced
//! calls, reasoning items, hosted tools left out, the stateless answers, and errors before and
//! after the stream began. The official SDKs, the Agents SDK, the AI SDK and Codex drive the
//! same endpoint in `tests/e2e`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{Reply, TestGateway, hermes, spawn_gateway};

fn weather() -> Value {
    json!({"type": "function", "name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

async fn post(gw: &TestGateway, body: &Value) -> reqwest::Response {
    within(gw.http().post(gw.url("/v1/responses")).json(body).send()).await.unwrap()
}

/// The events of a streamed response, checked on the way: one `event:` line naming the JSON
/// `type`, sequence numbers from 0, every output index added before its deltas and done once.
fn events(body: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut added = std::collections::BTreeMap::new();
    for frame in body.split("\n\n").filter(|f| !f.is_empty() && !f.starts_with(':')) {
        let (name, data) = frame
            .strip_prefix("event: ")
            .and_then(|r| r.split_once("\ndata: "))
            .unwrap_or_else(|| panic!("{frame:?}"));
        let value: Value = serde_json::from_str(data).unwrap();
        assert_eq!(value["type"], name);
        assert_eq!(value["sequence_number"], out.len() as u64, "{frame}");
        assert!(value.get("error").is_none_or(Value::is_null), "no top-level error: {frame}");
        if let Some(index) = value["output_index"].as_u64() {
            match name {
                "response.output_item.added" => {
                    assert!(added.insert(index, value["item"]["id"].clone()).is_none(), "{frame}");
                }
                "response.output_item.done" => {
                    assert_eq!(added.get(&index), Some(&value["item"]["id"]), "{frame}")
                }
                _ => assert!(added.contains_key(&index), "a delta before its item: {frame}"),
            }
        }
        out.push(value);
    }
    out
}

#[tokio::test]
async fn a_streamed_function_call_follows_the_grammar() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(
        Reply::text(format!(
            "<think>Paris, so weather.</think>Checking. {}",
            hermes("get_weather", json!({"city": "Paris"}))
        ))
        .chunks(3),
    );
    let response = post(
        &gw,
        &json!({"model": "m", "input": "Weather in Paris?", "tools": [weather()], "stream": true}),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let events = events(&within(response.text()).await.unwrap());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(&types[..2], ["response.created", "response.in_progress"]);
    assert_eq!(types.last(), Some(&"response.completed"));
    let id = &events[0]["response"]["id"];
    assert_eq!(&events.last().unwrap()["response"]["id"], id);
    let output = events.last().unwrap()["response"]["output"].as_array().unwrap().clone();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "message", "function_call"]);
    assert_eq!(output[0]["content"][0]["text"], "Paris, so weather.");
    let arguments: Value = serde_json::from_str(output[2]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert!(types.iter().filter(|t| **t == "response.function_call_arguments.delta").count() > 1);
}

#[tokio::test]
async fn custom_and_namespaced_tools_map_back() {
    let gw = spawn_gateway(|_| {}).await;
    let tools = json!([
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
        {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}]},
        {"type": "web_search"}]);
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        hermes("apply_patch", json!({"input": patch})),
        hermes("agents__spawn", json!({"task": "t"}))
    )));
    let response = post(&gw, &json!({"model": "m", "input": "Go.", "tools": tools})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let value: Value = response.json().await.unwrap();
    let output = value["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "custom_tool_call");
    assert_eq!(output[0]["input"], patch);
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(
        (output[1]["name"].as_str(), output[1]["namespace"].as_str()),
        (Some("spawn"), Some("agents"))
    );
    let sent = gw.upstream.requests()[0].to_string();
    assert!(sent.contains("agents__spawn") && !sent.contains("web_search"), "{sent}");
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("toolshim_hosted_tools_left_out_total{type=\"web_search\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn stateless_answers_and_websockets() {
    let gw = spawn_gateway(|_| {}).await;
    let response =
        post(&gw, &json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"})).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "previous_response_not_found");
    assert_eq!(body["error"]["param"], "previous_response_id");
    let response = gw.http().get(gw.url("/v1/responses/resp_1")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("resp_1"));
    let response = gw
        .http()
        .get(gw.url("/v1/responses"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UPGRADE_REQUIRED);
}

#[tokio::test]
async fn errors_before_the_stream_are_http_and_after_it_response_failed() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream
        .push(Reply::error(429, json!({"error": {"message": "slow down"}})).retry_after("3"));
    let response =
        post(&gw, &json!({"model": "m", "input": "hi", "tools": [weather()], "stream": true}))
            .await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let long = "Paris in spring is mild and often sunny, with chestnut trees in bloom along the boulevards and cafe terraces full from late morning on. Evenings stay light until nine and showers are short.";
    gw.upstream.push(Reply::text(long.repeat(2)).chunks(8).disconnect_after(35));
    let response = post(&gw, &json!({"model": "m", "input": "Tell me about Paris.", "tools": [weather()], "stream": true})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let events = events(&within(response.text()).await.unwrap());
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"]["code"], "server_error");
    gw.upstream.push(Reply::text("Paris is").finish("length"));
    let response = post(&gw, &json!({"model": "m", "input": "hi", "max_output_tokens": 3})).await;
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["status"], "incomplete");
    assert_eq!(value["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(gw.upstream.requests()[2]["max_tokens"], 3);
}
