//! `native` passes requests through; `auto` tries native and falls back to emulation when the
//! upstream rejects tools.

use axum::http::StatusCode;
use serde_json::json;
use toolshim_gateway::Mode;

use crate::common::{MODEL, Reply, args, hermes, model, request, spawn_gateway, sse_data};

/// The content deltas of a relayed stream, joined.
fn content(body: &str) -> String {
    sse_data(body)
        .iter()
        .filter(|data| data.as_str() != "[DONE]")
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn native_mode_passes_tools_through_and_relays_the_reply() {
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Native;
        config.models.insert(MODEL.into(), model(Some("up-model"), None));
    })
    .await;
    gw.upstream.push(Reply::text("native answer"));
    let mut body = request("Weather in Paris?");
    body["stream"] = json!(true);
    let (status, _, text) = gw.chat_stream(&body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content(&text), "native answer", "the upstream's stream is relayed: {text}");
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["model"], "up-model", "the model is renamed for the upstream");
    assert_eq!(sent["tools"], body["tools"], "tools go upstream untouched");
    assert!(
        sent["messages"].as_array().unwrap().iter().all(|m| m["role"] != "system"),
        "no tool prompt"
    );
}

#[tokio::test]
async fn auto_mode_falls_back_to_emulation_when_the_upstream_rejects_tools() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::error(
        400,
        json!({"error": {"message": "tools are not supported", "type": "invalid_request_error"}}),
    ));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].get("tools").is_some(), "native first: {:#}", requests[0]);
    assert!(requests[1].get("tools").is_none(), "then emulated: {:#}", requests[1]);
}

#[tokio::test]
async fn auto_mode_passes_plain_chat_through() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::text("hello"));
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true, "temperature": 0});
    let (status, _, text) = gw.chat_stream(&body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content(&text), "hello", "{text}");
    assert_eq!(gw.upstream.requests()[0]["temperature"], 0);
}

#[tokio::test]
async fn auto_mode_keeps_upstream_failures_that_are_not_about_tools() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(Reply::error(429, json!({"error": {"message": "slow down"}})));
    let (status, body) = gw.chat(&request("Weather in Paris?")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(gw.upstream.requests().len(), 1);
}

#[tokio::test]
async fn the_call_format_is_chosen_per_model_and_replies_parse_in_any_dialect() {
    let gw = spawn_gateway(|config| {
        config.models.insert(MODEL.into(), model(None, Some(toolshim_gateway::CallFormat::Json)));
    })
    .await;
    // The model was taught bare JSON but answers with a <tool_call> block: still a call.
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(completion["choices"][0]["message"]["tool_calls"].as_array().unwrap().len(), 1);
    let system = gw.upstream.requests()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("a JSON object on a line of its own"), "{system}");
    assert!(!system.contains("<tool_call>"), "{system}");
}

/// What a small model answers with native tools when its engine's parser misses its calls:
/// fenced JSON in the text.
const FENCED_CALL: &str =
    "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```";

