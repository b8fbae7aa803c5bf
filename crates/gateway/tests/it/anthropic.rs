//! Anthropic Messages through real HTTP, on the same emulation pipeline: responses, the
//! stream event grammar, `tool_choice`, history, auth, errors,
//! `count_tokens` and `/v1/models`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{Reply, TestGateway, hermes, spawn_gateway};

pub(crate) fn tools() -> Value {
    json!([
        {"name": "get_weather", "description": "Weather for a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"name": "get_time", "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}}}
    ])
}

pub(crate) fn request(user: &str) -> Value {
    json!({"model": "claude-test", "max_tokens": 256, "messages": [{"role": "user", "content": user}], "tools": tools()})
}

pub(crate) async fn post(gw: &TestGateway, path: &str, body: &Value) -> reqwest::Response {
    gw.http()
        .post(gw.url(path))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "claude-code-20250219,fine-grained-tool-streaming-2025-05-14")
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn message(gw: &TestGateway, body: &Value) -> Value {
    let response = post(gw, "/v1/messages", body).await;
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

fn tool_uses(message: &Value) -> Vec<&Value> {
    message["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_use").collect()
}

/// One stream, checked against the event grammar; returns the folded message.
struct Folded {
    blocks: Vec<Value>,
    stop_reason: String,
    start_input_tokens: u64,
    output_tokens: u64,
}

fn is_json_prefix(text: &str) -> bool {
    // A prefix is valid when some completion parses: close strings and brackets.
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' if stack.pop() != Some(c) => return false,
            _ => {}
        }
    }
    let mut completed = text.to_owned();
    if escaped {
        completed.push('\\');
    }
    if in_string {
        completed.push('"');
    }
    let trimmed = completed.trim_end();
    if trimmed.ends_with(',') || trimmed.ends_with(':') {
        completed.push_str(if trimmed.ends_with(':') { "null" } else { "\"k\":null" });
    }
    while let Some(close) = stack.pop() {
        completed.push(close);
    }
    text.is_empty() || serde_json::from_str::<Value>(&completed).is_ok()
}

fn check_stream(body: &str) -> Folded {
    let mut events = Vec::new();
    for frame in body.split("\n\n").filter(|f| !f.trim().is_empty()) {
        let mut name = None;
        let mut data = None;
        for line in frame.lines() {
            if let Some(rest) = line.strip_prefix("event: ") {
                name = Some(rest.to_owned());
            } else if let Some(rest) = line.strip_prefix("data: ") {
                data = Some(rest.to_owned());
            } else {
                panic!("unexpected line {line:?} in {body}");
            }
        }
        let (name, data) = (name.expect("every event has a name"), data.expect("and data"));
        let value: Value = serde_json::from_str(&data).unwrap();
        assert_eq!(value["type"], name.as_str(), "event name equals type: {data}");
        events.push((name, value));
    }
    assert_eq!(events.first().map(|e| e.0.as_str()), Some("message_start"), "{body}");
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("message_stop"), "{body}");
    let start = &events[0].1["message"];
    assert_eq!(start["content"], json!([]));
    assert!(start["stop_reason"].is_null());
    let start_input_tokens = start["usage"]["input_tokens"].as_u64().unwrap();
    assert!(start_input_tokens > 0, "real input tokens in message_start");
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    let mut open: Option<usize> = None;
    let mut stop_reason = String::new();
    let mut output_tokens = 0;
    let mut saw_delta = false;
    for (name, value) in &events[1..events.len() - 1] {
        match name.as_str() {
            "ping" => {}
            "content_block_start" => {
                assert!(open.is_none() && !saw_delta, "blocks do not overlap: {body}");
                let index = value["index"].as_u64().unwrap() as usize;
                assert_eq!(index, blocks.len(), "contiguous indices");
                let block = value["content_block"].clone();
                if block["type"] == "tool_use" {
                    assert_eq!(block["input"], json!({}), "tool blocks start with input {{}}");
                    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));
                } else {
                    assert_eq!(block, json!({"type": "text", "text": ""}));
                }
                blocks.push(block);
                partial.push(String::new());
                open = Some(index);
            }
            "content_block_delta" => {
                let index = value["index"].as_u64().unwrap() as usize;
                assert_eq!(Some(index), open, "deltas go to the open block");
                let delta = &value["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => {
                        let text = blocks[index]["text"].as_str().unwrap().to_owned()
                            + delta["text"].as_str().unwrap();
                        blocks[index]["text"] = json!(text);
                    }
                    "input_json_delta" => {
                        partial[index].push_str(delta["partial_json"].as_str().unwrap());
                        assert!(
                            is_json_prefix(&partial[index]),
                            "prefix-valid partial_json: {:?}",
                            partial[index]
                        );
                    }
                    other => panic!("unknown delta {other}"),
                }
            }
            "content_block_stop" => {
                let index = value["index"].as_u64().unwrap() as usize;
                assert_eq!(Some(index), open);
                if blocks[index]["type"] == "tool_use" {
                    let text =
                        if partial[index].is_empty() { "{}" } else { partial[index].as_str() };
                    let input: Value = serde_json::from_str(text).unwrap();
                    assert!(input.is_object());
                    blocks[index]["input"] = input;
                }
                open = None;
            }
            "message_delta" => {
                assert!(open.is_none());
                saw_delta = true;
                stop_reason = value["delta"]["stop_reason"].as_str().unwrap().to_owned();
                assert!(value["delta"]["stop_sequence"].is_null());
                output_tokens =
                    value["usage"]["output_tokens"].as_u64().expect("output_tokens is required");
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert!(saw_delta, "message_delta before message_stop");
    Folded { blocks, stop_reason, start_input_tokens, output_tokens }
}

