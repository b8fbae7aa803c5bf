//! Stored responses (issue 26) in process: `previous_response_id` and `item_reference`
//! resolved into the whole conversation the upstream gets, kept responses read back (whole,
//! and their input items a page at a time) and deleted, each key reading only its own, and
//! the API's errors for what is not there. The `openai` SDK and the AI SDK drive the same
//! endpoints in `tests/e2e`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::common::api::within;
use crate::common::{Reply, TestGateway, hermes, spawn_gateway};
use crate::responses::{events, weather};

async fn post(gw: &TestGateway, key: &str, body: &Value) -> (StatusCode, Value) {
    let request = gw.http().post(gw.url("/v1/responses")).bearer_auth(key).json(body);
    let response = within(request.send()).await.unwrap();
    let status = response.status();
    let text = within(response.text()).await.unwrap();
    if body["stream"] == true && status == StatusCode::OK {
        let events = events(&text);
        return (status, events.last().unwrap()["response"].clone());
    }
    (status, serde_json::from_str(&text).unwrap())
}

async fn get(gw: &TestGateway, key: &str, path: &str) -> (StatusCode, Value) {
    let response = within(gw.http().get(gw.url(path)).bearer_auth(key).send()).await.unwrap();
    (response.status(), within(response.json()).await.unwrap())
}

/// Whether `texts` stand in `seen` in this order.
fn in_order(seen: &str, texts: &[&str]) -> bool {
    let mut from = 0;
    texts.iter().all(|text| match seen.get(from..).and_then(|rest| rest.find(text)) {
        Some(at) => {
            from += at + text.len();
            true
        }
        None => false,
    })
}

