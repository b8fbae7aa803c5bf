//! Issue 18: reasoning reaches the clients that ask for it: OpenAI-compatible clients get
//! `reasoning_content` (when they send `reasoning_effort`, `include_reasoning`, …), Anthropic
//! clients with `thinking` get thinking blocks; others get none of it, as before. Calls inside
//! reasoning follow `reasoning_calls`.

use serde_json::{Value, json};

use crate::common::api::Api;
use crate::common::{Reply, content_frame, finish_frames, hermes, role_frame, spawn_gateway};

const REPLY: &str = "<think>The user wants Paris.</think>Paris is sunny.";

#[tokio::test]
async fn openai_clients_that_ask_get_reasoning_content() {
    let gw = spawn_gateway(|_| {}).await;
    for stream in [false, true] {
        for ask in [true, false] {
            gw.upstream.push(Reply::text(REPLY).chunks(5));
            let mut body = crate::common::request("Weather in Paris?");
            body["stream"] = json!(stream);
            if ask {
                body["reasoning_effort"] = json!("low");
            }
            let (reasoning, content) = if stream {
                let text = gw.stream_ok(&body).await;
                let mut reasoning = String::new();
                let mut content = String::new();
                for payload in crate::common::sse_data(&text).iter().filter(|p| *p != "[DONE]") {
                    let chunk: Value = serde_json::from_str(payload).unwrap();
                    let delta = &chunk["choices"][0]["delta"];
                    reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or_default());
                    content.push_str(delta["content"].as_str().unwrap_or_default());
                }
                (reasoning, content)
            } else {
                let value = gw.complete(&body).await;
                let message = &value["choices"][0]["message"];
                (
                    message["reasoning_content"].as_str().unwrap_or_default().to_owned(),
                    message["content"].as_str().unwrap_or_default().to_owned(),
                )
            };
            assert_eq!(content, "Paris is sunny.", "stream {stream} ask {ask}");
            let expected = if ask { "The user wants Paris." } else { "" };
            assert_eq!(reasoning, expected, "stream {stream} ask {ask}");
        }
    }
}

#[tokio::test]
async fn anthropic_clients_with_thinking_get_thinking_blocks() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(REPLY).chunks(5));
    let mut body = crate::anthropic::request("Weather in Paris?");
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let response = crate::anthropic::post(&gw, "/v1/messages", &body).await;
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["content"][0]["type"], "thinking", "{value}");
    assert_eq!(value["content"][0]["thinking"], "The user wants Paris.");
    assert!(value["content"][0]["signature"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(value["content"][1]["text"], "Paris is sunny.");

    gw.upstream.push(Reply::text(REPLY).chunks(5));
    body["stream"] = json!(true);
    let text = crate::anthropic::post(&gw, "/v1/messages", &body).await.text().await.unwrap();
    let folded = Api::Anthropic.fold(&text);
    assert_eq!(folded.text, "Paris is sunny.");
    let thinking: String = text
        .split("\n\n")
        .filter_map(|frame| frame.split_once("\ndata: ").map(|(_, data)| data))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| event["delta"]["type"] == "thinking_delta")
        .map(|event| event["delta"]["thinking"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(thinking, "The user wants Paris.");
    assert!(text.contains("\"type\":\"signature_delta\""), "{text}");

    gw.upstream.push(Reply::text(REPLY).chunks(5));
    body.as_object_mut().unwrap().remove("thinking");
    let text = crate::anthropic::post(&gw, "/v1/messages", &body).await.text().await.unwrap();
    assert!(!text.contains("thinking"), "no thinking without a request for it: {text}");
}

/// Reasoning the upstream already separates (`reasoning_content`) is passed on, not dropped.
#[tokio::test]
async fn reasoning_the_upstream_separates_is_passed_on() {
    let gw = spawn_gateway(|_| {}).await;
    let reasoning = "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Think first.\"},\"finish_reason\":null}]}\n\n";
    gw.upstream.push(Reply::bytes(
        "text/event-stream",
        [role_frame(), reasoning.to_owned(), content_frame("Sunny."), finish_frames("stop")],
    ));
    let mut body = crate::common::request("Weather?");
    body["include_reasoning"] = json!(true);
    let value = gw.complete(&body).await;
    assert_eq!(value["choices"][0]["message"]["reasoning_content"], "Think first.");
    assert_eq!(value["choices"][0]["message"]["content"], "Sunny.");
}

/// `reasoning_calls = "allow"` for a model makes a call inside its reasoning a call.
#[tokio::test]
async fn calls_inside_reasoning_follow_the_model_policy() {
    let gw = spawn_gateway(|config| {
        let mut entry = crate::common::model(None, None);
        entry.reasoning_calls = Some(toolshim_gateway::ReasoningCalls::Allow);
        config.models.insert("thinker".into(), entry);
    })
    .await;
    let inside = format!("<think>{}</think>", hermes("get_weather", json!({"city": "Paris"})));
    for (model, calls) in [("thinker", 1), ("mock-model", 0)] {
        gw.upstream.push(Reply::text(inside.clone()));
        let mut body = crate::common::request("Weather?");
        body["model"] = json!(model);
        let value = gw.complete(&body).await;
        let n = value["choices"][0]["message"]["tool_calls"].as_array().map_or(0, Vec::len);
        assert_eq!(n, calls, "{model}: {value}");
        assert_eq!(gw.upstream.pending(), 0, "{model}: no retry");
    }
}
