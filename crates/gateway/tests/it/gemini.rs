//! The Gemini API (issue 28): `generateContent` and `streamGenerateContent` (SSE with
//! `alt=sse`, a JSON array without) emulated against a scripted upstream, Gemini's key in
//! `x-goog-api-key` or `?key=`, and its error shape. The official `google-genai` SDK drives it
//! end to end in `tests/e2e/test_gemini.py`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{MODEL, Reply, hermes, spawn_gateway};

fn request() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather",
            "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}]})
}

#[tokio::test]
async fn issue_28_a_stream_without_alt_is_one_json_array() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(format!(
        "Checking. {}",
        hermes("get_weather", json!({"city": "Paris"}))
    )));
    let url = gw.url(&format!("/v1beta/models/{MODEL}:streamGenerateContent"));
    let response = within(gw.http().post(url).json(&request()).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_str(&within(response.text()).await.unwrap()).unwrap();
    let chunks = body.as_array().unwrap();
    let call = chunks
        .iter()
        .find_map(|c| c["candidates"][0]["content"]["parts"][0].get("functionCall"))
        .unwrap();
    assert_eq!(
        (call["name"].clone(), call["args"].clone()),
        (json!("get_weather"), json!({"city": "Paris"}))
    );
    let last = chunks.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(last["usageMetadata"]["totalTokenCount"].as_u64().is_some(), "{last}");
}

#[tokio::test]
async fn issue_28_geminis_key_and_errors() {
    let gw = spawn_gateway(|config| config.api_keys = vec!["sk-gemini".into()]).await;
    gw.upstream.push(Reply::text("Hello."));
    gw.upstream.push(Reply::text("Hello again."));
    let url = |rest: &str| gw.url(&format!("/v1beta/models/{MODEL}{rest}"));
    let none =
        within(gw.http().post(url(":generateContent")).json(&request()).send()).await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let error: Value = within(none.json()).await.unwrap();
    assert_eq!(error["error"]["status"], "UNAUTHENTICATED", "{error}");
    assert_eq!(error["error"]["code"], 401);
    let header = gw.http().post(url(":generateContent")).header("x-goog-api-key", "sk-gemini");
    assert_eq!(within(header.json(&request()).send()).await.unwrap().status(), StatusCode::OK);
    let query = gw.http().post(url(":generateContent?key=sk-gemini"));
    assert_eq!(within(query.json(&request()).send()).await.unwrap().status(), StatusCode::OK);
    let listed = gw.http().get(gw.url("/v1/models?key=sk-gemini"));
    let listed: Value = within(within(listed.send()).await.unwrap().json()).await.unwrap();
    assert!(listed["models"].is_array(), "Gemini's list on /v1/models with Gemini's key: {listed}");
    let bad = gw
        .http()
        .post(url(":generateContent?key=sk-gemini"))
        .json(&json!({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}));
    let bad = within(bad.send()).await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let error: Value = within(bad.json()).await.unwrap();
    assert_eq!(error["error"]["status"], "INVALID_ARGUMENT", "{error}");
    assert_eq!(gw.upstream.pending(), 0);
}

/// Natively (`native` and `auto`), the upstream gets the tools (as JSON Schema) and answers
/// with a native call, which reaches the client as a `functionCall`, streamed and not.
#[tokio::test]
async fn issue_28_gemini_calls_tools_natively_in_native_and_auto() {
    for mode in [toolshim_gateway::Mode::Native, toolshim_gateway::Mode::Auto] {
        let gw = spawn_gateway(|config| config.mode = mode).await;
        for method in ["generateContent", "streamGenerateContent?alt=sse"] {
            let reply = crate::native_families::native_call("get_weather", r#"{"city": "Paris"}"#);
            gw.upstream.push(reply);
            let url = gw.url(&format!("/v1beta/models/{MODEL}:{method}"));
            let text =
                within(within(gw.http().post(url).json(&request()).send()).await.unwrap().text())
                    .await
                    .unwrap();
            assert!(
                text.contains(r#""functionCall":{"args":{"city":"Paris"}"#)
                    || text.contains(r#""args":{"city":"Paris"}"#),
                "{mode:?} {method}: {text}"
            );
            let sent = gw.upstream.requests().pop().unwrap();
            let parameters = &sent["tools"][0]["function"]["parameters"];
            assert_eq!(parameters["properties"]["city"]["type"], "string", "{sent}");
        }
    }
}

/// A model no route serves is Gemini's 404.
#[tokio::test]
async fn issue_28_a_model_no_route_serves_is_not_found() {
    let gw = crate::ollama::serving_llama().await;
    let url = gw.url("/v1beta/models/nope:generateContent");
    let response = within(gw.http().post(url).json(&request()).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let error: Value = within(response.json()).await.unwrap();
    assert_eq!(error["error"]["status"], "NOT_FOUND", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("`nope`"), "{error}");
    let model = within(gw.http().get(gw.url("/v1beta/models/llama3.2")).send()).await.unwrap();
    assert_eq!(model.status(), StatusCode::OK);
    // `/v1/models/NAME` is OpenAI's retrieve without Gemini's key, Gemini's with it.
    let openai = within(gw.http().get(gw.url("/v1/models/llama3.2")).send()).await.unwrap();
    let openai: Value = within(openai.json()).await.unwrap();
    assert_eq!(
        (openai["id"].clone(), openai["object"].clone()),
        (json!("llama3.2"), json!("model"))
    );
    let gemini = gw.http().get(gw.url("/v1/models/llama3.2?key=k"));
    let gemini: Value = within(within(gemini.send()).await.unwrap().json()).await.unwrap();
    assert_eq!(gemini["name"], "models/llama3.2", "{gemini}");
    let missing = within(gw.http().get(gw.url("/v1/models/nope")).send()).await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let missing: Value = within(missing.json()).await.unwrap();
    assert_eq!(missing["error"]["code"], "model_not_found", "{missing}");
}
