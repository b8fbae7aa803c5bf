//! `x-should-retry`: the OpenAI and Anthropic SDKs retry every 5xx twice
//! unless the response says `x-should-retry: false`. A failure the same request will meet
//! again (the emulation's retries ran out, the request is wrong) says so; a transient one
//! (an upstream that is unreachable, rate-limited or overloaded) never does.

use axum::http::StatusCode;
use serde_json::json;

use crate::common::api::{APIS, Api, within};
use crate::common::{Reply, closed_port, spawn_gateway};

fn should_retry(response: &reqwest::Response) -> Option<String> {
    response.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_owned())
}

/// A request that requires a call, on each family.
fn requiring_a_call(api: Api, stream: bool) -> serde_json::Value {
    let mut body = api.request("Weather in Paris?", true, stream);
    body["tool_choice"] = match api {
        Api::OpenAi => json!("required"),
        Api::Anthropic => json!({"type": "any"}),
    };
    body
}

#[tokio::test]
async fn retries_that_ran_out_say_a_client_retry_will_not_help() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for stream in [false, true] {
            // `max_retries` is 1: two replies without the required call.
            gw.upstream.push(Reply::text("No."));
            gw.upstream.push(Reply::text("Still no."));
            let response = within(api.send(&gw, &requiring_a_call(api, stream))).await;
            assert_eq!(response.status(), StatusCode::BAD_GATEWAY, "{api:?} stream={stream}");
            assert_eq!(should_retry(&response).as_deref(), Some("false"), "{api:?} {stream}");
            let error = api.error(response).await;
            assert!(error.message.contains("after 1 retries"), "{api:?}: {}", error.message);
        }
    }
    assert_eq!(gw.upstream.pending(), 0);
}

#[tokio::test]
async fn a_bad_request_says_a_client_retry_will_not_help() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        let response = within(api.send_raw(&gw, "{not json")).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{api:?}");
        assert_eq!(should_retry(&response).as_deref(), Some("false"), "{api:?}");
    }
}

#[tokio::test]
async fn transient_upstream_failures_leave_the_retry_to_the_client() {
    let gw = spawn_gateway(|_| {}).await;
    for api in APIS {
        for (reply, status) in [
            (Reply::error(429, json!({"error": {"message": "slow down"}})), 429),
            (Reply::error(503, json!({"error": {"message": "busy"}})), 0),
        ] {
            gw.upstream.push(reply);
            let response = within(api.send(&gw, &api.request("Hi", true, false))).await;
            if status != 0 {
                assert_eq!(response.status().as_u16(), status, "{api:?}");
            }
            assert!(response.status().is_client_error() || response.status().is_server_error());
            assert_eq!(should_retry(&response).as_deref(), Some("true"), "{api:?}");
        }
    }
    // Unreachable.
    let dead = closed_port().await;
    let gw = spawn_gateway(move |config| config.upstream.url = format!("http://{dead}")).await;
    for api in APIS {
        let response = within(api.send(&gw, &api.request("Hi", true, false))).await;
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY, "{api:?}");
        assert_eq!(should_retry(&response).as_deref(), Some("true"), "{api:?}");
    }
}
