//! The Responses API's `input` items into the conversation: messages, calls of every kind
//! and their outputs, each call paired with its output.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tools::read_tool;
use super::wire::*;
use crate::api::openai::wire::{arguments_text, missing, text_of};
use crate::chat::{Message, PriorCall};
use crate::error::ApiError;

/// The flat name of a call in the history (a namespaced call's `namespace` joined on).
pub(super) fn flat_name(item: &Value) -> String {
    let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
    match item.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() => format!("{ns}{NAMESPACE_SEPARATOR}{name}"),
        _ => name.to_owned(),
    }
}

/// Adds a call to the assistant turn that ends the conversation so far, or starts one.
pub(super) fn push_call(messages: &mut Vec<Message>, call: PriorCall) {
    match messages.last_mut() {
        Some(Message::Assistant { calls, .. }) => calls.push(call),
        _ => messages.push(Message::Assistant { text: String::new(), calls: vec![call] }),
    }
}

/// The text of a tool output: a string, or the text of its parts.
pub(super) fn output_text(output: Option<&Value>) -> String {
    text_of(output)
}

pub(super) fn call_id(item: &Value, i: usize) -> Result<String, ApiError> {
    match item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(id.to_owned()),
        _ => Err(missing(&format!("input[{i}].call_id"))),
    }
}

/// One `input` item into the conversation.
pub(super) fn read_item(
    i: usize,
    item: &Value,
    origins: &BTreeMap<String, ToolOrigin>,
    messages: &mut Vec<Message>,
) -> Result<(), ApiError> {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
    match kind {
        "message" => {
            let role = item
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(&format!("input[{i}].role")))?;
            let text = text_of(item.get("content"));
            match role {
                "system" | "developer" => messages.push(Message::System(text)),
                "user" => messages.push(Message::User(text)),
                "assistant" => match messages.last_mut() {
                    Some(Message::Assistant { text: previous, calls }) if calls.is_empty() => {
                        if !previous.is_empty() {
                            previous.push('\n');
                        }
                        previous.push_str(&text);
                    }
                    _ => messages.push(Message::Assistant { text, calls: Vec::new() }),
                },
                other => {
                    return Err(invalid(
                        format!(
                            "Invalid value: '{other}'. Supported values are: 'user', 'assistant', 'system', and 'developer'."
                        ),
                        &format!("input[{i}].role"),
                    ));
                }
            }
        }
        "function_call" => push_call(
            messages,
            PriorCall {
                id: call_id(item, i)?,
                name: flat_name(item),
                arguments: arguments_text(item.get("arguments")),
            },
        ),
        "custom_tool_call" => {
            let input = item.get("input").and_then(Value::as_str).unwrap_or_default();
            push_call(
                messages,
                PriorCall {
                    id: call_id(item, i)?,
                    name: flat_name(item),
                    arguments: json!({"input": input}).to_string(),
                },
            );
        }
        "tool_search_call" if is_client(item) => push_call(
            messages,
            PriorCall {
                id: call_id(item, i)?,
                name: TOOL_SEARCH.to_owned(),
                arguments: arguments_text(item.get("arguments")),
            },
        ),
        "tool_search_output" if is_client(item) => {
            let mut names = Vec::new();
            let mut ignored = Vec::new();
            let mut origins = BTreeMap::new();
            for tool in item.get("tools").and_then(Value::as_array).into_iter().flatten() {
                read_tool("", tool, None, &mut names, &mut origins, &mut ignored)?;
            }
            let names: Vec<String> = names.into_iter().map(|t| t.name).collect();
            let content = if names.is_empty() {
                "No tools were found.".to_owned()
            } else {
                format!("These tools can be called now: {}.", names.join(", "))
            };
            messages.push(Message::ToolResult {
                call_id: call_id(item, i)?,
                name: Some(TOOL_SEARCH.to_owned()),
                content,
                is_error: false,
            });
        }
        "local_shell_call" => push_call(
            messages,
            PriorCall {
                id: call_id(item, i)?,
                name: "local_shell".into(),
                arguments: item.get("action").map_or_else(|| "{}".into(), Value::to_string),
            },
        ),
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let id = call_id(item, i)?;
            let name =
                called(messages, &id).or_else(|| origins.keys().find(|n| **n == id).cloned());
            messages.push(Message::ToolResult {
                call_id: id,
                name,
                content: output_text(item.get("output")),
                is_error: false,
            });
        }
        "reasoning" => {}
        "item_reference" => {
            return Err(invalid(
                "Item references are not supported: this gateway keeps no items. Send the item itself in 'input'.",
                &format!("input[{i}]"),
            ));
        }
        // Results of hosted tools from an earlier session (web searches, …): nothing the
        // model here can use, and not call syntax.
        _ => tracing::debug!(kind, "input item of a hosted tool left out"),
    }
    Ok(())
}

/// The name of the earlier call with this id.
pub(super) fn called(messages: &[Message], id: &str) -> Option<String> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { calls, .. } => {
            calls.iter().find(|c| c.id == id).map(|c| c.name.clone())
        }
        _ => None,
    })
}

/// Whether an item is a call or a call's output, for pairing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pairing {
    Call,
    Output,
    Neither,
}

pub(super) fn pairing(item: &Value) -> Pairing {
    match item.get("type").and_then(Value::as_str).unwrap_or("message") {
        "function_call" | "custom_tool_call" | "local_shell_call" => Pairing::Call,
        "tool_search_call" if is_client(item) => Pairing::Call,
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            Pairing::Output
        }
        "tool_search_output" if is_client(item) => Pairing::Output,
        _ => Pairing::Neither,
    }
}

/// Every call has its output later, and every output follows its call (the API's words).
pub(super) fn check_pairs(input: &[Value]) -> Result<(), ApiError> {
    let id = |item: &Value| {
        item.get("call_id")
            .or_else(|| item.get("id"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut calls: Vec<String> = Vec::new();
    for item in input {
        match pairing(item) {
            Pairing::Call => calls.push(id(item)),
            Pairing::Output => {
                let output = id(item);
                if !calls.contains(&output) {
                    return Err(ApiError::InvalidRequest {
                        message: format!(
                            "No tool call found for function call output with call_id {output}."
                        ),
                        param: Some("input".into()),
                        code: None,
                    });
                }
            }
            Pairing::Neither => {}
        }
    }
    for call in &calls {
        let answered =
            input.iter().any(|item| pairing(item) == Pairing::Output && id(item) == *call);
        if !answered {
            return Err(ApiError::InvalidRequest {
                message: format!("No tool output found for function call {call}."),
                param: Some("input".into()),
                code: None,
            });
        }
    }
    Ok(())
}
