//! Named keys (issue 27): each with the models it may use and its limits; a limit that is hit
//! is the API's own 429 with `retry-after` and a message naming it; usage per key and model
//! in the metrics and at `/admin/usage`, for an admin key only. Limits shared through Redis
//! are tested end to end (`tests/e2e/test_limits.py`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use toolshim_gateway::KeyConfig;

use crate::common::api::within;
use crate::common::{
    Reply, TestGateway, UPSTREAM_COMPLETION_TOKENS as OUT, UPSTREAM_PROMPT_TOKENS as IN,
    plain_request, spawn_gateway,
};

fn key(secret: &str) -> KeyConfig {
    KeyConfig { key: secret.into(), ..KeyConfig::default() }
}

/// A gateway with the keys `alice` (as `tweak` sets it), `bob` (no limit) and `root` (admin).
async fn gateway(alice: KeyConfig) -> TestGateway {
    spawn_gateway(move |config| {
        config.keys.insert("alice".into(), alice);
        config.keys.insert("bob".into(), key("sk-bob"));
        config.keys.insert("root".into(), KeyConfig { admin: true, ..key("sk-root") });
    })
    .await
}

/// `POST path` with `secret` as the bearer key (and Anthropic's version header).
async fn post(gw: &TestGateway, path: &str, secret: &str, body: &Value) -> reqwest::Response {
    let request = gw.http().post(gw.url(path)).bearer_auth(secret).json(body);
    within(request.header("anthropic-version", "2023-06-01").send()).await.unwrap()
}

async fn json_of(response: reqwest::Response) -> Value {
    within(response.json::<Value>()).await.unwrap()
}

fn chat(model: &str) -> Value {
    let mut body = plain_request("Hi");
    body["model"] = json!(model);
    body
}

fn messages(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test]
async fn issue_27_named_keys_authenticate_and_a_model_outside_their_list_is_the_apis_404() {
    let gw =
        gateway(KeyConfig { models: vec!["m".into(), "gpt-*".into()], ..key("sk-alice") }).await;
    for _ in 0..3 {
        gw.upstream.push(Reply::text("Hello."));
    }
    let none = within(gw.http().post(gw.url("/v1/chat/completions")).json(&chat("m")).send());
    assert_eq!(none.await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-wrong", &chat("m")).await.status(), 401);
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await.status(), 200);
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-alice", &chat("gpt-4o")).await.status(), 200);
    // Another model: OpenAI's 404, Anthropic's, and nothing reaches the upstream.
    let refused = post(&gw, "/v1/chat/completions", "sk-alice", &chat("other")).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    let error = json_of(refused).await["error"].clone();
    assert_eq!(error["code"], "model_not_found", "{error}");
    assert!(error["message"].as_str().unwrap().contains("`other`"), "{error}");
    let refused = post(&gw, "/v1/messages", "sk-alice", &messages("claude-x")).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    assert_eq!(json_of(refused).await["error"]["type"], "not_found_error");
    // `bob` may use any model.
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-bob", &chat("other")).await.status(), 200);
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn issue_27_an_rpm_limit_is_each_familys_429_naming_it_with_retry_after() {
    let gw = gateway(KeyConfig { rpm: 2, ..key("sk-alice") }).await;
    for _ in 0..3 {
        gw.upstream.push(Reply::text("Hello."));
    }
    for _ in 0..2 {
        assert_eq!(post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await.status(), 200);
    }
    let refused = post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((55..=60).contains(&wait), "{wait}");
    assert_eq!(refused.headers()["x-should-retry"], "true");
    let error = json_of(refused).await["error"].clone();
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("requests"), Some("rate_limit_exceeded"))
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("'alice'") && message.contains("2 requests per minute (rpm)"),
        "{message}"
    );
    assert!(message.contains(&format!("try again in {wait}s")), "{message}");
    // The same limit in Anthropic's and the Responses API's words.
    let refused = post(&gw, "/v1/messages", "sk-alice", &messages("m")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(json_of(refused).await["error"]["type"], "rate_limit_error");
    let body = json!({"model": "m", "input": "Hi"});
    let refused = post(&gw, "/v1/responses", "sk-alice", &body).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(json_of(refused).await["error"]["code"], "rate_limit_exceeded");
    // Another key has its own count; count_tokens is not counted.
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-bob", &chat("m")).await.status(), 200);
    let counted = post(&gw, "/v1/messages/count_tokens", "sk-alice", &messages("m")).await;
    assert_eq!(counted.status(), StatusCode::OK);
}

