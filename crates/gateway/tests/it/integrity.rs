//! Issue 14, on the upstream side: nothing the model wrote is silently lost and nothing is
//! faked. Unreadable events end the reply with an error, lone surrogates are repaired, a
//! reply that did not finish is not passed off as finished (in passthrough too), replies are
//! bounded, every upstream wait has a timeout, and upstream errors reach the client with the
//! status that says whose fault they are.

use std::io::Write;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::{APIS, Api, within};
use crate::common::{
    MockUpstream, Reply, closed_port, content_frame, finish_frames, hermes, role_frame,
    spawn_gateway,
};

/// Prose longer than the refusal window: with tools, it is streamed before the reply ends.
const LONG_PROSE: &str = "Paris in spring is mild and often sunny, with chestnut trees in \
    bloom along the boulevards and cafe terraces full from late morning on. Evenings stay \
    light until nine, and a short shower rarely lasts long enough to matter.";

/// One OpenAI SSE event whose content is `raw`, written into the JSON as it is (so it may
/// hold escapes that `json!` would never write).
fn raw_content_frame(raw: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-up\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{raw}\"}},\"finish_reason\":null}}]}}\n\n"
    )
}

fn write_file_tools() -> Value {
    json!([{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}}])
}

/// A lone surrogate escape in an upstream event (a token boundary inside an emoji) is read
/// as U+FFFD: the line around it survives in the call's argument, on both surfaces, and the
/// repair is counted.
#[tokio::test]
async fn lone_surrogates_in_upstream_events_become_replacement_characters() {
    let gw = spawn_gateway(|_| {}).await;
    let parts = [
        role_frame(),
        raw_content_frame(
            r#"<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"line 1\\nsmile "#,
        ),
        raw_content_frame(r"\ud83d"),
        raw_content_frame(r"\ude00"),
        raw_content_frame(r#" end\\nline 3\"}}\n</tool_call>"#),
        finish_frames("stop"),
    ];
    for api in APIS {
        for stream in [true, false] {
            gw.upstream.push(Reply::bytes("text/event-stream", parts.clone()));
            let mut body = api.request("Write it.", true, stream);
            match api {
                Api::OpenAi => body["tools"] = write_file_tools(),
                Api::Anthropic => {
                    body["tools"] = json!([{"name": "write_file", "input_schema": write_file_tools()[0]["function"]["parameters"]}]);
                }
            }
            let arguments = if stream {
                let folded = api.streams(&gw, &body).await;
                assert!(folded.error.is_none(), "{folded:?}");
                assert_eq!(folded.finish.as_deref(), Some(api.pick("tool_calls", "tool_use")));
                folded.calls[0].1.clone()
            } else {
                let response = within(api.send(&gw, &body)).await;
                assert_eq!(response.status(), StatusCode::OK);
                let value: Value = response.json().await.unwrap();
                match api {
                    Api::OpenAi => {
                        value["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
                            .as_str()
                            .unwrap()
                            .to_owned()
                    }
                    Api::Anthropic => value["content"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|b| b["type"] == "tool_use")
                        .unwrap()["input"]
                        .to_string(),
                }
            };
            let arguments: Value = serde_json::from_str(&arguments).unwrap();
            assert_eq!(
                arguments["content"], "line 1\nsmile \u{FFFD}\u{FFFD} end\nline 3",
                "{api:?} {stream}"
            );
        }
    }
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("toolshim_upstream_repairs_total{kind=\"lone_surrogate\"} 8"),
        "{metrics}"
    );
}

/// An event that is not JSON at all is never skipped: before anything reached the client
/// it is a 502, after that an in-band error, and the reply does not end as if complete.
#[tokio::test]
async fn an_unreadable_event_ends_the_reply_with_an_error() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        gw.upstream.push(Reply::bytes(
            "text/event-stream",
            [
                role_frame(),
                content_frame("Hi"),
                "data: {\"choices\": [{\"delta\": {\"conte\n\n".into(),
                finish_frames("stop"),
            ],
        ));
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?}");
        assert!(err.message.contains("invalid JSON event"), "{}", err.message);

        gw.upstream.push(Reply::bytes(
            "text/event-stream",
            [
                role_frame(),
                content_frame(LONG_PROSE),
                "data: {not json\n\n".into(),
                content_frame(" More."),
                finish_frames("stop"),
            ],
        ));
        let folded = api.streams(&gw, &api.request("Tell me about Paris.", true, true)).await;
        assert_eq!(folded.text, LONG_PROSE, "{api:?}");
        let error = folded.error.unwrap_or_else(|| panic!("{api:?}: no in-band error"));
        assert!(error["message"].as_str().unwrap().contains("invalid JSON event"), "{error}");
        assert!(!folded.finished && folded.finish.is_none(), "{api:?}");
    }
}