async fn stream(gw: &TestGateway, body: &Value) -> Folded {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let response = post(gw, "/v1/messages?beta=true", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    check_stream(&response.text().await.unwrap())
}

#[tokio::test]
async fn a_call_becomes_a_tool_use_block() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(format!(
        "Checking.\n{}",
        hermes("get_weather", json!({"city": "Paris"}))
    )));
    let message = message(&gw, &request("Weather in Paris?")).await;
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-test");
    assert!(message["id"].as_str().unwrap().starts_with("msg_01"));
    assert_eq!(message["stop_reason"], "tool_use");
    assert!(message["stop_sequence"].is_null());
    assert_eq!(message["content"][0]["type"], "text");
    let uses = tool_uses(&message);
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0]["name"], "get_weather");
    assert_eq!(uses[0]["input"], json!({"city": "Paris"}));
    assert!(uses[0]["id"].as_str().unwrap().starts_with("toolu_01"));
    for key in
        ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
    {
        assert!(message["usage"][key].is_u64(), "usage.{key}");
    }
}

#[tokio::test]
async fn streams_follow_the_event_grammar() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "Let me check both.\n{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_time", json!({"timezone": "Europe/Paris"}))
    );
    gw.upstream.push(Reply::text(text).chunks(3));
    let folded = stream(&gw, &request("Weather and time in Paris?")).await;
    assert_eq!(folded.stop_reason, "tool_use");
    let kinds: Vec<&str> = folded.blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_use"]);
    assert_eq!(folded.blocks[1]["input"], json!({"city": "Paris"}));
    assert_eq!(folded.blocks[2]["input"], json!({"timezone": "Europe/Paris"}));
    assert!(!folded.blocks[0]["text"].as_str().unwrap().contains("tool_call"));
    assert!(folded.output_tokens > 0);
}

#[tokio::test]
async fn text_only_ends_the_turn() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Paris is lovely in spring."));
    let folded = stream(&gw, &request("Tell me about Paris")).await;
    assert_eq!(folded.stop_reason, "end_turn");
    assert_eq!(folded.blocks, vec![json!({"type": "text", "text": "Paris is lovely in spring."})]);
}

