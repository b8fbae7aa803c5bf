//! Issue 25: native tools toward an Anthropic upstream. In `native` and `auto` modes every
//! family's request goes to a Messages upstream with its tools declared (`input_schema`), the
//! history as `tool_use` and `tool_result` blocks, and the reply's `tool_use` blocks come back
//! as the family's calls, streamed and not; `emulate` still writes the contract.

use serde_json::{Value, json};
use toolshim_gateway::Mode;

use crate::common::anthropic::{self, Answer};
use crate::common::api::{Api, within};
use crate::native_families::FAMILIES;

#[tokio::test]
async fn issue_25_every_family_calls_natively_through_an_anthropic_upstream() {
    let weather = vec![("get_weather".to_owned(), json!({"city": "Paris"}))];
    for mode in [Mode::Native, Mode::Auto] {
        let upstream = anthropic::start(Answer::Native).await;
        let gw = upstream.gateway(mode).await;
        for family in FAMILIES {
            for stream in [false, true] {
                let body = family.request("Weather in Paris?", stream);
                let (calls, text) = family.calls(&gw, &body).await;
                assert_eq!(calls, weather, "{mode:?} {family:?} stream={stream}");
                assert_eq!(text, "Let me check.", "{mode:?} {family:?} stream={stream}");
            }
        }
        for sent in &upstream.bodies() {
            assert_eq!(sent["tools"][0]["name"], "get_weather", "{mode:?}: {sent:#}");
            assert_eq!(sent["tools"][0]["input_schema"]["type"], "object", "{sent:#}");
            assert_eq!(sent["tool_choice"]["type"], "auto", "{sent:#}");
            let system = sent["system"].as_str().unwrap_or_default();
            assert!(!system.contains("# Tools"), "no contract natively: {sent:#}");
        }
    }
    // Emulated, the tools are in the prompt and not declared.
    let upstream = anthropic::start(Answer::Native).await;
    let gw = upstream.gateway(Mode::Emulate).await;
    let response = within(Api::OpenAi.send(&gw, &Api::OpenAi.request("Hi", true, false))).await;
    assert!(response.status().is_success());
    let sent = upstream.bodies()[0].clone();
    assert!(sent.get("tools").is_none(), "{sent:#}");
    assert!(sent["system"].as_str().unwrap().contains("# Tools"), "{sent:#}");
}

/// A second turn natively: the earlier call goes back as a `tool_use` block and its result as
/// a `tool_result` block in the next user turn, and the answer comes back as text.
#[tokio::test]
async fn issue_25_a_tool_loop_round_trips_through_an_anthropic_upstream() {
    let upstream = anthropic::start(Answer::Native).await;
    let gw = upstream.gateway(Mode::Native).await;
    let mut body = Api::OpenAi.request("Weather in Paris?", true, false);
    let first: Value = within(Api::OpenAi.send(&gw, &body)).await.json().await.unwrap();
    let message = first["choices"][0]["message"].clone();
    assert_eq!(message["reasoning_content"], Value::Null, "reasoning is shown only when asked");
    let id = message["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(id, "toolu_01", "the upstream's call id is kept");
    body["messages"]
        .as_array_mut()
        .unwrap()
        .extend([message, json!({"role": "tool", "tool_call_id": id, "content": "sunny, 24 C"})]);
    body["tool_choice"] = json!("none");
    let second: Value = within(Api::OpenAi.send(&gw, &body)).await.json().await.unwrap();
    assert_eq!(second["choices"][0]["message"]["content"], "It is sunny.", "{second:#}");
    assert_eq!(second["usage"]["prompt_tokens"], 40);
    assert_eq!(second["usage"]["completion_tokens"], 21);
    let sent = upstream.bodies()[1].clone();
    let messages = sent["messages"].as_array().unwrap();
    let assistant = &messages[1]["content"];
    assert!(
        assistant.as_array().unwrap().iter().any(|b| b["type"] == "tool_use"
            && b["id"] == "toolu_01"
            && b["input"] == json!({"city": "Paris"})),
        "{sent:#}"
    );
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sent:#}");
    assert_eq!(result["tool_use_id"], "toolu_01");
    assert_eq!(result["content"][0]["text"], "sunny, 24 C");
    assert_eq!(sent["tool_choice"]["type"], "none");
}