/// Events with model output in a shape the gateway cannot read are never skipped: content
/// that is not a string, `choices` that is not a list, a payload that is not an object,
/// reasoning of the wrong type, and native tool calls the emulated request did not declare
/// tools for. Before anything reached the client it is a 502 naming the field; after text
/// went out, an in-band error after that text; a JSON body the same.
#[tokio::test]
async fn output_in_an_unreadable_shape_ends_the_reply_with_an_error() {
    let gw = spawn_gateway(|_| {}).await;
    let unreadable = [
        ("\"just a string\"", "not an object"),
        ("{\"choices\": 5}", "`choices` is a number"),
        ("{\"choices\": [{\"index\": 0, \"delta\": {\"content\": 7}}]}", "content` is a number"),
        (
            "{\"choices\": [{\"index\": 0, \"delta\": {\"content\": [{\"type\": \"image_url\"}]}}]}",
            "not a text part",
        ),
        (
            "{\"choices\": [{\"index\": 0, \"delta\": {\"reasoning_content\": {\"t\": 1}}}]}",
            "reasoning_content` is an object",
        ),
        (
            "{\"choices\": [{\"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"function\": {\"name\": \"get_weather\", \"arguments\": \"{}\"}}]}}]}",
            "native tool calls",
        ),
        ("{\"choices\": [{\"index\": 1, \"delta\": {\"content\": \"Hi\"}}]}", "index 1"),
    ];
    for api in APIS {
        for (payload, says) in unreadable {
            gw.upstream.push(Reply::bytes(
                "text/event-stream",
                [
                    role_frame(),
                    content_frame("Hi"),
                    format!("data: {payload}\n\n"),
                    finish_frames("stop"),
                ],
            ));
            let err = api.fails(&gw, &api.request("Hi", true, true)).await;
            assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?} {payload}");
            assert!(
                err.message.contains("cannot read") && err.message.contains(says),
                "{api:?} {payload}: {}",
                err.message
            );
        }
        gw.upstream.push(Reply::bytes(
            "text/event-stream",
            [
                role_frame(),
                content_frame(LONG_PROSE),
                "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": 7}}]}\n\n".into(),
                content_frame(" More."),
                finish_frames("stop"),
            ],
        ));
        let folded = api.streams(&gw, &api.request("Tell me about Paris.", true, true)).await;
        assert_eq!(folded.text, LONG_PROSE, "{api:?}");
        let error = folded.error.unwrap_or_else(|| panic!("{api:?}: no in-band error"));
        assert!(error["message"].as_str().unwrap().contains("cannot read"), "{error}");
        assert!(!folded.finished && folded.finish.is_none(), "{api:?}");

        let body =
            json!({"choices": [{"index": 0, "message": {"content": 7}, "finish_reason": "stop"}]});
        gw.upstream.push(Reply::bytes("application/json", [body.to_string()]));
        let err = api.fails(&gw, &api.request("Hi", true, false)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?}");
        assert!(err.message.contains("cannot read"), "{}", err.message);
    }
}

/// One Anthropic stream event, as an Anthropic upstream writes it.
fn anthropic_event(data: &Value) -> String {
    format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or("message"))
}

fn text_delta(delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": 0, "delta": delta})
}

