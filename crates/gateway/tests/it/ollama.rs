//! The Ollama API (issue 28): `/api/chat` and `/api/generate` emulated against a scripted
//! upstream, NDJSON streams, a tool round trip, the model endpoints, and Ollama's error
//! shape. The official `ollama` client drives it end to end in `tests/e2e/test_ollama.py`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{MODEL, Reply, TestGateway, hermes, spawn_gateway};

fn weather() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

async fn post(gw: &TestGateway, path: &str, body: &Value) -> reqwest::Response {
    within(gw.http().post(gw.url(path)).json(body).send()).await.unwrap()
}

async fn get(gw: &TestGateway, path: &str) -> (StatusCode, String) {
    let response = within(gw.http().get(gw.url(path)).send()).await.unwrap();
    (response.status(), within(response.text()).await.unwrap())
}

/// The lines of an NDJSON body, each parsed.
fn lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect()
}

#[tokio::test]
async fn issue_28_a_call_comes_back_with_its_arguments_as_an_object() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    let body = json!({"model": MODEL, "stream": false, "tools": weather(),
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let response = post(&gw, "/api/chat", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let reply: Value = within(response.json()).await.unwrap();
    assert_eq!(reply["model"], MODEL);
    assert_eq!(reply["done"], true);
    assert_eq!(reply["done_reason"], "stop");
    assert_eq!(reply["message"]["role"], "assistant");
    let call = &reply["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["arguments"], json!({"city": "Paris"}));
    assert!(reply["eval_count"].as_u64().is_some() && reply["total_duration"].as_u64().is_some());
}

#[tokio::test]
async fn issue_28_ollama_streams_ndjson_by_default_and_ends_with_the_counts() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream
        .push(Reply::text(format!("Checking. {}", hermes("get_weather", json!({"city": "Rome"})))));
    let body = json!({"model": MODEL, "tools": weather(),
        "messages": [{"role": "user", "content": "Weather in Rome?"}]});
    let response = post(&gw, "/api/chat", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let lines = lines(&within(response.text()).await.unwrap());
    let text: String = lines.iter().filter_map(|l| l["message"]["content"].as_str()).collect();
    assert_eq!(text.trim(), "Checking.");
    let calls: Vec<&Value> =
        lines.iter().filter_map(|l| l["message"]["tool_calls"].get(0)).collect();
    assert_eq!(calls.len(), 1, "{lines:?}");
    assert_eq!(calls[0]["function"]["arguments"], json!({"city": "Rome"}));
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert!(lines[..lines.len() - 1].iter().all(|l| l["done"] == false), "{lines:?}");
}

#[tokio::test]
async fn issue_28_a_tool_result_goes_back_as_the_result_of_its_call() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("It is 18 degrees in Paris."));
    let body = json!({"model": MODEL, "stream": false, "tools": weather(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "18 degrees", "tool_name": "get_weather"}]});
    let reply: Value = within(post(&gw, "/api/chat", &body).await.json()).await.unwrap();
    assert_eq!(reply["message"]["content"], "It is 18 degrees in Paris.");
    let sent = gw.upstream.requests();
    let prompt = sent[0].to_string();
    assert!(prompt.contains("18 degrees") && prompt.contains("get_weather"), "{prompt}");
}

#[tokio::test]
async fn issue_28_generate_answers_a_prompt_and_format_json_is_checked() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("{\"answer\": 4}"));
    let body = json!({"model": MODEL, "prompt": "2 + 2? Answer in JSON.", "system": "Be brief.",
        "format": {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]},
        "stream": false, "options": {"temperature": 0, "num_predict": 64}, "keep_alive": "5m"});
    let reply: Value = within(post(&gw, "/api/generate", &body).await.json()).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(reply["response"].as_str().unwrap()).unwrap(),
        json!({"answer": 4})
    );
    assert_eq!(reply["done"], true);
    let sent = &gw.upstream.requests()[0];
    assert_eq!(sent["max_tokens"], 64, "{sent}");
}