#[tokio::test]
async fn count_tokens_matches_message_start() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("ok"));
    let body = request("Weather in Paris?");
    let counted: Value = post(&gw, "/v1/messages/count_tokens", &body).await.json().await.unwrap();
    let folded = stream(&gw, &body).await;
    assert_eq!(counted["input_tokens"].as_u64(), Some(folded.start_input_tokens));
}

#[tokio::test]
async fn any_forces_a_call_with_no_text_before_it() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Sure, let me think about it."));
    gw.upstream
        .push(Reply::text(format!("Okay.\n{}", hermes("get_weather", json!({"city": "Paris"})))));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!({"type": "any"});
    let message = message(&gw, &body).await;
    assert_eq!(gw.upstream.requests().len(), 2, "retried");
    let kinds: Vec<&str> = message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["tool_use"]);
    assert_eq!(message["stop_reason"], "tool_use");
}

#[tokio::test]
async fn named_tool_none_and_no_parallel_are_enforced() {
    let gw = spawn_gateway(|_| {}).await;
    let two = format!(
        "{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_time", json!({}))
    );
    gw.upstream.push(Reply::text(two.clone()));
    let mut body = request("both");
    body["tool_choice"] = json!({"type": "tool", "name": "get_time"});
    let named = message(&gw, &body).await;
    let uses = tool_uses(&named);
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0]["name"], "get_time");
    assert_eq!(named["stop_reason"], "tool_use", "tool_use even for a forced tool");

    gw.upstream.push(Reply::text(two.clone()));
    body["tool_choice"] = json!({"type": "none"});
    let none = message(&gw, &body).await;
    assert!(tool_uses(&none).is_empty());
    assert!(!none.to_string().contains("tool_call"));

    gw.upstream.push(Reply::text(two));
    body["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
    let single = message(&gw, &body).await;
    assert_eq!(tool_uses(&single).len(), 1);
}

#[tokio::test]
async fn tool_results_reach_the_upstream_as_text_with_errors_marked() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("It failed, sorry."));
    let body = json!({"model": "claude-test", "max_tokens": 100, "tools": tools(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_01abc", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01abc", "content": [{"type": "text", "text": "ConnectionError: timeout"}], "is_error": true}]}
    ]});
    let reply = message(&gw, &body).await;
    assert_eq!(reply["stop_reason"], "end_turn");
    let sent = gw.upstream.requests()[0].to_string();
    assert!(sent.contains("Error from call toolu_01abc (get_weather)"), "{sent}");
    assert!(sent.contains("ConnectionError: timeout"));
    assert!(!sent.contains("tool_result") && !sent.contains("\"tool_use\""), "{sent}");
}

#[tokio::test]
async fn request_errors_use_anthropic_shapes_and_wording() {
    let gw = spawn_gateway(|config| config.api_keys = vec!["secret".into()]).await;
    let body = request("hi");
    let missing = gw
        .http()
        .post(gw.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    let value: Value = missing.json().await.unwrap();
    assert_eq!(value["type"], "error");
    assert_eq!(value["error"]["type"], "authentication_error");
    assert_eq!(value["error"]["message"], "x-api-key header is required");
    assert!(value["request_id"].as_str().unwrap().starts_with("req_"));
    let bad = gw
        .http()
        .post(gw.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "nope")
        .json(&body)
        .send()
        .await
        .unwrap();
    let value: Value = bad.json().await.unwrap();
    assert_eq!(value["error"]["message"], "invalid x-api-key");
    let bearer = gw
        .http()
        .post(gw.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .bearer_auth("nope")
        .json(&body)
        .send()
        .await
        .unwrap();
    let value: Value = bearer.json().await.unwrap();
    assert_eq!(value["error"]["message"], "Invalid bearer token");
    let no_version = gw
        .http()
        .post(gw.url("/v1/messages"))
        .header("x-api-key", "secret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(no_version.status(), StatusCode::BAD_REQUEST);
    let value: Value = no_version.json().await.unwrap();
    assert_eq!(value["error"]["message"], "anthropic-version: header is required");

    let unanswered = json!({"model": "c", "max_tokens": 10, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}}]},
        {"role": "user", "content": "never mind"}]});
    let response = gw
        .http()
        .post(gw.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", "secret")
        .json(&unanswered)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["type"], "invalid_request_error");
    assert_eq!(
        value["error"]["message"],
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_9. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    );
}