/// An Anthropic upstream is read as strictly: events without model text (pings, the end of a
/// block, signature and citation deltas, redacted thinking, and event types the gateway does
/// not know, which Anthropic's versioning policy says to ignore) leave the text whole, while
/// a delta or block that may carry output but cannot be read (text of the wrong type, a
/// delta or block type the gateway does not know, a tool use the request did not ask for, a
/// delta without a type or text) ends the reply with a 502.
#[tokio::test]
async fn anthropic_upstream_events_are_read_strictly() {
    let gw = spawn_gateway(|config| config.upstream.api = toolshim_gateway::UpstreamApi::Anthropic)
        .await;
    let events = |middle: Vec<Value>| -> Vec<String> {
        let mut all = vec![
            json!({"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 5}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            text_delta(json!({"type": "text_delta", "text": "Hello"})),
        ];
        all.extend(middle);
        all.extend([
            text_delta(json!({"type": "text_delta", "text": " world"})),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]);
        all.iter().map(anthropic_event).collect()
    };
    let harmless = vec![
        json!({"type": "ping"}),
        json!({"type": "a_future_event", "detail": {"text": "not content"}}),
        text_delta(json!({"type": "signature_delta", "signature": "c2ln"})),
        text_delta(json!({"type": "citations_delta", "citation": {"cited_text": "a source"}})),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "ZW5j"}}),
    ];
    let unreadable = [
        (text_delta(json!({"type": "text_delta", "text": 7})), "`delta.text` is a number"),
        (text_delta(json!({"type": "text_delta_v2", "text": "!"})), "unknown type `text_delta_v2`"),
        (text_delta(json!({"type": "input_json_delta", "partial_json": "{}"})), "tool use"),
        (text_delta(json!({"note": "no type"})), "no `type`"),
        (
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "get_weather", "input": {}}}),
            "tool_use block",
        ),
        (
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "video"}}),
            "unknown type `video`",
        ),
        (json!({"no_type": true}), "without a `type`"),
    ];
    for api in APIS {
        for stream in [true, false] {
            gw.upstream.push(Reply::bytes("text/event-stream", events(harmless.clone())));
            let body = api.request("Hi", false, stream);
            let (text, finish) = api.answers(&gw, &body, stream).await;
            assert_eq!(text, "Hello world", "{api:?} {stream}");
            assert_eq!(finish, api.pick("stop", "end_turn"));
        }
        for (event, says) in &unreadable {
            gw.upstream.push(Reply::bytes("text/event-stream", events(vec![event.clone()])));
            let err = api.fails(&gw, &api.request("Hi", true, true)).await;
            assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?} {event}");
            assert!(
                err.message.contains("cannot read") && err.message.contains(says),
                "{api:?} {event}: {}",
                err.message
            );
        }
        let message = json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "t", "name": "get_weather", "input": {}}]});
        gw.upstream.push(Reply::bytes("application/json", [message.to_string()]));
        let err = api.fails(&gw, &api.request("Hi", true, false)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?}");
        assert!(err.message.contains("tool_use block"), "{}", err.message);
    }
}

/// Bytes that are not UTF-8, in an event or in a JSON body, become U+FFFD like lone
/// surrogates: the text around them survives, and each is counted
/// (`toolshim_upstream_repairs_total{kind="invalid_utf8"}`) and logged.
#[tokio::test]
async fn invalid_utf8_from_the_upstream_becomes_replacement_characters() {
    let gw = spawn_gateway(|_| {}).await;
    let event =
        b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"caf\xe9 ok\"}}]}\n\n";
    let body = b"{\"choices\": [{\"index\": 0, \"message\": {\"content\": \"na\xefve \xff\"}, \"finish_reason\": \"stop\"}]}";
    for api in APIS {
        for stream in [true, false] {
            let parts: Vec<Vec<u8>> =
                vec![role_frame().into(), event.to_vec(), finish_frames("stop").into()];
            gw.upstream.push(Reply::bytes("text/event-stream", parts));
            let request = api.request("Hi", false, stream);
            let text = if stream {
                let folded = api.streams(&gw, &request).await;
                assert!(folded.finished && folded.error.is_none(), "{api:?}: {folded:?}");
                folded.text
            } else {
                api.completes(&gw, &request).await.0
            };
            assert_eq!(text, "caf\u{FFFD} ok", "{api:?} {stream}");
        }
        gw.upstream.push(Reply::bytes("application/json", [body.to_vec()]));
        let (text, _) = api.completes(&gw, &api.request("Hi", false, false)).await;
        assert_eq!(text, "na\u{FFFD}ve \u{FFFD}", "{api:?}");
    }
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("toolshim_upstream_repairs_total{kind=\"invalid_utf8\"} 8"),
        "{metrics}"
    );
}

