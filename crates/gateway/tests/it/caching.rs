//! Issue 25: prompt caching. An upstream's prefix cache reuses a prompt only up to the first
//! byte that differs, so the emulated prompt of each turn must begin with the whole prompt of
//! the turn before; cached tokens the upstream reports reach the client in its family's
//! usage; the client's cache hints reach the upstream.

use serde_json::{Value, json};

use crate::common::api::Api;
use crate::common::{
    Reply, TestGateway, content_frame, finish_frames, hermes, role_frame, spawn_gateway,
};

/// The messages an upstream request carried.
fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

/// Turn after turn of an agent loop on `api`: a call, its result, the answer, a new
/// question. Each turn's upstream request must start with every message of the turn before,
/// byte for byte.
async fn turns(gw: &TestGateway, api: Api) {
    let call = hermes("get_weather", json!({"city": "Paris"}));
    let mut history: Vec<Value> = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    let mut sent = Vec::new();
    for turn in 0..3 {
        gw.upstream.push(Reply::text(if turn == 0 {
            call.clone()
        } else {
            format!("Answer {turn}.")
        }));
        let mut body = api.request("unused", true, false);
        body["messages"] = json!(history);
        let response = api.send(gw, &body).await;
        assert!(response.status().is_success(), "{api:?} turn {turn}");
        let reply: Value = response.json().await.unwrap();
        sent.push(gw.upstream.requests().pop().unwrap());
        match (api, turn) {
            (Api::OpenAi, 0) => {
                let message = reply["choices"][0]["message"].clone();
                let id = message["tool_calls"][0]["id"].clone();
                history.push(message);
                history.push(json!({"role": "tool", "tool_call_id": id, "content": "sunny, 24 C"}));
            }
            (Api::Anthropic, 0) => {
                let id = reply["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|b| b["type"] == "tool_use")
                    .unwrap()["id"]
                    .clone();
                history.push(json!({"role": "assistant", "content": reply["content"]}));
                history.push(json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id, "content": "sunny, 24 C"}]}));
            }
            (Api::OpenAi, _) => {
                history.push(reply["choices"][0]["message"].clone());
                history.push(json!({"role": "user", "content": "And tomorrow?"}));
            }
            (Api::Anthropic, _) => {
                history.push(json!({"role": "assistant", "content": reply["content"]}));
                history.push(json!({"role": "user", "content": "And tomorrow?"}));
            }
        }
    }
    for pair in sent.windows(2) {
        let (before, after) = (messages(&pair[0]), messages(&pair[1]));
        assert!(after.len() > before.len(), "{api:?}: {before:#?}\n{after:#?}");
        assert_eq!(
            after[..before.len()],
            before[..],
            "{api:?}: a turn's prompt is not a prefix of the next one's"
        );
    }
}

#[tokio::test]
async fn issue_25_each_emulated_prompt_begins_with_the_one_before() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let gw = spawn_gateway(|config| config.check_grounding = false).await;
        turns(&gw, api).await;
    }
}

/// A reply whose usage says 900 of its 1,000 prompt tokens came from the upstream's cache.
fn cached_reply() -> Reply {
    let usage = json!({"id": "chatcmpl-upstream", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 7,
        "total_tokens": 1007, "prompt_tokens_details": {"cached_tokens": 900}}});
    Reply::bytes(
        "text/event-stream",
        [
            role_frame(),
            content_frame("Hello."),
            format!("data: {usage}\n\n"),
            finish_frames("stop"),
        ],
    )
}

/// Cached tokens the upstream reports reach every family's usage: Chat Completions'
/// `prompt_tokens_details.cached_tokens`, Messages' `cache_read_input_tokens` (its
/// `input_tokens` then count the rest), Responses' `input_tokens_details.cached_tokens`.
#[tokio::test]
async fn issue_25_cached_tokens_are_reported_on_every_family() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(cached_reply());
    let completion = gw.complete(&crate::common::plain_request("Hi")).await;
    assert_eq!(completion["usage"]["prompt_tokens"], 1000, "{completion:#}");
    assert_eq!(completion["usage"]["prompt_tokens_details"]["cached_tokens"], 900);

    for stream in [false, true] {
        gw.upstream.push(cached_reply());
        let body = Api::Anthropic.request("Hi", false, stream);
        let response = Api::Anthropic.send(&gw, &body).await;
        let text = response.text().await.unwrap();
        let usage = if stream {
            let mut data = text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str::<Value>(d).unwrap());
            data.rfind(|e| e["type"] == "message_delta").unwrap()["usage"].clone()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["usage"].clone()
        };
        assert_eq!(usage["cache_read_input_tokens"], 900, "stream={stream}: {usage}");
        let input = usage["input_tokens"].as_u64().unwrap();
        assert!(input < 900, "input_tokens leave out the cached ones: {usage}");
    }

    gw.upstream.push(cached_reply());
    let response = crate::responses::post(&gw, &json!({"model": "m", "input": "Hi"})).await;
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["usage"]["input_tokens"], 1000, "{value:#}");
    assert_eq!(value["usage"]["input_tokens_details"]["cached_tokens"], 900);
}

/// A Messages request that marks its prompt for caching (`cache_control`), emulated to an
/// Anthropic upstream: the upstream is asked to cache the system text (the tool contract)
/// and the conversation so far; without a mark, nothing is asked.
#[tokio::test]
async fn issue_25_cache_control_reaches_an_anthropic_upstream() {
    let upstream =
        crate::common::anthropic::start(crate::common::anthropic::Answer::Text("Hello.")).await;
    let gw = upstream.gateway(toolshim_gateway::Mode::Emulate).await;
    let mut body = Api::Anthropic.request("Weather in Paris?", true, false);
    body["system"] =
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]);
    let response = Api::Anthropic.send(&gw, &body).await;
    assert!(response.status().is_success());
    body["system"] = json!("Be brief.");
    let response = Api::Anthropic.send(&gw, &body).await;
    assert!(response.status().is_success());
    let seen = upstream.seen.lock().unwrap();
    let (_, marked) = &seen[0];
    assert_eq!(marked["system"][0]["cache_control"]["type"], "ephemeral", "{marked:#}");
    assert!(marked["system"][0]["text"].as_str().unwrap().contains("# Tools"));
    let last = marked["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["cache_control"]["type"], "ephemeral", "{marked:#}");
    assert_eq!(last["content"][0]["text"], "Weather in Paris?");
    let (_, plain) = &seen[1];
    assert!(plain["system"].is_string(), "no mark, no breakpoint: {plain:#}");
    assert!(!plain.to_string().contains("cache_control"), "{plain:#}");
}
