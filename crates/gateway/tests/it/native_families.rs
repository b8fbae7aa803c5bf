//! Issue 25: native tools on every API family. Chat Completions, Messages and Responses in
//! `native`, `auto` and `emulate` against the same scripted upstream: natively, the upstream
//! gets the tools, the history's calls and results as Chat Completions declares them, and
//! its native calls reach the client in the client's family; a refusal of native tools
//! falls back to emulation and is remembered; calls left in the text are repaired.

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolshim_gateway::Mode;

use crate::common::api::{Api, within};
use crate::common::{Reply, TestGateway, hermes, spawn_gateway};

/// The three client families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Chat,
    Messages,
    Responses,
}

pub(crate) const FAMILIES: [Family; 3] = [Family::Chat, Family::Messages, Family::Responses];

/// A reply the mock streams as an upstream with native tool calling does: one call to
/// `name`, its arguments in two pieces, then usage.
pub(crate) fn native_call(name: &str, arguments: &str) -> Reply {
    let chunk = |delta: Value, finish: Option<&str>| {
        let chunk = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1,
            "model": "up", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let (head, tail) = arguments.split_at(arguments.len() / 2);
    let usage = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1,
        "model": "up", "choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9,
        "total_tokens": 40}});
    Reply::bytes(
        "text/event-stream",
        [
            chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                "id": "call_up1", "type": "function",
                "function": {"name": name, "arguments": head}}]}),
                None,
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": tail}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ],
    )
}

impl Family {
    pub(crate) fn request(self, user: &str, stream: bool) -> Value {
        match self {
            Family::Chat => Api::OpenAi.request(user, true, stream),
            Family::Messages => Api::Anthropic.request(user, true, stream),
            Family::Responses => json!({"model": "m", "input": user, "stream": stream,
                "tools": [crate::responses::weather()]}),
        }
    }

    async fn send(self, gw: &TestGateway, body: &Value) -> reqwest::Response {
        match self {
            Family::Chat => within(Api::OpenAi.send(gw, body)).await,
            Family::Messages => within(Api::Anthropic.send(gw, body)).await,
            Family::Responses => crate::responses::post(gw, body).await,
        }
    }

    /// The calls of a reply, streamed or not, as (name, arguments), and its text.
    pub(crate) async fn calls(
        self,
        gw: &TestGateway,
        body: &Value,
    ) -> (Vec<(String, Value)>, String) {
        let response = self.send(gw, body).await;
        let status = response.status();
        let text = within(response.text()).await.unwrap();
        assert_eq!(status, StatusCode::OK, "{self:?}: {text}");
        let parse = |args: &str| serde_json::from_str::<Value>(args).unwrap();
        let stream = body["stream"] == json!(true);
        match (self, stream) {
            (Family::Chat | Family::Messages, true) => {
                let api = if self == Family::Chat { Api::OpenAi } else { Api::Anthropic };
                let folded = api.fold(&text);
                assert!(folded.finished && folded.error.is_none(), "{self:?}: {text}");
                let calls = folded.calls.iter().map(|(n, a)| (n.clone(), parse(a))).collect();
                (calls, folded.text)
            }
            (Family::Chat, false) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                let message = &value["choices"][0]["message"];
                let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
                let calls = calls
                    .iter()
                    .map(|c| {
                        let name = c["function"]["name"].as_str().unwrap().to_owned();
                        (name, parse(c["function"]["arguments"].as_str().unwrap()))
                    })
                    .collect();
                (calls, message["content"].as_str().unwrap_or_default().to_owned())
            }
            (Family::Messages, false) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                let blocks = value["content"].as_array().unwrap();
                let calls = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| (b["name"].as_str().unwrap().to_owned(), b["input"].clone()))
                    .collect();
                let text = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
                (calls, text)
            }
            (Family::Responses, _) => {
                let value = if stream {
                    let events = crate::responses::events(&text);
                    let last = events.last().unwrap();
                    assert_eq!(last["type"], "response.completed", "{text}");
                    last["response"].clone()
                } else {
                    serde_json::from_str(&text).unwrap()
                };
                let output = value["output"].as_array().unwrap();
                let calls = output
                    .iter()
                    .filter(|i| i["type"] == "function_call")
                    .map(|i| {
                        let name = i["name"].as_str().unwrap().to_owned();
                        (name, parse(i["arguments"].as_str().unwrap()))
                    })
                    .collect();
                let text = output
                    .iter()
                    .filter(|i| i["type"] == "message")
                    .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
                    .filter_map(|c| c["text"].as_str().map(str::to_owned))
                    .collect();
                (calls, text)
            }
        }
    }
}