/// Issue 24: in native and auto modes, calls the upstream left in its text become calls,
/// whole and streamed; `native_repair = false` relays the text as it came.
#[tokio::test]
async fn issue_24_native_replies_are_read_for_calls_the_upstream_left_in_its_text() {
    for mode in [Mode::Native, Mode::Auto] {
        let gw = spawn_gateway(|config| config.mode = mode).await;
        gw.upstream.push(Reply::text(FENCED_CALL));
        let completion = gw.complete(&request("Weather in Paris?")).await;
        let choice = &completion["choices"][0];
        let calls = choice["message"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 1, "{mode:?}: {completion:#}");
        assert_eq!(calls[0]["function"]["name"], "get_weather");
        assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert!(
            choice["message"]["content"].as_str().unwrap_or("").trim().is_empty(),
            "{completion:#}"
        );
        let sent = &gw.upstream.requests()[0];
        assert!(sent.get("tools").is_some(), "the upstream got the tools natively: {sent:#}");

        gw.upstream.push(Reply::text(FENCED_CALL));
        let mut body = request("Weather in Paris?");
        body["stream"] = json!(true);
        let (status, _, text) = gw.chat_stream(&body).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content(&text).trim(), "", "{text}");
        let mut name = String::new();
        let mut arguments = String::new();
        for data in sse_data(&text).iter().filter(|d| d.as_str() != "[DONE]") {
            let chunk: serde_json::Value = serde_json::from_str(data).unwrap();
            for call in chunk["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten()
            {
                name.push_str(call["function"]["name"].as_str().unwrap_or(""));
                arguments.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        assert_eq!(name, "get_weather", "{text}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&arguments).unwrap(),
            json!({"city": "Paris"})
        );
        assert!(text.contains(r#""finish_reason":"tool_calls""#), "{text}");
    }

    let gw = spawn_gateway(|config| {
        config.mode = Mode::Native;
        config.native_repair = false;
    })
    .await;
    gw.upstream.push(Reply::text(FENCED_CALL));
    let mut body = request("Weather in Paris?");
    body["stream"] = json!(true);
    let (_, _, text) = gw.chat_stream(&body).await;
    assert_eq!(content(&text), FENCED_CALL, "relayed as it came: {text}");
}

/// A native reply with plain text and no call stays that text, and a native call passes.
#[tokio::test]
async fn issue_24_a_repaired_native_reply_keeps_text_and_native_calls() {
    let gw = spawn_gateway(|config| config.mode = Mode::Native).await;
    gw.upstream.push(Reply::text("It is sunny in Paris."));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    assert_eq!(completion["choices"][0]["message"]["content"], "It is sunny in Paris.");
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");
    assert!(
        completion["choices"][0]["message"].get("tool_calls").is_none_or(|c| c.is_null()),
        "{completion:#}"
    );
}

#[tokio::test]
async fn an_anthropic_upstream_is_spoken_to_in_messages() {
    let upstream = crate::common::anthropic::start(crate::common::anthropic::Answer::Text(
        "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    ))
    .await;
    let gw = upstream.gateway(Mode::Emulate).await;
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    assert_eq!(completion["usage"]["prompt_tokens"], 77);
    assert_eq!(completion["usage"]["completion_tokens"], 12);
    let seen = upstream.seen.lock().unwrap();
    let (headers, body) = &seen[0];
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert!(
        body["system"].as_str().unwrap().contains("# Tools"),
        "the tool prompt is the system text"
    );
    assert!(body.get("tools").is_none());
    assert!(body["max_tokens"].is_u64());
    let roles: Vec<&str> =
        body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user"]);
}

/// `allowed_tools` in native mode: the upstream sees only the allowed tools with the mode as
/// `tool_choice`, and a call the model makes to another tool is dropped, streamed or not.
#[tokio::test]
async fn native_mode_narrows_allowed_tools_and_drops_other_calls() {
    let gw = spawn_gateway(|config| config.mode = Mode::Native).await;
    let call = |index: u64, id: &str, name: &str, arguments: &str| {
        json!({"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": arguments}})
    };
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let chunk = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1,
            "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    gw.upstream.push(Reply::bytes(
        "text/event-stream",
        [
            chunk(json!({"role": "assistant", "tool_calls": [call(0, "call_a", "get_weather", "")]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}), None),
            chunk(json!({"tool_calls": [call(1, "call_b", "get_time", "")]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"timezone\":\"UTC\"}"}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".to_owned(),
        ],
    ));
    let mut body = request("Weather and time?");
    body["tool_choice"] = json!({"type": "allowed_tools", "allowed_tools": {"mode": "auto",
        "tools": [{"type": "function", "function": {"name": "get_time"}}]}});
    body["stream"] = json!(true);
    let (status, _, text) = gw.chat_stream(&body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let folded = crate::common::api::Api::OpenAi.fold(&text);
    assert_eq!(folded.calls, [("get_time".to_owned(), "{\"timezone\":\"UTC\"}".to_owned())]);
    let indices: Vec<u64> = sse_data(&text)
        .iter()
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .flat_map(|chunk| {
            let calls = chunk["choices"][0]["delta"]["tool_calls"].as_array().cloned();
            calls.unwrap_or_default().into_iter().map(|c| c["index"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(indices, [0, 0], "the kept call is renumbered: {text}");
    assert_eq!(folded.finish.as_deref(), Some("tool_calls"));
    let sent = &gw.upstream.requests()[0];
    let names: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_time"]);
    assert_eq!(sent["tool_choice"], "auto");

    // A whole completion whose only call is to another tool: no call, finish `stop`.
    let completion = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 1,
        "model": MODEL, "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
        "message": {"role": "assistant", "content": null, "refusal": null,
            "tool_calls": [call(0, "call_a", "get_weather", "{\"city\":\"Paris\"}")]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
    gw.upstream.push(Reply::bytes("application/json", [completion.to_string()]));
    body["stream"] = json!(false);
    body["tool_choice"]["allowed_tools"]["mode"] = json!("required");
    let value = gw.complete(&body).await;
    let choice = &value["choices"][0];
    assert!(choice["message"].get("tool_calls").is_none(), "{value}");
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(gw.upstream.requests()[1]["tool_choice"], "required");
}

/// `[models.NAME] format_file`: the model's replies are read in the format its file
/// describes (here Gemma 4's published response_template), and only in it; a file that
/// cannot be read, or asks for what the parser cannot express, is a configuration problem.
#[tokio::test]
async fn a_models_format_file_reads_its_replies_in_that_format_only() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../parse/tests/templates/gemma4.json");
    let file = toolshim_gateway::FormatFile::load(path.clone()).unwrap();
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Emulate;
        let entry = config.models.entry(MODEL.into()).or_default();
        entry.format_file = Some(file);
    })
    .await;
    gw.upstream.push(Reply::text(
        "Checking.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>",
    ));
    let completion = gw.complete(&request("Weather in Paris?")).await;
    let message = &completion["choices"][0]["message"];
    let calls = message["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Paris", "days": 2}), "{completion}");
    assert_eq!(message["content"], "Checking.", "{completion}");
    // A Hermes block is not this model's format: it stays text.
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Oslo"}))));
    let completion = gw.complete(&request("Weather in Oslo?")).await;
    assert!(completion["choices"][0]["message"]["tool_calls"].is_null(), "{completion}");

    let toml = |file: &str| {
        format!("[upstream]\nurl = \"http://127.0.0.1:1\"\n[models.m]\nformat_file = {file:?}\n")
    };
    let shown = path.to_string_lossy().into_owned();
    assert!(toolshim_gateway::Config::from_toml(&toml(&shown), "t.toml").is_ok());
    let problems = toolshim_gateway::Config::from_toml(&toml("no-such-file.json"), "t.toml")
        .err()
        .unwrap_or_default();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("models.m.format_file") && p.contains("no-such-file.json")),
        "{problems:?}"
    );
}
