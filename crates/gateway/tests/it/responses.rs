//! The Responses API (issue 16) in process: the event grammar, function, custom and namespaced
//! calls, reasoning items, hosted tools left out, the stateless answers, and errors before and
//! after the stream began. The official SDKs, the Agents SDK, the AI SDK and Codex drive the
//! same endpoint in `tests/e2e`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{Reply, TestGateway, hermes, spawn_gateway};

pub(crate) fn weather() -> Value {
    json!({"type": "function", "name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

pub(crate) async fn post(gw: &TestGateway, body: &Value) -> reqwest::Response {
    within(gw.http().post(gw.url("/v1/responses")).json(body).send()).await.unwrap()
}

/// The events of a streamed response, checked on the way: one `event:` line naming the JSON
/// `type`, sequence numbers from 0, every output index added before its deltas and done once.
pub(crate) fn events(body: &str) -> Vec<Value> {
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
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
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
    gw.upstream.push(Reply::error(500, json!({"error": {"message": "boom"}})));
    let response =
        post(&gw, &json!({"model": "m", "input": "hi", "tools": [weather()], "stream": true}))
            .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let long = "Paris in spring is mild and often sunny, with chestnut trees in bloom along the boulevards and cafe terraces full from late morning on. Evenings stay light until nine and showers are short.";
    gw.upstream.push(Reply::text(long.repeat(2)).chunks(8).disconnect_after(35));
    let response = post(&gw, &json!({"model": "m", "input": "Tell me about Paris.", "tools": [weather()], "stream": true})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let events = events(&within(response.text()).await.unwrap());
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert!(last["response"]["completed_at"].is_null());
    assert_eq!(last["response"]["error"]["code"], "server_error");
    // The message that was being written is closed, incomplete, and is in the output.
    let before = &events[events.len() - 2];
    assert_eq!(before["type"], "response.output_item.done");
    assert_eq!(before["item"]["status"], "incomplete");
    assert_eq!(last["response"]["output"][0]["id"], before["item"]["id"]);
    gw.upstream.push(Reply::text("Paris is").finish("length"));
    let response = post(&gw, &json!({"model": "m", "input": "hi", "max_output_tokens": 3})).await;
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["status"], "incomplete");
    assert_eq!(value["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(value["output"][0]["status"], "incomplete");
    assert_eq!(gw.upstream.requests()[2]["max_tokens"], 3);
}

fn overflow() -> Reply {
    Reply::error(
        400,
        json!({"error": {"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."}}),
    )
}

/// Codex reads a rate limit and a context overflow only from `response.failed` (an HTTP 429
/// ends its turn; an HTTP 400 is shown raw): in a stream they are that event, with the codes
/// and the delay it reads, even before the first event. Without a stream, HTTP errors.
#[tokio::test]
async fn rate_limits_and_context_overflows_are_response_failed_in_a_stream() {
    let gw = spawn_gateway(|_| {}).await;
    let body = json!({"model": "m", "input": "hi", "tools": [weather()], "stream": true});
    gw.upstream
        .push(Reply::error(429, json!({"error": {"message": "slow down"}})).retry_after("3"));
    let response = post(&gw, &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let limited = events(&within(response.text()).await.unwrap());
    let types: Vec<&str> = limited.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["response.created", "response.in_progress", "response.failed"]);
    let failed = &limited[2]["response"];
    assert_eq!(failed["id"], limited[0]["response"]["id"]);
    assert_eq!(failed["error"]["code"], "rate_limit_exceeded");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("Please try again in 3s."), "{message}");

    gw.upstream.push(overflow());
    let overflowed = events(&within(post(&gw, &body).await.text()).await.unwrap());
    let failed = &overflowed.last().unwrap()["response"];
    assert_eq!(failed["error"]["code"], "context_length_exceeded");
    assert!(failed["error"]["message"].as_str().unwrap().contains("8192 tokens"), "{failed}");

    let mut whole = body.clone();
    whole["stream"] = json!(false);
    gw.upstream
        .push(Reply::error(429, json!({"error": {"message": "slow down"}})).retry_after("3"));
    let response = post(&gw, &whole).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "3");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert!(error["error"]["message"].as_str().unwrap().contains("try again in 3s"), "{error}");
    gw.upstream.push(overflow());
    let response = post(&gw, &whole).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "context_length_exceeded");
    assert_eq!(error["error"]["param"], "input");
    // Both in-band failures are counted like any error.
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("kind=\"upstream_rate_limited\"} 2"), "{metrics}");
}

/// Everything that reaches the prompt: Codex's `local_shell_call`s and their output (as
/// `function_call_output`, or `local_shell_call_output` by `id`) as text, images as images,
/// files as files.
#[tokio::test]
async fn local_shell_calls_images_and_files_reach_the_prompt() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Two files."));
    let input = json!([
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in the folder, and in this picture and file?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
            {"type": "input_file", "filename": "notes.pdf", "file_data": "data:application/pdf;base64,AAAA"}]},
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "status": "completed",
            "action": {"type": "exec", "command": ["ls", "-la"], "env": {}}},
        {"type": "function_call_output", "call_id": "call_ls", "output": "a.txt b.txt"},
        {"type": "local_shell_call", "id": "lsh_2", "call_id": "call_cat", "status": "completed",
            "action": {"type": "exec", "command": ["cat", "a.txt"], "env": {}}},
        {"type": "local_shell_call_output", "id": "call_cat", "output": "contents-of-a"}]);
    let response =
        post(&gw, &json!({"model": "m", "input": input, "tools": [{"type": "local_shell"}]})).await;
    assert_eq!(response.status(), StatusCode::OK);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["output"][0]["content"][0]["text"], "Two files.");
    let request = &gw.upstream.requests()[0];
    let sent = request.to_string();
    for seen in ["local_shell", "ls", "a.txt b.txt", "contents-of-a"] {
        assert!(sent.contains(seen), "{seen} in {sent}");
    }
    // Issue 25: the image and the file reach the upstream as such, not as words.
    let user = &request["messages"][1]["content"];
    assert_eq!(
        user[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        "{sent}"
    );
    assert_eq!(
        user[2],
        json!({"type": "file", "file": {"file_data": "data:application/pdf;base64,AAAA",
            "filename": "notes.pdf"}}),
        "{sent}"
    );
    assert!(!sent.contains("[image]") && !sent.contains("[file"), "{sent}");
}

