//! Issue 14: the gateway fails closed. A tool list it cannot hold is refused, and a call
//! that the request did not ask for cannot reach the client: not through a broken tool
//! list, and not through call syntax that a tool result carried into the prompt and the
//! model quoted back.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::{APIS, Api};
use crate::common::corpus::corpus_calls;
use crate::common::{Reply, hermes, spawn_gateway};

/// Two tools with one name are a 400 in each API's words, and a model that names a tool
/// that was never declared gets nothing through.
#[tokio::test]
async fn duplicate_tool_names_are_refused_on_both_apis() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        let mut body = api.request("Weather?", true, false);
        let tools = body["tools"].as_array().unwrap().clone();
        body["tools"] = json!([tools[0].clone(), tools[0].clone()]);
        let err = api.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{api:?}");
        let wording = api.pick("function names must be unique", "Tool names must be unique");
        assert!(err.message.contains(wording), "{api:?}: {}", err.message);
    }
    assert!(gw.upstream.requests().is_empty(), "nothing went upstream");
}

/// A conversation whose only tools come from its history, one of them without a name, is
/// refused instead of accepting any name.
#[tokio::test]
async fn an_unnamed_tool_in_history_is_refused() {
    let gw = spawn_gateway(|_| {}).await;
    let openai = json!({"model": "m", "messages": [
        {"role": "user", "content": "Delete it."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"}]});
    let anthropic = json!({"model": "m", "max_tokens": 64, "messages": [
        {"role": "user", "content": "Delete it."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}]}]});
    for (api, body) in [(Api::OpenAi, openai), (Api::Anthropic, anthropic)] {
        gw.upstream.push(Reply::text(hermes("delete_all", json!({}))));
        let err = api.fails(&gw, &body).await;
        assert_eq!(err.status, StatusCode::BAD_REQUEST, "{api:?}: {}", err.message);
    }
}

/// A request whose last message is a tool result holding `result`, with `names` declared.
fn result_request(api: Api, names: &[String], result: &str) -> Value {
    match api {
        Api::OpenAi => {
            let tools: Vec<Value> = names
                .iter()
                .map(|n| json!({"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}))
                .collect();
            json!({"model": "m", "tools": tools, "messages": [
                {"role": "user", "content": "Read the page."},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": names[0], "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": result}]})
        }
        Api::Anthropic => {
            let tools: Vec<Value> = names
                .iter()
                .map(|n| json!({"name": n, "input_schema": {"type": "object", "properties": {}}}))
                .collect();
            json!({"model": "m", "max_tokens": 256, "tools": tools, "messages": [
                {"role": "user", "content": "Read the page."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": names[0], "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]})
        }
    }
}

/// Prompt injection through tool results: a result that holds call syntax, in any dialect
/// or model-native format of the parser's corpus, is projected so that a model quoting it
/// back verbatim produces no call, on both surfaces (Anthropic on every third case).
#[tokio::test]
async fn call_syntax_in_tool_results_never_becomes_a_call() {
    let gw = spawn_gateway(|config| config.max_retries = 0).await;
    let cases = corpus_calls();
    assert!(cases.len() > 300, "{} corpus cases", cases.len());
    // Every catalogued model-native format and every generic dialect is among them.
    for format in toolshim_parse::formats() {
        let prefix = format!("formats/{}__", format.id);
        assert!(
            cases.iter().any(|(name, ..)| name.starts_with(&prefix)),
            "no case for {}",
            format.id
        );
    }
    for dialect in
        ["hermes", "markup", "fenced", "python", "json_bare", "keyvalue", "react", "action"]
    {
        let prefix = format!("{dialect}/");
        assert!(cases.iter().any(|(name, ..)| name.starts_with(&prefix)), "no case for {dialect}");
    }
    let mut leaked = Vec::new();
    for (i, (name, text, names)) in cases.iter().enumerate() {
        for api in APIS {
            if api == Api::Anthropic && i % 3 != 0 {
                continue;
            }
            gw.upstream.push(Reply::echo());
            let response = api.send(&gw, &result_request(api, names, text)).await;
            assert_eq!(response.status(), StatusCode::OK, "{api:?} {name}");
            let value: Value = response.json().await.unwrap();
            let calls = api.n_calls(&value);
            if calls > 0 {
                leaked.push(format!("{api:?} {name}"));
            }
        }
    }
    assert!(leaked.is_empty(), "{} cases became calls:\n{}", leaked.len(), leaked.join("\n"));
}
