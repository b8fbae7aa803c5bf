//! The request inspector (issue 27): off by default; on, it keeps the last requests with
//! every attempt (prompt, raw text, what the parser found, verdict, correction) and what the
//! client received, for an admin key only, as JSON and as an escaped HTML page. The page in
//! a real browser: `tests/e2e/test_inspect.py`.

use reqwest::StatusCode;
use serde_json::{Value, json};
use toolshim_gateway::{InspectConfig, KeyConfig};

use crate::common::api::within;
use crate::common::{Reply, TestGateway, hermes, request, spawn_gateway};

const ROOT: &str = "sk-inspect-root";
const USER: &str = "sk-inspect-user";

async fn gateway(inspect: InspectConfig) -> TestGateway {
    spawn_gateway(move |config| {
        config.keys.insert(
            "root".into(),
            KeyConfig { key: ROOT.into(), admin: true, ..KeyConfig::default() },
        );
        config.keys.insert("app".into(), KeyConfig { key: USER.into(), ..KeyConfig::default() });
        config.inspect = inspect;
    })
    .await
}

fn on() -> InspectConfig {
    InspectConfig { enabled: true, ..InspectConfig::default() }
}

async fn get(gw: &TestGateway, path: &str, auth: Option<&str>, accept: &str) -> reqwest::Response {
    let mut request = gw.http().get(gw.url(path)).header("accept", accept);
    if let Some(key) = auth {
        request = request.bearer_auth(key);
    }
    within(request.send()).await.unwrap()
}

async fn json_at(gw: &TestGateway, path: &str) -> Value {
    let response = get(gw, path, Some(ROOT), "application/json").await;
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    within(response.json()).await.unwrap()
}

/// A request that needed a retry: the first reply refused, holding markup; the second called.
async fn retried(gw: &TestGateway) -> Value {
    gw.upstream.push(Reply::text("<script>alert(1)</script> I cannot check the weather."));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let mut body = request("Weather in Paris?");
    body["tool_choice"] = json!("required");
    let response =
        within(gw.http().post(gw.url("/v1/chat/completions")).bearer_auth(USER).json(&body).send());
    let response = response.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    within(response.json::<Value>()).await.unwrap()
}

#[tokio::test]
async fn issue_27_a_retried_request_shows_both_attempts_with_what_the_parser_found() {
    let gw = gateway(on()).await;
    let completion = retried(&gw).await;
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
    let list = json_at(&gw, "/inspect").await;
    let line = &list["data"][0];
    assert_eq!(line["family"], "chat_completions");
    assert_eq!(line["key"], "app");
    assert_eq!(line["mode"], "emulate");
    assert_eq!(line["status"], 200);
    assert_eq!(line["outcome"], "tool_calls");
    assert_eq!(line["attempts"], 2);
    assert_eq!(line["retries"], 1);
    assert_eq!(list["inspector"]["kept"], 1);
    let record = json_at(&gw, &format!("/inspect/{}", line["id"])).await;
    let attempts = record["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["verdict"], "retry", "{record}");
    assert!(attempts[0]["problem"].as_str().unwrap().starts_with("missing_call"), "{record}");
    assert!(attempts[0]["raw"].as_str().unwrap().contains("<script>"), "{record}");
    assert!(attempts[0]["system"].as_str().unwrap().contains("get_weather"), "the tool contract");
    assert!(attempts[0]["correction"].is_null());
    assert_eq!(attempts[1]["verdict"], "answer", "{record}");
    assert!(attempts[1]["correction"].as_str().is_some_and(|c| !c.is_empty()), "{record}");
    let found = &attempts[1]["findings"][0];
    assert_eq!(found["kind"], "call");
    assert_eq!(found["name"], "get_weather");
    assert_eq!(found["detail"], r#"{"city":"Paris"}"#);
    let raw = attempts[1]["raw"].as_str().unwrap();
    let span =
        [found["span"][0].as_u64().unwrap() as usize, found["span"][1].as_u64().unwrap() as usize];
    assert!(raw[span[0]..span[1]].starts_with("<tool_call>"), "{raw} {span:?}");
    // What the client received, and what it sent (the key is not in the body; nothing leaks).
    assert!(record["response"].as_str().unwrap().contains("get_weather"), "{record}");
    assert!(record["request"].as_str().unwrap().contains("Weather in Paris?"), "{record}");
    assert!(!record.to_string().contains(USER) && !record.to_string().contains(ROOT));

    // The page: the model's markup is text, never markup.
    let page = get(&gw, &format!("/inspect/{}", line["id"]), Some(ROOT), "text/html").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'")
    );
    let html = within(page.text()).await.unwrap();
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains("<mark class=\"call\""), "the call's bytes are marked");
    assert!(html.contains("id=\"attempt-1\"") && html.contains("id=\"attempt-2\""));
    let list = within(get(&gw, "/inspect", Some(ROOT), "text/html").await.text()).await.unwrap();
    assert!(list.contains("<a href=\"/inspect/1\">1</a>"), "{list}");
}

