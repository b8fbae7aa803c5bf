//! Issue 25: images reach the upstream as images on every family, emulated or native: a
//! user's image and an image a tool returned (a screenshot), as `image_url` parts to an
//! OpenAI-kind upstream and as `image` blocks to an Anthropic one; a URL is passed on as it is
//! (the gateway never fetches it).

use serde_json::{Value, json};
use toolshim_gateway::Mode;

use crate::common::api::Api;
use crate::common::{Reply, spawn_gateway};

const PNG: &str = "data:image/png;base64,iVBORw0KGgo=";
const URL: &str = "http://127.0.0.1:9/never-fetched.png";

/// The image parts of an upstream request's messages, as (message index, URL).
fn image_parts(request: &Value) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, message) in request["messages"].as_array().unwrap().iter().enumerate() {
        for part in message["content"].as_array().into_iter().flatten() {
            if part["type"] == "image_url" {
                out.push((i, part["image_url"]["url"].as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

/// A Messages request whose user sends a picture, and whose tool returned a screenshot.
fn messages_body() -> Value {
    json!({"model": "claude-test", "max_tokens": 100, "tools": crate::anthropic::tools(),
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"timezone": "UTC"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "a screenshot"},
                    {"type": "image", "source": {"type": "url", "url": URL}}]}]}]})
}

