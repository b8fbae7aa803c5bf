//! Usage counts every attempt: when the emulation asks the upstream again, the reply's usage
//! is the sum of the prompt and completion tokens of all attempts, on every family, streamed
//! or not. Anthropic's `input_tokens` counts the prompt as `count_tokens` does, plus what the
//! retries cost; an attempt whose upstream reported no usage is estimated.

use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{
    Reply, TestGateway, UPSTREAM_COMPLETION_TOKENS as OUT, UPSTREAM_PROMPT_TOKENS as IN,
    content_frame, finish_frames, hermes, request, role_frame, spawn_gateway, sse_data,
};

/// A reply without a call, then one with it: `tool_choice` requires a call, so two attempts.
fn push_retry(gw: &TestGateway) {
    gw.upstream.push(Reply::text("No."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
}

/// The JSON of every SSE `data:` line but `[DONE]`.
fn payloads(body: &str) -> Vec<Value> {
    sse_data(body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn chat_completions_usage_counts_every_attempt() {
    let gw = spawn_gateway(|_| {}).await;
    for stream in [false, true] {
        push_retry(&gw);
        let mut body = request("Weather in Paris?");
        body["tool_choice"] = json!("required");
        body["stream"] = json!(stream);
        body["stream_options"] = json!({"include_usage": true});
        let text = within(within(gw.post(&body)).await.text()).await.unwrap();
        let usage = if stream {
            payloads(&text).last().unwrap()["usage"].clone()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["usage"].clone()
        };
        assert_eq!(usage["prompt_tokens"], 2 * IN, "stream={stream}: {usage}");
        assert_eq!(usage["completion_tokens"], 2 * OUT, "stream={stream}: {usage}");
        assert_eq!(usage["total_tokens"], 2 * (IN + OUT), "stream={stream}: {usage}");
    }
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn responses_usage_counts_every_attempt() {
    let gw = spawn_gateway(|_| {}).await;
    for stream in [false, true] {
        push_retry(&gw);
        let body = json!({"model": "m", "input": "Weather in Paris?", "stream": stream,
            "tools": [crate::responses::weather()], "tool_choice": "required"});
        let text = within(crate::responses::post(&gw, &body).await.text()).await.unwrap();
        let response = if stream {
            crate::responses::events(&text).last().unwrap()["response"].clone()
        } else {
            serde_json::from_str(&text).unwrap()
        };
        let usage = &response["usage"];
        assert_eq!(usage["input_tokens"], 2 * IN, "stream={stream}: {usage}");
        assert_eq!(usage["output_tokens"], 2 * OUT, "stream={stream}: {usage}");
    }
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn anthropic_usage_counts_every_attempt() {
    use crate::anthropic::post;
    let gw = spawn_gateway(|_| {}).await;
    let mut body = crate::anthropic::request("Weather in Paris?");
    body["tool_choice"] = json!({"type": "any"});
    let counted: Value = post(&gw, "/v1/messages/count_tokens", &body).await.json().await.unwrap();
    let counted = counted["input_tokens"].as_u64().unwrap();
    for stream in [false, true] {
        push_retry(&gw);
        body["stream"] = json!(stream);
        let text = within(within(post(&gw, "/v1/messages", &body)).await.text()).await.unwrap();
        let usage = if stream {
            let data = text.split("\n\n").filter_map(|f| f.split_once("\ndata: ")).map(|(_, d)| d);
            let events: Vec<Value> = data.map(|d| serde_json::from_str(d).unwrap()).collect();
            let delta = events.into_iter().find(|e| e["type"] == "message_delta");
            delta.unwrap()["usage"].clone()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["usage"].clone()
        };
        // This attempt as `count_tokens` counts it, and the retried one as the upstream did.
        assert_eq!(usage["input_tokens"], counted + IN, "stream={stream}: {usage}");
        assert_eq!(usage["output_tokens"], 2 * OUT, "stream={stream}: {usage}");
    }
    assert_eq!(gw.upstream.pending(), 0);
}

/// An upstream that reports no usage: each attempt's prompt is estimated from what was sent.
#[tokio::test]
async fn attempts_without_upstream_usage_are_estimated() {
    let gw = spawn_gateway(|_| {}).await;
    let no_usage = |text: &str| {
        let frames = [role_frame(), content_frame(text), finish_frames("stop")];
        Reply::bytes("text/event-stream", frames.map(String::into_bytes))
    };
    let call = hermes("get_weather", json!({"city": "Paris"}));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("required");
    gw.upstream.push(no_usage(&call));
    let once = gw.complete(&body).await["usage"].clone();
    gw.upstream.push(no_usage("No."));
    gw.upstream.push(no_usage(&call));
    let twice = gw.complete(&body).await["usage"].clone();
    let prompt = |usage: &Value| usage["prompt_tokens"].as_u64().unwrap();
    assert!(prompt(&once) > 0, "{once}");
    // The retry's prompt is the first one and a correction: more than twice the first.
    assert!(prompt(&twice) > 2 * prompt(&once), "{once} {twice}");
    assert!(twice["completion_tokens"].as_u64().unwrap() > 0, "{twice}");
    assert_eq!(gw.upstream.pending(), 0);
}
