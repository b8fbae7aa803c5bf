//! Non-streaming Chat Completions through real HTTP: calls parsed out of the upstream's
//! text, `tool_choice` / `parallel_tool_calls` policy, retries, history rendering, and the
//! small GET endpoints.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{
    MODEL, Reply, UPSTREAM_COMPLETION_TOKENS, UPSTREAM_PROMPT_TOKENS, args, assert_call_id, hermes,
    model, plain_request, request, spawn_gateway, sse_data,
};

fn message(completion: &Value) -> &Value {
    &completion["choices"][0]["message"]
}

fn finish_reason(completion: &Value) -> &str {
    completion["choices"][0]["finish_reason"].as_str().unwrap()
}

fn calls(completion: &Value) -> &Vec<Value> {
    message(completion)["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool_calls: {completion:#}"))
}

/// The last message of an upstream request body (the retry's correction).
fn last_user_text(body: &Value) -> String {
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{body:#}");
    last["content"].as_str().unwrap().to_owned()
}

/// Every object key anywhere in `value`.
fn all_keys(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                out.push(key.clone());
                all_keys(value, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| all_keys(item, out)),
        _ => {}
    }
}

#[tokio::test]
async fn single_call_has_name_arguments_id_and_finish_reason() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_call_id(calls[0]["id"].as_str().unwrap());
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(finish_reason(&completion), "tool_calls");
    assert_eq!(message(&completion)["content"], Value::Null);
    assert_eq!(completion["model"], MODEL);
    // Usage is the upstream's.
    assert_eq!(completion["usage"]["prompt_tokens"], UPSTREAM_PROMPT_TOKENS);
    assert_eq!(completion["usage"]["completion_tokens"], UPSTREAM_COMPLETION_TOKENS);

    // What went upstream: streaming, no `tools`, the tool contract in the system prompt.
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["stream"], true);
    assert_eq!(sent[0]["model"], MODEL);
    assert!(sent[0].get("tools").is_none() && sent[0].get("tool_choice").is_none());
    let system = sent[0]["messages"][0]["content"].as_str().unwrap();
    assert_eq!(sent[0]["messages"][0]["role"], "system");
    assert!(system.contains("get_weather") && system.contains("<tool_call>"), "{system}");
}

#[tokio::test]
async fn text_before_a_call_is_the_content() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!("Let me check.\n{}", hermes("get_weather", json!({"city": "Paris"})));
    gw.upstream.push(Reply::text(text));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(calls(&completion).len(), 1);
    assert_eq!(message(&completion)["content"].as_str().map(str::trim), Some("Let me check."));
    assert_eq!(finish_reason(&completion), "tool_calls");
}

/// Models end their output with a newline or put blank lines before a call; whitespace is
/// not text that "preceded the calls" (2.9), so `content` stays `null`.
#[tokio::test]
async fn whitespace_around_a_call_is_not_content() {
    let gw = spawn_gateway(|_| {}).await;
    let call = hermes("get_weather", json!({"city": "Paris"}));
    for text in [format!("{call}\n"), format!("\n\n{call}")] {
        gw.upstream.push(Reply::text(text.clone()));
        let completion = gw.complete(&request("Weather in Paris?")).await;
        assert_eq!(calls(&completion).len(), 1);
        assert_eq!(message(&completion)["content"], Value::Null, "upstream text {text:?}");
    }
}

#[tokio::test]
async fn two_parallel_calls() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_weather", json!({"city": "Tokyo"}))
    );
    gw.upstream.push(Reply::text(text));
    let completion = gw.complete(&request("Paris and Tokyo?")).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 2);
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(args(&calls[1]), json!({"city": "Tokyo"}));
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    assert_eq!(finish_reason(&completion), "tool_calls");
}

