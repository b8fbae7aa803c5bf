//! Streaming Chat Completions: every scenario is checked against the chunk grammar
//! (`common::check_stream`), plus one byte-level golden.

use serde_json::{Value, json};

use crate::common::{
    MODEL, Reply, UPSTREAM_COMPLETION_TOKENS, UPSTREAM_PROMPT_TOKENS, check_stream, hermes,
    plain_request, request, spawn_gateway,
};

fn with_usage(mut body: Value) -> Value {
    body["stream_options"] = json!({"include_usage": true});
    body
}

#[tokio::test]
async fn single_call_stream() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))).chunks(3));
    let body = gw.stream_ok(&request("Weather in Paris?")).await;
    let streamed = check_stream(&body, false);
    assert_eq!(streamed.names(), ["get_weather"]);
    assert_eq!(streamed.call_args(0), json!({"city": "Paris"}));
    assert_eq!(streamed.finish_reason, "tool_calls");
    assert_eq!(streamed.content, "");
    // Tool call first: the role chunk says `content: null` (2.13.1).
    let first = &streamed.chunks[0]["choices"][0]["delta"];
    assert_eq!(first.get("content"), Some(&Value::Null), "{first}");
}

#[tokio::test]
async fn text_then_two_calls_with_usage() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "Let me check both.\n{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_weather", json!({"city": "Tokyo", "unit": "celsius"}))
    );
    gw.upstream.push(Reply::text(text).chunks(5));
    let body = gw.stream_ok(&with_usage(request("Paris and Tokyo?"))).await;
    let streamed = check_stream(&body, true);
    assert_eq!(streamed.content.trim(), "Let me check both.");
    assert_eq!(streamed.names(), ["get_weather", "get_weather"]);
    assert_eq!(streamed.call_args(0), json!({"city": "Paris"}));
    assert_eq!(streamed.call_args(1), json!({"city": "Tokyo", "unit": "celsius"}));
    assert_eq!(streamed.finish_reason, "tool_calls");
    let usage = streamed.usage.unwrap();
    assert_eq!(usage["prompt_tokens"], UPSTREAM_PROMPT_TOKENS);
    assert_eq!(usage["completion_tokens"], UPSTREAM_COMPLETION_TOKENS);
    // Text first: the role chunk carries `content: ""` (2.13.1).
    let first = &streamed.chunks[0]["choices"][0]["delta"];
    assert_eq!(first["content"], "", "{first}");
}

#[tokio::test]
async fn text_only_stream_with_and_without_usage() {
    let gw = spawn_gateway(|_| {}).await;
    let text = "Paris is 18°C and cloudy; Tokyo is 24°C and clear.";
    for include_usage in [false, true] {
        gw.upstream.push(Reply::text(text).chunks(2));
        let mut body = plain_request("Weather?");
        if include_usage {
            body = with_usage(body);
        }
        let streamed = check_stream(&gw.stream_ok(&body).await, include_usage);
        assert_eq!(streamed.content, text);
        assert!(streamed.calls.is_empty());
        assert_eq!(streamed.finish_reason, "stop");
        assert_eq!(streamed.chunks[0]["model"], MODEL);
    }
}

#[tokio::test]
async fn named_choice_stream_finishes_with_stop() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_time", json!({"timezone": "Asia/Tokyo"}))).chunks(4));
    let mut body = request("Time in Tokyo?");
    body["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
    let streamed = check_stream(&gw.stream_ok(&body).await, false);
    assert_eq!(streamed.names(), ["get_time"]);
    assert_eq!(streamed.finish_reason, "stop");
}

#[tokio::test]
async fn retry_happens_before_anything_is_streamed() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("I don't have access to tools, sorry."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let streamed = check_stream(&gw.stream_ok(&request("Weather in Paris?")).await, false);
    assert_eq!(streamed.content, "", "the refusal never reached the client");
    assert_eq!(streamed.names(), ["get_weather"]);
    assert_eq!(gw.upstream.requests().len(), 2);
}

#[tokio::test]
async fn parallel_tool_calls_false_stream_has_one_call() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "{}{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_time", json!({"timezone": "Europe/Paris"}))
    );
    gw.upstream.push(Reply::text(text).chunks(3));
    let mut body = request("Weather and time in Paris?");
    body["parallel_tool_calls"] = json!(false);
    let streamed = check_stream(&gw.stream_ok(&body).await, false);
    assert_eq!(streamed.names(), ["get_weather"]);
}

