//! Errors: the client's mistakes (400/401/404/405/413), the upstream's failures before the first
//! byte (429/502/504 as ordinary HTTP errors) and after it (an in-band error chunk), and a
//! client that goes away mid-stream.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::{
    DEADLINE, MODEL, Reply, assert_error_shape, closed_port, plain_request, read_first_event,
    request, spawn_gateway, sse_data,
};

async fn error_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = response.text().await.unwrap();
    assert!(content_type.starts_with("application/json"), "{status} {content_type}: {text}");
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_error_shape(&value);
    (status, value)
}

#[tokio::test]
async fn malformed_json_is_400() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw
        .http()
        .post(gw.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body("{\"model\": \"m\", \"messages\": [")
        .send()
        .await
        .unwrap();
    let (status, value) = error_of(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(value["error"]["type"], "invalid_request_error");
    assert!(gw.upstream.requests().is_empty());
}

#[tokio::test]
async fn missing_model_is_400_with_param_model() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw.post(&json!({"messages": [{"role": "user", "content": "hi"}]})).await;
    let (status, value) = error_of(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(value["error"]["param"], "model");
    assert_eq!(value["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn tool_message_without_a_call_uses_openai_wording() {
    let gw = spawn_gateway(|_| {}).await;
    let body = json!({"model": MODEL, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_x", "content": "18C"}
    ]});
    let (status, value) = error_of(gw.post(&body).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        value,
        json!({"error": {
            "message": "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            "type": "invalid_request_error",
            "param": "messages.[1].role",
            "code": null
        }})
    );
}

/// 2.6, second row: every call needs an answer, also when the calls end the conversation.
#[tokio::test]
async fn unanswered_tool_calls_use_openai_wording() {
    let gw = spawn_gateway(|_| {}).await;
    let call = |id: &str| {
        json!({"id": id, "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}})
    };
    let followed = json!({"model": MODEL, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [call("call_a"), call("call_b")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18C"},
        {"role": "user", "content": "next"}
    ]});
    let last = json!({"model": MODEL, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [call("call_b")]}
    ]});
    for (case, body) in [("followed by a user message", followed), ("at the end", last)] {
        let (status, value) = error_of(gw.post(&body).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{case}: {value}");
        assert_eq!(
            value,
            json!({"error": {
                "message": "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b",
                "type": "invalid_request_error",
                "param": "messages.[1].role",
                "code": null
            }}),
            "{case}"
        );
    }
    assert!(gw.upstream.requests().is_empty());
}

#[tokio::test]
async fn missing_messages_is_400_with_param_messages() {
    let gw = spawn_gateway(|_| {}).await;
    for body in [json!({"model": MODEL}), json!({"model": MODEL, "messages": []})] {
        let (status, value) = error_of(gw.post(&body).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(value["error"]["param"], "messages", "{body}");
    }
}

#[tokio::test]
async fn wrong_or_missing_gateway_key_is_401() {
    let gw = spawn_gateway(|config| config.api_keys = vec!["sk-gateway-key".into()]).await;
    let body = plain_request("hi");
    let url = gw.url("/v1/chat/completions");
    for auth in [None, Some("Bearer sk-wrong"), Some("sk-gateway-key")] {
        let mut builder = gw.http().post(&url).json(&body);
        if let Some(auth) = auth {
            builder = builder.header("authorization", auth);
        }
        let (status, value) = error_of(builder.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(value["error"]["code"], "invalid_api_key", "{auth:?}");
    }
    let response = gw.http().get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(error_of(response).await.0, StatusCode::UNAUTHORIZED);
    assert!(gw.upstream.requests().is_empty());

    gw.upstream.push(Reply::text("Hello."));
    let response =
        gw.http().post(&url).bearer_auth("sk-gateway-key").json(&body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn upstream_429_is_429_with_retry_after() {
    let gw = spawn_gateway(|_| {}).await;
    let limited = json!({"error": {"message": "slow down", "type": "requests", "param": null,
        "code": "rate_limit_exceeded"}});
    for stream in [false, true] {
        gw.upstream.push(Reply::error(429, limited.clone()).retry_after("7"));
        let mut body = request("Weather?");
        body["stream"] = json!(stream);
        let response = gw.post(&body).await;
        assert_eq!(
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()),
            Some("7"),
            "stream: {stream}"
        );
        // Before the first byte an error is an HTTP error, also for a stream (1.6).
        let (status, value) = error_of(response).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "stream: {stream}");
        assert_eq!(value["error"]["code"], "rate_limit_exceeded");
    }
    assert_eq!(gw.upstream.requests().len(), 2, "a rate limit is not retried by the gateway");
}

#[tokio::test]
async fn upstream_500_is_502_without_the_upstream_body() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::error(
        500,
        json!({"error": {"message": "secret stack trace at /srv/model.py:12"}}),
    ));
    let (status, value) = error_of(gw.post(&request("Weather?")).await).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(value["error"]["type"], "server_error");
    assert!(!value.to_string().contains("secret"), "{value}");
}

#[tokio::test]
async fn unreachable_upstream_is_502() {
    let port = closed_port().await;
    let gw = spawn_gateway(|config| config.upstream.url = format!("http://{port}")).await;
    for stream in [false, true] {
        let mut body = request("Weather?");
        body["stream"] = json!(stream);
        let (status, _) = error_of(gw.post(&body).await).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "stream: {stream}");
    }
}

#[tokio::test]
async fn upstream_stalling_before_the_first_byte_is_504() {
    let gw = spawn_gateway(|config| config.upstream.first_byte_timeout_secs = 0.3).await;
    gw.upstream.push(Reply::stall());
    let started = Instant::now();
    let (status, value) = error_of(gw.post(&request("Weather?")).await).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(value["error"]["code"], "upstream_timeout");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(gw.upstream.wait_dropped(DEADLINE).await, "the stalled upstream request is abandoned");
}

/// Reads a streaming response to its end, returning the SSE payloads.
async fn stream_payloads(response: reqwest::Response) -> Vec<String> {
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    sse_data(&text)
}

fn assert_in_band_error(payloads: &[String]) -> Value {
    let last: Value = serde_json::from_str(payloads.last().unwrap()).unwrap();
    let error = assert_error_shape(&last).clone();
    assert!(!payloads.iter().any(|p| p == "[DONE]"), "no [DONE] after an error: {payloads:?}");
    for payload in &payloads[..payloads.len() - 1] {
        let chunk: Value = serde_json::from_str(payload).unwrap();
        assert!(chunk.get("error").is_none(), "only the last chunk is an error: {chunk}");
        assert_eq!(chunk["object"], "chat.completion.chunk");
    }
    error
}

#[tokio::test]
async fn upstream_breaking_mid_stream_is_an_in_band_error() {
    let gw = spawn_gateway(|_| {}).await;
    // Role chunk and three content chunks, then the connection breaks.
    gw.upstream.push(Reply::text("Hello world, how are you today?").chunks(4).disconnect_after(4));
    let mut body = plain_request("Say hello.");
    body["stream"] = json!(true);
    let payloads = stream_payloads(gw.post(&body).await).await;
    let error = assert_in_band_error(&payloads);
    assert_eq!(error["type"], "server_error");
    let content: String = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str::<Value>(p).unwrap())
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(content, "Hello world,");
}

#[tokio::test]
async fn upstream_going_silent_mid_stream_is_an_in_band_error() {
    let gw = spawn_gateway(|config| config.upstream.idle_timeout_secs = 0.3).await;
    gw.upstream.push(Reply::text("Hello world, how are you today?").chunks(4).stall_after(3));
    let mut body = plain_request("Say hello.");
    body["stream"] = json!(true);
    let payloads = stream_payloads(gw.post(&body).await).await;
    let error = assert_in_band_error(&payloads);
    assert_eq!(error["code"], "upstream_timeout");
}

#[tokio::test]
async fn upstream_breaking_before_anything_was_streamed_is_502() {
    let gw = spawn_gateway(|_| {}).await;
    // With tools, short text is held back (it could still be a refusal or a call), so the
    // break happens before the response began.
    gw.upstream.push(Reply::text("Let me think about it.").chunks(4).disconnect_after(3));
    let mut body = request("Weather?");
    body["stream"] = json!(true);
    let (status, value) = error_of(gw.post(&body).await).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{value}");
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let gw = spawn_gateway(|config| config.body_limit_bytes = 2048).await;
    let body = plain_request(&"x".repeat(4096));
    let (status, value) = error_of(gw.post(&body).await).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(value["error"]["code"], "request_too_large");
    assert!(gw.upstream.requests().is_empty());
}

#[tokio::test]
async fn unknown_path_is_404() {
    let gw = spawn_gateway(|_| {}).await;
    let response = gw.http().get(gw.url("/v1/nothing-here")).send().await.unwrap();
    let (status, value) = error_of(response).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(value["error"]["message"].as_str().unwrap().contains("/v1/nothing-here"));
}

/// A client that hangs up mid-stream cancels the upstream request (7.8).
#[tokio::test]
async fn client_disconnect_aborts_the_upstream_request() {
    let gw = spawn_gateway(|_| {}).await;
    let text = "a slow and steady reply that would take several seconds to finish ".repeat(2);
    gw.upstream.push(Reply::text(text).chunks(1).delay(Duration::from_millis(20)));
    let mut body = plain_request("Talk slowly.");
    body["stream"] = json!(true);
    let response = gw.post(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut bytes = response.bytes_stream();
    let received = read_first_event(&mut bytes).await;
    assert!(received.starts_with(b"data: {"), "{}", String::from_utf8_lossy(&received));
    drop(bytes);
    assert!(
        gw.upstream.wait_dropped(DEADLINE).await,
        "the upstream never saw its request cancelled"
    );
}

/// A streaming client that gives up while the gateway still holds the reply back (nothing
/// sent yet) also cancels the upstream request.
#[tokio::test]
async fn client_leaving_before_the_first_byte_aborts_the_upstream_request() {
    let gw = spawn_gateway(|_| {}).await;
    for stream in [true, false] {
        let text = "Let me think about this for quite a while before answering.";
        gw.upstream.push(Reply::text(text).chunks(1).delay(Duration::from_millis(20)));
        let mut body = request("Weather?");
        body["stream"] = json!(stream);
        let mut post = Box::pin(gw.post(&body));
        let n = if stream { 1 } else { 2 };
        tokio::select! {
            response = &mut post => panic!("answered early: {response:?}"),
            arrived = gw.upstream.wait_requests(n, DEADLINE) => assert!(arrived),
        }
        drop(post);
        assert!(
            gw.upstream.wait_dropped(DEADLINE).await,
            "stream: {stream}: the upstream never saw its request cancelled"
        );
    }
}

/// Issue 25: a known path asked with a method it does not serve is a 405 with a body in the
/// family's error shape (it was an empty body).
#[tokio::test]
async fn a_wrong_method_is_a_405_in_the_familys_shape() {
    let gw = spawn_gateway(|_| {}).await;
    for path in ["/v1/chat/completions", "/v1/responses/resp_1"] {
        let response = gw.http().put(gw.url(path)).send().await.unwrap();
        let (status, value) = error_of(response).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(value["error"]["code"], "method_not_allowed", "{path}: {value}");
        assert!(value["error"]["message"].as_str().unwrap().contains("PUT"), "{value}");
    }
    let response = gw.http().get(gw.url("/v1/messages")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["type"], "error", "{value}");
    assert_eq!(value["error"]["type"], "invalid_request_error", "{value}");
    assert!(value["error"]["message"].as_str().unwrap().contains("GET"), "{value}");
}
