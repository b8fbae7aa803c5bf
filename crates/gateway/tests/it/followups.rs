//! What follows a reply (issue 24): continuations that add the parallel calls a small model
//! leaves out, on upstreams that continue a final assistant message (`upstream.prefill`),
//! and a plain answer instead of calls whose required values appear nowhere
//! (`check_grounding`). Native (repaired) and emulated replies alike.

use serde_json::{Value, json};
use toolshim_gateway::{Engine, Mode};

use crate::common::{
    MODEL, Reply, TestGateway, UPSTREAM_COMPLETION_TOKENS, UPSTREAM_PROMPT_TOKENS, args,
    check_stream, hermes, request, spawn_gateway,
};

/// A call as a small model writes it in its text: a fenced JSON object.
fn fenced(name: &str, arguments: Value) -> String {
    format!("```json\n{{\n    \"name\": {},\n    \"arguments\": {arguments}\n}}\n```", json!(name))
}

/// The opening of the next call after `reply`, as the gateway continues it.
fn continued(reply: &str) -> String {
    format!("{reply}\n\n```json\n{{\n    \"name\": \"")
}

/// The rest of a fenced call after its opening (`continued`).
fn rest(name: &str, arguments: Value) -> String {
    fenced(name, arguments).split_once("\"name\": \"").unwrap().1.to_owned()
}

async fn gateway(mode: Mode, prefill: Engine) -> TestGateway {
    spawn_gateway(|config| {
        config.mode = mode;
        config.upstream.prefill = prefill;
        // No one-token probe of the model's odds first (`odds.rs` tests that).
        config.min_call_confidence = 0.0;
    })
    .await
}

fn calls(completion: &Value) -> Vec<(String, Value)> {
    completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| (c["function"]["name"].as_str().unwrap().to_owned(), args(c)))
                .collect()
        })
        .unwrap_or_default()
}

/// The last message of a request the upstream received.
fn last_message(request: &Value) -> Value {
    request["messages"].as_array().unwrap().last().unwrap().clone()
}

#[tokio::test]
async fn issue_24_a_continuation_adds_the_call_a_native_reply_left_out() {
    let gw = gateway(Mode::Auto, Engine::LlamaCpp).await;
    let first = fenced("get_weather", json!({"city": "Paris"}));
    gw.upstream.push(Reply::text(first.clone()));
    // llama.cpp's server sends the continued text back before what it adds.
    let second = continued(&first);
    gw.upstream
        .push(Reply::text(format!("{second}{}", rest("get_weather", json!({"city": "Rome"})))));
    let third = format!("{second}{}", rest("get_weather", json!({"city": "Rome"})));
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        continued(&third),
        rest("get_weather", json!({"city": "Paris"}))
    )));
    let completion = gw.complete(&request("What is the weather in Paris and in Rome?")).await;
    assert_eq!(
        calls(&completion),
        vec![
            ("get_weather".to_owned(), json!({"city": "Paris"})),
            ("get_weather".to_owned(), json!({"city": "Rome"}))
        ],
        "{completion:#}"
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 3, "the reply, a kept continuation, one that repeated a call");
    assert_eq!(last_message(&requests[1]), json!({"role": "assistant", "content": second}));
    assert_eq!(
        last_message(&requests[2]),
        json!({"role": "assistant", "content": continued(&third)})
    );
    for continuation in &requests[1..] {
        assert_eq!(continuation["tools"], requests[0]["tools"], "the same request, continued");
        assert_eq!(continuation["stream"], true, "streamed, to be left once decided");
        assert!(continuation["max_tokens"].as_u64().unwrap() >= 48);
        assert!(continuation.get("continue_final_message").is_none(), "llama.cpp needs no flag");
    }
    // Usage counts the continuations.
    assert_eq!(completion["usage"]["prompt_tokens"], 3 * UPSTREAM_PROMPT_TOKENS);
    assert_eq!(completion["usage"]["completion_tokens"], 3 * UPSTREAM_COMPLETION_TOKENS);
}