#[tokio::test]
async fn tool_choice_none_stream_has_no_calls_and_no_markup() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!("Here you go.\n{}", hermes("get_weather", json!({"city": "Paris"})));
    gw.upstream.push(Reply::text(text).chunks(2));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("none");
    let streamed = check_stream(&gw.stream_ok(&body).await, false);
    assert!(streamed.calls.is_empty());
    assert!(!streamed.content.contains("get_weather"), "{:?}", streamed.content);
    assert_eq!(streamed.finish_reason, "stop");
}

#[tokio::test]
async fn call_without_arguments_streams_an_empty_object() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its tool requires a time zone; then it would be asked again).
        config.check_grounding = false;
    })
    .await;
    gw.upstream.push(Reply::text("<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>").chunks(3));
    let streamed = check_stream(&gw.stream_ok(&request("Time?")).await, false);
    assert_eq!(streamed.names(), ["get_time"]);
    assert_eq!(streamed.calls[0].2, "{}", "arguments are `{{}}`, never empty (2.9)");
}

#[tokio::test]
async fn unknown_call_between_known_calls_keeps_indices_contiguous() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!(
        "{}\n{}\n{}",
        hermes("get_weather", json!({"city": "Paris"})),
        hermes("get_stock_price", json!({"ticker": "ACME"})),
        hermes("get_time", json!({"timezone": "Europe/Paris"}))
    );
    gw.upstream.push(Reply::text(text).chunks(5));
    let streamed = check_stream(&gw.stream_ok(&request("Paris?")).await, false);
    assert_eq!(streamed.names(), ["get_weather", "get_time"]);
    assert!(!streamed.content.contains("get_stock_price"), "{:?}", streamed.content);
}

/// A marker split anywhere across upstream chunks never leaks into content (7.1).
#[tokio::test]
async fn split_markers_never_leak_into_content() {
    let gw = spawn_gateway(|_| {}).await;
    let prose = "Sure thing, let me look that up for you right away.";
    let text = format!(
        "{prose}\n{}\n{}",
        hermes("get_weather", json!({"city": "Paris", "days": 2})),
        hermes("get_time", json!({"timezone": "Europe/Paris"}))
    );
    for size in 1..=7 {
        gw.upstream.push(Reply::text(&text).chunks(size));
        let streamed = check_stream(&gw.stream_ok(&with_usage(request("Paris?"))).await, true);
        assert_eq!(streamed.content.trim(), prose, "chunks of {size}");
        assert_eq!(streamed.names(), ["get_weather", "get_time"], "chunks of {size}");
        assert_eq!(streamed.call_args(0), json!({"city": "Paris", "days": 2}), "size {size}");
        assert_eq!(streamed.call_args(1), json!({"timezone": "Europe/Paris"}), "size {size}");
        assert_eq!(streamed.finish_reason, "tool_calls");
    }
    // Bare JSON after long prose (so the text was already committed to the client).
    let prose = "Here is a long introduction that goes on for a while so that the gateway has \
                 to decide to stream it before any call shows up, which is the case where a \
                 marker that starts mid-chunk is most likely to slip out to the client unseen.";
    let text =
        format!("{prose}\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Oslo\"}}}}");
    for size in 1..=7 {
        gw.upstream.push(Reply::text(&text).chunks(size));
        let streamed = check_stream(&gw.stream_ok(&request("Oslo?")).await, false);
        assert_eq!(streamed.content.trim(), prose, "chunks of {size}");
        assert_eq!(streamed.names(), ["get_weather"], "chunks of {size}");
        assert_eq!(streamed.call_args(0), json!({"city": "Oslo"}));
    }
}