/// Every message text the upstream got in its last request, in order.
fn upstream_texts(gw: &TestGateway) -> String {
    let requests = gw.upstream.requests();
    let last = requests.last().unwrap();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().map_or_else(|| m["content"].to_string(), str::to_owned))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn issue_26_three_turns_chained_by_previous_response_id_reach_the_upstream_whole() {
    let gw = spawn_gateway(|_| {}).await;
    let mut previous = Value::Null;
    let mut ids = Vec::new();
    for (turn, stream) in [("one", false), ("two", true), ("three", false)] {
        gw.upstream.push(Reply::text(format!("Answer {turn}.")));
        let body = json!({"model": "m", "input": format!("Question {turn}?"),
            "previous_response_id": previous, "stream": stream});
        let (status, response) = post(&gw, "sk-a", &body).await;
        assert_eq!(status, StatusCode::OK, "{response}");
        assert_eq!(response["store"], true);
        assert_eq!(response["previous_response_id"], previous);
        previous = response["id"].clone();
        ids.push(response["id"].as_str().unwrap().to_owned());
    }
    let seen = upstream_texts(&gw);
    let order = ["Question one?", "Answer one.", "Question two?", "Answer two.", "Question three?"];
    assert!(in_order(&seen, &order), "the upstream got the conversation in order: {seen}");

    // Read back, whole and as input items (newest first by default, a page at a time).
    let (status, third) = get(&gw, "sk-a", &format!("/v1/responses/{}", ids[2])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(third["output"][0]["content"][0]["text"], "Answer three.");
    let (status, page) =
        get(&gw, "sk-a", &format!("/v1/responses/{}/input_items?limit=2", ids[2])).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["object"], "list");
    assert_eq!(page["has_more"], true);
    let texts = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"][0]["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(texts(&page), ["Question three?", "Answer two."]);
    let after = page["last_id"].as_str().unwrap();
    let (_, rest) =
        get(&gw, "sk-a", &format!("/v1/responses/{}/input_items?limit=20&after={after}", ids[2]))
            .await;
    assert_eq!(texts(&rest), ["Question two?", "Answer one.", "Question one?"]);
    assert_eq!(rest["has_more"], false);
    let (_, ascending) =
        get(&gw, "sk-a", &format!("/v1/responses/{}/input_items?order=asc", ids[2])).await;
    assert_eq!(texts(&ascending)[0], "Question one?");

    // Another key sees none of it; a deleted response is gone, and so is a chain through it.
    let (status, error) = get(&gw, "sk-b", &format!("/v1/responses/{}", ids[2])).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    let deleted = within(
        gw.http().delete(gw.url(&format!("/v1/responses/{}", ids[1]))).bearer_auth("sk-a").send(),
    )
    .await
    .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    let deleted: Value = within(deleted.json()).await.unwrap();
    assert_eq!(deleted, json!({"id": ids[1], "object": "response", "deleted": true}));
    let (status, _) = get(&gw, "sk-a", &format!("/v1/responses/{}", ids[1])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    gw.upstream.push(Reply::text("Never sent."));
    let body = json!({"model": "m", "input": "More?", "previous_response_id": ids[2]});
    let (status, error) = post(&gw, "sk-a", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["code"], "previous_response_not_found");
    assert_eq!(error["error"]["param"], "previous_response_id");
}

#[tokio::test]
async fn issue_26_item_references_to_a_call_and_its_message_are_read_from_the_store() {
    let gw = spawn_gateway(|config| config.check_grounding = false).await;
    gw.upstream.push(Reply::text(format!(
        "Let me look. {}",
        hermes("get_weather", json!({"city": "Paris"}))
    )));
    let body = json!({"model": "m", "input": "Weather in Paris?", "tools": [weather()]});
    let (status, first) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let output = first["output"].as_array().unwrap();
    let call = output.iter().find(|i| i["type"] == "function_call").unwrap();
    // What the AI SDK sends by default on its second step: the earlier output as references.
    let mut input = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    input.extend(output.iter().map(|i| json!({"type": "item_reference", "id": i["id"]})));
    input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny, 21 C"}));
    gw.upstream.push(Reply::text("It is sunny in Paris."));
    let body = json!({"model": "m", "input": input, "tools": [weather()]});
    let (status, second) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["output"][0]["content"][0]["text"], "It is sunny in Paris.");
    let seen = upstream_texts(&gw);
    assert!(seen.contains("Let me look."), "the referenced message: {seen}");
    assert!(seen.contains("get_weather") && seen.contains("Paris"), "the referenced call: {seen}");
    assert!(seen.contains("Sunny, 21 C"), "its result: {seen}");

    let body = json!({"model": "m", "input": [{"type": "item_reference", "id": "fc_missing"}]});
    let (status, error) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "input[0]");
    assert!(error["error"]["message"].as_str().unwrap().contains("fc_missing"), "{error}");
}

#[tokio::test]
async fn issue_26_store_false_keeps_nothing_and_bad_ids_are_the_apis_errors() {
    let gw = spawn_gateway(|_| {}).await;
    gw.upstream.push(Reply::text("Not kept."));
    let body = json!({"model": "m", "input": "Hi", "store": false});
    let (status, response) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["store"], false);
    let (status, error) =
        get(&gw, "", &format!("/v1/responses/{}", response["id"].as_str().unwrap())).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    assert_eq!(error["error"]["code"], "not_found");
    let (status, error) = get(&gw, "", "/v1/responses/not-an-id").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "response_id");
    let body = json!({"model": "m", "input": "Hi", "previous_response_id": "42"});
    let (status, error) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "previous_response_id");
}

#[tokio::test]
async fn issue_26_with_the_store_off_responses_say_store_false_and_references_are_refused() {
    let gw = spawn_gateway(|config| config.store.url = "off".into()).await;
    gw.upstream.push(Reply::text("Hello."));
    let (status, response) = post(&gw, "", &json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["store"], false);
    let (status, error) =
        get(&gw, "", &format!("/v1/responses/{}", response["id"].as_str().unwrap())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error["error"]["message"].as_str().unwrap().contains("store.url"), "{error}");
    let body = json!({"model": "m", "input": "Hi", "previous_response_id": response["id"]});
    let (status, error) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error["error"]["code"], "previous_response_not_found");
    let (_, ready) = get(&gw, "", "/readyz").await;
    assert!(ready.get("store").is_none(), "{ready}");
}

