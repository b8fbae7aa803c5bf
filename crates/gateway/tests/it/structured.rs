//! Issue 18: structured outputs. `response_format` (Chat Completions), `text.format`
//! (Responses) and `output_config.format` (Messages) reach an upstream that takes
//! `response_format` when no tool call can be the reply, else the prompt; the answer is checked
//! against the schema, asked for again with what was wrong, and an error when it never fits.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::Api;
use crate::common::{Reply, hermes, spawn_gateway};

fn schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}, "temp_c": {"type": "integer"}},
        "required": ["city", "temp_c"], "additionalProperties": false})
}

fn chat_request(stream: bool, tools: bool) -> Value {
    let mut body = if tools {
        crate::common::request("Weather in Paris?")
    } else {
        crate::common::plain_request("Weather in Paris?")
    };
    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "weather", "schema": schema(), "strict": true}});
    body["stream"] = json!(stream);
    body
}

fn content(value: &Value) -> Value {
    serde_json::from_str(value["choices"][0]["message"]["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn without_tools_the_upstream_gets_response_format_and_the_answer_is_checked() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("```json\n{\"city\": \"Paris\", \"temp_c\": 18}\n```"));
    let value = gw.complete(&chat_request(false, false)).await;
    assert_eq!(content(&value), json!({"city": "Paris", "temp_c": 18}));
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema());
    assert!(sent["messages"][0]["content"].as_str().unwrap().contains("# Answer format"));
}

#[tokio::test]
async fn a_wrong_answer_is_asked_for_again_with_what_was_wrong() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": \"warm\"}"));
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
    let text = gw.stream_ok(&chat_request(true, false)).await;
    let streamed = crate::common::check_stream(&text, false);
    assert_eq!(
        serde_json::from_str::<Value>(&streamed.content).unwrap(),
        json!({"city": "Paris", "temp_c": 18})
    );
    let second = &gw.upstream.requests()[1];
    let last = second["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(last.contains("$.temp_c: expected integer, got string"), "{last}");
}

#[tokio::test]
async fn an_upstream_that_refuses_response_format_gets_it_in_the_prompt() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream
        .push(Reply::error(400, json!({"error": {"message": "response_format is not supported"}})));
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
    let value = gw.complete(&chat_request(false, false)).await;
    assert_eq!(content(&value)["temp_c"], 18);
    let requests = gw.upstream.requests();
    assert!(
        requests[0].get("response_format").is_some()
            && requests[1].get("response_format").is_none()
    );
}

#[tokio::test]
async fn tools_and_a_format_work_together() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(format!(
        "Let me check. {}",
        hermes("get_weather", json!({"city": "Paris"}))
    )));
    let value = gw.complete(&chat_request(false, true)).await;
    assert_eq!(value["choices"][0]["finish_reason"], "tool_calls");
    let sent = &gw.upstream.requests()[0];
    assert!(sent.get("response_format").is_none(), "a call must stay possible");
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("rather than call a tool") && system.contains("# Tools"), "{system}");
}

#[tokio::test]
async fn an_answer_that_never_fits_is_an_error_that_carries_it() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("It is 18 degrees in Paris."));
    gw.upstream.push(Reply::text("Sunny and 18."));
    let err = Api::OpenAi.fails(&gw, &chat_request(false, false)).await;
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert_eq!(err.code.as_deref(), Some("output_invalid"));
    assert!(err.message.contains("Sunny and 18."), "{}", err.message);
}

#[tokio::test]
async fn messages_and_responses_formats_are_checked_too() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
    let mut body = crate::anthropic::request("Weather in Paris?");
    body.as_object_mut().unwrap().remove("tools");
    body["output_config"] = json!({"format": {"type": "json_schema", "schema": schema()}});
    let value: Value =
        crate::anthropic::post(&gw, "/v1/messages", &body).await.json().await.unwrap();
    let text = value["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap()["temp_c"], 18);

    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": \"18\"}"));
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
    let body = json!({"model": "m", "input": "Weather in Paris?", "text": {"format": {"type": "json_schema", "name": "weather", "schema": schema(), "strict": true}}});
    let value: Value = gw
        .http()
        .post(gw.url("/v1/responses"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = value["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap()["temp_c"], 18);
    assert_eq!(gw.upstream.requests().len(), 3);
}