/// A call cut off by the token limit must not reach a streaming client as a finished call:
/// like the non-streaming path, the gateway should ask again (7.2: never emit a call before
/// its arguments are a complete JSON object).
/// A streamed call goes out as soon as it begins, so a call that the token limit cuts off
/// cannot be retried; like OpenAI, the stream then ends with `length`, and the arguments that
/// went out still form a JSON object. (Non-streaming requests retry instead; see `openai.rs`.)
#[tokio::test]
async fn call_cut_off_by_the_token_limit_ends_with_length_when_streaming() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
    gw.upstream.push(
        Reply::text("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par")
            .finish("length"),
    );
    let streamed = check_stream(&gw.stream_ok(&request("Weather in Paris?")).await, false);
    assert_eq!(streamed.names(), ["get_weather"]);
    assert_eq!(streamed.call_args(0), json!({"city": "Par"}));
    assert_eq!(streamed.finish_reason, "length");
    assert_eq!(gw.upstream.requests().len(), 1);
}

/// Replaces the per-response values (completion id, created, call ids) with placeholders.
fn normalize(body: &str) -> String {
    let streamed = check_stream(body, true);
    let first = &streamed.chunks[0];
    let mut out = body.replace(first["id"].as_str().unwrap(), "chatcmpl-ID");
    out = out.replace(&format!("\"created\":{}", first["created"]), "\"created\":0");
    for (i, (id, _, _)) in streamed.calls.iter().enumerate() {
        out = out.replace(id.as_str(), &format!("call_{i}"));
    }
    out
}

#[tokio::test]
async fn golden_tool_call_stream() {
    let gw = spawn_gateway(|_| {}).await;
    let text = format!("Checking.\n{}", hermes("get_weather", json!({"city": "Paris", "days": 2})));
    gw.upstream.push(Reply::text(text).chunks(6));
    let body = gw.stream_ok(&with_usage(request("Weather in Paris?"))).await;
    assert_eq!(normalize(&body), GOLDEN, "raw body:\n{body}");
}

/// `Checking.` then `get_weather({"city":"Paris","days":2})`, upstream chunks of 6 characters,
/// with `include_usage`. The first word of a line is held until it ends (it could name a
/// Python call), so `Checki` goes out with `ng.`. The call is held until it ends, since its
/// required city could be a guess (`check_grounding`), and its arguments go out whole;
/// a call nothing holds goes out in the fragments the parser produced (see
/// `split_markers_never_leak_into_content` and `responses::a_streamed_function_call_follows_the_grammar`).
const GOLDEN: &str = r#"data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[{"index":0,"delta":{"content":"Checking."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\",\"days\":2}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[],"usage":{"prompt_tokens":42,"completion_tokens":7,"total_tokens":49,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"#;

/// The checker itself: the golden passes, and each grammar violation in it is caught.
#[test]
fn checker_rejects_broken_streams() {
    let ok = GOLDEN.replace("call_0", "call_abcdefghijklmnopqrstuvwx");
    let ok = ok.replace("chatcmpl-ID", "chatcmpl-abcdefghijklmnopqrstuvwxyz123");
    check_stream(&ok, true);
    let broken = [
        ("no [DONE]", ok.replace("data: [DONE]\n\n", "")),
        (
            "role twice",
            ok.replace(
                r#""delta":{"content":"Checking."}"#,
                r#""delta":{"role":"assistant","content":"Checking."}"#,
            ),
        ),
        (
            "name repeated",
            ok.replace(
                r#"{"index":0,"function":{"arguments":"{\"city"#,
                r#"{"index":0,"function":{"name":"get_weather","arguments":"{\"city"#,
            ),
        ),
        (
            "index gap",
            ok.replace(
                r#"{"index":0,"function":{"arguments":"{\"city"#,
                r#"{"index":2,"function":{"arguments":"{\"city"#,
            ),
        ),
        (
            "no function",
            ok.replace(
                r#"{"index":0,"function":{"arguments":"{\"city\":\"Paris\",\"days\":2}"}}"#,
                r#"{"index":0}"#,
            ),
        ),
        ("two data lines", ok.replacen("\n\ndata: {", "\ndata: {", 1)),
        ("usage missing", ok.replacen(r#","usage":null}"#, "}", 1)),
        ("marker in content", ok.replace("Checking", "<tool_call")),
        ("other object", ok.replacen("chat.completion.chunk", "chat.completion", 1)),
        ("bad arguments", ok.replace(r#",\"days\":2}"#, r#",\"days\":2"#)),
    ];
    for (what, body) in broken {
        assert_ne!(body, ok, "{what}: the mutation applies");
        let caught = std::panic::catch_unwind(|| check_stream(&body, true)).is_err();
        assert!(caught, "the checker accepted a stream with {what}");
    }
}
