//! Issue 18: several upstreams routed by model name (`[upstreams.NAME]`): exact names,
//! aliases and patterns, a default route for names no upstream lists (Claude Code's side
//! requests), fallbacks when an upstream is down or failing, a remembered refusal of native
//! tools, the model list and `/readyz` over all upstreams.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolshim_gateway::{Config, Mode, NamedUpstream, UpstreamConfig};

use crate::common::api::{APIS, Api};
use crate::common::{
    MockUpstream, Reply, TestGateway, args, base_config, closed_port, hermes, serve_config,
};

/// A named upstream at `url` serving `models`.
fn named(url: &str, models: &[&str]) -> NamedUpstream {
    NamedUpstream {
        upstream: UpstreamConfig { url: url.into(), ..base_config(url).upstream },
        models: models.iter().map(|m| (*m).to_owned()).collect(),
        ..NamedUpstream::default()
    }
}

/// Two mock upstreams, `local` (the default route, with the alias `gpt-5.5` → `qwen-coder`)
/// and `hosted` (serving `claude-*`), behind one gateway with no `[upstream]` table.
async fn two_upstreams(tweak: impl FnOnce(&mut Config)) -> (TestGateway, MockUpstream) {
    let local = MockUpstream::start().await;
    let hosted = MockUpstream::start().await;
    let mut config = base_config("");
    let mut first = named(&local.url(), &["qwen-coder"]);
    first.aliases.insert("gpt-5.5".into(), "qwen-coder".into());
    config.upstreams = BTreeMap::from([
        ("local".to_owned(), first),
        ("hosted".to_owned(), named(&hosted.url(), &["claude-*"])),
    ]);
    config.default_upstream = Some("local".into());
    tweak(&mut config);
    (serve_config(local, config).await, hosted)
}

fn with_model(api: Api, model: &str) -> Value {
    let mut body = api.request("Weather in Paris, Oslo, Rome, Bern, Lyon or Nice?", true, false);
    body["model"] = json!(model);
    body
}