/// Two tools a question names, over the same numbers: the continued call to the second
/// tool adds nothing but its tool, which the user named, so it is kept; a third tool nobody
/// named ends the reply.
#[tokio::test]
async fn issue_24_a_continuation_keeps_a_call_to_another_tool_the_user_named() {
    let gw = gateway(Mode::Auto, Engine::LlamaCpp).await;
    let data = json!({"data": [3, 4, 5, 2, 8, 5]});
    let first = fenced("statistics_median", data.clone());
    gw.upstream.push(Reply::text(first.clone()));
    let second = format!("{}{}", continued(&first), rest("statistics_variance", data.clone()));
    gw.upstream.push(Reply::text(second.clone()));
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        continued(&second),
        rest("statistics_mode", data.clone())
    )));
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name, "parameters": {"type": "object",
            "properties": {"data": {"type": "array", "items": {"type": "number"}}},
            "required": ["data"]}}})
    };
    let body = json!({"model": MODEL, "messages": [{"role": "user",
        "content": "Determine the median and variance for the data points 3,4,5,2,8,5."}],
        "tools": [tool("statistics_median"), tool("statistics_variance"), tool("statistics_mode")]});
    let completion = gw.complete(&body).await;
    let numbers = json!({"data": [3.0, 4.0, 5.0, 2.0, 8.0, 5.0]});
    assert_eq!(
        calls(&completion),
        vec![
            ("statistics_median".to_owned(), numbers.clone()),
            ("statistics_variance".to_owned(), numbers)
        ],
        "{completion:#}"
    );
    assert_eq!(gw.upstream.requests().len(), 3, "the third tool was asked for, and not kept");
}

/// "A loss of $1000" is `-1000`: a continued call holding the number with the sign the
/// words give is kept.
#[tokio::test]
async fn issue_24_a_number_given_with_the_other_sign_is_kept_in_a_continued_call() {
    let gw = gateway(Mode::Auto, Engine::LlamaCpp).await;
    let first = fenced("roi", json!({"initial_investment": 2000, "gain_loss": 500}));
    gw.upstream.push(Reply::text(first.clone()));
    let second = format!(
        "{}{}",
        continued(&first),
        rest("roi", json!({"initial_investment": 5000, "gain_loss": -1000}))
    );
    gw.upstream.push(Reply::text(second.clone()));
    gw.upstream.push(Reply::text(format!(
        "{}{}",
        continued(&second),
        rest("roi", json!({"initial_investment": 5000, "gain_loss": -1000}))
    )));
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content":
        "Return on investment for $2000 with a gain of $500, then for $5000 with a loss of $1000."}],
        "tools": [{"type": "function", "function": {"name": "roi", "parameters": {"type": "object",
            "properties": {"initial_investment": {"type": "integer"}, "gain_loss": {"type": "integer"}},
            "required": ["initial_investment", "gain_loss"]}}}]});
    let completion = gw.complete(&body).await;
    let got: Vec<Value> = calls(&completion).into_iter().map(|(_, args)| args).collect();
    assert_eq!(
        got,
        vec![
            json!({"initial_investment": 2000, "gain_loss": 500}),
            json!({"initial_investment": 5000, "gain_loss": -1000})
        ],
        "{completion:#}"
    );
}

#[tokio::test]
async fn issue_24_continued_calls_stream_after_the_first_and_without_an_echo() {
    let gw = gateway(Mode::Auto, Engine::Vllm).await;
    let first = fenced("get_weather", json!({"city": "Paris"}));
    gw.upstream.push(Reply::text(first.clone()));
    // vLLM sends only what it adds; then the model makes up a city: the reply ends.
    gw.upstream.push(Reply::text(rest("get_weather", json!({"city": "Rome"}))));
    gw.upstream.push(Reply::text(rest("get_weather", json!({"city": "Berlin"}))));
    let mut body = request("What is the weather in Paris and in Rome?");
    body["stream_options"] = json!({"include_usage": true});
    let streamed = check_stream(&gw.stream_ok(&body).await, true);
    assert_eq!(streamed.names(), vec!["get_weather", "get_weather"]);
    assert_eq!(streamed.call_args(1), json!({"city": "Rome"}));
    assert_eq!(streamed.finish_reason, "tool_calls");
    assert_eq!(streamed.content, "");
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1]["continue_final_message"], true, "vLLM is told to continue");
    assert_eq!(requests[1]["add_generation_prompt"], false);
}

