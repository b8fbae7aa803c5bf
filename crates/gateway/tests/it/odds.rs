//! The model's own odds of a call (`min_call_confidence`, issue 24): before a native request
//! with tools under `tool_choice: auto` to an engine that reports token odds, one token is
//! asked for with its odds; a reply that would open with a call the model gave low odds is
//! asked for without tools instead, on every API family, streamed or not.

use serde_json::{Value, json};
use toolshim_gateway::{Engine, Mode};

use crate::common::api::{APIS, Api};
use crate::common::{MODEL, Reply, TestGateway, spawn_gateway};

/// A fenced JSON call, as a small model writes it in its text.
fn fenced(name: &str, arguments: Value) -> String {
    format!("```json\n{{\n    \"name\": {},\n    \"arguments\": {arguments}\n}}\n```", json!(name))
}

/// A whole (not streamed) completion of `content`, with `logprobs` if any.
fn whole(content: &str, logprobs: Option<Value>) -> Reply {
    let mut choice = json!({"index": 0, "message": {"role": "assistant", "content": content},
        "finish_reason": "stop"});
    if let Some(logprobs) = logprobs {
        choice["logprobs"] = logprobs;
    }
    let completion = json!({"id": "chatcmpl-up", "object": "chat.completion", "created": 0,
        "model": MODEL, "choices": [choice], "usage": {"prompt_tokens": 20, "completion_tokens": 1}});
    Reply::bytes("application/json", [completion.to_string()])
}

/// The reply to the probe: one token, `token`, with its odds (`odds` to it, the rest to
/// `other`), as llama.cpp's server reports `logprobs`.
fn probed(token: &str, odds: f64, other: &str) -> Reply {
    let top = [
        json!({"token": token, "logprob": odds.ln()}),
        json!({"token": other, "logprob": (1.0 - odds).ln()}),
    ];
    let logprobs =
        json!({"content": [{"token": token, "logprob": odds.ln(), "top_logprobs": top}]});
    whole(token, Some(logprobs))
}

/// A reply of `text`, streamed or whole.
fn reply(text: &str, stream: bool) -> Reply {
    if stream { Reply::text(text) } else { whole(text, None) }
}

async fn gateway(confidence: f64) -> TestGateway {
    spawn_gateway(move |config| {
        config.mode = Mode::Auto;
        config.upstream.prefill = Engine::LlamaCpp;
        config.continue_calls = 0;
        config.min_call_confidence = confidence;
    })
    .await
}

/// "Find the roots" with numbers the user gave: the guess check keeps the call, so only the
/// odds can doubt it.
fn roots_request(api: Api, stream: bool) -> Value {
    let tool = json!({"name": "find_roots", "description": "Roots of ax^2 + bx + c = 0.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"},
        "b": {"type": "number"}, "c": {"type": "number"}}, "required": ["a", "b", "c"]}});
    let mut body = api.request("Find the roots of 3x^2 - 2x + 1 = 0.", true, stream);
    body["tools"] = match api {
        Api::OpenAi => json!([{"type": "function", "function": tool}]),
        Api::Anthropic => json!([{"name": tool["name"], "description": tool["description"],
            "input_schema": tool["parameters"]}]),
    };
    body
}

const CALL: fn() -> String = || fenced("find_roots", json!({"a": 3, "b": -2, "c": 1}));
const PLAIN: &str = "The roots are complex: x = (1 ± i√2) / 3.";

/// What a reply to `body` holds: its text, and how many calls.
async fn answer(api: Api, gw: &TestGateway, body: &Value, stream: bool) -> (String, usize) {
    if stream {
        let folded = api.streams(gw, body).await;
        assert!(folded.finished && folded.error.is_none(), "{api:?}: {folded:?}");
        (folded.text, folded.calls.len())
    } else {
        let value: Value = api.send(gw, body).await.json().await.unwrap();
        let calls = api.n_calls(&value);
        let text = match api {
            Api::OpenAi => value["choices"][0]["message"]["content"].as_str(),
            Api::Anthropic => value["content"][0]["text"].as_str(),
        };
        (text.unwrap_or_default().to_owned(), calls)
    }
}