/// The name of the first call in a non-streaming reply of either family.
async fn first_call(api: Api, gw: &TestGateway, body: &Value) -> (String, Value, Value) {
    let response = api.send(gw, body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let reply: Value = response.json().await.unwrap();
    let (name, arguments) = match api {
        Api::OpenAi => {
            let call = &reply["choices"][0]["message"]["tool_calls"][0];
            (call["function"]["name"].as_str().unwrap().to_owned(), args(call))
        }
        Api::Anthropic => {
            let block =
                reply["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_use");
            let block = block.unwrap_or_else(|| panic!("no tool_use: {reply}"));
            (block["name"].as_str().unwrap().to_owned(), block["input"].clone())
        }
    };
    (name, arguments, reply)
}

#[tokio::test]
async fn each_model_reaches_its_upstream_under_its_upstream_name() {
    let (gw, hosted) = two_upstreams(|_| {}).await;
    for api in APIS {
        // An alias: the client's name on the reply, the upstream's name upstream.
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
        let (name, arguments, reply) = first_call(api, &gw, &with_model(api, "gpt-5.5")).await;
        assert_eq!((name.as_str(), arguments), ("get_weather", json!({"city": "Paris"})));
        assert_eq!(reply["model"], "gpt-5.5", "{api:?}: {reply}");
        assert_eq!(gw.upstream.requests().last().unwrap()["model"], "qwen-coder", "{api:?}");
        // A pattern: sent to its upstream as it is.
        hosted.push(Reply::text(hermes("get_weather", json!({"city": "Lyon"}))));
        let (_, arguments, _) = first_call(api, &gw, &with_model(api, "claude-haiku-4-5")).await;
        assert_eq!(arguments, json!({"city": "Lyon"}));
        assert_eq!(hosted.requests().last().unwrap()["model"], "claude-haiku-4-5", "{api:?}");
        // A name no upstream lists takes the default route.
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Nice"}))));
        let (_, arguments, _) = first_call(api, &gw, &with_model(api, "some-side-model")).await;
        assert_eq!(arguments, json!({"city": "Nice"}));
        assert_eq!(gw.upstream.requests().last().unwrap()["model"], "some-side-model");
    }
    assert_eq!((gw.upstream.requests().len(), hosted.requests().len()), (4, 2));
}

#[tokio::test]
async fn without_a_default_route_an_unlisted_model_is_a_404_naming_the_models() {
    let (gw, hosted) = two_upstreams(|config| config.default_upstream = None).await;
    for api in APIS {
        let err = api.fails(&gw, &with_model(api, "gpt-4o")).await;
        assert_eq!(err.status, StatusCode::NOT_FOUND, "{api:?}: {:?}", err.body);
        assert_eq!(err.kind, api.pick("invalid_request_error", "not_found_error"));
        if api == Api::OpenAi {
            assert_eq!(err.code.as_deref(), Some("model_not_found"));
            assert_eq!(err.body["error"]["param"], "model");
        }
        assert!(
            err.message.contains("`gpt-4o`") && err.message.contains("gpt-5.5, qwen-coder"),
            "{}",
            err.message
        );
        // Streaming requests get the same 404 before any event.
        let mut body = with_model(api, "gpt-4o");
        body["stream"] = json!(true);
        assert_eq!(api.fails(&gw, &body).await.status, StatusCode::NOT_FOUND);
    }
    assert!(gw.upstream.requests().is_empty() && hosted.requests().is_empty());
}

#[tokio::test]
async fn a_down_or_failing_upstream_falls_back_to_the_next() {
    let port = closed_port().await;
    let (gw, hosted) = two_upstreams(|config| {
        let local = config.upstreams.get_mut("local").unwrap();
        local.fallback = vec!["hosted".into()];
        // The `local` route's own upstream is down: nothing listens on it.
        config.upstreams.insert("down".into(), {
            let mut down = named(&format!("http://{port}"), &["tiny"]);
            down.fallback = vec!["local".into()];
            down
        });
    })
    .await;
    // Down: the next upstream answers, under its own model name for the client model.
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Oslo"}))));
    let (_, arguments, _) = first_call(Api::OpenAi, &gw, &with_model(Api::OpenAi, "tiny")).await;
    assert_eq!(arguments, json!({"city": "Oslo"}));
    assert_eq!(gw.upstream.requests()[0]["model"], "tiny");
    // A 503 and a 500 before the reply began: the fallback answers.
    for status in [503, 500] {
        gw.upstream.push(Reply::error(status, json!({"error": {"message": "busy"}})));
        hosted.push(Reply::text(hermes("get_weather", json!({"city": "Rome"}))));
        let (_, arguments, _) =
            first_call(Api::Anthropic, &gw, &with_model(Api::Anthropic, "gpt-5.5")).await;
        assert_eq!(arguments, json!({"city": "Rome"}), "after a {status}");
        assert_eq!(hosted.requests().last().unwrap()["model"], "gpt-5.5");
    }
    // A 400 is about the request: another upstream would refuse it too, so it is the answer.
    gw.upstream.push(Reply::error(400, json!({"error": {"message": "bad request"}})));
    let err = Api::OpenAi.fails(&gw, &with_model(Api::OpenAi, "gpt-5.5")).await;
    assert_eq!(err.status, StatusCode::BAD_REQUEST, "{:?}", err.body);
    assert_eq!(hosted.requests().len(), 2, "no fallback after a 400");
    // Every upstream failing: the last failure is the answer.
    gw.upstream.push(Reply::error(503, json!({"error": {"message": "busy"}})));
    hosted.push(Reply::error(502, json!({"error": {"message": "also busy"}})));
    let err = Api::OpenAi.fails(&gw, &with_model(Api::OpenAi, "gpt-5.5")).await;
    assert_eq!(err.status, StatusCode::BAD_GATEWAY, "{:?}", err.body);
}

/// Issue 24: the odds asked before a native request (`min_call_confidence`) go to the
/// route's first upstream only: a probe that fails there is not tried along the chain (a
/// dead upstream would cost two timeouts), and the request itself falls back as any does.
#[tokio::test]
async fn issue_24_the_odds_are_asked_of_the_first_upstream_only() {
    let (gw, hosted) = two_upstreams(|config| {
        config.mode = Mode::Auto;
        config.min_call_confidence = 0.75;
        config.continue_calls = 0;
        let local = config.upstreams.get_mut("local").unwrap();
        local.upstream.prefill = toolshim_gateway::Engine::LlamaCpp;
        local.fallback = vec!["hosted".into()];
    })
    .await;
    gw.upstream.push(Reply::error(503, json!({"error": {"message": "busy"}})));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Oslo"}))));
    let (_, arguments, _) =
        first_call(Api::OpenAi, &gw, &with_model(Api::OpenAi, "qwen-coder")).await;
    assert_eq!(arguments, json!({"city": "Oslo"}));
    let probes = gw.upstream.requests();
    assert_eq!(probes.len(), 2, "{probes:#?}");
    assert_eq!((&probes[0]["max_tokens"], &probes[0]["logprobs"]), (&json!(1), &json!(true)));
    assert!(hosted.requests().is_empty(), "{:?}", hosted.requests());
}

#[tokio::test]
async fn a_refusal_of_native_tools_is_remembered_per_upstream_and_model() {
    let (gw, _hosted) = two_upstreams(|config| config.mode = Mode::Auto).await;
    let refusal = || {
        Reply::error(
            400,
            json!({"error": {"message": "tools are not supported", "type": "invalid_request_error"}}),
        )
    };
    gw.upstream.push(refusal());
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Bern"}))));
    let body = with_model(Api::OpenAi, "gpt-5.5");
    let (_, first, _) = first_call(Api::OpenAi, &gw, &body).await;
    let (_, second, _) = first_call(Api::OpenAi, &gw, &body).await;
    assert_eq!((first, second), (json!({"city": "Paris"}), json!({"city": "Bern"})));
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 3, "the second request is not refused again: {sent:#?}");
    assert!(sent[0].get("tools").is_some() && sent[1].get("tools").is_none());
    assert!(sent[2].get("tools").is_none(), "straight to emulation");
    // Another model on the same upstream is asked natively.
    gw.upstream.push(Reply::text("native"));
    let mut body = with_model(Api::OpenAi, "other-model");
    body["stream"] = json!(true);
    let response = Api::OpenAi.send(&gw, &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(gw.upstream.requests()[3].get("tools").is_some(), "another model is tried natively");
}

/// Only the upstream's refusal of tools (a 400 or 422) is remembered: after a server error,
/// refused credentials or a redirect the next request is asked natively again.
#[tokio::test]
async fn a_failure_that_is_no_refusal_of_tools_is_not_remembered() {
    let (gw, _hosted) = two_upstreams(|config| config.mode = Mode::Auto).await;
    let body = with_model(Api::OpenAi, "gpt-5.5");
    let failures = [
        Reply::error(500, json!({"error": {"message": "boom"}})),
        Reply::error(401, json!({"error": {"message": "bad key"}})),
        Reply::bytes("text/plain", [""]).status(307).header("location", "http://elsewhere/"),
    ];
    for (i, failure) in failures.into_iter().enumerate() {
        gw.upstream.push(failure);
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
        let (_, arguments, _) = first_call(Api::OpenAi, &gw, &body).await;
        assert_eq!(arguments, json!({"city": "Paris"}), "emulated after failure {i}");
        let sent = gw.upstream.requests();
        assert!(sent[2 * i].get("tools").is_some(), "failure {i}: asked natively: {sent:#?}");
    }
}

/// `native_refusal_secs = 0` remembers no refusal: every tool request is asked natively.
#[tokio::test]
async fn with_native_refusal_secs_zero_a_refusal_is_not_remembered() {
    let (gw, _hosted) = two_upstreams(|config| {
        config.mode = Mode::Auto;
        config.native_refusal_secs = 0.0;
    })
    .await;
    let body = with_model(Api::OpenAi, "gpt-5.5");
    for city in ["Paris", "Bern"] {
        gw.upstream
            .push(Reply::error(400, json!({"error": {"message": "tools are not supported"}})));
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": city}))));
        let (_, arguments, _) = first_call(Api::OpenAi, &gw, &body).await;
        assert_eq!(arguments, json!({"city": city}));
    }
    let native: Vec<bool> =
        gw.upstream.requests().iter().map(|r| r.get("tools").is_some()).collect();
    assert_eq!(native, [true, false, true, false]);
}

/// A fallback chain may mix API kinds: an emulated request falls back to an Anthropic
/// upstream in its own wire, while a passthrough (an OpenAI body) skips it.
#[tokio::test]
async fn a_passthrough_skips_fallbacks_of_the_other_api_kind() {
    let anthropic = crate::common::anthropic::start(crate::common::anthropic::Answer::Text("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"))
    .await;
    let url = anthropic.url.clone();
    let (gw, _hosted) = two_upstreams(move |config| {
        config.mode = Mode::Native;
        let mut claude = named(&url, &["claude-only"]);
        claude.upstream.api = toolshim_gateway::UpstreamApi::Anthropic;
        config.upstreams.insert("claude".into(), claude);
        config.upstreams.get_mut("local").unwrap().fallback = vec!["claude".into()];
        let emulated = toolshim_gateway::ModelConfig {
            mode: Some(Mode::Emulate),
            ..toolshim_gateway::ModelConfig::default()
        };
        config.models.insert("qwen-coder".into(), emulated);
    })
    .await;
    // Native: the local upstream is overloaded and the Anthropic fallback cannot take the
    // OpenAI body, so the overload is the answer.
    gw.upstream.push(Reply::error(503, json!({"error": {"message": "busy"}})));
    let err = Api::OpenAi.fails(&gw, &with_model(Api::OpenAi, "gpt-5.5")).await;
    assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE, "{:?}", err.body);
    assert!(anthropic.seen.lock().unwrap().is_empty(), "no OpenAI body reached it");
    // Emulated: the fallback is asked in Messages.
    gw.upstream.push(Reply::error(503, json!({"error": {"message": "busy"}})));
    let (_, arguments, _) =
        first_call(Api::OpenAi, &gw, &with_model(Api::OpenAi, "qwen-coder")).await;
    assert_eq!(arguments, json!({"city": "Oslo"}));
    let seen = anthropic.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].1["system"].as_str().unwrap().contains("# Tools"), "{:?}", seen[0].1);
}

