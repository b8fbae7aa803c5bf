//! The Anthropic Messages wire with native tools: the neutral request as a Messages body that
//! declares its tools (`native` and `auto` modes toward an `anthropic` upstream). The reply's
//! `tool_use` blocks are read as calls by `anthropic::stream_event` with a `NativeCalls`.

use serde_json::{Map, Value, json};

use crate::neutral::{ChatRequest, Message, ToolChoice};
use crate::upstream::anthropic::{image_block, mark_cache, write_sampling};

/// `req` as a streaming Messages body for `model`, its tools declared: system messages as the
/// system text, earlier calls as `tool_use` blocks and their results as `tool_result`
/// blocks (an error result flagged `is_error`), images as image blocks where they came, and
/// consecutive messages of one role joined into one turn.
pub(crate) fn native_body(req: &ChatRequest, model: &str) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        let images = req.images_of(i).map(image_block);
        let (role, blocks): (&str, Vec<Value>) = match message {
            Message::System(text) => {
                system.push(text);
                continue;
            }
            Message::User(text) => ("user", text_block(text).into_iter().chain(images).collect()),
            Message::Assistant { text, calls } => {
                let uses = calls.iter().map(|call| {
                    json!({"type": "tool_use", "id": call.id, "name": call.name,
                        "input": input_of(&call.arguments)})
                });
                ("assistant", text_block(text).into_iter().chain(uses).collect())
            }
            Message::ToolResult { call_id, content, is_error, .. } => {
                let parts: Vec<Value> = text_block(content).into_iter().chain(images).collect();
                let mut block = json!({"type": "tool_result", "tool_use_id": call_id,
                    "content": parts});
                if *is_error {
                    block["is_error"] = Value::Bool(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, joined)) if *last == role => joined.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let max_tokens = req.sampling.max_tokens.as_ref().and_then(|n| n.as_u64()).unwrap_or(4096);
    let mut out = Map::new();
    out.insert("model".into(), Value::String(model.to_owned()));
    out.insert("max_tokens".into(), json!(max_tokens));
    out.insert("messages".into(), Value::Array(messages));
    out.insert("stream".into(), Value::Bool(true));
    if !system.is_empty() {
        out.insert("system".into(), Value::String(system.join("\n\n")));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|tool| {
                let mut declared = Map::new();
                declared.insert("name".into(), Value::String(tool.name.clone()));
                if let Some(description) = &tool.description {
                    declared.insert("description".into(), Value::String(description.clone()));
                }
                let schema = tool
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                declared.insert("input_schema".into(), schema);
                Value::Object(declared)
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
        let mut choice = match &req.tool_choice {
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
        };
        if !req.parallel_tool_calls && req.tool_choice != ToolChoice::None {
            choice["disable_parallel_tool_use"] = Value::Bool(true);
        }
        out.insert("tool_choice".into(), choice);
    }
    let mut out = Value::Object(out);
    write_sampling(&req.sampling, &mut out);
    if let Some(schema) = req.output.as_ref().and_then(|f| f.schema.as_ref()) {
        out["output_config"] = json!({"format": {"type": "json_schema", "schema": schema}});
    }
    if req.cache_breakpoints {
        mark_cache(&mut out);
    }
    out
}

/// The same request asking for an answer without calls: its tools stay declared (the
/// history's `tool_use` blocks need them) under `tool_choice: none`.
pub(crate) fn without_calls(body: &Value) -> Value {
    let mut body = body.clone();
    if body.get("tools").is_some() {
        body["tool_choice"] = json!({"type": "none"});
    }
    body
}

/// A text block, when there is text (Messages refuses empty text blocks).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A call's arguments as a `tool_use` block's `input`, which must be an object: the JSON
/// object they hold; anything else kept whole under `arguments`.
fn input_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({"arguments": arguments}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::neutral::{Image, PriorCall, ToolSpec};

    #[test]
    fn the_history_and_tools_in_messages_terms() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::System("Be brief.".into()),
                Message::User("Weather in Paris?".into()),
                Message::Assistant {
                    text: String::new(),
                    calls: vec![PriorCall {
                        id: "toolu_1".into(),
                        name: "get_weather".into(),
                        arguments: r#"{"city": "Paris"}"#.into(),
                    }],
                },
                Message::ToolResult {
                    call_id: "toolu_1".into(),
                    name: None,
                    content: "no such city".into(),
                    is_error: true,
                },
                Message::User("And this?".into()),
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: Some("Weather".into()),
                parameters: None,
                strict: false,
            }],
            tool_choice: ToolChoice::Required,
            parallel_tool_calls: false,
            images: vec![(4, Image::picture("https://example.com/a.png"))],
            ..ChatRequest::default()
        };
        let body = native_body(&req, "claude");
        assert_eq!(body["model"], "claude");
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(body["tool_choice"], json!({"type": "any", "disable_parallel_tool_use": true}));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{body:#}");
        assert_eq!(messages[1]["content"][0]["input"], json!({"city": "Paris"}));
        let user = &messages[2]["content"];
        assert_eq!(user[0]["type"], "tool_result");
        assert_eq!(user[0]["is_error"], true);
        assert_eq!(user[1]["text"], "And this?", "a result and the next question share a turn");
        assert_eq!(user[2]["source"]["url"], "https://example.com/a.png");
        assert_eq!(without_calls(&body)["tool_choice"], json!({"type": "none"}));
        assert_eq!(input_of("not json"), json!({"arguments": "not json"}));
    }
}