fn weather_call() -> Vec<(String, Value)> {
    vec![("get_weather".to_owned(), json!({"city": "Paris"}))]
}

/// The same scenario on every family and mode: natively (native, auto) the upstream gets
/// the tools and answers with a native call; emulated, it gets the contract and answers in
/// text. The client gets the call either way, streamed and not.
#[tokio::test]
async fn issue_25_every_family_calls_tools_natively_in_native_and_auto_and_emulated_in_emulate() {
    for family in FAMILIES {
        for mode in [Mode::Native, Mode::Auto, Mode::Emulate] {
            let gw = spawn_gateway(|config| config.mode = mode).await;
            for stream in [false, true] {
                if mode == Mode::Emulate {
                    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
                } else {
                    gw.upstream.push(native_call("get_weather", r#"{"city": "Paris"}"#));
                }
                let (calls, _) =
                    family.calls(&gw, &family.request("Weather in Paris?", stream)).await;
                assert_eq!(calls, weather_call(), "{family:?} {mode:?} stream={stream}");
                let sent = gw.upstream.requests().pop().unwrap();
                let tools = sent.get("tools").and_then(Value::as_array);
                if mode == Mode::Emulate {
                    assert!(tools.is_none(), "{family:?}: emulated: {sent:#}");
                } else {
                    let tools = tools.unwrap_or_else(|| panic!("{family:?} {mode:?}: {sent:#}"));
                    assert!(
                        tools.iter().any(|t| t["type"] == "function"
                            && t["function"]["name"] == "get_weather"
                            && t["function"]["parameters"]["properties"]["city"]["type"]
                                == "string"),
                        "{family:?} {mode:?}: {sent:#}"
                    );
                    let system = sent["messages"][0]["content"].as_str().unwrap_or_default();
                    assert!(!system.contains("# Tools"), "no tool contract natively: {sent:#}");
                }
            }
        }
    }
}

/// A native call whose arguments are no JSON object never reaches a tool as `{}`: an object
/// encoded twice is read as the object on every family, and arguments from which no object
/// can be read stay visible as text, with no call.
#[tokio::test]
async fn native_call_arguments_that_are_no_object_are_repaired_or_shown() {
    let gw = spawn_gateway(|config| config.mode = Mode::Native).await;
    for family in FAMILIES {
        for stream in [false, true] {
            gw.upstream.push(native_call("get_weather", r#""{\"city\": \"Paris\"}""#));
            let (calls, _) = family.calls(&gw, &family.request("Weather in Paris?", stream)).await;
            assert_eq!(calls, weather_call(), "{family:?} stream={stream}");
            gw.upstream.push(native_call("get_weather", r#"{"city": "Par"#));
            let (calls, text) =
                family.calls(&gw, &family.request("Weather in Paris?", stream)).await;
            assert!(calls.is_empty(), "{family:?} stream={stream}: {calls:?}");
            assert!(
                text.contains("get_weather") && text.contains(r#"{"city": "Par"#),
                "{family:?} stream={stream}: {text}"
            );
        }
    }
}

/// Messages natively: the history's `tool_use` and `tool_result` blocks reach the upstream
/// as `tool_calls` and `tool` messages, an error result says so, the tool choice and the
/// sampling options are translated, and the upstream's usage is reported.
#[tokio::test]
async fn issue_25_messages_history_goes_upstream_as_native_calls_and_results() {
    let gw = spawn_gateway(|config| config.mode = Mode::Native).await;
    gw.upstream.push(native_call("get_time", r#"{"timezone": "Europe/Paris"}"#));
    let body = json!({"model": "claude-test", "max_tokens": 300, "temperature": 0.2,
        "system": "Be brief.", "tools": crate::anthropic::tools(),
        "tool_choice": {"type": "tool", "name": "get_time"},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                 "content": "the weather service is down"},
                {"type": "text", "text": "Then the time there?"}]}]});
    let response = within(Api::Anthropic.send(&gw, &body)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let message: Value = response.json().await.unwrap();
    let call = message["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use");
    let call = call.unwrap_or_else(|| panic!("{message:#}"));
    assert_eq!(call["name"], "get_time");
    assert_eq!(call["input"], json!({"timezone": "Europe/Paris"}));
    assert!(call["id"].as_str().unwrap().starts_with("toolu_"), "an id in Anthropic's form");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["usage"]["output_tokens"], 9, "{message:#}");

    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["max_tokens"], 300);
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["tool_choice"], json!({"type": "function", "function": {"name": "get_time"}}));
    let messages = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"], "{sent:#}");
    assert_eq!(messages[0]["content"], "Be brief.");
    assert_eq!(messages[2]["content"], "Checking.");
    let calls = messages[2]["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["id"], "toolu_1");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(messages[3]["tool_call_id"], "toolu_1");
    assert_eq!(messages[3]["content"], "Error: the weather service is down");
    assert_eq!(messages[4]["content"], "Then the time there?");
}

/// Responses natively: a custom (freeform) tool is a function of one string `input`
/// upstream, and the native call to it comes back as a `custom_tool_call` with that input;
/// the history's calls and outputs go upstream as `tool_calls` and `tool` messages.
#[tokio::test]
async fn issue_25_responses_custom_tools_and_history_natively() {
    let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
    gw.upstream.push(native_call("apply_patch", r#"{"input": "*** Begin Patch\n*** End Patch"}"#));
    let body = json!({"model": "m", "tools": [crate::responses::weather(),
            {"type": "custom", "name": "apply_patch", "description": "Edit files."}],
        "input": [
            {"role": "user", "content": "Weather in Paris, then patch the file."},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": "{\"city\": \"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]});
    let response = crate::responses::post(&gw, &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let value: Value = response.json().await.unwrap();
    let output = value["output"].as_array().unwrap();
    let call = output.iter().find(|i| i["type"] == "custom_tool_call");
    let call = call.unwrap_or_else(|| panic!("{value:#}"));
    assert_eq!(call["name"], "apply_patch");
    assert_eq!(call["input"], "*** Begin Patch\n*** End Patch");

    let sent = &gw.upstream.requests()[0];
    let tool =
        sent["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "apply_patch");
    let tool = tool.unwrap_or_else(|| panic!("{sent:#}"));
    assert_eq!(tool["function"]["parameters"]["properties"]["input"]["type"], "string");
    let messages = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{sent:#}");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[2], json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}));
}

/// `auto` on Messages and Responses: an upstream that rejects native tools (a 400) gets the
/// request emulated at once, and the next request goes straight to emulation.
#[tokio::test]
async fn issue_25_a_refusal_of_native_tools_falls_back_and_is_remembered_on_every_family() {
    for family in [Family::Messages, Family::Responses] {
        let gw = spawn_gateway(|config| config.mode = Mode::Auto).await;
        gw.upstream.push(Reply::error(
            400,
            json!({"error": {"message": "tools are not supported", "type": "invalid_request_error"}}),
        ));
        for _ in 0..2 {
            gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
            let (calls, _) = family.calls(&gw, &family.request("Weather in Paris?", false)).await;
            assert_eq!(calls, weather_call(), "{family:?}");
        }
        let sent = gw.upstream.requests();
        let native: Vec<bool> = sent.iter().map(|r| r.get("tools").is_some()).collect();
        assert_eq!(native, [true, false, false], "{family:?}: native once, then emulated");
    }
}

/// Calls the upstream's parser left in the text (fenced JSON) are read as calls on Messages
/// and Responses too; with `native_repair = false` the text stays text.
#[tokio::test]
async fn issue_25_native_replies_are_repaired_on_messages_and_responses() {
    let fenced = "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```";
    for family in [Family::Messages, Family::Responses] {
        for repair in [true, false] {
            let gw = spawn_gateway(|config| {
                config.mode = Mode::Native;
                config.native_repair = repair;
            })
            .await;
            for stream in [false, true] {
                gw.upstream.push(Reply::text(fenced));
                let (calls, text) =
                    family.calls(&gw, &family.request("Weather in Paris?", stream)).await;
                if repair {
                    assert_eq!(calls, weather_call(), "{family:?} stream={stream}");
                    assert_eq!(text.trim(), "", "{family:?} stream={stream}");
                } else {
                    assert!(calls.is_empty(), "{family:?} stream={stream}: {calls:?}");
                    assert_eq!(text, fenced, "{family:?} stream={stream}");
                }
            }
        }
    }
}

/// Sampling options, typed in the neutral request (issue 25): each family's names are read
/// (`max_completion_tokens`, `max_output_tokens`, `stop_sequences`), and each upstream wire
/// writes what it takes under its own names, emulated and native alike; numbers keep the
/// form the client wrote them in.
#[tokio::test]
async fn issue_25_sampling_options_reach_the_upstream_under_its_names() {
    for mode in [Mode::Emulate, Mode::Native] {
        let gw = spawn_gateway(move |config| config.mode = mode).await;
        let mut chat = Api::OpenAi.request("Weather in Paris?", true, false);
        for (key, value) in [
            ("temperature", json!(0)),
            ("top_p", json!(0.9)),
            ("max_completion_tokens", json!(64)),
            ("stop", json!("END")),
            ("seed", json!(7)),
            ("presence_penalty", json!(0.5)),
            ("frequency_penalty", json!(-0.5)),
            ("logit_bias", json!({"50256": -100})),
            ("top_k", json!(40)),
            ("min_p", json!(0.05)),
            ("repeat_penalty", json!(1.1)),
        ] {
            chat[key] = value;
        }
        let mut messages = Api::Anthropic.request("Weather in Paris?", true, false);
        messages["max_tokens"] = json!(99);
        messages["temperature"] = json!(0.3);
        messages["top_k"] = json!(5);
        messages["stop_sequences"] = json!(["STOP", "HALT"]);
        let mut responses = Family::Responses.request("Weather in Paris?", false);
        responses["max_output_tokens"] = json!(77);
        responses["top_p"] = json!(1);
        for (family, body) in
            [(Family::Chat, &chat), (Family::Messages, &messages), (Family::Responses, &responses)]
        {
            let reply = match mode {
                Mode::Native => native_call("get_weather", r#"{"city": "Paris"}"#),
                _ => Reply::text(hermes("get_weather", json!({"city": "Paris"}))),
            };
            gw.upstream.push(reply);
            let (calls, _) = family.calls(&gw, body).await;
            assert_eq!(calls, weather_call(), "{mode:?} {family:?}");
        }
        let sent = gw.upstream.requests();
        let chat_sent = &sent[0];
        if mode == Mode::Native {
            // Natively, Chat Completions is relayed as the client wrote it.
            assert_eq!(chat_sent["max_completion_tokens"], 64, "{chat_sent:#}");
            assert_eq!(chat_sent["stop"], "END", "{chat_sent:#}");
            assert_eq!(chat_sent["logit_bias"], json!({"50256": -100}), "{chat_sent:#}");
        } else {
            for (key, value) in [
                ("temperature", json!(0)),
                ("top_p", json!(0.9)),
                ("max_tokens", json!(64)),
                ("seed", json!(7)),
                ("presence_penalty", json!(0.5)),
                ("frequency_penalty", json!(-0.5)),
                ("logit_bias", json!({"50256": -100})),
                ("top_k", json!(40)),
                ("min_p", json!(0.05)),
                ("repeat_penalty", json!(1.1)),
            ] {
                assert_eq!(chat_sent[key], value, "{key} in {chat_sent:#}");
            }
            assert!(chat_sent.get("max_completion_tokens").is_none(), "{chat_sent:#}");
            // The gateway adds its result marker to the client's stops.
            let stops = chat_sent["stop"].as_array().unwrap();
            assert_eq!(stops[0], "END", "the client's stop first: {chat_sent:#}");
            assert_eq!(stops.len(), 2, "{chat_sent:#}");
        }
        let messages_sent = &sent[1];
        assert_eq!(messages_sent["max_tokens"], 99);
        assert_eq!(messages_sent["temperature"], 0.3);
        assert_eq!(messages_sent["top_k"], 5);
        assert_eq!(messages_sent["stop"][0], "STOP", "{messages_sent:#}");
        assert_eq!(messages_sent["stop"][1], "HALT", "{messages_sent:#}");
        assert!(messages_sent.get("stop_sequences").is_none(), "{messages_sent:#}");
        let responses_sent = &sent[2];
        assert_eq!(responses_sent["max_tokens"], 77, "{responses_sent:#}");
        assert_eq!(responses_sent["top_p"], 1, "{responses_sent:#}");
        assert!(responses_sent.get("max_output_tokens").is_none(), "{responses_sent:#}");
    }
}

/// To an Anthropic upstream the same options are Anthropic's: `max_tokens`, `temperature`,
/// `top_p`, `top_k` and `stop_sequences` (the client's and the gateway's own); the options
/// Anthropic has no counterpart for are not sent.
#[tokio::test]
async fn issue_25_sampling_options_to_an_anthropic_upstream() {
    let upstream =
        crate::common::anthropic::start(crate::common::anthropic::Answer::Text("Sunny.")).await;
    let gw = upstream.gateway(Mode::Emulate).await;
    let mut body = Api::OpenAi.request("Weather in Paris?", true, false);
    body["max_tokens"] = json!(50);
    body["temperature"] = json!(0.7);
    body["top_k"] = json!(3);
    body["seed"] = json!(1);
    body["stop"] = json!(["END"]);
    let response = within(Api::OpenAi.send(&gw, &body)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let seen = upstream.seen.lock().unwrap();
    let (_, sent) = &seen[0];
    assert_eq!(sent["max_tokens"], 50);
    assert_eq!(sent["temperature"], 0.7);
    assert_eq!(sent["top_k"], 3);
    assert_eq!(sent["stop_sequences"][0], "END", "{sent:#}");
    assert!(sent.get("seed").is_none() && sent.get("stop").is_none(), "{sent:#}");
}

/// OpenAI's `prompt_cache_key` (Chat Completions and Responses) reaches a Chat Completions
/// upstream under its name in every mode, so that requests sharing a prefix land where the
/// upstream cached it; Messages has no such key and sends none.
#[tokio::test]
async fn issue_25_prompt_cache_key_reaches_the_upstream_in_every_mode() {
    for family in FAMILIES {
        for mode in [Mode::Native, Mode::Auto, Mode::Emulate] {
            let gw = spawn_gateway(|config| config.mode = mode).await;
            if mode == Mode::Emulate {
                gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
            } else {
                gw.upstream.push(native_call("get_weather", r#"{"city": "Paris"}"#));
            }
            let mut body = family.request("Weather in Paris?", false);
            if family != Family::Messages {
                body["prompt_cache_key"] = json!("conversation-42");
            }
            let (calls, _) = family.calls(&gw, &body).await;
            assert_eq!(calls, weather_call(), "{family:?} {mode:?}");
            let sent = gw.upstream.requests().pop().unwrap();
            if family == Family::Messages {
                assert!(sent.get("prompt_cache_key").is_none(), "{mode:?}: {sent:#}");
            } else {
                assert_eq!(
                    sent["prompt_cache_key"], "conversation-42",
                    "{family:?} {mode:?}: {sent:#}"
                );
            }
        }
    }
}

/// An upstream that rejects fields it does not know (some hosted APIs answer 400 naming
/// `prompt_cache_key`) gets the request again without the key, and later requests go
/// without it: the client never sees the refusal.
#[tokio::test]
async fn issue_25_an_upstream_that_rejects_prompt_cache_key_gets_requests_without_it() {
    let refusal = || {
        Reply::error(
            400,
            json!({"error": {"message": "property 'prompt_cache_key' is unsupported",
                "type": "invalid_request_error"}}),
        )
    };
    for (family, mode) in [(Family::Chat, Mode::Emulate), (Family::Responses, Mode::Native)] {
        let gw = spawn_gateway(|config| config.mode = mode).await;
        let answer = || {
            if mode == Mode::Emulate {
                Reply::text(hermes("get_weather", json!({"city": "Paris"})))
            } else {
                native_call("get_weather", r#"{"city": "Paris"}"#)
            }
        };
        gw.upstream.push(refusal());
        gw.upstream.push(answer());
        gw.upstream.push(answer());
        let mut body = family.request("Weather in Paris?", false);
        body["prompt_cache_key"] = json!("conversation-42");
        for round in 0..2 {
            let (calls, _) = family.calls(&gw, &body).await;
            assert_eq!(calls, weather_call(), "{family:?} round {round}");
        }
        let sent = gw.upstream.requests();
        assert_eq!(sent.len(), 3, "{family:?}: one refusal, then two answers");
        assert_eq!(sent[0]["prompt_cache_key"], "conversation-42");
        for request in &sent[1..] {
            assert!(request.get("prompt_cache_key").is_none(), "{family:?}: {request:#}");
        }
    }
}