#[tokio::test]
async fn issue_24_an_emulated_reply_is_continued_in_the_contracts_syntax() {
    let gw = gateway(Mode::Emulate, Engine::LlamaCpp).await;
    let first = hermes("get_weather", json!({"city": "Paris"}));
    gw.upstream.push(Reply::text(first.clone()));
    let opener = "<tool_call>\n{\"name\": \"";
    let second = format!("{first}\n{opener}");
    let added = hermes("get_weather", json!({"city": "Rome"}));
    gw.upstream.push(Reply::text(format!("{second}{}", added.strip_prefix(opener).unwrap())));
    gw.upstream.push(Reply::text(format!("{second}{}", added.strip_prefix(opener).unwrap())));
    let completion = gw.complete(&request("Weather in Paris, then Rome?")).await;
    assert_eq!(calls(&completion).len(), 2, "{completion:#}");
    let requests = gw.upstream.requests();
    assert!(requests[1].get("tools").is_none(), "emulated: {:#}", requests[1]);
    assert_eq!(last_message(&requests[1]), json!({"role": "assistant", "content": second}));
}

#[tokio::test]
async fn issue_24_no_continuation_without_an_upstream_that_continues_or_parallel_calls() {
    // `prefill = "auto"` and an upstream that is not llama.cpp's server (no `/props`).
    let gw = gateway(Mode::Auto, Engine::Auto).await;
    gw.upstream.push(Reply::text(fenced("get_weather", json!({"city": "Paris"}))));
    let completion = gw.complete(&request("Weather in Paris and Rome?")).await;
    assert_eq!(calls(&completion).len(), 1);
    assert_eq!(gw.upstream.requests().len(), 1);

    let gw = gateway(Mode::Auto, Engine::LlamaCpp).await;
    gw.upstream.push(Reply::text(fenced("get_weather", json!({"city": "Paris"}))));
    let mut body = request("Weather in Paris and Rome?");
    body["parallel_tool_calls"] = json!(false);
    let completion = gw.complete(&body).await;
    assert_eq!(calls(&completion).len(), 1);
    assert_eq!(gw.upstream.requests().len(), 1, "one call per reply: nothing to continue");
}

/// A call that packs several values into a parameter that takes one (`{"city": ["Paris",
/// "Rome"]}`) becomes one call per value, streamed or not, read from a native reply's text or
/// an emulated one, with no retry; with one call per reply allowed it is not split.
#[tokio::test]
async fn issue_24_a_call_packing_two_cities_becomes_a_call_for_each() {
    // The days as strings, as a small model packs them: each call gets an integer.
    let packed = json!({"city": ["Paris", "Rome"], "unit": ["celsius"], "days": ["2", "3"]});
    for (mode, stream) in
        [(Mode::Auto, false), (Mode::Auto, true), (Mode::Emulate, false), (Mode::Emulate, true)]
    {
        let gw = gateway(mode, Engine::Off).await;
        gw.upstream.push(Reply::text(if mode == Mode::Auto {
            fenced("get_weather", packed.clone())
        } else {
            hermes("get_weather", packed.clone())
        }));
        let body =
            request("What is the weather in Paris and in Rome, in celsius, for 2 and 3 days?");
        let got: Vec<(String, Value)> = if stream {
            let streamed = check_stream(&gw.stream_ok(&body).await, false);
            assert_eq!(streamed.finish_reason, "tool_calls");
            (0..streamed.calls.len())
                .map(|i| (streamed.names()[i].to_owned(), streamed.call_args(i)))
                .collect()
        } else {
            calls(&gw.complete(&body).await)
        };
        let call = |city: &str, days: u32| {
            ("get_weather".to_owned(), json!({"city": city, "unit": "celsius", "days": days}))
        };
        assert_eq!(got, vec![call("Paris", 2), call("Rome", 3)], "{mode:?} stream={stream}");
        assert_eq!(gw.upstream.requests().len(), 1, "{mode:?} stream={stream}: no retry");
    }

    let gw = gateway(Mode::Auto, Engine::Off).await;
    gw.upstream.push(Reply::text(fenced("get_weather", packed.clone())));
    gw.upstream.push(Reply::text(fenced("get_weather", json!({"city": "Paris"}))));
    let mut body = request("What is the weather in Paris and in Rome?");
    body["parallel_tool_calls"] = json!(false);
    let completion = gw.complete(&body).await;
    assert_eq!(calls(&completion), vec![("get_weather".to_owned(), json!({"city": "Paris"}))]);
    assert_eq!(gw.upstream.requests().len(), 2, "not split: asked again with the fault");
}

