//! Issue 18, requests the gateway used to ignore or refuse: `allowed_tools` on Chat
//! Completions, Anthropic message threads, Codex's older chat wire (two assistant messages
//! for one turn), and the 400s for `n < 1`, `max_tokens <= 0` and an empty `messages`.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::api::Api;
use crate::common::{Reply, args, hermes, request, spawn_gateway};

/// `allowed_tools` shows the model only the allowed tools, accepts only them, and honours its
/// mode.
#[tokio::test]
async fn allowed_tools_narrow_what_the_model_sees_and_may_call() {
    let gw = spawn_gateway(|_| {}).await;
    let mut body = crate::common::request("Weather and time in Paris?");
    body["tool_choice"] = json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
        "tools": [{"type": "function", "function": {"name": "get_time"}}]}});
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_time", json!({"timezone": "Europe/Paris"}))
    )));
    let value = gw.complete(&body).await;
    let calls = value["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    let names: Vec<&str> = calls.iter().map(|c| c["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_time"], "only the allowed tool reaches the client");
    let prompt = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(prompt.contains("get_time") && !prompt.contains("\"get_weather\""), "{prompt}");
    assert!(prompt.contains("must call at least one tool"), "required mode: {prompt}");
}

/// `allowed_tools` with mode `auto`: a plain answer is an answer (no call is required), and a
/// call to a tool outside the subset is an unknown tool, asked for again.
#[tokio::test]
async fn allowed_tools_in_auto_mode_allow_a_plain_answer_and_only_their_calls() {
    let gw = spawn_gateway(|_| {}).await;
    let mut body = crate::common::request("Weather and time in Paris?");
    body["tool_choice"] = json!({"type": "allowed_tools", "allowed_tools": {"mode": "auto",
        "tools": [{"type": "function", "function": {"name": "get_time"}}]}});
    gw.upstream.push(Reply::text("It is noon and sunny in Paris."));
    let value = gw.complete(&body).await;
    assert_eq!(value["choices"][0]["message"]["content"], "It is noon and sunny in Paris.");
    let prompt = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(prompt.contains("get_time") && !prompt.contains("\"get_weather\""), "{prompt}");
    assert!(!prompt.contains("must call at least one tool"), "auto mode: {prompt}");

    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.upstream.push(Reply::text(hermes("get_time", json!({"timezone": "Europe/Paris"}))));
    let value = gw.complete(&body).await;
    let calls = value["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    let names: Vec<&str> = calls.iter().map(|c| c["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["get_time"]);
    assert_eq!(gw.upstream.requests().len(), 3, "the call outside the subset was asked again");
}

/// A Messages request with `thread` gets Anthropic's `thread_unsupported_request`, whose
/// details make the SDK resend the full history without a thread.
#[tokio::test]
async fn a_thread_gets_thread_unsupported_request() {
    let gw = spawn_gateway(|_| {}).await;
    let mut body = crate::anthropic::request("Hi");
    body["thread"] = json!({"type": "create"});
    let err = Api::Anthropic.fails(&gw, &body).await;
    assert_eq!(err.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        err.body["error"]["details"],
        json!({"error_code": "thread_unsupported_request", "unsupported": ["thread"]})
    );
    assert!(gw.upstream.requests().is_empty());
}