#[tokio::test]
async fn the_model_list_names_the_routes_on_both_apis() {
    let (gw, _hosted) = two_upstreams(|_| {}).await;
    let list: Value =
        gw.http().get(gw.url("/v1/models")).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> =
        list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["gpt-5.5", "qwen-coder"], "{list}");
    let list: Value = gw
        .http()
        .get(gw.url("/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["first_id"], "gpt-5.5", "{list}");
    assert_eq!(list["data"][1]["type"], "model", "{list}");
}

#[tokio::test]
async fn readyz_reports_each_upstream() {
    let port = closed_port().await;
    let (gw, _hosted) = two_upstreams(|config| {
        config.upstreams.insert("down".into(), named(&format!("http://{port}"), &["tiny"]));
    })
    .await;
    let response = gw.http().get(gw.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "some upstreams answer");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["upstreams"]["local"]["status"], "ready", "{body}");
    assert_eq!(body["upstreams"]["hosted"]["status"], "ready", "{body}");
    assert_eq!(body["upstreams"]["down"]["kind"], "upstream_unavailable", "{body}");
    assert_eq!(body["kind"], "upstream_unavailable", "{body}");
}

#[test]
fn a_bad_routing_table_is_refused_with_every_problem() {
    let text = "default_upstream = \"nowhere\"\n\
        [upstream]\nurl = \"http://127.0.0.1:9\"\n\
        [upstreams.default]\nurl = \"http://127.0.0.1:9\"\nmodels = [\"a\"]\n\
        [upstreams.idle]\nurl = \"http://127.0.0.1:9\"\n\
        [upstreams.bad]\nurl = \"ftp://x\"\nmodels = [\"b\"]\nfallback = [\"ghost\"]\n";
    let (config, origins) = Config::from_toml(text, "gw.toml").unwrap();
    let problems = config.validate_from(&origins).unwrap_err().join("\n");
    for expected in [
        "default_upstream",
        "`nowhere`",
        "upstreams.default",
        "upstreams.idle: serves no model",
        "upstreams.bad.url",
        "upstreams.bad.fallback",
        "`ghost`",
    ] {
        assert!(problems.contains(expected), "{expected} missing from:\n{problems}");
    }
    // An unknown key names the keys an upstream may have, with its line.
    let problems = Config::from_toml("[upstreams.x]\nurl = \"http://h\"\nflavour = 1\n", "gw.toml")
        .unwrap_err()
        .join("\n");
    assert!(problems.contains("line 3") && problems.contains("upstreams.x.flavour"), "{problems}");
    assert!(problems.contains("aliases") && problems.contains("fallback"), "{problems}");
}