/// A status-200 reply that is an error object, or a completion without a finish reason, is
/// not an empty successful answer: it is a 502, streamed or not, on both surfaces.
#[tokio::test]
async fn error_objects_and_unfinished_completions_are_502s() {
    let gw = spawn_gateway(|_| {}).await;
    let bodies = [
        json!({"error": {"message": "the model is loading", "type": "server_error"}}),
        json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hel"}}]}),
        json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hel"}, "finish_reason": null}]}),
    ];
    for api in APIS {
        for stream in [true, false] {
            for body in &bodies {
                gw.upstream.push(Reply::bytes("application/json", [body.to_string()]));
                let err = api.fails(&gw, &api.request("Hi", false, stream)).await;
                assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?} {stream} {body}");
            }
        }
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// Passthrough gets the same checks as emulation: a stream that ends without `[DONE]` or a
/// finish reason ends with an in-band error, an HTML page is a 502, a gzip body is decoded,
/// a completion without a finish reason or with an error object is a 502, and a stall mid
/// stream hits the idle timeout. In `native` mode, and in `auto` for requests without tools.
#[tokio::test]
async fn passthrough_gets_the_same_checks_as_emulation() {
    for mode in [toolshim_gateway::Mode::Native, toolshim_gateway::Mode::Auto] {
        let gw = spawn_gateway(|config| {
            config.mode = mode;
            config.upstream.idle_timeout_secs = 0.3;
        })
        .await;
        let api = Api::OpenAi;
        let plain = |stream: bool| api.request("Hi", false, stream);

        gw.upstream.push(Reply::bytes("text/event-stream", [role_frame(), content_frame("Hel")]));
        let folded = api.streams(&gw, &plain(true)).await;
        assert_eq!(folded.text, "Hel", "{mode:?}");
        assert!(folded.error.is_some() && !folded.finished, "{mode:?}: {folded:?}");

        gw.upstream.push(Reply::bytes("text/html", ["<!doctype html><title>Login</title>"]));
        let err = api.fails(&gw, &plain(true)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{mode:?}");
        assert!(err.message.contains("text/html"), "{}", err.message);

        let sse = [role_frame(), content_frame("Hello"), finish_frames("stop")].concat();
        gw.upstream.push(
            Reply::bytes("text/event-stream", [gzip(sse.as_bytes())])
                .header("content-encoding", "gzip"),
        );
        let folded = api.streams(&gw, &plain(true)).await;
        assert_eq!(
            (folded.text.as_str(), folded.finished),
            ("Hello", true),
            "{mode:?}: {folded:?}"
        );

        let completion = json!({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}]});
        gw.upstream.push(
            Reply::bytes("application/json", [gzip(completion.to_string().as_bytes())])
                .header("content-encoding", "gzip"),
        );
        let (text, finish) = api.completes(&gw, &plain(false)).await;
        assert_eq!((text.as_str(), finish.as_str()), ("Hello", "stop"), "{mode:?}");

        for body in [
            json!({"error": {"message": "loading"}}),
            json!({"choices": [{"index": 0, "message": {"content": "Hel"}}]}),
        ] {
            gw.upstream.push(Reply::bytes("application/json", [body.to_string()]));
            let err = api.fails(&gw, &plain(false)).await;
            assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{mode:?} {body}");
        }

        gw.upstream.push(Reply::text("Hello there").chunks(2).stall_after(3));
        let started = Instant::now();
        let folded = api.streams(&gw, &plain(true)).await;
        assert!(folded.error.is_some() && !folded.finished, "{mode:?}: {folded:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}

/// Replies past the caps end with an error that names the setting: a JSON body past
/// `upstream.max_reply_bytes`, an event line past `upstream.max_line_bytes`, and a
/// `<tool_call>` followed by more white space than `max_reply_bytes` allows.
#[tokio::test]
async fn replies_past_the_caps_end_with_an_error() {
    let gw = spawn_gateway(|config| {
        config.upstream.max_reply_bytes = 64 << 10;
        config.upstream.max_line_bytes = 16 << 10;
    })
    .await;
    for api in APIS {
        let big = json!({"choices": [{"index": 0, "message": {"content": "x".repeat(200 << 10)}, "finish_reason": "stop"}]});
        gw.upstream.push(Reply::bytes("application/json", [big.to_string()]));
        let err = api.fails(&gw, &api.request("Hi", true, false)).await;
        assert_eq!(err.status, StatusCode::BAD_GATEWAY);
        assert!(err.message.contains("upstream.max_reply_bytes"), "{}", err.message);

        gw.upstream.push(
            Reply::bytes(
                "text/event-stream",
                [format!("data: {{\"x\": \"{}", "y".repeat(100 << 10))],
            )
            .then_stall(),
        );
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert!(err.message.contains("upstream.max_line_bytes"), "{}", err.message);

        let mut parts = vec![role_frame(), content_frame("<tool_call>")];
        parts.extend(std::iter::repeat_n(content_frame(&" ".repeat(4096)), 50));
        gw.upstream.push(Reply::bytes("text/event-stream", parts).then_stall());
        let err = api.fails(&gw, &api.request("Hi", true, true)).await;
        assert!(err.message.contains("upstream.max_reply_bytes"), "{}", err.message);

        // Reasoning counts too.
        let mut parts = vec![role_frame()];
        parts.extend(std::iter::repeat_n(delta_frame("reasoning_content", &"r".repeat(4096)), 50));
        gw.upstream.push(Reply::bytes("text/event-stream", parts).then_stall());
        let err = api.fails(&gw, &api.request("Hi", true, false)).await;
        assert!(err.message.contains("upstream.max_reply_bytes"), "{}", err.message);
    }
}

/// One OpenAI SSE event whose delta has `field` set to `text`.
fn delta_frame(field: &str, text: &str) -> String {
    let chunk = json!({"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 0,
        "model": "m", "choices": [{"index": 0, "delta": {field: text}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// Passthrough (`native`, and `auto` for a request without tools) is bounded like emulation:
/// no first byte within `first_byte_timeout_secs` is a 504; model output past
/// `upstream.max_reply_bytes` (text or reasoning) ends the relayed stream with an in-band
/// error naming the key, long before the 16-fold wire backstop; an error status whose body
/// never ends is answered within `error_body_timeout_secs`, with the status it had.
#[tokio::test]
async fn passthrough_replies_are_bounded_like_emulated_ones() {
    for mode in [toolshim_gateway::Mode::Native, toolshim_gateway::Mode::Auto] {
        let gw = spawn_gateway(|config| {
            config.mode = mode;
            config.upstream.first_byte_timeout_secs = 0.3;
            config.upstream.error_body_timeout_secs = 0.3;
            config.upstream.max_reply_bytes = 64 << 10;
        })
        .await;
        let api = Api::OpenAi;
        let plain = |stream: bool| api.request("Hi", false, stream);
        for stream in [true, false] {
            gw.upstream.push(Reply::stall());
            let started = Instant::now();
            let err = api.fails(&gw, &plain(stream)).await;
            assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT, "{mode:?} {stream}");
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        }
        for field in ["content", "reasoning_content"] {
            let mut parts = vec![role_frame()];
            parts.extend(std::iter::repeat_n(delta_frame(field, &"x".repeat(4096)), 40));
            gw.upstream.push(Reply::bytes("text/event-stream", parts).then_stall());
            let folded = api.streams(&gw, &plain(true)).await;
            let error = folded.error.unwrap_or_else(|| panic!("{mode:?} {field}: no error"));
            assert!(
                error["message"].as_str().unwrap().contains("upstream.max_reply_bytes"),
                "{error}"
            );
            assert!(!folded.finished && folded.text.len() <= 64 << 10, "{mode:?} {field}");
        }
        for (status, expected) in [(500, StatusCode::BAD_GATEWAY), (400, StatusCode::BAD_REQUEST)] {
            gw.upstream.push(
                Reply::bytes("application/json", ["{\"error\": {\"message\": \"bo"])
                    .status(status)
                    .then_stall(),
            );
            let started = Instant::now();
            let err = api.fails(&gw, &plain(true)).await;
            assert_eq!(err.status, expected, "{mode:?}");
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        }
    }
}

/// An upstream error status whose body never ends is reported within
/// `error_body_timeout_secs` (the idle timeout is 5 s here), with the status it had.
#[tokio::test]
async fn an_error_body_that_never_ends_does_not_hold_the_client() {
    let gw = spawn_gateway(|config| config.upstream.error_body_timeout_secs = 0.3).await;
    for (status, expected) in [(500, StatusCode::BAD_GATEWAY), (400, StatusCode::BAD_REQUEST)] {
        for api in APIS {
            gw.upstream.push(
                Reply::bytes("application/json", ["{\"error\": {\"message\": \"bo"])
                    .status(status)
                    .then_stall(),
            );
            let started = Instant::now();
            let err = api.fails(&gw, &api.request("Hi", true, false)).await;
            assert_eq!(err.status, expected, "{api:?}");
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        }
    }
}

/// `GET /v1/models` with a stalled upstream, or one whose error body never ends, times out
/// (504) within `probe_timeout_secs` (the first-byte and error-body timeouts, 5 s here, do
/// not apply: a client waits for the list) and with an unreachable one is a 502, on both
/// shapes; never an empty list. `/readyz` is bounded the same way.
#[tokio::test]
async fn models_report_upstream_failures() {
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_addr = stalled.local_addr().unwrap();
    let _keep = crate::common::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = stalled.accept().await {
            held.push(stream);
        }
    });
    // Answers 500 at once, then never finishes the error body.
    let slow_error = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_error_addr = slow_error.local_addr().unwrap();
    let _keep_slow = crate::common::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = slow_error.accept().await {
            let mut head = [0; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut head).await;
            let answer = "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n\
                          content-length: 1000\r\n\r\n{\"error\": {\"message\": \"bo";
            let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, answer.as_bytes()).await;
            held.push(stream);
        }
    });
    let closed = closed_port().await;
    for (addr, status) in [
        (stalled_addr, StatusCode::GATEWAY_TIMEOUT),
        (closed, StatusCode::BAD_GATEWAY),
        (slow_error_addr, StatusCode::GATEWAY_TIMEOUT),
    ] {
        let gw = spawn_gateway(|config| {
            config.upstream.url = format!("http://{addr}");
            config.upstream.probe_timeout_secs = 0.3;
            // The probe's time bounds the whole list, an error body being read included.
            config.upstream.error_body_timeout_secs = 5.0;
        })
        .await;
        for anthropic in [false, true] {
            let mut request = gw.http().get(gw.url("/v1/models"));
            if anthropic {
                request = request.header("anthropic-version", "2023-06-01");
            }
            let started = Instant::now();
            let response = within(request.send()).await.unwrap();
            assert_eq!(response.status(), status, "{addr} anthropic: {anthropic}");
            assert!(started.elapsed() < Duration::from_secs(2));
        }
        // The readiness probe is bounded the same way.
        let started = Instant::now();
        let response = within(gw.http().get(gw.url("/readyz")).send()).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{addr}");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }
}

/// An upstream 400, 404 or 422 is the client's doing: the client gets that status and the
/// upstream's message (so SDKs do not retry it). A 401 or 403 is the gateway's own key: a
/// 502 that says so.
#[tokio::test]
async fn upstream_errors_keep_their_status_when_the_request_caused_them() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for (status, message) in [
            (400, "temperature must be at most 2"),
            (404, "model 'qwen-9' not found"),
            (422, "messages: field required"),
        ] {
            gw.upstream.push(Reply::error(
                status,
                json!({"error": {"message": message, "type": "invalid_request_error"}}),
            ));
            let err = api.fails(&gw, &api.request("Hi", true, false)).await;
            assert_eq!(err.status.as_u16(), status, "{api:?}");
            assert!(err.message.contains(message), "{api:?}: {}", err.message);
            if api == Api::Anthropic {
                let kind = if status == 404 { "not_found_error" } else { "invalid_request_error" };
                assert_eq!(err.kind, kind);
            }
        }
        for status in [401, 403] {
            gw.upstream.push(Reply::error(
                status,
                json!({"error": {"message": "Incorrect API key provided"}}),
            ));
            let err = api.fails(&gw, &api.request("Hi", true, false)).await;
            assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{api:?}");
            assert!(
                err.message.contains("gateway's own credentials")
                    && err.message.contains("TOOLSHIM_IT_UNSET_UPSTREAM_KEY"),
                "{}",
                err.message
            );
        }
    }
}

/// A redirect is not followed: the upstream key would go wherever it points. The client
/// gets a 502 naming the redirect, and the target sees nothing.
#[tokio::test]
async fn upstream_redirects_are_not_followed() {
    let target = MockUpstream::start().await;
    let gw = spawn_gateway(|config| config.upstream.api_key_env = "PATH".into()).await;
    let location = format!("{}/v1/chat/completions", target.url());
    gw.upstream.push(Reply::bytes("text/plain", [""]).status(307).header("location", location));
    let err = Api::OpenAi.fails(&gw, &Api::OpenAi.request("Hi", true, false)).await;
    assert_eq!(err.status, StatusCode::BAD_GATEWAY);
    assert!(err.message.contains("redirected"), "{}", err.message);
    assert!(target.requests().is_empty(), "the redirect was followed");
    let sent = gw.upstream.request_headers();
    let path = std::env::var("PATH").unwrap();
    assert_eq!(sent[0]["authorization"].to_str().unwrap(), format!("Bearer {path}"));
}

/// `/readyz` checks the upstream; `/healthz` does not.
#[tokio::test]
async fn readyz_checks_the_upstream() {
    let up = spawn_gateway(|_| {}).await;
    let response = up.http().get(up.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "ready");
    let port = closed_port().await;
    let down = spawn_gateway(|config| config.upstream.url = format!("http://{port}")).await;
    let response = down.http().get(down.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (body["status"].as_str(), body["kind"].as_str()),
        (Some("unavailable"), Some("upstream_unavailable")),
        "{body}"
    );
    let response = down.http().get(down.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// `/readyz` needs no key, so its probe is shared and reused: many concurrent calls (here
/// while the startup probe, which is the same probe, is still waiting for a slow model list)
/// cause one request to the upstream, and later calls within `readyz_cache_secs` none.
#[tokio::test]
async fn concurrent_readyz_calls_share_one_probe() {
    let upstream = MockUpstream::start().await;
    upstream.delay_models(Duration::from_millis(300));
    let mut config = crate::common::base_config(&upstream.url());
    config.readyz_cache_secs = 60.0;
    let gw = crate::common::serve_config(upstream, config).await;
    let calls = (0..16).map(|_| gw.http().get(gw.url("/readyz")).send());
    for response in within(futures::future::join_all(calls)).await {
        let response = response.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.json::<Value>().await.unwrap()["status"], "ready");
    }
    let response = within(gw.http().get(gw.url("/readyz")).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(gw.upstream.models_requests(), 1, "one probe for 17 calls and the startup");
}

/// An upstream URL that already names the endpoint is used as it is, not doubled.
#[tokio::test]
async fn an_upstream_url_with_the_endpoint_path_is_not_doubled() {
    let upstream = MockUpstream::start().await;
    let url = format!("{}/v1/chat/completions", upstream.url());
    let gw = spawn_gateway(|config| config.upstream.url = url).await;
    gw.upstream.push(Reply::text("unused"));
    upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let (_, finish) =
        Api::OpenAi.completes(&gw, &Api::OpenAi.request("Weather in Paris?", true, false)).await;
    assert_eq!(finish, "tool_calls");
    assert_eq!(upstream.requests().len(), 1);
}

/// While a `tool_choice: required` stream is held across a retry, the client is kept alive:
/// the head and keep-alives (SSE comments, Anthropic pings) go out before the first event.
#[tokio::test]
async fn streams_held_across_retries_get_keepalives() {
    let gw = spawn_gateway(|config| config.stream_keepalive_secs = 0.15).await;
    for api in APIS {
        gw.upstream.push(
            Reply::text("The weather is probably fine there.").delay(Duration::from_millis(40)),
        );
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
        let mut body = api.request("Weather in Paris?", true, true);
        body["tool_choice"] = match api {
            Api::OpenAi => json!("required"),
            Api::Anthropic => json!({"type": "any"}),
        };
        let response = within(api.send(&gw, &body)).await;
        assert_eq!(response.status(), StatusCode::OK);
        let text = within(response.text()).await.unwrap();
        // OpenAI: a comment; Anthropic: `message_start` then `ping` (its grammar starts so).
        let first = api.pick(": keepalive\n\n", "event: message_start\n");
        assert!(text.starts_with(first), "{api:?}: {text}");
        if api == Api::Anthropic {
            let frames: Vec<&str> = text.split("\n\n").collect();
            let second = frames.get(1).copied().unwrap_or_default();
            assert!(second.starts_with("event: ping\n"), "{text}");
            // The first content block still gets its ping right after it, as Anthropic's
            // streams do (clients that check the grammar look for it there).
            let block = frames.iter().position(|f| f.starts_with("event: content_block_start"));
            let after = block.and_then(|at| frames.get(at + 1)).copied().unwrap_or_default();
            assert!(after.starts_with("event: ping\n"), "{text}");
        }
        let folded = api.fold(&text);
        assert_eq!(folded.calls.len(), 1, "{api:?}: {text}");
        assert!(folded.finished && folded.error.is_none());
    }
}