/// A call whose value is an expression the parser cannot work out (`"b": 1 + x`) breaks off
/// into text that is not JSON: it is not sent with the values read before the break. Read
/// from a native reply's text it is the reply's text, ended by `stop`; emulated, it is asked
/// for again. A sum of numbers (`"b": 4 / 2`) is worked out and the call goes out.
#[tokio::test]
async fn issue_24_a_call_with_an_expression_for_a_value_is_never_sent_cut_short() {
    let written = "```json\n{\"name\": \"find_roots\", \"arguments\": {\"a\": 3, \"b\": 1 + x, \"c\": 1}}\n```";
    let gw = gateway(Mode::Auto, Engine::Off).await;
    gw.upstream.push(Reply::text(written));
    let completion = gw.complete(&roots_request("Find the roots of 3x^2 + 2x + 1 = 0.")).await;
    let message = &completion["choices"][0]["message"];
    assert!(message.get("tool_calls").is_none_or(Value::is_null), "{completion:#}");
    assert_eq!(message["content"], written);
    assert_eq!(completion["choices"][0]["finish_reason"], "stop");

    let gw = gateway(Mode::Emulate, Engine::Off).await;
    gw.upstream.push(Reply::text(written));
    gw.upstream.push(Reply::text(hermes("find_roots", json!({"a": 3, "b": 2, "c": 1}))));
    let completion = gw.complete(&roots_request("Find the roots of 3x^2 + 2x + 1 = 0.")).await;
    assert_eq!(
        calls(&completion),
        vec![("find_roots".to_owned(), json!({"a": 3.0, "b": 2.0, "c": 1.0}))]
    );
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 2);
    let correction = last_message(&requests[1]).to_string();
    assert!(correction.contains("not a sum or an expression"), "{correction}");

    for mode in [Mode::Auto, Mode::Emulate] {
        let gw = gateway(mode, Engine::Off).await;
        let summed =
            "{\"name\": \"find_roots\", \"arguments\": {\"a\": 3, \"b\": 4 / 2, \"c\": 1}}";
        gw.upstream.push(Reply::text(if mode == Mode::Auto {
            format!("```json\n{summed}\n```")
        } else {
            format!("<tool_call>\n{summed}\n</tool_call>")
        }));
        let completion = gw.complete(&roots_request("Find the roots of 3x^2 + 2x + 1 = 0.")).await;
        assert_eq!(
            calls(&completion),
            vec![("find_roots".to_owned(), json!({"a": 3.0, "b": 2.0, "c": 1.0}))],
            "{mode:?}"
        );
        assert_eq!(gw.upstream.requests().len(), 1, "{mode:?}: not asked again");
    }
}

/// `find_roots(a, b, c)`, three required numbers.
fn roots_request(user: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": user}], "tools": [
        {"type": "function", "function": {"name": "find_roots",
            "description": "Find the roots of a quadratic equation ax^2 + bx + c = 0.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"},
                "b": {"type": "number"}, "c": {"type": "number"}}, "required": ["a", "b", "c"]}}}]})
}

#[tokio::test]
async fn issue_24_a_call_with_made_up_numbers_gives_way_to_a_plain_answer() {
    for mode in [Mode::Auto, Mode::Emulate] {
        let gw = gateway(mode, Engine::Off).await;
        let guess = json!({"a": 1, "b": -2, "c": 3});
        gw.upstream.push(Reply::text(if mode == Mode::Auto {
            fenced("find_roots", guess.clone())
        } else {
            hermes("find_roots", guess.clone())
        }));
        gw.upstream.push(Reply::text("A linear equation bx + c = 0 has the root x = -c/b."));
        let completion = gw.complete(&roots_request("What is the root of bx + c = 0?")).await;
        let message = &completion["choices"][0]["message"];
        assert!(message.get("tool_calls").is_none_or(Value::is_null), "{mode:?}: {completion:#}");
        assert_eq!(message["content"], "A linear equation bx + c = 0 has the root x = -c/b.");
        assert_eq!(completion["choices"][0]["finish_reason"], "stop");
        let requests = gw.upstream.requests();
        assert_eq!(requests.len(), 2, "{mode:?}");
        assert!(requests[1].get("tools").is_none(), "{mode:?}: asked without tools");
        let system = requests[1]["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(!system.contains("find_roots"), "{mode:?}: no tool contract: {system}");
        let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("toolshim_guessed_calls_total 1"), "{metrics}");
    }
}

