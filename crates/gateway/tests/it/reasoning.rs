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
    let mut body = crate::common::request("Weather in Paris?");
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
        let mut body = crate::common::request("Weather in Paris?");
        body["model"] = json!(model);
        let value = gw.complete(&body).await;
        let n = value["choices"][0]["message"]["tool_calls"].as_array().map_or(0, Vec::len);
        assert_eq!(n, calls, "{model}: {value}");
        assert_eq!(gw.upstream.pending(), 0, "{model}: no retry");
    }
}

/// The reasoning and the text of a reply on either API, streamed or not.
async fn reasoning_and_text(
    api: Api,
    gw: &crate::common::TestGateway,
    body: &Value,
) -> (String, String) {
    let stream = body["stream"].as_bool().unwrap_or(false);
    let response = api.send(gw, body).await;
    assert_eq!(response.status(), axum::http::StatusCode::OK, "{api:?}");
    let (mut reasoning, mut text) = (String::new(), String::new());
    if !stream {
        let value: Value = response.json().await.unwrap();
        match api {
            Api::OpenAi => {
                let message = &value["choices"][0]["message"];
                reasoning.push_str(message["reasoning_content"].as_str().unwrap_or_default());
                text.push_str(message["content"].as_str().unwrap_or_default());
            }
            Api::Anthropic => {
                for block in value["content"].as_array().unwrap() {
                    reasoning.push_str(block["thinking"].as_str().unwrap_or_default());
                    text.push_str(block["text"].as_str().unwrap_or_default());
                }
            }
        }
        return (reasoning, text);
    }
    let body = response.text().await.unwrap();
    text = api.fold(&body).text;
    for data in body.split("\n\n").filter_map(|f| f.split("data: ").nth(1)) {
        let Ok(event) = serde_json::from_str::<Value>(data) else { continue };
        let piece = match api {
            Api::OpenAi => &event["choices"][0]["delta"]["reasoning_content"],
            Api::Anthropic => &event["delta"]["thinking"],
        };
        reasoning.push_str(piece.as_str().unwrap_or_default());
    }
    (reasoning, text)
}

/// Issue 18: reasoning is told apart from the answer whether or not the request has tools;
/// it reaches only the clients that asked for it, on both APIs, streamed or not.
#[tokio::test]
async fn without_tools_reasoning_is_separated_and_shown_only_when_asked() {
    let gw = spawn_gateway(|_| {}).await;
    for api in crate::common::api::APIS {
        for stream in [false, true] {
            for ask in [false, true] {
                gw.upstream.push(Reply::text(REPLY).chunks(3));
                let mut body = api.request("Weather in Paris?", false, stream);
                if ask {
                    match api {
                        Api::OpenAi => body["reasoning_effort"] = json!("low"),
                        Api::Anthropic => {
                            body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024})
                        }
                    }
                }
                let (reasoning, text) = reasoning_and_text(api, &gw, &body).await;
                let case = format!("{api:?} stream {stream} ask {ask}");
                assert_eq!(text, "Paris is sunny.", "{case}");
                assert_eq!(reasoning, if ask { "The user wants Paris." } else { "" }, "{case}");
            }
        }
    }
}

/// The Responses API always shows reasoning, as a reasoning item, with or without tools,
/// streamed or not.
#[tokio::test]
async fn responses_without_tools_get_a_reasoning_item() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(REPLY).chunks(3));
    let body = json!({"model": "m", "input": "Weather in Paris?"});
    let value: Value = gw.post_to("/v1/responses", &body).await.json().await.unwrap();
    let output = value["output"].as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "message"], "{value}");
    assert_eq!(output[0]["content"][0]["text"], "The user wants Paris.");
    assert_eq!(output[1]["content"][0]["text"], "Paris is sunny.");

    gw.upstream.push(Reply::text(REPLY).chunks(3));
    let body = json!({"model": "m", "input": "Weather in Paris?", "stream": true});
    let text = gw.post_to("/v1/responses", &body).await.text().await.unwrap();
    let events: Vec<Value> = text
        .split("\n\n")
        .filter_map(|frame| frame.split_once("\ndata: ").map(|(_, data)| data))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let joined = |kind: &str| -> String {
        events.iter().filter(|e| e["type"] == kind).map(|e| e["delta"].as_str().unwrap()).collect()
    };
    assert_eq!(joined("response.reasoning_text.delta"), "The user wants Paris.");
    assert_eq!(joined("response.output_text.delta"), "Paris is sunny.");
}

/// A reasoning model's structured answer starts with its reasoning: the answer after it is
/// what is checked, and the reasoning goes to the clients that asked.
#[tokio::test]
async fn a_structured_answer_after_reasoning_is_valid() {
    let gw = spawn_gateway(|_| {}).await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    for (stream, ask) in [(false, false), (true, true)] {
        gw.upstream.push(
            Reply::text("<think>JSON with the city.</think>\n{\"city\": \"Paris\"}").chunks(4),
        );
        let mut body = crate::common::plain_request("Which city?");
        body["response_format"] = json!({"type": "json_schema",
            "json_schema": {"name": "city", "schema": schema, "strict": true}});
        body["stream"] = json!(stream);
        if ask {
            body["reasoning_effort"] = json!("low");
        }
        let (reasoning, text) = reasoning_and_text(Api::OpenAi, &gw, &body).await;
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"city": "Paris"}));
        assert_eq!(reasoning, if ask { "JSON with the city." } else { "" });
    }
    assert_eq!(gw.upstream.requests().len(), 2, "no retry: the answer fitted");
}

/// Streamed reasoning goes out as the model writes it, before the answer can commit: a
/// client that asked is not kept waiting for the whole reasoning. The upstream here sends
/// its reasoning and then nothing more; the reasoning still arrives.
#[tokio::test]
async fn streamed_reasoning_is_not_held_until_the_answer_commits() {
    use futures::StreamExt;
    let gw = spawn_gateway(|_| {}).await;
    let thinking = "<think>The user wants the weather in Paris.</think>";
    let frames = 1 + thinking.len().div_ceil(5);
    for api in crate::common::api::APIS {
        gw.upstream.push(Reply::text(thinking).chunks(5).stall_after(frames));
        let mut body = api.request("Weather in Paris?", true, true);
        match api {
            Api::OpenAi => body["reasoning_effort"] = json!("low"),
            Api::Anthropic => body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024}),
        }
        let response = api.send(&gw, &body).await;
        let mut bytes = response.bytes_stream();
        let mut received = String::new();
        // Within the deadline, although the upstream never finishes its reply.
        while reasoning_in(api, &received) != "The user wants the weather in Paris." {
            let chunk = crate::common::api::within(bytes.next()).await.unwrap().unwrap();
            received.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert!(!api.fold(&received).finished, "{api:?}: {received}");
    }
}

/// The reasoning in the complete events of a stream so far.
fn reasoning_in(api: Api, received: &str) -> String {
    let complete = received.rsplit_once("\n\n").map_or("", |(done, _)| done);
    complete
        .split("\n\n")
        .filter_map(|frame| frame.split("data: ").nth(1))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|event| {
            let piece = match api {
                Api::OpenAi => &event["choices"][0]["delta"]["reasoning_content"],
                Api::Anthropic => &event["delta"]["thinking"],
            };
            piece.as_str().map(str::to_owned)
        })
        .collect()
}