#[tokio::test]
async fn issue_27_only_an_admin_key_reads_the_inspector() {
    let gw = gateway(on()).await;
    let none = get(&gw, "/inspect", None, "text/html").await;
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert!(none.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic realm="));
    assert_eq!(get(&gw, "/inspect", Some("sk-nobody"), "application/json").await.status(), 401);
    assert_eq!(get(&gw, "/inspect/1", None, "application/json").await.status(), 401);
    assert_eq!(get(&gw, "/inspect", Some(USER), "application/json").await.status(), 403);
    // A browser sends the key as the password of HTTP Basic.
    let basic = gw.http().get(gw.url("/inspect")).basic_auth("anyone", Some(ROOT));
    assert_eq!(within(basic.send()).await.unwrap().status(), StatusCode::OK);
    let basic = gw.http().get(gw.url("/inspect")).basic_auth("anyone", Some(USER));
    assert_eq!(within(basic.send()).await.unwrap().status(), StatusCode::FORBIDDEN);
    // An unknown id is a 404 that says why it may be gone.
    let missing = get(&gw, "/inspect/99", Some(ROOT), "application/json").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let error: Value = within(missing.json()).await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("pushed out"), "{error}");
    // Unauthenticated requests are never kept.
    let refused =
        within(gw.http().post(gw.url("/v1/chat/completions")).json(&request("Hi")).send());
    assert_eq!(refused.await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(json_at(&gw, "/inspect").await["inspector"]["kept"], 0);
}

#[tokio::test]
async fn issue_27_the_inspector_is_off_by_default() {
    let gw = gateway(InspectConfig::default()).await;
    let off = get(&gw, "/inspect", Some(ROOT), "application/json").await;
    assert_eq!(off.status(), StatusCode::NOT_FOUND);
    let error: Value = within(off.json()).await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("[inspect]"), "{error}");
}

#[tokio::test]
async fn issue_27_the_inspector_keeps_at_most_its_requests_and_bytes() {
    let gw = gateway(InspectConfig { enabled: true, requests: 3, max_bytes: 1 << 16 }).await;
    let long = "x".repeat(40_000);
    for i in 0..6 {
        gw.upstream.push(Reply::text(format!("Answer {i}. {long}")));
        let body = json!({"model": crate::common::MODEL, "messages": [{"role": "user", "content": format!("Question {i}")}]});
        let response = within(
            gw.http().post(gw.url("/v1/chat/completions")).bearer_auth(USER).json(&body).send(),
        );
        assert_eq!(response.await.unwrap().status(), StatusCode::OK);
    }
    let list = json_at(&gw, "/inspect").await;
    let totals = &list["inspector"];
    assert!(totals["kept"].as_u64().unwrap() <= 3, "{totals}");
    assert!(totals["bytes"].as_u64().unwrap() <= 1 << 16, "{totals}");
    // The newest is kept, and what did not fit says so.
    let newest = &list["data"][0];
    assert_eq!(newest["id"], 6);
    let record = json_at(&gw, "/inspect/6").await;
    let text = record.to_string();
    assert!(text.contains("Question 5"), "{text}");
    assert!(text.contains("more bytes not kept"), "{text}");
}

#[tokio::test]
async fn issue_27_every_api_family_is_kept_with_its_name() {
    let gw = gateway(on()).await;
    gw.upstream.push(Reply::text("Hello from Messages."));
    gw.upstream.push(Reply::text("Hello from Responses."));
    let messages = json!({"model": crate::common::MODEL, "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": "Hi"}]});
    let sent = gw
        .http()
        .post(gw.url("/v1/messages"))
        .bearer_auth(USER)
        .header("anthropic-version", "2023-06-01");
    let response = within(sent.json(&messages).send()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    within(response.text()).await.unwrap();
    let responses = json!({"model": crate::common::MODEL, "input": "Hi", "store": false});
    let response =
        within(gw.http().post(gw.url("/v1/responses")).bearer_auth(USER).json(&responses).send());
    assert_eq!(response.await.unwrap().status(), StatusCode::OK);
    let list = json_at(&gw, "/inspect").await;
    let families: Vec<&str> =
        list["data"].as_array().unwrap().iter().map(|l| l["family"].as_str().unwrap()).collect();
    assert_eq!(families, ["responses", "messages"], "{list}");
    let messages = json_at(&gw, "/inspect/1").await;
    assert_eq!(messages["stream"], true);
    assert_eq!(messages["outcome"], "stop");
    assert_eq!(messages["attempts"][0]["raw"], "Hello from Messages.");
    // The whole stream the client received.
    let received = messages["response"].as_str().unwrap();
    assert!(
        received.contains("event: message_start") && received.contains("event: message_stop"),
        "{received}"
    );
}