#[tokio::test]
async fn issue_24_numbers_the_user_gave_make_a_call_and_the_check_can_be_off() {
    let gw = gateway(Mode::Auto, Engine::Off).await;
    gw.upstream.push(Reply::text(fenced("find_roots", json!({"a": 3, "b": -2, "c": 1}))));
    let completion = gw.complete(&roots_request("Find the roots of 3x^2 - 2x + 1 = 0.")).await;
    assert_eq!(
        calls(&completion),
        // The schema declares numbers: whole values come out with a fraction.
        vec![("find_roots".to_owned(), json!({"a": 3.0, "b": -2.0, "c": 1.0}))]
    );
    assert_eq!(gw.upstream.requests().len(), 1);

    let gw = spawn_gateway(|config| {
        config.mode = Mode::Auto;
        config.check_grounding = false;
    })
    .await;
    gw.upstream.push(Reply::text(fenced("find_roots", json!({"a": 1, "b": -2, "c": 3}))));
    let completion = gw.complete(&roots_request("What is the root of bx + c = 0?")).await;
    assert_eq!(calls(&completion).len(), 1, "check_grounding = false: {completion:#}");
}

#[tokio::test]
async fn issue_24_a_guess_is_kept_when_a_call_is_required() {
    let gw = gateway(Mode::Auto, Engine::Off).await;
    gw.upstream.push(Reply::text(fenced("find_roots", json!({"a": 1, "b": -2, "c": 3}))));
    let mut body = roots_request("What is the root of bx + c = 0?");
    body["tool_choice"] = json!("required");
    // A forced choice against an upstream without grammars stays native.
    let completion = gw.complete(&body).await;
    assert_eq!(calls(&completion).len(), 1, "{completion:#}");
}

/// `team_stats(team_name, date)`, two required strings.
fn team_request(user: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": user}], "tools": [
        {"type": "function", "function": {"name": "team_stats", "description": "A team's results.",
            "parameters": {"type": "object", "properties": {"team_name": {"type": "string"},
                "date": {"type": "string"}}, "required": ["team_name", "date"]}}}]})
}

#[tokio::test]
async fn issue_24_a_call_with_a_made_up_name_or_date_gives_way_to_a_plain_answer() {
    for stream in [false, true] {
        let gw = gateway(Mode::Emulate, Engine::Off).await;
        let guess = json!({"team_name": "Manchester United", "date": "2023-10-05"});
        gw.upstream.push(Reply::text(hermes("team_stats", guess)).chunks(4));
        gw.upstream.push(Reply::text("I cannot know who won yesterday."));
        let body = team_request("Who won the basketball game yesterday?");
        let (content, n_calls) = if stream {
            let mut body = body;
            body["stream"] = json!(true);
            let streamed = check_stream(&gw.stream_ok(&body).await, false);
            (streamed.content, streamed.calls.len())
        } else {
            let completion = gw.complete(&body).await;
            let message = &completion["choices"][0]["message"];
            (message["content"].as_str().unwrap_or_default().to_owned(), calls(&completion).len())
        };
        assert_eq!((content.as_str(), n_calls), ("I cannot know who won yesterday.", 0));
        let requests = gw.upstream.requests();
        assert_eq!(requests.len(), 2, "stream {stream}");
        assert!(requests[1].get("tools").is_none());
    }
    // Named by the user (a word of it is enough, a date written out too): a call.
    let gw = gateway(Mode::Emulate, Engine::Off).await;
    let named = json!({"team_name": "Manchester United FC", "date": "2023-10-05"});
    gw.upstream.push(Reply::text(hermes("team_stats", named.clone())));
    let completion =
        gw.complete(&team_request("How did Manchester play on October 5, 2023?")).await;
    assert_eq!(calls(&completion), vec![("team_stats".to_owned(), named)]);
}