/// Each dialect a chat model may fall back to is read as the same call.
#[tokio::test]
async fn dialects_hermes_bare_json_fenced_and_invoke() {
    let dialects = [
        (
            "hermes",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        ),
        ("bare json", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"),
        (
            "fenced",
            "Checking.\n\n```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Paris\"}\n}\n```\n",
        ),
        (
            "invoke",
            "<function_calls>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</function_calls>",
        ),
    ];
    let gw = spawn_gateway(|_| {}).await;
    for (dialect, text) in dialects {
        gw.upstream.push(Reply::text(text).chunks(3));
        let completion = gw.complete(&request("Weather in Paris?")).await;
        let calls = calls(&completion);
        assert_eq!(calls.len(), 1, "{dialect}: {completion:#}");
        assert_eq!(calls[0]["function"]["name"], "get_weather", "{dialect}");
        assert_eq!(args(&calls[0]), json!({"city": "Paris"}), "{dialect}");
        assert_eq!(finish_reason(&completion), "tool_calls", "{dialect}");
        let content = message(&completion)["content"].as_str().unwrap_or_default();
        for marker in ["<tool_call", "<invoke", "<function_calls", "```", "{\"name\""] {
            assert!(!content.contains(marker), "{dialect}: {marker} in {content:?}");
        }
    }
    assert_eq!(gw.upstream.requests().len(), 4, "no retries");
}

#[tokio::test]
async fn tool_choice_none_drops_calls_and_markup() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!("Here you go.\n{}", hermes("get_weather", json!({"city": "Paris"})));
    gw.upstream.push(Reply::text(text));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("none");
    let completion = gw.complete(&body).await;
    assert!(message(&completion).get("tool_calls").is_none(), "{completion:#}");
    let content = message(&completion)["content"].as_str().unwrap_or_default();
    for marker in ["<tool_call", "</tool_call", "{\"name\"", "get_weather"] {
        assert!(!content.contains(marker), "{marker} in {content:?}");
    }
    assert_eq!(finish_reason(&completion), "stop");
    // `none`: no tool contract in the prompt either.
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].to_string().contains("<tools>"), "{:#}", sent[0]);
}

#[tokio::test]
async fn tool_choice_required_retries_a_text_reply() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Paris is usually mild in spring."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("required");
    let completion = gw.complete(&body).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1);
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(finish_reason(&completion), "tool_calls");
    assert_eq!(message(&completion)["content"], Value::Null, "the rejected text is not shown");

    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2);
    let correction = last_user_text(&sent[1]);
    assert!(correction.contains("did not call a tool"), "{correction}");
    // The rejected reply is shown to the upstream before the correction.
    let messages = sent[1]["messages"].as_array().unwrap();
    let previous = &messages[messages.len() - 2];
    assert_eq!(previous["role"], "assistant");
    assert_eq!(previous["content"], "Paris is usually mild in spring.");
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn tool_choice_required_without_a_call_after_retries_is_an_error() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("No."));
    gw.upstream.push(Reply::text("Still no."));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("required");
    let (status, value) = gw.chat(&body).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{value:#}");
    let error = crate::common::assert_error_shape(&value);
    assert_eq!(error["code"], "tool_call_missing");
    assert_eq!(gw.upstream.requests().len(), 2, "max_retries = 1");
}

#[tokio::test]
async fn named_tool_choice_finishes_with_stop() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_time", json!({"timezone": "Europe/Paris"}))));
    let mut body = request("Time in Paris?");
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
    let completion = gw.complete(&body).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "get_time");
    assert_eq!(args(&calls[0]), json!({"timezone": "Europe/Paris"}));
    assert_eq!(finish_reason(&completion), "stop", "forced named function: `stop` (2.10)");
    let system = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("must call the tool `get_time`"), "{system}");
}

#[tokio::test]
async fn named_tool_choice_retries_a_call_to_another_tool() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.upstream.push(Reply::text(hermes("get_time", json!({"timezone": "Europe/Paris"}))));
    let mut body = request("Time in Paris?");
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
    let completion = gw.complete(&body).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1, "{completion:#}");
    assert_eq!(calls[0]["function"]["name"], "get_time");
    assert_eq!(gw.upstream.requests().len(), 2);
}

#[tokio::test]
async fn parallel_tool_calls_false_keeps_the_first_call() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_weather", json!({"city": "Tokyo"}))
    );
    gw.upstream.push(Reply::text(text));
    let mut body = request("Paris and Tokyo?");
    body["parallel_tool_calls"] = json!(false);
    let completion = gw.complete(&body).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1, "{completion:#}");
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(finish_reason(&completion), "tool_calls");
    let system = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("at most one tool"), "{system}");
}

#[tokio::test]
async fn unknown_tool_is_retried_then_text_is_returned() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_stock_price", json!({"ticker": "ACME"}))));
    gw.upstream.push(Reply::text("I can only check weather and time."));
    let completion = gw.complete(&request("ACME price?")).await;
    assert!(message(&completion).get("tool_calls").is_none(), "{completion:#}");
    assert_eq!(message(&completion)["content"], "I can only check weather and time.");
    assert_eq!(finish_reason(&completion), "stop");
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2);
    let correction = last_user_text(&sent[1]);
    assert!(correction.contains("does not exist"), "{correction}");
    assert!(correction.contains("get_weather") && correction.contains("get_time"));
}

