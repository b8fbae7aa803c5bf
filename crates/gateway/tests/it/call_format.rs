//! `call_format = "auto"` (issue 24, lever 3): the contract asks for calls in the syntax the
//! model's own chat template teaches, chosen from the upstream model's name or, when the
//! name says nothing, from the template llama.cpp's server shows at `GET /props`; the
//! history's calls are shown in the same syntax, and the replies come back as calls.

use serde_json::{Value, json};
use toolshim_gateway::CallFormat;

use crate::common::{MODEL, Reply, args, request, spawn_gateway};

/// The system prompt and the turns the upstream got in its `n`th request.
fn sent_text(sent: &Value) -> String {
    sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// A conversation that already holds a call and its result, then a new question.
fn with_history(model: &str) -> Value {
    json!({"model": model, "tools": crate::common::tools(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "user", "content": "And in Rome?"}]})
}

#[tokio::test]
async fn a_template_on_props_decides_the_syntax_when_the_name_says_nothing() {
    let gw = spawn_gateway(|config| config.continue_calls = 0).await;
    gw.upstream.show_template("{{ bos_token }}[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS]{% if message.tool_calls %}[TOOL_CALLS][{{ message.tool_calls | tojson }}]{% endif %}");
    gw.upstream.push(Reply::text(
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 2}}]",
    ));
    let completion = gw.complete(&with_history(MODEL)).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Rome", "days": 2}));
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("[TOOL_CALLS][{\"name\": \"<tool name>\""), "the contract: {sent}");
    assert!(!sent.contains("<tool_call>"), "{sent}");
    assert!(
        sent.contains("[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}"),
        "the earlier call in the same syntax: {sent}"
    );
    // The template is asked for once per upstream.
    gw.upstream.push(Reply::text("It is sunny in Rome."));
    gw.complete(&request("Is it sunny in Rome?")).await;
    assert_eq!(gw.upstream.props_requests(), 1);
}

#[tokio::test]
async fn a_model_name_decides_when_the_upstream_shows_no_template() {
    // The mock has no `/props` (404), as servers other than llama.cpp's.
    let gw = spawn_gateway(|config| config.continue_calls = 0).await;
    gw.upstream
        .push(Reply::text("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}"));
    let completion = gw.complete(&with_history("meta-llama/Llama-3.1-8B-Instruct")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Rome"}));
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("{\"name\": \"<tool name>\", \"parameters\": {"), "{sent}");
    assert!(sent.contains("\"parameters\":{\"city\":\"Paris\"}"), "{sent}");
    assert_eq!(gw.upstream.props_requests(), 1);
}

#[tokio::test]
async fn the_template_wins_over_a_name_the_client_chose() {
    // Claude Code asks a local Qwen for `claude-…`: the template says what the model is.
    let gw = spawn_gateway(|config| config.continue_calls = 0).await;
    gw.upstream
        .show_template("For each function call, return it within <tool_call></tool_call> XML tags");
    gw.upstream.push(Reply::text(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
    ));
    let completion = gw.complete(&with_history("claude-sonnet-4-5")).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Rome"}));
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("<tool_call>\n{\"name\": \"<tool name>\""), "{sent}");
    assert!(!sent.contains("<function_calls>"), "{sent}");
}

#[tokio::test]
async fn a_qwen3_coder_template_gets_its_xml_and_typed_values_come_back() {
    let gw = spawn_gateway(|config| config.continue_calls = 0).await;
    gw.upstream.show_template(
        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call>",
    );
    gw.upstream.push(Reply::text(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
    ));
    let completion = gw.complete(&with_history(MODEL)).await;
    let calls = completion["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(args(&calls[0]), json!({"city": "Rome", "days": 2}));
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("<function=<tool name>>"), "{sent}");
    assert!(
        sent.contains("<function=get_weather>\n<parameter=city>\nParis\n</parameter>"),
        "{sent}"
    );
}

#[tokio::test]
async fn a_configured_format_wins_and_no_template_is_asked_for() {
    let gw = spawn_gateway(|config| {
        config.continue_calls = 0;
        config.call_format = CallFormat::ToolCall;
    })
    .await;
    gw.upstream.show_template("[TOOL_CALLS]");
    gw.upstream.push(Reply::text(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
    ));
    gw.complete(&with_history(MODEL)).await;
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("<tool_call>") && !sent.contains("[TOOL_CALLS]"), "{sent}");
    assert_eq!(gw.upstream.props_requests(), 0);
}

#[tokio::test]
async fn without_a_template_or_a_known_name_the_contract_is_hermes() {
    let gw = spawn_gateway(|config| config.continue_calls = 0).await;
    gw.upstream.push(Reply::text(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
    ));
    gw.complete(&with_history(MODEL)).await;
    let sent = sent_text(&gw.upstream.requests()[0]);
    assert!(sent.contains("<tool_call>\n{\"name\": \"<tool name>\""), "{sent}");
    // The mock has no `/props` (404): asked once, and that answer is kept.
    assert_eq!(gw.upstream.props_requests(), 1);
}