/// A call held to judge its short strings goes out as it is written once its arguments are
/// too long to be only short strings: a file's content streams, it is not held to the end.
#[tokio::test]
async fn issue_24_a_long_call_streams_as_it_is_written() {
    let gw = gateway(Mode::Emulate, Engine::Off).await;
    let content = "A line the model writes.\n".repeat(40);
    let written = json!({"path": "notes/today.md", "content": content});
    gw.upstream.push(Reply::text(hermes("write_file", written.clone())).chunks(16));
    let body = json!({"model": MODEL, "stream": true,
        "messages": [{"role": "user", "content": "Save my notes."}],
        "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"},
                "content": {"type": "string"}}, "required": ["path", "content"]}}}]});
    let streamed = check_stream(&gw.stream_ok(&body).await, false);
    assert_eq!(streamed.call_args(0), written);
    let deltas = streamed
        .chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] != "")
        .filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].is_string())
        .count();
    assert!(deltas > 10, "{deltas} argument fragments");
}

#[tokio::test]
async fn issue_24_a_native_reply_whose_call_copies_the_schema_is_asked_for_again_natively() {
    let gw = gateway(Mode::Auto, Engine::Off).await;
    let copied = fenced("get_weather", json!({"city": {"type": "string"}}));
    gw.upstream.push(Reply::text(copied.clone()));
    gw.upstream.push(Reply::text(fenced("get_weather", json!({"city": "Paris"}))));
    for stream in [false, true] {
        let mut body = request("What is the weather in Paris?");
        body["stream"] = json!(stream);
        if stream {
            gw.upstream.push(Reply::text(copied.clone()));
            gw.upstream.push(Reply::text(fenced("get_weather", json!({"city": "Paris"}))));
            let folded = crate::common::api::Api::OpenAi.fold(&gw.stream_ok(&body).await);
            let sent: Vec<(String, Value)> = folded
                .calls
                .iter()
                .map(|(name, arguments)| (name.clone(), serde_json::from_str(arguments).unwrap()))
                .collect();
            // The schema copy never went out: only the call asked for again.
            assert_eq!(sent, vec![("get_weather".to_owned(), json!({"city": "Paris"}))]);
        } else {
            let completion = gw.complete(&body).await;
            assert_eq!(
                calls(&completion),
                vec![("get_weather".to_owned(), json!({"city": "Paris"}))]
            );
            // Both replies' tokens are counted.
            assert_eq!(
                completion["usage"]["completion_tokens"],
                json!(2 * UPSTREAM_COMPLETION_TOKENS),
                "{completion:#}"
            );
        }
    }
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 4);
    for again in [&requests[1], &requests[3]] {
        assert!(again.get("tools").is_some(), "asked again natively, with the tools");
        let messages = again["messages"].as_array().unwrap();
        let reply = &messages[messages.len() - 2];
        assert_eq!(
            (reply["role"].as_str(), reply["content"].as_str()),
            (Some("assistant"), Some(copied.as_str()))
        );
        let correction = last_message(again);
        assert_eq!(correction["role"], "user");
        let correction = correction["content"].as_str().unwrap();
        assert!(
            correction.contains("`get_weather`: city holds a piece of the schema"),
            "{correction}"
        );
    }
    let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"reason="invalid_arguments""#), "{metrics}");

    // With no retries, a call that only recites the schema is no call: a plain answer is
    // asked for instead (without tools), as for a guess. BFCL's `irrelevance_0`: the model
    // recited `determine_body_mass_index`'s schema for a question about a triangle.
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Auto;
        config.max_retries = 0;
    })
    .await;
    gw.upstream.push(Reply::text(copied));
    gw.upstream.push(Reply::text("It is sunny in Paris."));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert!(calls(&completion).is_empty(), "{completion:#}");
    assert_eq!(completion["choices"][0]["message"]["content"], "It is sunny in Paris.");
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].get("tools").is_none(), "the plain answer is asked for without tools");

    // Emulated, the same after the retry.
    let gw = gateway(Mode::Emulate, Engine::Off).await;
    let recited = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    for _ in 0..2 {
        gw.upstream.push(Reply::text(hermes("get_weather", recited.clone())));
    }
    gw.upstream.push(Reply::text("It is sunny in Paris."));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert!(calls(&completion).is_empty(), "{completion:#}");
    assert_eq!(completion["choices"][0]["message"]["content"], "It is sunny in Paris.");
    assert_eq!(gw.upstream.requests().len(), 3, "a try, a retry, and the plain answer");

    // The same when the retry's recital is cut off by the end of the reply.
    let gw = gateway(Mode::Emulate, Engine::Off).await;
    let whole = hermes("get_weather", recited.clone());
    gw.upstream.push(Reply::text(whole.clone()));
    gw.upstream.push(Reply::text(&whole[..whole.len() - 20]));
    gw.upstream.push(Reply::text("It is sunny in Paris."));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert!(calls(&completion).is_empty(), "{completion:#}");
    assert_eq!(completion["choices"][0]["message"]["content"], "It is sunny in Paris.");
    assert_eq!(gw.upstream.requests().len(), 3);

    // Any other fault, with no retries, goes out as written, in one request.
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Auto;
        config.max_retries = 0;
    })
    .await;
    let unknown_key = json!({"city": "Paris", "town": "Paris"});
    gw.upstream.push(Reply::text(fenced("get_weather", unknown_key.clone())));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert_eq!(calls(&completion), vec![("get_weather".to_owned(), unknown_key)]);
    assert_eq!(gw.upstream.requests().len(), 1);
}

