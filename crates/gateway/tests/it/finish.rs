//! A reply ends with `length` (Anthropic `max_tokens`, a Responses `incomplete` with
//! `max_output_tokens`) only when the upstream said its token limit cut it. A call that ended
//! incomplete for another reason (a stop sequence, an upstream that says `stop`, arguments that
//! are not JSON), once it cannot be asked for again, fails the reply instead: in-band when it
//! went out, as a 502 `call_incomplete` when the retries ran out.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::{APIS, Api, within};
use crate::common::{Reply, spawn_gateway};
use crate::responses::{events, post, weather};

const CUT: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
const NOT_JSON: &str =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {city = Paris}}\n</tool_call>";

fn length_word(api: Api) -> &'static str {
    api.pick("length", "max_tokens")
}

#[tokio::test]
async fn an_incomplete_call_without_a_token_limit_is_never_length() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
    for api in APIS {
        for text in [CUT, NOT_JSON] {
            // `max_retries` is 1: the same reply twice, and the retries ran out.
            gw.upstream.push(Reply::text(text).finish("stop"));
            gw.upstream.push(Reply::text(text).finish("stop"));
            let response = within(api.send(&gw, &api.request("Weather?", true, false))).await;
            assert_eq!(response.headers()["x-should-retry"], "false", "{api:?}");
            let error = api.error(response).await;
            assert_eq!(error.status, StatusCode::BAD_GATEWAY, "{api:?} {text}: {:?}", error.body);
            if api == Api::OpenAi {
                assert_eq!(error.code.as_deref(), Some("call_incomplete"));
            }
            assert!(error.message.contains("incomplete"), "{api:?}: {}", error.message);
        }
        // Streamed, the call went out before it was cut: the stream fails in-band.
        gw.upstream.push(Reply::text(CUT).finish("stop"));
        let folded = api.streams(&gw, &api.request("Weather?", true, true)).await;
        assert_eq!(folded.calls.len(), 1, "{api:?}: {folded:?}");
        assert!(folded.error.is_some(), "{api:?}: {folded:?}");
        assert_ne!(folded.finish.as_deref(), Some(length_word(api)), "{api:?}: {folded:?}");
    }
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn a_call_the_token_limit_cut_is_length() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
    for api in APIS {
        gw.upstream.push(Reply::text(CUT).finish("length"));
        gw.upstream.push(Reply::text(CUT).finish("length"));
        let (_, finish) = api.completes(&gw, &api.request("Weather?", true, false)).await;
        assert_eq!(finish, length_word(api), "{api:?}");
        gw.upstream.push(Reply::text(CUT).finish("length"));
        let folded = api.streams(&gw, &api.request("Weather?", true, true)).await;
        assert!(folded.error.is_none(), "{api:?}: {folded:?}");
        assert_eq!(folded.finish.as_deref(), Some(length_word(api)), "{api:?}: {folded:?}");
    }
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn a_responses_call_is_incomplete_only_at_the_token_limit() {
    let gw = spawn_gateway(|config| {
        // The call goes out as it is written: no judge holds it (`check_grounding` would,
        // until it ends, since its required city could be a guess).
        config.check_grounding = false;
    })
    .await;
    let body = |stream: bool| {
        json!({"model": "m", "input": "Weather?", "tools": [weather()], "stream": stream,
            "max_output_tokens": 100})
    };
    // Cut without a token limit: a 502, and in a stream `response.failed`.
    gw.upstream.push(Reply::text(CUT).finish("stop"));
    gw.upstream.push(Reply::text(CUT).finish("stop"));
    let response = post(&gw, &body(false)).await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let value: Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "call_incomplete", "{value:#}");
    gw.upstream.push(Reply::text(CUT).finish("stop"));
    let events = events(&within(post(&gw, &body(true)).await.text()).await.unwrap());
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.failed", "{last:#}");
    assert_eq!(last["response"]["error"]["code"], "call_incomplete");
    // Cut by the token limit: `incomplete`, for `max_output_tokens`.
    gw.upstream.push(Reply::text(CUT).finish("length"));
    gw.upstream.push(Reply::text(CUT).finish("length"));
    let value: Value = post(&gw, &body(false)).await.json().await.unwrap();
    assert_eq!(value["status"], "incomplete", "{value:#}");
    assert_eq!(value["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(gw.upstream.pending(), 0);
}