/// A model that keeps calling a tool that does not exist would leave the client an empty
/// reply under `auto`: the gateway asks once more, without tools, for a plain answer.
#[tokio::test]
async fn only_unknown_tools_after_the_retries_ends_in_a_plain_answer() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("translate", json!({"text": "thank you", "to": "de"}))));
    gw.upstream.push(Reply::text(hermes("translate", json!({"text": "thank you", "to": "de"}))));
    gw.upstream.push(Reply::text("\"Thank you\" in German is \"Danke\"."));
    let completion = gw.complete(&request("Translate 'thank you' into German")).await;
    assert!(message(&completion).get("tool_calls").is_none(), "{completion:#}");
    assert_eq!(message(&completion)["content"], "\"Thank you\" in German is \"Danke\".");
    assert_eq!(finish_reason(&completion), "stop");
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 3, "two tool attempts, then one plain one");
    let system = |i: usize| sent[i]["messages"][0]["content"].as_str().unwrap_or("").to_owned();
    assert!(system(0).contains("get_weather"), "the tool attempts describe the tools");
    assert!(
        !system(2).contains("get_weather"),
        "the plain attempt has no tool contract: {:#}",
        sent[2]
    );
    // A required call never falls back to plain text.
    gw.upstream.push(Reply::text(hermes("translate", json!({"text": "x"}))));
    gw.upstream.push(Reply::text(hermes("translate", json!({"text": "x"}))));
    let mut body = request("Translate");
    body["tool_choice"] = json!("required");
    let (status, error) = gw.chat(&body).await;
    assert_eq!(status, 502, "{error:#}");
    assert_eq!(gw.upstream.requests().len(), 5);
}

#[tokio::test]
async fn refusal_is_retried_then_the_call_is_returned() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("I'm sorry, but I don't have access to tools or real-time data."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1);
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(message(&completion)["content"], Value::Null, "the refusal is not shown");
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2);
    assert!(last_user_text(&sent[1]).contains("you can"), "{:#}", sent[1]);
}

#[tokio::test]
async fn malformed_call_is_repaired_without_a_retry() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris', 'unit': 'celsius',},}\n</tool_call>",
    ));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1);
    assert_eq!(args(&calls[0]), json!({"city": "Paris", "unit": "celsius"}));
    assert_eq!(gw.upstream.requests().len(), 1);
}

#[tokio::test]
async fn call_cut_off_by_the_token_limit_is_retried() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(
        Reply::text("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par")
            .finish("length"),
    );
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = calls(&completion);
    assert_eq!(calls.len(), 1, "{completion:#}");
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(finish_reason(&completion), "tool_calls");
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 2);
    assert!(last_user_text(&sent[1]).contains("cut off"), "{:#}", sent[1]);
}

/// A call cut off inside its arguments is incomplete whatever the upstream's finish reason
/// says (a stop sequence, an upstream that reports `stop`): it is asked for again, and a
/// reply that still carries one is never a whole call: it fails (`length` only when the token
/// limit cut it; `finish.rs`).
#[tokio::test]
async fn issue_17_an_incomplete_call_is_asked_for_again_whatever_the_finish_reason() {
    let gw = spawn_gateway(|_| {}).await;
    let cut = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    gw.upstream.push(Reply::text(cut).finish("stop"));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(args(&calls(&completion)[0]), json!({"city": "Paris"}), "{completion:#}");
    assert_eq!(finish_reason(&completion), "tool_calls");
    assert_eq!(gw.upstream.requests().len(), 2);
    // Retries spent (max_retries 1), with no token limit to blame: a 502.
    gw.upstream.push(Reply::text(cut).finish("stop"));
    gw.upstream.push(Reply::text(cut).finish("stop"));
    let (status, value) = gw.chat(&request("Weather in Paris?")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{value:#}");
    assert_eq!(crate::common::assert_error_shape(&value)["code"], "call_incomplete");
}

/// Issue 17: arguments that are not JSON make no call. The reply is asked for again as
/// malformed; when the retries are spent, the reply fails (there is no token limit to blame
/// for the incomplete call, so `length` would be false) and the error shows the text.
#[tokio::test]
async fn issue_17_arguments_that_are_not_json_are_asked_for_again_then_shown_in_an_error() {
    let gw = spawn_gateway(|_| {}).await;
    let broken =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {city = Paris}}\n</tool_call>";
    gw.upstream.push(Reply::text(broken));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(args(&calls(&completion)[0]), json!({"city": "Paris"}), "{completion:#}");
    assert_eq!(finish_reason(&completion), "tool_calls");
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].to_string().contains("could not be read"), "{:#}", requests[1]);
    gw.upstream.push(Reply::text(broken));
    gw.upstream.push(Reply::text(broken));
    let (status, value) = gw.chat(&request("Weather in Paris?")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{value:#}");
    let error = crate::common::assert_error_shape(&value);
    assert_eq!(error["code"], "call_incomplete");
    assert!(error["message"].as_str().unwrap().ends_with(broken), "{error:#}");
}

#[tokio::test]
async fn text_cut_off_by_the_token_limit_finishes_with_length() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Paris is").finish("length"));
    let completion = gw.complete(&plain_request("Describe Paris.")).await;
    assert_eq!(message(&completion)["content"], "Paris is");
    assert_eq!(finish_reason(&completion), "length");
}

