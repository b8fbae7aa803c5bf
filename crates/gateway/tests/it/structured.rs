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
    let value: Value = gw.post_to("/v1/responses", &body).await.json().await.unwrap();
    let text = value["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap()["temp_c"], 18);
    assert_eq!(gw.upstream.requests().len(), 3);
}

/// In `auto` mode (the default) a request with a format goes through the pipeline, not
/// straight through: the answer is checked and asked for again, streamed or not.
#[tokio::test]
async fn in_auto_mode_a_format_is_checked_and_asked_for_again() {
    let gw = spawn_gateway(|config| config.mode = toolshim_gateway::Mode::Auto).await;
    for stream in [false, true] {
        gw.upstream.push(Reply::text("It is 18 degrees in Paris."));
        gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
        let body = chat_request(stream, false);
        let answer = if stream {
            crate::common::check_stream(&gw.stream_ok(&body).await, false).content
        } else {
            gw.complete(&body).await["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["temp_c"], 18, "{stream}");
    }
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 4, "each answer was asked for again once");
    assert_eq!(sent[0]["response_format"]["json_schema"]["schema"], schema());
    assert!(sent[0]["messages"][0]["content"].as_str().unwrap().contains("# Answer format"));
}

/// An upstream that refused `response_format` for a model is not offered it again for that
/// model until `native_refusal_secs` have passed; 0 remembers nothing.
#[tokio::test]
async fn a_refusal_of_response_format_is_remembered() {
    let refused =
        || Reply::error(400, json!({"error": {"message": "response_format is not supported"}}));
    let paris = || Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}");
    let lyon = || Reply::text("{\"city\": \"Lyon\", \"temp_c\": 20}");
    let cases = [
        (600.0, vec![refused(), paris(), lyon()], vec![true, false, false]),
        (0.0, vec![refused(), paris(), refused(), lyon()], vec![true, false, true, false]),
    ];
    for (secs, script, offered) in cases {
        let gw = spawn_gateway(|config| config.native_refusal_secs = secs).await;
        for reply in script {
            gw.upstream.push(reply);
        }
        assert_eq!(content(&gw.complete(&chat_request(false, false)).await)["city"], "Paris");
        assert_eq!(content(&gw.complete(&chat_request(false, false)).await)["city"], "Lyon");
        let sent: Vec<bool> =
            gw.upstream.requests().iter().map(|r| r.get("response_format").is_some()).collect();
        assert_eq!(sent, offered, "native_refusal_secs {secs}");
    }
}

/// With tools and a format, the turn after the tool result is the answer: it is checked and
/// asked for again like any other (in `auto` mode too).
#[tokio::test]
async fn the_answer_after_a_tool_result_is_checked() {
    let gw = spawn_gateway(|config| config.mode = toolshim_gateway::Mode::Auto).await;
    gw.upstream.push(Reply::text("It is 18 degrees and sunny in Paris."));
    gw.upstream.push(Reply::text("{\"city\": \"Paris\", \"temp_c\": 18}"));
    let mut body = chat_request(false, true);
    body["messages"] = json!([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}]);
    let value = gw.complete(&body).await;
    assert_eq!(content(&value), json!({"city": "Paris", "temp_c": 18}));
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2, "the prose answer was asked for again");
    assert!(sent[0].get("tools").is_none() && sent[0].get("response_format").is_none());
    let last = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(last.contains("not valid JSON"), "{last}");
}

/// An Anthropic upstream gets a JSON schema as its own `output_config.format`.
#[tokio::test]
async fn an_anthropic_upstream_gets_the_schema_as_output_config() {
    let upstream = crate::common::anthropic::start(crate::common::anthropic::Answer::Text(
        "{\"city\": \"Paris\", \"temp_c\": 18}",
    ))
    .await;
    let gw = upstream.gateway(toolshim_gateway::Mode::Emulate).await;
    let value = gw.complete(&chat_request(false, false)).await;
    assert_eq!(content(&value)["temp_c"], 18);
    let mut body = crate::common::plain_request("Weather in Paris?");
    body["response_format"] = json!({"type": "json_object"});
    gw.complete(&body).await;
    let seen = upstream.seen.lock().unwrap();
    assert_eq!(
        seen[0].1["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema()}})
    );
    assert!(seen[1].1.get("output_config").is_none(), "json_object: the prompt alone");
}