#[tokio::test]
async fn issue_24_a_call_the_model_gave_low_odds_gives_way_to_a_plain_answer() {
    for api in APIS {
        for stream in [false, true] {
            let gw = gateway(0.75).await;
            gw.upstream.push(probed("```", 0.6, "The"));
            gw.upstream.push(reply(PLAIN, stream));
            let got = answer(api, &gw, &roots_request(api, stream), stream).await;
            assert_eq!(got, (PLAIN.to_owned(), 0), "{api:?} stream {stream}");
            let requests = gw.upstream.requests();
            assert_eq!(requests.len(), 2, "{api:?} stream {stream}");
            // The probe: the same conversation and tools, one token and its odds, not streamed.
            let probe = &requests[0];
            assert_eq!(
                (
                    &probe["logprobs"],
                    &probe["top_logprobs"],
                    &probe["max_tokens"],
                    &probe["stream"]
                ),
                (&json!(true), &json!(5), &json!(1), &json!(false)),
                "{api:?} stream {stream}"
            );
            assert_eq!(probe["tools"].as_array().map(Vec::len), Some(1));
            assert_eq!(probe["messages"], requests[1]["messages"]);
            // The answer: without tools, no odds, as long as the client allows.
            assert!(requests[1].get("tools").is_none(), "{api:?} stream {stream}");
            assert!(requests[1].get("logprobs").is_none());
            assert_ne!(requests[1]["max_tokens"], json!(1));
            let metrics =
                gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
            assert!(metrics.contains("toolshim_guessed_calls_total 1"), "{metrics}");
            assert!(metrics.contains(r#"reason="unsure_call""#), "{metrics}");
        }
    }
}

#[tokio::test]
async fn issue_24_a_call_the_model_is_sure_of_or_a_reply_of_words_keeps_its_tools() {
    // Sure of the call (90%), unsure but of words (a reply that opens with a word is never
    // doubted), and a probe that fails: the request goes as it is, and its call goes out.
    let probes = [
        probed("```", 0.9, "The"),
        probed("The", 0.6, "```"),
        Reply::error(500, json!({"error": {"message": "boom", "type": "server_error"}})),
    ];
    for probe in probes {
        for api in APIS {
            let gw = gateway(0.75).await;
            gw.upstream.push(probe.clone());
            gw.upstream.push(Reply::text(CALL()));
            let (_, calls) = answer(api, &gw, &roots_request(api, true), true).await;
            assert_eq!(calls, 1, "{api:?}");
            let requests = gw.upstream.requests();
            assert_eq!(requests.len(), 2);
            assert!(requests[1].get("tools").is_some());
            assert!(requests[1].get("logprobs").is_none());
        }
    }
    // Turned off: no probe, one request.
    let gw = gateway(0.0).await;
    gw.upstream.push(reply(&CALL(), false));
    let (_, calls) = answer(Api::OpenAi, &gw, &roots_request(Api::OpenAi, false), false).await;
    assert_eq!((calls, gw.upstream.requests().len()), (1, 1));
    // An engine not known to report odds (`prefill = "off"`): no probe either.
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Auto;
        config.upstream.prefill = Engine::Off;
    })
    .await;
    gw.upstream.push(reply(&CALL(), false));
    let (_, calls) = answer(Api::OpenAi, &gw, &roots_request(Api::OpenAi, false), false).await;
    assert_eq!((calls, gw.upstream.requests().len()), (1, 1));
}

/// A plain answer asked for instead of a call that only refuses ("I can't assist with
/// that") answered nothing: the request goes with its tools after all, and its call goes
/// out in place of the refusal, streamed or not. Should that reply show nothing either, the
/// refusal is the answer.
#[tokio::test]
async fn issue_24_a_plain_answer_that_only_refuses_gives_way_to_the_request_with_tools() {
    const REFUSAL: &str = "I'm sorry, but I can't assist with that.";
    for api in APIS {
        for stream in [false, true] {
            let gw = gateway(0.75).await;
            gw.upstream.push(probed("```", 0.6, "The"));
            gw.upstream.push(reply(REFUSAL, stream));
            gw.upstream.push(reply(&CALL(), stream));
            let got = answer(api, &gw, &roots_request(api, stream), stream).await;
            assert_eq!(got, (String::new(), 1), "{api:?} stream {stream}");
            let requests = gw.upstream.requests();
            assert_eq!(requests.len(), 3, "{api:?} stream {stream}");
            assert!(requests[1].get("tools").is_none(), "{api:?} stream {stream}");
            assert_eq!(requests[2]["tools"], requests[0]["tools"], "{api:?} stream {stream}");
            assert_eq!(requests[2]["messages"], requests[1]["messages"]);
            assert!(requests[2].get("logprobs").is_none());
            let metrics =
                gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
            assert!(metrics.contains(r#"reason="refused_plain""#), "{metrics}");

            // The reply with tools shows nothing: the refusal goes out after all.
            let gw = gateway(0.75).await;
            gw.upstream.push(probed("```", 0.6, "The"));
            gw.upstream.push(reply(REFUSAL, stream));
            gw.upstream.push(reply("", stream));
            let got = answer(api, &gw, &roots_request(api, stream), stream).await;
            assert_eq!(got, (REFUSAL.to_owned(), 0), "{api:?} stream {stream}");
            assert_eq!(gw.upstream.requests().len(), 3);
        }
    }
    // An answer that refuses and goes on to answer is an answer.
    let gw = gateway(0.75).await;
    gw.upstream.push(probed("```", 0.6, "The"));
    let answered = format!("I can't assist with live data. {PLAIN}");
    gw.upstream.push(reply(&answered, true));
    let got = answer(Api::OpenAi, &gw, &roots_request(Api::OpenAi, true), true).await;
    assert_eq!(got, (answered, 0));
    assert_eq!(gw.upstream.requests().len(), 2);
}