#[tokio::test]
async fn issue_28_the_model_endpoints_answer_from_the_routes() {
    let gw = spawn_gateway(|config| {
        config.models.insert("llama3.2".into(), crate::common::model(None, None));
    })
    .await;
    let (status, root) = get(&gw, "/").await;
    assert_eq!((status, root.as_str()), (StatusCode::OK, "Ollama is running"));
    let (_, version) = get(&gw, "/api/version").await;
    assert!(serde_json::from_str::<Value>(&version).unwrap()["version"].is_string());
    let (_, tags) = get(&gw, "/api/tags").await;
    let tags: Value = serde_json::from_str(&tags).unwrap();
    assert!(tags["models"].as_array().unwrap().iter().any(|m| m["name"] == "llama3.2"), "{tags}");
    let (_, ps) = get(&gw, "/api/ps").await;
    assert_eq!(serde_json::from_str::<Value>(&ps).unwrap(), json!({"models": []}));
    let shown = post(&gw, "/api/show", &json!({"model": "llama3.2"})).await;
    assert_eq!(shown.status(), StatusCode::OK);
    let shown: Value = within(shown.json()).await.unwrap();
    assert!(shown["capabilities"].as_array().unwrap().contains(&json!("tools")), "{shown}");
}

/// A gateway whose one upstream serves `llama3.2` only: other names are a 404.
pub(crate) async fn serving_llama() -> TestGateway {
    let upstream = crate::common::MockUpstream::start().await;
    let mut config = crate::common::base_config("");
    let named = toolshim_gateway::NamedUpstream {
        upstream: toolshim_gateway::UpstreamConfig {
            url: upstream.url(),
            ..crate::common::base_config(&upstream.url()).upstream
        },
        models: vec!["llama3.2".into()],
        ..toolshim_gateway::NamedUpstream::default()
    };
    config.upstreams.insert("local".into(), named);
    crate::common::serve_config(upstream, config).await
}

#[tokio::test]
async fn issue_28_errors_are_ollamas_shape_and_status() {
    let gw = serving_llama().await;
    let cases = [
        (json!({"messages": [{"role": "user", "content": "Hi"}]}), 400, "model is required"),
        (json!({"model": "nope", "messages": [{"role": "user", "content": "Hi"}]}), 404, "nope"),
        (json!({"model": "llama3.2", "messages": "Hi"}), 400, "messages must be an array"),
    ];
    for (body, status, says) in cases {
        let response = post(&gw, "/api/chat", &body).await;
        assert_eq!(response.status().as_u16(), status, "{body}");
        let error: Value = within(response.json()).await.unwrap();
        assert!(error["error"].as_str().unwrap().contains(says), "{error}");
        assert_eq!(error.as_object().unwrap().len(), 1, "only `error`: {error}");
    }
    let not_json = within(gw.http().post(gw.url("/api/chat")).body("{").send()).await.unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let unknown = post(&gw, "/api/show", &json!({"model": "nope"})).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(gw.upstream.pending(), 0);
}

/// Natively (`native` and `auto`), the upstream gets the tools and answers with a native call,
/// which reaches the client as Ollama writes calls, streamed and not.
#[tokio::test]
async fn issue_28_ollama_calls_tools_natively_in_native_and_auto() {
    for mode in [toolshim_gateway::Mode::Native, toolshim_gateway::Mode::Auto] {
        let gw = spawn_gateway(|config| config.mode = mode).await;
        for stream in [false, true] {
            let reply = crate::native_families::native_call("get_weather", r#"{"city": "Paris"}"#);
            gw.upstream.push(reply);
            let body = json!({"model": MODEL, "stream": stream, "tools": weather(),
                "messages": [{"role": "user", "content": "Weather in Paris?"}]});
            let text = within(post(&gw, "/api/chat", &body).await.text()).await.unwrap();
            let call = lines(&text)
                .into_iter()
                .find_map(|l| l["message"]["tool_calls"].get(0).cloned())
                .unwrap_or_else(|| panic!("{mode:?} {stream}: {text}"));
            assert_eq!(call["function"]["arguments"], json!({"city": "Paris"}), "{text}");
            let sent = gw.upstream.requests().pop().unwrap();
            assert_eq!(sent["tools"][0]["function"]["name"], "get_weather", "{sent}");
        }
    }
}

/// A request with nothing to answer loads the model, as Ollama's clients use it: answered at
/// once with `done_reason: "load"`, and nothing goes upstream.
#[tokio::test]
async fn issue_28_an_empty_request_loads_the_model() {
    let gw = spawn_gateway(|_| {}).await;
    let chat =
        post(&gw, "/api/chat", &json!({"model": MODEL, "messages": [], "stream": false})).await;
    let chat: Value = within(chat.json()).await.unwrap();
    assert_eq!(
        (chat["done"].clone(), chat["done_reason"].clone()),
        (json!(true), json!("load")),
        "{chat}"
    );
    let generate = post(&gw, "/api/generate", &json!({"model": MODEL})).await;
    let lines = lines(&within(generate.text()).await.unwrap());
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["done_reason"], "load");
    assert!(gw.upstream.requests().is_empty());
}