#[tokio::test]
async fn issue_24_a_native_reply_whose_only_call_names_no_tool_is_asked_for_again() {
    let unknown = fenced("Healthy Lunch Recipe", json!({"diet": "vegan"}));
    let right = fenced("get_weather", json!({"city": "Paris"}));
    for stream in [false, true] {
        let gw = gateway(Mode::Auto, Engine::Off).await;
        gw.upstream.push(Reply::text(unknown.clone()));
        gw.upstream.push(Reply::text(right.clone()));
        let mut body = request("What is the weather in Paris?");
        body["stream"] = json!(stream);
        let (text, names) = if stream {
            let folded = crate::common::api::Api::OpenAi.streams(&gw, &body).await;
            (folded.text, folded.calls.into_iter().map(|(name, _)| name).collect::<Vec<_>>())
        } else {
            let completion = gw.complete(&body).await;
            let text = completion["choices"][0]["message"]["content"].as_str().map(str::to_owned);
            (
                text.unwrap_or_default(),
                calls(&completion).into_iter().map(|(name, _)| name).collect(),
            )
        };
        assert_eq!(names, vec!["get_weather".to_owned()], "stream {stream}");
        assert_eq!(text, "", "the unknown call's text is not shown");
        let requests = gw.upstream.requests();
        assert_eq!(requests.len(), 2);
        let correction = last_message(&requests[1]);
        assert_eq!(
            correction["content"],
            "Your reply called a tool that does not exist. The only tools are: get_weather, get_time. If none of them fits the request, answer the user in your own words, without a tool."
        );
        let metrics = gw.http().get(gw.url("/metrics")).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains(r#"reason="unknown_tool""#), "{metrics}");
    }
    // Asked again and still no tool (or not asked again: `max_retries = 0`): what the model
    // wrote goes out as text, not as an empty reply.
    let gw = gateway(Mode::Auto, Engine::Off).await;
    gw.upstream.push(Reply::text(unknown.clone()));
    gw.upstream.push(Reply::text(unknown.clone()));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert_eq!(completion["choices"][0]["message"]["content"], json!(unknown));
    assert!(calls(&completion).is_empty());
    let gw = spawn_gateway(|config| {
        config.mode = Mode::Auto;
        config.max_retries = 0;
    })
    .await;
    gw.upstream.push(Reply::text(unknown.clone()));
    let completion = gw.complete(&request("What is the weather in Paris?")).await;
    assert_eq!(completion["choices"][0]["message"]["content"], json!(unknown));
    assert_eq!(gw.upstream.requests().len(), 1);
}

/// A concert search whose optional `price_range` takes `"cheap"` and whose optional flag is
/// `details`.
fn concert_tool() -> Value {
    json!({"name": "concert_search", "parameters": {"type": "object", "properties": {
        "genre": {"type": "string"}, "location": {"type": "string"},
        "price_range": {"type": "string", "enum": ["free", "cheap", "moderate"]},
        "details": {"type": "boolean"}}, "required": ["genre", "location"]}})
}

/// The arguments of the calls a gateway in `mode` sends `api`'s client when the model
/// calls `concert_search` with `written` after `user`.
async fn concert_calls(
    api: crate::common::api::Api,
    mode: Mode,
    check: bool,
    user: &str,
    stream: bool,
    written: &Value,
) -> Vec<Value> {
    use crate::common::api::Api;
    let gw = spawn_gateway(|config| {
        config.mode = mode;
        config.min_call_confidence = 0.0;
        config.check_grounding = check;
    })
    .await;
    gw.upstream.push(Reply::text(fenced("concert_search", written.clone())).chunks(7));
    let tool = concert_tool();
    let mut body = api.request(user, true, stream);
    body["tools"] = match api {
        Api::OpenAi => json!([{"type": "function", "function": tool}]),
        Api::Anthropic => json!([{"name": tool["name"], "input_schema": tool["parameters"]}]),
    };
    let arguments = if stream {
        let folded = api.streams(&gw, &body).await;
        assert!(folded.finished && folded.error.is_none(), "{api:?}: {folded:?}");
        folded.calls.iter().map(|(_, a)| serde_json::from_str(a).unwrap()).collect()
    } else {
        let value: Value = api.send(&gw, &body).await.json().await.unwrap();
        match api {
            Api::OpenAi => calls(&value).into_iter().map(|(_, a)| a).collect(),
            Api::Anthropic => {
                let blocks = value["content"].as_array().unwrap().iter();
                blocks.filter(|b| b["type"] == "tool_use").map(|b| b["input"].clone()).collect()
            }
        }
    };
    assert_eq!(gw.upstream.requests().len(), 1, "no second request");
    arguments
}

/// "Cheap tickets" for the optional `price_range` that takes `"cheap"`, and "with details"
/// for the optional flag `details`: what the call left out is added, on both families,
/// emulated and repaired alike, streamed or not. With `check_grounding` off, and where the
/// user negated it, the call goes out as written.
#[tokio::test]
async fn issue_24_an_optional_value_the_user_stated_is_added_to_a_call_that_left_it_out() {
    use crate::common::api::{APIS, Api};
    let written = json!({"genre": "jazz", "location": "Paris"});
    let user = "Find a jazz concert in Paris with cheap tickets, with details.";
    let filled =
        json!({"genre": "jazz", "location": "Paris", "price_range": "cheap", "details": true});
    for api in APIS {
        for stream in [false, true] {
            for mode in [Mode::Emulate, Mode::Auto] {
                let case = format!("{api:?} {mode:?} stream {stream}");
                let sent = concert_calls(api, mode, true, user, stream, &written).await;
                assert_eq!(sent, vec![filled.clone()], "{case}");
                let sent = concert_calls(api, mode, false, user, stream, &written).await;
                assert_eq!(sent, vec![written.clone()], "{case}, check_grounding off");
            }
        }
    }
    let negated = "Find a jazz concert in Paris, nothing cheap, and no details.";
    let sent = concert_calls(Api::OpenAi, Mode::Emulate, true, negated, true, &written).await;
    assert_eq!(sent, vec![written]);
}

/// A continued call gets the values the user stated too: "with details" holds no value of
/// either city's call, so both calls get `details`.
#[tokio::test]
async fn issue_24_a_continued_call_gets_the_values_the_user_stated() {
    let gw = gateway(Mode::Auto, Engine::LlamaCpp).await;
    let first = fenced("concert_search", json!({"genre": "jazz", "location": "Paris"}));
    gw.upstream.push(Reply::text(first.clone()));
    let rome = rest("concert_search", json!({"genre": "jazz", "location": "Rome"}));
    let second = format!("{}{rome}", continued(&first));
    gw.upstream.push(Reply::text(second.clone()));
    let again = rest("concert_search", json!({"genre": "jazz", "location": "Paris"}));
    gw.upstream.push(Reply::text(format!("{}{again}", continued(&second))));
    let body = json!({"model": MODEL, "tools": [{"type": "function", "function": concert_tool()}],
        "messages": [{"role": "user", "content": "Find jazz concerts in Paris and in Rome, with details."}]});
    let completion = gw.complete(&body).await;
    let with_details = |city: &str| json!({"genre": "jazz", "location": city, "details": true});
    assert_eq!(
        calls(&completion),
        vec![
            ("concert_search".to_owned(), with_details("Paris")),
            ("concert_search".to_owned(), with_details("Rome"))
        ],
        "{completion:#}"
    );
    // What the model wrote is what it is continued from.
    let requests = gw.upstream.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(last_message(&requests[2])["content"], json!(continued(&second)));
}