#[tokio::test]
async fn legacy_functions_answer_with_function_call() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let functions: Vec<Value> =
        crate::common::tools().as_array().unwrap().iter().map(|t| t["function"].clone()).collect();
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Paris?"}],
        "functions": functions});
    let completion = gw.complete(&body).await;
    let message = message(&completion);
    assert!(message.get("tool_calls").is_none(), "{completion:#}");
    assert_eq!(message["function_call"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(message["function_call"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(finish_reason(&completion), "function_call");
}

/// Assistant `tool_calls` and `tool` results reach the upstream as text.
#[tokio::test]
async fn tool_history_is_rendered_as_text_for_the_upstream() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Paris is 18°C and cloudy."));
    gw.upstream.push(Reply::text("Tokyo is warmer."));
    let history = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_IjplD4eZ1U48oji4zkaFQzaS",
            "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_IjplD4eZ1U48oji4zkaFQzaS",
            "content": "{\"temp_c\":18,\"sky\":\"cloudy\"}"}
    ]);
    let mut body = request("unused");
    body["messages"] = history.clone();
    let completion = gw.complete(&body).await;
    assert_eq!(message(&completion)["content"], "Paris is 18°C and cloudy.");
    assert_eq!(finish_reason(&completion), "stop");

    // Second turn: the same history, no `tools` in the request.
    let mut messages = history.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": "Paris is 18°C and cloudy."}));
    messages.push(json!({"role": "user", "content": "And Tokyo, compared?"}));
    let body = json!({"model": MODEL, "messages": messages});
    let completion = gw.complete(&body).await;
    assert_eq!(message(&completion)["content"], "Tokyo is warmer.");
    assert!(message(&completion).get("tool_calls").is_none());

    for sent in gw.upstream.requests() {
        let text = sent.to_string();
        let mut keys = Vec::new();
        all_keys(&sent, &mut keys);
        for key in ["tools", "tool_calls", "tool_call_id", "tool_choice", "functions"] {
            assert!(!keys.contains(&key.to_owned()), "`{key}` went upstream: {sent:#}");
        }
        for message in sent["messages"].as_array().unwrap() {
            let role = message["role"].as_str().unwrap();
            assert!(["system", "user", "assistant"].contains(&role), "{role}: {sent:#}");
            assert!(message["content"].is_string(), "{message}");
        }
        assert!(
            text.contains("Result of call call_IjplD4eZ1U48oji4zkaFQzaS (get_weather)"),
            "{sent:#}"
        );
        assert!(text.contains("temp_c"), "the result itself is there: {sent:#}");
        // The model sees its own earlier call, with id and arguments.
        let assistant =
            sent["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap()
                ["content"]
                .as_str()
                .unwrap()
                .to_owned();
        assert!(
            assistant.contains("call_IjplD4eZ1U48oji4zkaFQzaS") && assistant.contains("Paris"),
            "{assistant}"
        );
    }
}

#[tokio::test]
async fn string_arguments_are_coerced_by_the_schema() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris", "days": "3"}))));
    let completion = gw.complete(&request("3-day forecast for Paris?")).await;
    let calls = calls(&completion);
    assert_eq!(args(&calls[0]), json!({"city": "Paris", "days": 3}));
}

#[tokio::test]
async fn plain_chat_without_tools_passes_text_through() {
    let gw = spawn_gateway(|_| {}).await;
    // Without tools nothing is parsed, even text that looks like a call.
    let text = "Use {\"name\": \"x\"} as the payload.";
    gw.upstream.push(Reply::text(text).chunks(1));
    let completion = gw.complete(&plain_request("Show me a payload.")).await;
    assert_eq!(message(&completion)["content"], text);
    assert_eq!(finish_reason(&completion), "stop");
    let sent = gw.upstream.requests();
    assert_eq!(sent[0]["messages"], json!([{"role": "user", "content": "Show me a payload."}]));
}