fn patch_tool() -> Value {
    json!({"type": "custom", "name": "apply_patch", "description": "Edit files."})
}

fn agents() -> Value {
    json!({"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [
        {"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}]})
}

/// The names of the output's calls (namespaced ones as `namespace.name`).
fn called(value: &Value) -> Vec<String> {
    value["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] != "message" && i["type"] != "reasoning")
        .map(|i| match i["namespace"].as_str() {
            Some(ns) => format!("{ns}.{}", i["name"].as_str().unwrap()),
            None => i["name"].as_str().unwrap().to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn tool_choice_required_named_custom_and_namespaced() {
    let gw = spawn_gateway(|_| {}).await;
    let tools = json!([weather(), patch_tool(), agents()]);
    let request = |choice: Value| json!({"model": "m", "input": "Go.", "tools": tools, "tool_choice": choice});
    // required: a reply without a call is asked for again.
    gw.upstream.push(Reply::text("Sure, I will look that up."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let value: Value = post(&gw, &request(json!("required"))).await.json().await.unwrap();
    assert_eq!(called(&value), ["get_weather"]);
    assert_eq!(gw.upstream.requests().len(), 2);
    // A named function: a call of another tool does not count.
    gw.upstream.push(Reply::text(hermes("apply_patch", json!({"input": "x"}))));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Oslo"}))));
    let value: Value = post(&gw, &request(json!({"type": "function", "name": "get_weather"})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(called(&value), ["get_weather"]);
    assert_eq!(value["status"], "completed");
    // A named custom tool.
    gw.upstream.push(Reply::text(hermes("apply_patch", json!({"input": "*** Begin Patch"}))));
    let value: Value = post(&gw, &request(json!({"type": "custom", "name": "apply_patch"})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(called(&value), ["apply_patch"]);
    assert_eq!(value["output"][0]["input"], "*** Begin Patch");
    assert_eq!(value["tool_choice"], json!({"type": "custom", "name": "apply_patch"}));
    // A namespaced function by its own name and its namespace.
    gw.upstream.push(Reply::text(hermes("agents__spawn", json!({"task": "t"}))));
    let value: Value =
        post(&gw, &request(json!({"type": "function", "name": "spawn", "namespace": "agents"})))
            .await
            .json()
            .await
            .unwrap();
    assert_eq!(called(&value), ["agents.spawn"]);
    // A custom tool choice naming a function tool is a 400 in the API's shape.
    let response = post(&gw, &request(json!({"type": "custom", "name": "get_weather"}))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["param"], "tool_choice");
    assert!(error["error"]["message"].as_str().unwrap().contains("is a function tool"), "{error}");
    assert_eq!(gw.upstream.requests().len(), 6);
}

#[tokio::test]
async fn allowed_tools_with_unknown_names_are_a_400() {
    let gw = spawn_gateway(|_| {}).await;
    let response = post(&gw, &json!({"model": "m", "input": "Go.", "tools": [weather()],
        "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_time"}]}}))
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        error["error"],
        json!({"message": "Invalid value for 'tool_choice.tools': function 'get_time' is not one of the given tools.",
            "type": "invalid_request_error", "param": "tool_choice.tools", "code": null})
    );
    assert!(gw.upstream.requests().is_empty());
}

#[tokio::test]
async fn parallel_tool_calls_false_keeps_one_call_and_fields_are_echoed() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_weather", json!({"city": "Oslo"}))
    )));
    let value: Value = post(
        &gw,
        &json!({"model": "m", "input": "Paris and Oslo?", "tools": [weather()],
        "parallel_tool_calls": false, "max_tool_calls": 5, "service_tier": "flex", "store": false}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(called(&value), ["get_weather"]);
    assert_eq!(value["output"][0]["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(value["parallel_tool_calls"], false);
    assert_eq!(value["max_tool_calls"], 5);
    assert_eq!(value["service_tier"], "flex");
    assert_eq!(value["store"], false);
}

#[tokio::test]
async fn a_streamed_token_limit_ends_with_response_incomplete() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Paris is a city of").chunks(3).finish("length"));
    let response = post(
        &gw,
        &json!({"model": "m", "input": "Paris?", "max_output_tokens": 5, "stream": true}),
    )
    .await;
    let events = events(&within(response.text()).await.unwrap());
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["status"], "incomplete");
    assert_eq!(last["response"]["incomplete_details"]["reason"], "max_output_tokens");
    assert!(last["response"]["completed_at"].is_null());
    let item = &events[events.len() - 2];
    assert_eq!(
        (item["type"].as_str(), item["item"]["status"].as_str()),
        (Some("response.output_item.done"), Some("incomplete"))
    );
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], "Paris is a city of");
}

#[tokio::test]
async fn a_refusal_is_retried_before_anything_is_streamed() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("I'm sorry, but I don't have access to tools or real-time data."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))).chunks(5));
    let response = post(
        &gw,
        &json!({"model": "m", "input": "Weather in Paris?", "tools": [weather()], "stream": true}),
    )
    .await;
    let body = within(response.text()).await.unwrap();
    let events = events(&body);
    assert!(!body.contains("sorry"), "the refusal never reached the client");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed");
    assert_eq!(called(&last["response"]), ["get_weather"]);
    assert_eq!(gw.upstream.requests().len(), 2);
}

/// A custom tool's raw input streams as the model writes it: many deltas that join to the
/// input of `.done`.
#[tokio::test]
async fn a_long_custom_input_streams_in_deltas_that_join_to_its_input() {
    let gw = spawn_gateway(|_| {}).await;
    let patch: String =
        (0..30).map(|i| format!("+line {i}: \"quoted\" \\ and a tab\t\n")).collect();
    let patch = format!("*** Begin Patch\n*** Add File: a.txt\n{patch}*** End Patch");
    gw.upstream.push(Reply::text(hermes("apply_patch", json!({"input": patch}))).chunks(7));
    let response = post(
        &gw,
        &json!({"model": "m", "input": "Patch.", "tools": [patch_tool()], "stream": true}),
    )
    .await;
    let events = events(&within(response.text()).await.unwrap());
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "response.custom_tool_call_input.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(deltas.len() > 1, "{deltas:?}");
    let done = events.iter().find(|e| e["type"] == "response.custom_tool_call_input.done").unwrap();
    assert_eq!(deltas.concat(), done["input"].as_str().unwrap());
    assert_eq!(done["input"], patch.as_str());
    let item = &events.last().unwrap()["response"]["output"][0];
    assert_eq!(
        (item["type"].as_str(), item["input"].as_str()),
        (Some("custom_tool_call"), Some(patch.as_str()))
    );
}

/// Codex defers its sub-agent (and MCP) tools behind `tool_search`, which it runs itself: the
/// model's call goes out as a `tool_search_call` (arguments an object), and the tools the
/// `tool_search_output` in the next request loads are callable, namespaced as they came.
#[tokio::test]
async fn codex_tool_search_loads_tools_that_are_then_called() {
    let gw = spawn_gateway(|_| {}).await;
    let tools = json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
        {"type": "tool_search", "execution": "client", "description": "Searches deferred tools.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}}, "required": ["query"]}},
        {"type": "web_search"}]);
    gw.upstream.push(Reply::text(hermes("tool_search", json!({"query": "agent"}))).chunks(4));
    let response = post(
        &gw,
        &json!({"model": "m", "input": "Close the agent.", "tools": tools, "stream": true}),
    )
    .await;
    let events = events(&within(response.text()).await.unwrap());
    let done = events.iter().find(|e| e["type"] == "response.output_item.done").unwrap();
    let call = &done["item"];
    assert_eq!(call["type"], "tool_search_call");
    assert_eq!(call["execution"], "client");
    assert_eq!(call["arguments"], json!({"query": "agent"}));
    assert!(events.iter().all(|e| !e["type"].as_str().unwrap().contains("arguments")));
    assert_eq!(events.last().unwrap()["response"]["output"][0], *call);

    let call_id = call["call_id"].clone();
    gw.upstream.push(Reply::text(hermes("multi_agent_v1__close_agent", json!({"target": "a1"}))));
    let input = json!([
        {"role": "user", "content": "Close the agent."},
        {"type": "tool_search_call", "id": call["id"], "call_id": call_id, "status": "completed", "execution": "client", "arguments": {"query": "agent"}},
        {"type": "tool_search_output", "call_id": call_id, "status": "completed", "execution": "client", "tools": [
            {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "close_agent", "parameters": {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}}]}]}]);
    let value: Value = post(&gw, &json!({"model": "m", "input": input, "tools": tools}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(called(&value), ["multi_agent_v1.close_agent"]);
    let sent = gw.upstream.requests()[1].to_string();
    assert!(
        sent.contains("multi_agent_v1__close_agent") && sent.contains("(tool_search)"),
        "{sent}"
    );
}