#[tokio::test]
async fn upstream_failures_map_to_anthropic_statuses() {
    let gw = spawn_gateway(|_| {}).await;
    for (status, expected, kind) in
        [(503, 529, "overloaded_error"), (429, 429, "rate_limit_error"), (500, 502, "api_error")]
    {
        gw.upstream.push(Reply::error(status, json!({"error": {"message": "x"}})));
        let response = post(&gw, "/v1/messages", &request("hi")).await;
        assert_eq!(response.status().as_u16(), expected, "upstream {status}");
        let value: Value = response.json().await.unwrap();
        assert_eq!(value["error"]["type"], kind, "upstream {status}");
    }
    gw.upstream.push(Reply::error(
        400,
        json!({"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."}}),
    ));
    let response = post(&gw, "/v1/messages", &request("hi")).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["message"], "prompt is too long: 5000 tokens > 4096 maximum");
}

#[tokio::test]
async fn a_break_after_streaming_began_is_an_error_event() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(
        Reply::text("A long answer about the weather in Paris, ".repeat(20))
            .chunks(10)
            .disconnect_after(30),
    );
    let mut body = request("Tell me about Paris");
    body["stream"] = json!(true);
    let text = post(&gw, "/v1/messages", &body).await.text().await.unwrap();
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: error\ndata: "), "{last}");
    let value: Value =
        serde_json::from_str(last.trim_start_matches("event: error\ndata: ")).unwrap();
    assert_eq!(value["type"], "error");
    assert!(value["error"]["type"].is_string() && value["error"]["message"].is_string());
}

#[tokio::test]
async fn models_use_the_anthropic_shape_when_asked() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw
        .http()
        .get(gw.url("/v1/models?limit=1000"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["has_more"], false);
    let first = &value["data"][0];
    assert_eq!(first["type"], "model");
    assert_eq!(first["lifecycle"], "active");
    assert!(first["display_name"].is_string() && first["created_at"].is_string());
    assert_eq!(value["first_id"], first["id"]);
    let openai: Value =
        gw.http().get(gw.url("/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(openai["object"], "list");
}

#[tokio::test]
async fn input_tokens_agree_everywhere_and_request_id_is_sent() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("ok"));
    let body = request("Weather in Paris?");
    let counted: Value = post(&gw, "/v1/messages/count_tokens", &body).await.json().await.unwrap();
    let response = post(&gw, "/v1/messages", &body).await;
    let request_id = response.headers()["request-id"].to_str().unwrap().to_owned();
    assert!(request_id.starts_with("req_"), "{request_id}");
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["usage"]["input_tokens"], counted["input_tokens"]);
}

/// Issue 25: server tools (`web_search_20250305` next to a client tool) are left out and
/// counted, as the Responses API's hosted tools are; a `tool_choice` forcing one is a 400.
#[tokio::test]
async fn server_tools_are_left_out_and_counted() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let mut body = request("Weather in Paris?");
    body["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3}));
    let reply = message(&gw, &body).await;
    assert_eq!(tool_uses(&reply).len(), 1, "{reply:#}");
    let prompt = gw.upstream.requests()[0].to_string();
    assert!(prompt.contains("get_weather") && !prompt.contains("web_search"), "{prompt}");
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"type="web_search""#), "{metrics}");

    body["tool_choice"] = json!({"type": "tool", "name": "web_search"});
    let response = post(&gw, "/v1/messages", &body).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("server tool"), "{error}");
}