#[tokio::test]
async fn models_lists_the_upstream_models_or_the_configured_ones() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw.http().get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["object"], "list");
    let ids: Vec<&str> =
        value["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["upstream-a", "upstream-b"]);
    for model in value["data"].as_array().unwrap() {
        assert_eq!(model["object"], "model");
        assert!(model["created"].is_u64() && model["owned_by"].is_string(), "{model}");
    }

    let gw = spawn_gateway(|config| {
        config.models.insert("small".into(), model(Some("qwen"), None));
    })
    .await;
    let value: Value =
        gw.http().get(gw.url("/v1/models?limit=1000")).send().await.unwrap().json().await.unwrap();
    assert_eq!(value["data"][0]["id"], "small");
    assert_eq!(value["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn configured_model_is_renamed_for_the_upstream() {
    let gw = spawn_gateway(|config| {
        config.models.insert("small".into(), model(Some("qwen2.5-7b"), None));
    })
    .await;
    gw.upstream.push(Reply::text("Hi."));
    let mut body = plain_request("Hello");
    body["model"] = json!("small");
    body["temperature"] = json!(0.2);
    body["max_completion_tokens"] = json!(50);
    body["metadata"] = json!({"unknown": "fields are ignored"});
    let completion = gw.complete(&body).await;
    assert_eq!(completion["model"], "small", "the client's model name comes back");
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["model"], "qwen2.5-7b");
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["max_tokens"], 50);
    assert!(sent.get("metadata").is_none(), "{sent:#}");
}

#[tokio::test]
async fn healthz_and_metrics() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw.http().get(gw.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.json::<Value>().await.unwrap(), json!({"status": "ok"}));

    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.complete(&request("Weather in Paris?")).await;
    let response = gw.http().get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(text.contains("toolshim_requests"), "{text}");
    assert!(text.contains("/v1/chat/completions"), "route label: {text}");
    assert!(text.contains("toolshim_tool_calls"), "{text}");
}

#[tokio::test]
async fn responses_carry_a_request_id() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw.http().get(gw.url("/healthz")).send().await.unwrap();
    let id = response.headers().get("x-request-id").unwrap().to_str().unwrap();
    assert!(!id.is_empty());
}

/// Issue 25: custom (freeform) tools on Chat Completions, as on the Responses API: the model
/// is asked for the tool's one raw-text input, and the client gets a `custom` call with it,
/// whole and streamed; a custom call in the history goes back to the model as that input.
#[tokio::test]
async fn custom_tools_take_raw_input_whole_and_streamed() {
    let gw = spawn_gateway(|_| {}).await;
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+\"hi\"\n*** End Patch";
    let body = json!({"model": MODEL, "messages": [
            {"role": "user", "content": "Add a.txt"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "custom",
                "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "empty patch"}],
        "tools": [{"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}}}}],
        "tool_choice": {"type": "custom", "custom": {"name": "apply_patch"}}});
    for stream in [false, true] {
        gw.upstream.push(Reply::text(hermes("apply_patch", json!({"input": patch}))).chunks(7));
        let mut body = body.clone();
        body["stream"] = json!(stream);
        let call = if stream {
            let text = gw.stream_ok(&body).await;
            let mut name = String::new();
            let mut input = String::new();
            for data in sse_data(&text).iter().filter(|d| d.as_str() != "[DONE]") {
                let chunk: Value = serde_json::from_str(data).unwrap();
                for call in
                    chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten()
                {
                    assert!(call.get("function").is_none(), "{call}");
                    assert!(call.get("type").is_none(), "no type the chunk schema lacks: {call}");
                    name.push_str(call["custom"]["name"].as_str().unwrap_or(""));
                    input.push_str(call["custom"]["input"].as_str().unwrap());
                }
            }
            json!({"type": "custom", "custom": {"name": name, "input": input}})
        } else {
            let (status, completion) = gw.chat(&body).await;
            assert_eq!(status, StatusCode::OK, "{completion}");
            completion["choices"][0]["message"]["tool_calls"][0].clone()
        };
        assert_eq!(call["type"], "custom", "stream={stream}: {call}");
        assert_eq!(call["custom"]["name"], "apply_patch");
        assert_eq!(call["custom"]["input"], patch, "stream={stream}");
    }
    let sent = gw.upstream.requests()[0].clone();
    let history = sent["messages"][2]["content"].as_str().unwrap();
    assert!(
        history.contains(r#""input":"*** Begin Patch\n*** End Patch""#),
        "the history's input: {history}"
    );
}