#[tokio::test]
async fn issue_25_images_reach_the_upstream_emulated_and_native_on_every_family() {
    for mode in [Mode::Emulate, Mode::Native] {
        let gw = spawn_gateway(|config| config.mode = mode).await;

        // Messages: the user's image and the screenshot.
        gw.upstream.push(Reply::text("A cat."));
        let response = Api::Anthropic.send(&gw, &messages_body()).await;
        assert!(response.status().is_success(), "{mode:?}: {}", response.text().await.unwrap());
        let sent = gw.upstream.requests().pop().unwrap();
        let images = image_parts(&sent);
        let urls: Vec<&str> = images.iter().map(|(_, url)| url.as_str()).collect();
        assert_eq!(urls, [PNG, URL], "{mode:?}: {sent:#}");
        assert!(!sent.to_string().contains("[image]"), "{sent:#}");
        let messages = sent["messages"].as_array().unwrap();
        let (user, shot) = (&messages[images[0].0], &messages[images[1].0]);
        assert_eq!(user["content"][0]["text"], "What is in this picture?", "{sent:#}");
        if mode == Mode::Native {
            // A `tool` message holds text: the screenshot follows it in a user message.
            assert_eq!(messages[images[1].0 - 1]["role"], "tool", "{sent:#}");
            assert_eq!(messages[images[1].0 - 1]["content"], "a screenshot");
        } else {
            assert!(
                shot["content"][0]["text"].as_str().unwrap().contains("a screenshot"),
                "{sent:#}"
            );
        }

        // Chat Completions (passed through natively as the client wrote it) and Responses.
        gw.upstream.push(Reply::text("A cat."));
        let mut body = Api::OpenAi.request("unused", true, false);
        body["messages"] = json!([{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": URL}}]}]);
        let response = Api::OpenAi.send(&gw, &body).await;
        assert!(response.status().is_success(), "{mode:?}");
        let sent = gw.upstream.requests().pop().unwrap();
        assert_eq!(
            image_parts(&sent),
            [(usize::from(mode == Mode::Emulate), URL.to_owned())],
            "{sent:#}"
        );

        gw.upstream.push(Reply::text("A cat."));
        let body = json!({"model": "m", "tools": [crate::responses::weather()], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": PNG}]}]});
        let response = crate::responses::post(&gw, &body).await;
        assert!(response.status().is_success(), "{mode:?}");
        let sent = gw.upstream.requests().pop().unwrap();
        let urls: Vec<String> = image_parts(&sent).into_iter().map(|(_, url)| url).collect();
        assert_eq!(urls, [PNG], "{mode:?}: {sent:#}");
    }
}

/// To an Anthropic upstream, images are `image` blocks: a `data:` URL as a base64 source, any
/// other URL as a url source.
#[tokio::test]
async fn issue_25_images_are_image_blocks_to_an_anthropic_upstream() {
    let upstream =
        crate::common::anthropic::start(crate::common::anthropic::Answer::Text("A cat.")).await;
    let gw = upstream.gateway(Mode::Emulate).await;
    let response = Api::Anthropic.send(&gw, &messages_body()).await;
    assert!(response.status().is_success());
    let seen = upstream.seen.lock().unwrap();
    let (_, body) = &seen[0];
    let blocks: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "image")
        .collect();
    assert_eq!(
        blocks[0]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(blocks[1]["source"], json!({"type": "url", "url": URL}));
    assert_eq!(blocks.len(), 2, "{body:#}");
}

/// A text-only upstream's refusal of a request with an image is the client's 400, and its
/// message names the image.
#[tokio::test]
async fn issue_25_a_refused_image_is_a_400_that_names_it() {
    let gw = spawn_gateway(|_| {}).await;
    let refusal = || {
        Reply::error(
            400,
            json!({"error": {"message": "image input is not supported", "type": "invalid_request_error"}}),
        )
    };
    gw.upstream.push(refusal());
    let err = Api::Anthropic.fails(&gw, &messages_body()).await;
    assert_eq!(err.status, 400);
    assert!(err.message.contains("image input is not supported"), "{}", err.message);
    assert!(err.message.contains("`data:image/png;base64,iVBORw0KGgo=`"), "{}", err.message);

    gw.upstream.push(refusal());
    let mut body = Api::OpenAi.request("unused", false, true);
    body["messages"] = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": URL}}]}]);
    let err = Api::OpenAi.fails(&gw, &body).await;
    assert_eq!(err.status, 400);
    assert!(
        err.message.contains("carries an image") && err.message.contains(URL),
        "{}",
        err.message
    );
}

const PDF: &str = "data:application/pdf;base64,JVBERi0xLjQK";

/// Files (a PDF given by its contents) reach the upstream as files on every family, emulated
/// or native: Chat Completions `file` parts to an OpenAI-kind upstream, `document` blocks to
/// an Anthropic one, named as the client named them; the text around them is kept.
#[tokio::test]
async fn issue_25_files_reach_the_upstream_on_every_family() {
    let file_parts = |request: &Value| -> Vec<Value> {
        let messages = request["messages"].as_array().unwrap().iter();
        let parts = messages.flat_map(|m| m["content"].as_array().into_iter().flatten());
        parts.filter(|p| p["type"] == "file").map(|p| p["file"].clone()).collect()
    };
    let chat = json!([{"role": "user", "content": [{"type": "text", "text": "Summarize this."},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF}}]}]);
    let responses = json!([{"role": "user", "content": [
        {"type": "input_text", "text": "Summarize this."},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF}]}]);
    let messages = json!([{"role": "user", "content": [
        {"type": "document", "title": "report.pdf",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}},
        {"type": "text", "text": "Summarize this."}]}]);
    for mode in [Mode::Emulate, Mode::Native] {
        let gw = spawn_gateway(|config| config.mode = mode).await;
        for family in ["chat", "responses", "messages"] {
            gw.upstream.push(Reply::text("A report."));
            let response = match family {
                "chat" => {
                    let mut body = Api::OpenAi.request("unused", true, false);
                    body["messages"] = chat.clone();
                    Api::OpenAi.send(&gw, &body).await
                }
                "responses" => {
                    let body = json!({"model": "m", "tools": [crate::responses::weather()],
                        "input": responses});
                    crate::responses::post(&gw, &body).await
                }
                _ => {
                    let mut body = messages_body();
                    body["messages"] = messages.clone();
                    Api::Anthropic.send(&gw, &body).await
                }
            };
            assert!(response.status().is_success(), "{mode:?} {family}");
            let sent = gw.upstream.requests().pop().unwrap();
            let files = file_parts(&sent);
            assert_eq!(files.len(), 1, "{mode:?} {family}: {sent:#}");
            assert_eq!(files[0]["file_data"], PDF);
            assert_eq!(files[0]["filename"], "report.pdf", "{mode:?} {family}: {sent:#}");
            assert!(sent.to_string().contains("Summarize this."), "{sent:#}");
            assert!(!sent.to_string().contains("[file"), "no placeholder: {sent:#}");
        }
    }

    // To an Anthropic upstream: a `document` block.
    let upstream =
        crate::common::anthropic::start(crate::common::anthropic::Answer::Text("A report.")).await;
    let gw = upstream.gateway(Mode::Emulate).await;
    let mut body = Api::OpenAi.request("unused", true, false);
    body["messages"] = chat;
    let response = Api::OpenAi.send(&gw, &body).await;
    assert!(response.status().is_success());
    let sent = upstream.bodies().pop().unwrap();
    let messages = sent["messages"].as_array().unwrap().iter();
    let documents: Vec<&Value> = messages
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "document")
        .collect();
    assert_eq!(documents.len(), 1, "{sent:#}");
    assert_eq!(
        documents[0]["source"],
        json!({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"})
    );
    assert_eq!(documents[0]["title"], "report.pdf");
}
