//! Constrained decoding (issue 24, lever 2): a forced tool choice goes to an upstream that
//! decodes under a grammar with the grammar of the calls, in that upstream's field; an
//! upstream that refuses it is asked again without it, and that is remembered.

use serde_json::{Value, json};
use toolshim_gateway::{Engine, Mode};

use crate::common::{Reply, args, hermes, request, spawn_gateway};

fn forced(choice: Value) -> Value {
    let mut body = request("What is 2+2?");
    body["tool_choice"] = choice;
    body
}

#[tokio::test]
async fn a_forced_choice_carries_the_grammar_of_its_calls() {
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Emulate;
        config.upstream.constrain = Engine::LlamaCpp;
    })
    .await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.upstream.push(Reply::text(hermes("get_time", json!({"timezone": "UTC"}))));
    gw.upstream.push(Reply::text("Four."));
    let completion = gw.complete(&forced(json!("required"))).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Paris"}));
    gw.complete(&forced(json!({"type": "function", "function": {"name": "get_time"}}))).await;
    gw.complete(&request("What is 2+2?")).await;
    let sent = gw.upstream.requests();
    let required = sent[0]["grammar"].as_str().expect("a grammar for `required`");
    assert!(required.starts_with("root ::= "), "{required}");
    assert!(required.contains("get_weather") && required.contains("get_time"), "{required}");
    assert!(required.contains("\\\"celsius\\\""), "the enum is in it: {required}");
    let named = sent[1]["grammar"].as_str().expect("a grammar for a named tool");
    assert!(named.contains("get_time") && !named.contains("get_weather"), "{named}");
    assert!(sent[2].get("grammar").is_none(), "`auto` is not constrained: {:#}", sent[2]);
}

#[tokio::test]
async fn vllm_and_sglang_get_their_own_fields_and_off_gets_none() {
    for (constrain, field) in [
        (Engine::Vllm, "/structured_outputs/grammar"),
        (Engine::Sglang, "/ebnf"),
        (Engine::Off, ""),
    ] {
        let gw = spawn_gateway(|config| {
            config.mode = Mode::Emulate;
            config.upstream.constrain = constrain;
        })
        .await;
        gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
        gw.complete(&forced(json!("required"))).await;
        let sent = &gw.upstream.requests()[0];
        assert!(sent.get("grammar").is_none(), "{constrain:?}: {sent:#}");
        if field.is_empty() {
            assert!(sent.get("structured_outputs").is_none() && sent.get("ebnf").is_none());
        } else {
            let grammar = sent.pointer(field).and_then(Value::as_str).unwrap_or_default();
            assert!(grammar.starts_with("root ::= "), "{constrain:?}: {sent:#}");
        }
    }
}

#[tokio::test]
async fn auto_sends_no_grammar_to_an_upstream_that_is_not_llama_cpp() {
    // The scripted upstream has no `/props`: it is not llama.cpp's server.
    let gw = spawn_gateway(|config| config.mode = Mode::Emulate).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.complete(&forced(json!("required"))).await;
    assert!(gw.upstream.requests()[0].get("grammar").is_none());
}

#[tokio::test]
async fn a_refused_grammar_is_dropped_and_remembered() {
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Emulate;
        config.upstream.constrain = Engine::LlamaCpp;
    })
    .await;
    gw.upstream.push(Reply::error(
        400,
        json!({"error": {"message": "failed to parse grammar", "type": "invalid_request_error"}}),
    ));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Rome"}))));
    let first = gw.complete(&forced(json!("required"))).await;
    assert_eq!(
        args(&first["choices"][0]["message"]["tool_calls"][0]),
        json!({"city": "Paris"}),
        "{first:#}"
    );
    gw.complete(&forced(json!("required"))).await;
    let sent = gw.upstream.requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[0].get("grammar").is_some());
    assert!(sent[1].get("grammar").is_none(), "asked again without it");
    assert!(sent[2].get("grammar").is_none(), "and remembered");
}