#[tokio::test]
async fn issue_27_token_and_concurrency_limits_count_what_replies_cost_and_hold() {
    let gw = gateway(KeyConfig { tpm: IN + OUT, concurrent: 1, ..key("sk-alice") }).await;
    // One reply in flight (slow), and a second request meanwhile: refused.
    gw.upstream.push(Reply::text("Hello there.").delay(Duration::from_millis(300)));
    let slow = {
        let (http, url) = (gw.http().clone(), gw.url("/v1/chat/completions"));
        crate::common::spawn(async move {
            let request = http.post(url).bearer_auth("sk-alice").json(&chat("m"));
            request.send().await.unwrap().text().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let message = json_of(refused).await["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("1 requests at once (concurrent)"), "{message}");
    assert!(within(slow).await.unwrap().contains("Hello there."));
    // The first reply cost the whole minute's tokens.
    let refused = post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let error = json_of(refused).await["error"].clone();
    assert_eq!(error["type"], "tokens", "{error}");
    assert!(error["message"].as_str().unwrap().contains("tokens per minute (tpm)"), "{error}");
}

#[tokio::test]
async fn issue_27_usage_per_key_and_model_is_in_the_metrics_and_at_admin_usage_for_an_admin_key() {
    let gw = gateway(KeyConfig { rpm: 100, ..key("sk-alice") }).await;
    gw.upstream.push(Reply::text("Hello."));
    gw.upstream.push(Reply::text("Hello."));
    assert_eq!(post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await.status(), 200);
    assert_eq!(post(&gw, "/v1/messages", "sk-alice", &messages("m")).await.status(), 200);
    // Without a key, a 401; with a key that is not an admin's, a 403 that says what is needed.
    let usage = gw.url("/admin/usage");
    assert_eq!(within(gw.http().get(&usage).send()).await.unwrap().status(), 401);
    let refused = within(gw.http().get(&usage).bearer_auth("sk-alice").send()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(json_of(refused).await["error"]["message"].as_str().unwrap().contains("admin = true"));
    let answer = within(gw.http().get(&usage).bearer_auth("sk-root").send()).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let text = within(answer.text()).await.unwrap();
    assert!(!text.contains("sk-alice") && !text.contains("sk-root"), "{text}");
    let usage: Value = serde_json::from_str(&text).unwrap();
    let alice = usage["keys"].as_array().unwrap().iter().find(|k| k["name"] == "alice").unwrap();
    let m = &alice["models"]["m"];
    assert_eq!(m["requests"], 2, "{alice}");
    assert_eq!(m["prompt_tokens"], 2 * IN, "{alice}");
    assert_eq!(m["completion_tokens"], 2 * OUT, "{alice}");
    assert_eq!(alice["limits"]["rpm"], 100);
    assert_eq!(alice["now"]["requests_last_minute"], 2, "{alice}");
    assert_eq!(usage["counters"], "local");
    // The metrics name the key, never its secret.
    let metrics = within(within(gw.http().get(gw.url("/metrics")).send()).await.unwrap().text())
        .await
        .unwrap();
    assert!(!metrics.contains("sk-alice"));
    let line = |kind: &str| {
        format!(
            "toolshim_key_tokens_total{{key=\"alice\",model=\"m\",kind=\"{kind}\",attempt=\"final\"}}"
        )
    };
    assert!(metrics.contains(&format!("{} {}", line("prompt"), 2 * IN)), "{metrics}");
    assert!(metrics.contains(&format!("{} {}", line("completion"), 2 * OUT)), "{metrics}");
    assert!(
        metrics.contains("toolshim_key_requests_total{key=\"alice\",model=\"m\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn issue_27_a_native_stream_is_asked_for_its_usage_and_a_second_header_does_not_shed_the_key()
{
    let gw = spawn_gateway(|config| {
        config.mode = toolshim_gateway::Mode::Native;
        config.keys.insert("alice".into(), KeyConfig { tpm: IN + OUT, rpm: 5, ..key("sk-alice") });
        config.keys.insert("bob".into(), key("sk-bob"));
    })
    .await;
    gw.upstream.push(Reply::text("Hello."));
    let mut body = chat("m");
    body["stream"] = json!(true);
    let streamed = post(&gw, "/v1/chat/completions", "sk-alice", &body).await;
    assert_eq!(streamed.status(), StatusCode::OK);
    let text = within(streamed.text()).await.unwrap();
    // The client did not ask for usage: it gets none; the upstream was asked for it.
    assert!(!text.contains("\"usage\""), "{text}");
    assert!(text.contains("\"Hell\"") && text.ends_with("data: [DONE]\n\n"), "{text}");
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["stream_options"]["include_usage"], true, "{sent}");
    // Its tokens counted against the key: the minute's are spent.
    let refused = post(&gw, "/v1/chat/completions", "sk-alice", &chat("m")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // A junk `x-api-key` beside the bearer key changes nothing: still alice, still limited.
    let request = gw.http().post(gw.url("/v1/chat/completions")).bearer_auth("sk-alice");
    let request = request.header("x-api-key", "junk").json(&chat("m"));
    assert_eq!(within(request.send()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(gw.upstream.pending(), 0);
}