/// Codex's older chat wire: the calls, then the text of the same turn, then the results.
#[tokio::test]
async fn consecutive_assistant_messages_are_one_turn() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("It is 18C."));
    let body = json!({"model": "m", "tools": crate::common::tools(), "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "assistant", "content": "Checking the weather."},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]});
    let value = gw.complete(&body).await;
    assert_eq!(value["choices"][0]["message"]["content"], "It is 18C.");
    let sent = &gw.upstream.requests()[0]["messages"];
    let assistant = sent.as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap();
    let text = assistant["content"].as_str().unwrap();
    assert!(text.contains("Checking the weather.") && text.contains("call_1"), "{text}");
}

/// Values the APIs refuse are 400s in their words, not 200s.
#[tokio::test]
async fn out_of_range_values_are_400s() {
    let gw = spawn_gateway(|_| {}).await;
    for (key, value) in
        [("n", json!(0)), ("max_tokens", json!(0)), ("max_completion_tokens", json!(-5))]
    {
        let mut body = crate::common::plain_request("Hi");
        body[key] = value;
        let err = Api::OpenAi.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{key}");
        assert_eq!(err.code.as_deref(), Some("integer_below_min_value"), "{key}");
    }
    let mut body = crate::anthropic::request("Hi");
    body["max_tokens"] = json!(0);
    assert_eq!(Api::Anthropic.fails(&gw, &body).await.status, StatusCode::BAD_REQUEST);
    body["max_tokens"] = json!(64);
    body["messages"] = json!([]);
    let err = Api::Anthropic.fails(&gw, &body).await;
    assert!(err.message.contains("at least 1 item"), "{}", err.message);
    assert!(gw.upstream.requests().is_empty());
}

/// Time to first text: a plain answer is released once its first sentence shows it is no
/// refusal, not after the whole 200-character refusal window (seconds at a small local
/// model's pace). A refusal is still held and retried.
#[tokio::test]
async fn a_plain_answer_is_released_after_its_first_sentence() {
    use futures::StreamExt;
    let gw = spawn_gateway(|_| {}).await;
    let answer = "Paris in spring is mild and often sunny. Chestnut trees bloom along the boulevards, cafe terraces fill from late morning on, and evenings stay light until nine; a short shower rarely lasts long.";
    gw.upstream.push(Reply::text(answer).chunks(4).delay(std::time::Duration::from_millis(15)));
    let mut body = crate::common::request("What is Paris like in spring?");
    body["stream"] = json!(true);
    let sent = gw.upstream.sent_bytes();
    let response = gw.post(&body).await;
    let mut bytes = response.bytes_stream();
    let mut received = String::new();
    while !received.contains("\"content\":\"Paris") {
        let chunk = crate::common::api::within(bytes.next()).await.unwrap().unwrap();
        received.push_str(&String::from_utf8_lossy(&chunk));
    }
    let at_first_text = *sent.borrow();
    while let Some(chunk) = crate::common::api::within(bytes.next()).await {
        received.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let total = *sent.borrow();
    // The first sentence is a fifth of the answer (the 200-character window was all of it).
    assert!(
        at_first_text * 3 < total,
        "the first text came after {at_first_text} of {total} upstream bytes"
    );
    assert!(received.contains("[DONE]"));

    gw.upstream.push(Reply::text("I'm sorry, but I don't have access to real-time weather data, so I cannot check it for you today."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let text = gw.stream_ok(&body).await;
    assert!(!text.contains("sorry"), "a refusal is not released: {text}");
    assert!(text.contains("get_weather"), "{text}");
}

/// A pleasantry before a refusal does not release the text: "I'd be happy to help with that."
/// is a whole first sentence, and the refusal after it is still retried unseen.
#[tokio::test]
async fn a_hedge_before_a_refusal_is_not_released() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(
        "I'd be happy to help with that. Unfortunately, I don't have access to real-time weather data.",
    ));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let mut body = request("What is the weather in Paris?");
    body["stream"] = json!(true);
    let text = gw.stream_ok(&body).await;
    let streamed = crate::common::check_stream(&text, false);
    assert_eq!(streamed.content, "", "nothing of the refusal reached the client");
    assert_eq!(streamed.names(), ["get_weather"]);
    assert_eq!(gw.upstream.requests().len(), 2);
}

/// Found trying the README on the local model: a small model that starts its reply with a
/// tool result ("Result of call 1 (get_weather): …") is cut off by the stop sequence at once,
/// and the client got an empty answer. An empty reply to a request with tools is asked for
/// again, with what was wrong; a reply with reasoning only is not empty.
#[tokio::test]
async fn an_empty_reply_to_a_request_with_tools_is_asked_for_again() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(""));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2);
    let retry = sent[1]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(retry.contains("Your reply was empty"), "{retry}");
    // Without tools an empty reply is an answer.
    gw.upstream.push(Reply::text(""));
    let completion = gw.complete(&crate::common::plain_request("Say nothing.")).await;
    assert_eq!(completion["choices"][0]["message"]["content"], "");
    assert_eq!(gw.upstream.requests().len(), 3);
}