async fn send(
    gw: &TestGateway,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = gw.http().request(method, gw.url(path)).bearer_auth("sk-a");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = within(request.send()).await.unwrap();
    (response.status(), within(response.json()).await.unwrap())
}

#[tokio::test]
async fn issue_26_a_conversation_holds_its_turns_and_the_responses_that_use_it() {
    use reqwest::Method;
    let gw = spawn_gateway(|_| {}).await;
    let body = json!({"items": [{"role": "user", "content": "My name is Ada."}], "metadata": {"topic": "names"}});
    let (status, conversation) = send(&gw, Method::POST, "/v1/conversations", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{conversation}");
    assert_eq!(conversation["object"], "conversation");
    assert_eq!(conversation["metadata"], json!({"topic": "names"}));
    let id = conversation["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("conv_"), "{id}");

    for (question, answer) in [("What is my name?", "Ada."), ("Spell it.", "A-D-A.")] {
        gw.upstream.push(Reply::text(answer));
        let body = json!({"model": "m", "input": question, "conversation": id, "stream": answer == "A-D-A."});
        let (status, response) = post(&gw, "sk-a", &body).await;
        assert_eq!(status, StatusCode::OK, "{response}");
        assert_eq!(response["conversation"], json!({"id": id}));
    }
    let seen = upstream_texts(&gw);
    let order = ["My name is Ada.", "What is my name?", "Ada.", "Spell it."];
    assert!(in_order(&seen, &order), "the conversation reached the upstream: {seen}");

    let (status, items) =
        send(&gw, Method::GET, &format!("/v1/conversations/{id}/items?order=asc"), None).await;
    assert_eq!(status, StatusCode::OK, "{items}");
    let texts: Vec<&str> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["My name is Ada.", "What is my name?", "Ada.", "Spell it.", "A-D-A."]);
    assert!(
        items["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"].is_string() && i["type"] == "message")
    );

    // Items added, read one by one, deleted; metadata replaced; the conversation deleted.
    let body = json!({"items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Note."}]}]});
    let (status, added) =
        send(&gw, Method::POST, &format!("/v1/conversations/{id}/items"), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let item = added["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, got) =
        send(&gw, Method::GET, &format!("/v1/conversations/{id}/items/{item}"), None).await;
    assert_eq!((status, &got["content"][0]["text"]), (StatusCode::OK, &json!("Note.")));
    let (status, _) =
        send(&gw, Method::DELETE, &format!("/v1/conversations/{id}/items/{item}"), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) =
        send(&gw, Method::GET, &format!("/v1/conversations/{id}/items/{item}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let body = json!({"metadata": {"topic": "spelling"}});
    let (_, updated) =
        send(&gw, Method::POST, &format!("/v1/conversations/{id}"), Some(body)).await;
    assert_eq!(updated["metadata"], json!({"topic": "spelling"}));

    let other = gw.http().get(gw.url(&format!("/v1/conversations/{id}"))).bearer_auth("sk-b");
    assert_eq!(within(other.send()).await.unwrap().status(), StatusCode::NOT_FOUND);
    let body =
        json!({"model": "m", "input": "x", "conversation": id, "previous_response_id": "resp_1"});
    let (status, error) = post(&gw, "sk-a", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["code"], "mutually_exclusive_parameters");
    let (status, deleted) =
        send(&gw, Method::DELETE, &format!("/v1/conversations/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted, json!({"id": id, "object": "conversation.deleted", "deleted": true}));
    let (status, _) =
        post(&gw, "sk-a", &json!({"model": "m", "input": "x", "conversation": id})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, error) = send(&gw, Method::GET, "/v1/conversations/nope", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
}

/// Two gateways on one store (here one SQLite file; Redis works the same): a refusal of
/// native tools that one meets is not met again by the other.
#[tokio::test]
async fn issue_26_replicas_on_one_store_share_what_an_upstream_refused() {
    use crate::common::{MockUpstream, base_config, serve_config};
    let dir = std::env::temp_dir().join(format!("toolshim-shared-{}", fastrand::u64(..)));
    let config = |url: &str| {
        let mut config = base_config(url);
        config.mode = toolshim_gateway::Mode::Auto;
        config.store.url = format!("sqlite:{}", dir.join("store.db").display());
        config
    };
    let shared = MockUpstream::start().await;
    let url = shared.url();
    let a = serve_config(shared, config(&url)).await;
    // The second gateway's own mock is never asked: both go to the first's upstream.
    let b = serve_config(MockUpstream::start().await, config(&url)).await;
    let refusal =
        json!({"error": {"message": "tools are not supported", "type": "invalid_request_error"}});
    a.upstream.push(Reply::error(400, refusal));
    a.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Paris"}))));
    a.upstream.push(Reply::text(hermes("get_weather", json!({"city": "Bern"}))));
    let body = |city: &str| {
        json!({"model": "m", "messages": [{"role": "user", "content": format!("Weather in {city}?")}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})
    };
    assert_eq!(a.chat(&body("Paris")).await.0, StatusCode::OK);
    assert_eq!(b.chat(&body("Bern")).await.0, StatusCode::OK);
    let sent = a.upstream.requests();
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert!(sent[0].get("tools").is_some(), "the first gateway asked natively");
    assert!(sent[1].get("tools").is_none(), "then emulated");
    assert!(sent[2].get("tools").is_none(), "the second went straight to emulation");
    assert!(b.upstream.requests().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn issue_26_a_stored_response_streams_again_with_its_own_ids() {
    let gw = spawn_gateway(|config| config.check_grounding = false).await;
    gw.upstream.push(Reply::text(format!(
        "<think>Paris, so weather.</think>Checking. {}",
        hermes("get_weather", json!({"city": "Paris"}))
    )));
    let body = json!({"model": "m", "input": "Weather in Paris?", "tools": [weather()]});
    let (status, stored) = post(&gw, "", &body).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    let id = stored["id"].as_str().unwrap();
    let response = within(gw.http().get(gw.url(&format!("/v1/responses/{id}?stream=true"))).send())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let replayed = events(&within(response.text()).await.unwrap());
    let types: Vec<&str> = replayed.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(&types[..2], ["response.created", "response.in_progress"]);
    assert_eq!(types.last(), Some(&"response.completed"));
    assert_eq!(replayed.last().unwrap()["response"], stored, "the final event holds it as stored");
    let joined = |kind: &str| -> String {
        replayed
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(joined("response.reasoning_text.delta"), "Paris, so weather.");
    assert_eq!(joined("response.output_text.delta"), stored["output"][1]["content"][0]["text"]);
    assert_eq!(joined("response.function_call_arguments.delta"), stored["output"][2]["arguments"]);
    let added: Vec<&Value> = replayed
        .iter()
        .filter(|e| e["type"] == "response.output_item.added")
        .map(|e| &e["item"]["id"])
        .collect();
    let kept: Vec<&Value> = stored["output"].as_array().unwrap().iter().map(|i| &i["id"]).collect();
    assert_eq!(added, kept, "the stored ids");

    // From a sequence number on; a bad one is a 400.
    let url = gw.url(&format!("/v1/responses/{id}?stream=true&starting_after=3"));
    let rest = within(within(gw.http().get(url).send()).await.unwrap().text()).await.unwrap();
    let first = rest.split("\n\n").next().unwrap();
    assert!(first.contains("\"sequence_number\":4"), "{first}");
    let url = gw.url(&format!("/v1/responses/{id}?stream=true&starting_after=x"));
    let bad = within(gw.http().get(url).send()).await.unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}
