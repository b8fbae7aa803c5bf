//! Anthropic Messages JSON: the request read into a `ChatRequest`, and the response shapes.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::api::fields::{Fields, JsonType, Walker, fields, items};
use crate::chat::{ChatRequest, Image, Message, PriorCall, ToolChoice, ToolSpec};
use crate::error::ApiError;
use crate::neutral::Sampling;

/// A parsed request: the neutral part and what only the encoder needs.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) chat: ChatRequest,
    pub(crate) stream: bool,
    /// The types of the server tools left out (`web_search_20250305`, …).
    pub(crate) server_tools: Vec<String>,
}

/// Whether the request marks any part of its prompt for caching (`cache_control` on the
/// system text, a tool, or a block of a message).
fn marks_cache(object: &serde_json::Map<String, Value>) -> bool {
    let marked = |value: &Value| value.get("cache_control").is_some_and(|c| !c.is_null());
    let blocks =
        |value: Option<&Value>| value.and_then(Value::as_array).into_iter().flatten().any(&marked);
    blocks(object.get("system"))
        || blocks(object.get("tools"))
        || object
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|message| blocks(message.get("content")))
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid(message, None)
}

/// `output_config.format` (or the older `output_format`): a JSON schema the answer must follow.
fn output_format(
    object: &serde_json::Map<String, Value>,
) -> Result<Option<crate::chat::OutputFormat>, ApiError> {
    let format = object
        .get("output_config")
        .and_then(|c| c.get("format"))
        .or_else(|| object.get("output_format"))
        .filter(|f| !f.is_null());
    let Some(format) = format else { return Ok(None) };
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => match format.get("schema").filter(|s| s.is_object()) {
            // Anthropic's structured outputs always follow the schema.
            Some(schema) => Ok(Some(crate::chat::OutputFormat {
                name: "output".into(),
                schema: Some(schema.clone()),
                strict: true,
            })),
            None => Err(invalid("output_config.format.schema: Field required")),
        },
        _ => Err(invalid("output_config.format.type: Input should be 'json_schema'")),
    }
}

/// The `error_code` of a request that used `thread` (in the error's `details`).
pub(crate) const THREAD_UNSUPPORTED: &str = "thread_unsupported_request";

/// Reads a Messages (or count_tokens) body; `max_tokens` is required unless `counting`.
pub(crate) fn from_wire(body: &Value, counting: bool) -> Result<Parsed, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(invalid("The request body must be a JSON object."));
    };
    check_types(object)?;
    let model = match object.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        _ => return Err(invalid("model: Field required")),
    };
    if object.get("thread").is_some_and(|t| !t.is_null()) {
        // Message threads keep state on the server; the SDK's tool runner then sends the
        // full history without `thread`.
        return Err(ApiError::InvalidRequest {
            message: "thread: this gateway keeps no state and cannot thread requests; send the full conversation without `thread`.".into(),
            param: Some("thread".into()),
            code: Some(THREAD_UNSUPPORTED.into()),
        });
    }
    let max_tokens = object.get("max_tokens");
    if !counting && !max_tokens.is_some_and(Value::is_i64) {
        return Err(invalid(if max_tokens.is_none() {
            "max_tokens: Field required"
        } else {
            "max_tokens: Input should be a valid integer"
        }));
    }
    if !counting && max_tokens.and_then(Value::as_i64).is_some_and(|n| n < 1) {
        return Err(invalid("max_tokens: Input should be greater than or equal to 1"));
    }
    let Some(Value::Array(raw_messages)) = object.get("messages") else {
        return Err(invalid("messages: Field required"));
    };
    if raw_messages.is_empty() {
        return Err(invalid("messages: List should have at least 1 item after validation, not 0"));
    }
    let mut messages = Vec::new();
    let mut images = Vec::new();
    match object.get("system") {
        None | Some(Value::Null) => {}
        Some(system) => messages.push(Message::System(text_of(system))),
    }
    for (i, message) in raw_messages.iter().enumerate() {
        let first = messages.len();
        read_message(i, message, &mut messages)?;
        // A message's images go with what it became: its text, or the tool result that
        // held them.
        if message.get("role").and_then(Value::as_str) == Some("user") {
            images_of_user(message.get("content"), first, &messages, &mut images);
        }
    }
    validate_history(raw_messages)?;

    let mut tools = Vec::new();
    // Server tools (Anthropic runs them: `web_search_20250305`, …) and Anthropic-defined
    // ones: (type, name). No upstream here runs them: they are left out, and counted.
    let mut server = Vec::new();
    if let Some(Value::Array(list)) = object.get("tools") {
        for (i, tool) in list.iter().enumerate() {
            match tool.get("type").and_then(Value::as_str) {
                Some(kind) if kind != "custom" => {
                    let name = tool.get("name").and_then(Value::as_str).unwrap_or(kind);
                    server.push((kind.to_owned(), name.to_owned()));
                }
                _ => tools.push(read_tool(i, tool)?),
            }
        }
    }
    if let Some(name) =
        object.get("tool_choice").and_then(|c| c.get("name")).and_then(Value::as_str)
    {
        if let Some((kind, _)) = server.iter().find(|(_, n)| n == name) {
            return Err(invalid(format!(
                "tool_choice.name: `{name}` is a server tool (`{kind}`), which this gateway cannot run; use auto, any or a custom tool"
            )));
        }
    }
    if tools.is_empty() {
        // Tool history without `tools`: keep tool calling on for the tools seen before.
        tools = crate::chat::tools_from_history(&messages);
    }
    match crate::chat::check_tools(&tools) {
        Ok(()) => {}
        Err(crate::chat::ToolListProblem::Duplicate(_)) => {
            return Err(invalid("tools: Tool names must be unique."));
        }
        Err(crate::chat::ToolListProblem::Empty) => {
            return Err(invalid(
                "messages: a `tool_use` block in the conversation has an empty name: String should have at least 1 character",
            ));
        }
    }
    let (tool_choice, parallel_tool_calls) = read_tool_choice(object.get("tool_choice"), &tools)?;
    let output = output_format(object)?;
    let show_reasoning = object
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|kind| kind != "disabled");
    let mut sampling = Sampling::default();
    for key in ["temperature", "top_p", "top_k", "max_tokens"] {
        if let (Some(slot), Some(Value::Number(n))) = (sampling.slot(key), object.get(key)) {
            *slot = Some(n.clone());
        }
    }
    if let Some(Value::Array(list)) = object.get("stop_sequences") {
        sampling.stop = list.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect();
    }
    Ok(Parsed {
        chat: ChatRequest {
            model,
            messages,
            tools,
            tool_choice,
            parallel_tool_calls,
            sampling,
            show_reasoning,
            cache_breakpoints: marks_cache(object),
            cache_key: None,
            images,
            output,
        },
        stream: object.get("stream").and_then(Value::as_bool).unwrap_or(false),
        server_tools: server.into_iter().map(|(kind, _)| kind).collect(),
    })
}

use JsonType::{
    Array as Arr, Boolean as Bool, Integer as Int, Number as Num, Object as Obj, String as Str,
};

/// Every request field the Messages API defines, with its types.
const REQUEST: Fields = fields![
    model: Str, max_tokens: Int, messages: Arr, system: Str | Arr, stream: Bool, temperature: Num,
    top_p: Num, top_k: Int, stop_sequences: Arr, tools: Arr, tool_choice: Obj, metadata: Obj,
    thinking: Obj, service_tier: Str, container: Str | Obj, context_management: Obj,
    output_config: Obj, inference_geo: Str, cache_control: Obj, mcp_servers: Arr,
];
const METADATA: Fields = fields![user_id: Str];
const MESSAGE: Fields = fields![role: Str, content: Str | Arr];
const BLOCK: Fields = fields![type: Str, cache_control: Obj];
/// `system` holds text blocks only, so their fields are not under a type tag.
const SYSTEM_BLOCK: Fields = fields![type: Str, text: Str, cache_control: Obj, citations: Arr];
const TOOL: Fields = fields![
    name: Str, description: Str, input_schema: Obj, type: Str, cache_control: Obj, strict: Bool,
];
const TOOL_CHOICE: Fields = fields![type: Str, name: Str, disable_parallel_tool_use: Bool];

/// The fields of a content block of one type.
fn block_fields(kind: &str) -> Fields {
    match kind {
        "text" => fields![text: Str, citations: Arr],
        "image" | "document" => fields![source: Obj],
        "tool_use" => fields![id: Str, name: Str, input: Obj],
        "tool_result" => fields![tool_use_id: Str, content: Str | Arr, is_error: Bool],
        "thinking" => fields![thinking: Str, signature: Str],
        "redacted_thinking" => fields![data: Str],
        _ => &[],
    }
}

/// The types of every field the API defines, worded like the API:
/// `messages.0.content.1.tool_use.input: Input should be a valid dictionary`.
const WALK: Walker = Walker { error: type_error };

fn check_types(body: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    WALK.fields("", body, REQUEST)?;
    if let Some(Value::Object(metadata)) = body.get("metadata") {
        WALK.fields("metadata", metadata, METADATA)?;
    }
    for (i, block) in items(body, "system") {
        WALK.object(&format!("system.{i}"), block, SYSTEM_BLOCK)?;
    }
    for (i, sequence) in items(body, "stop_sequences") {
        if !sequence.is_string() {
            return Err(type_error(&format!("stop_sequences.{i}"), &[Str], sequence));
        }
    }
    for (i, message) in items(body, "messages") {
        let path = format!("messages.{i}");
        let message = WALK.object(&path, message, MESSAGE)?;
        if let Some(Value::Array(content)) = message.get("content") {
            blocks(&format!("{path}.content"), content)?;
        }
    }
    for (i, tool) in items(body, "tools") {
        WALK.object(&format!("tools.{i}"), tool, TOOL)?;
    }
    if let Some(Value::Object(choice)) = body.get("tool_choice") {
        WALK.fields("tool_choice", choice, TOOL_CHOICE)?;
    }
    Ok(())
}

/// Content blocks: objects with a `type`, and the fields of that type (a tool result's
/// content blocks too).
fn blocks(path: &str, blocks: &[Value]) -> Result<(), ApiError> {
    for (j, block) in blocks.iter().enumerate() {
        let path = format!("{path}.{j}");
        let block = WALK.object(&path, block, BLOCK)?;
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
        let typed = format!("{path}.{kind}");
        WALK.fields(&typed, block, block_fields(kind))?;
        if let Some(Value::Array(content)) = block.get("content").filter(|_| kind == "tool_result")
        {
            self::blocks(&format!("{typed}.content"), content)?;
        }
    }
    Ok(())
}

/// `Input should be a valid …`, naming the last (the structured) of the allowed types.
fn type_error(path: &str, types: &[JsonType], _value: &Value) -> ApiError {
    let name = match types.last() {
        Some(Str) => "string",
        Some(Int) => "integer",
        Some(Num) => "number",
        Some(Bool) => "boolean",
        Some(Arr) => "list",
        Some(Obj) | None => "dictionary",
    };
    invalid(format!("{path}: Input should be a valid {name}"))
}

/// An `image` block's image: a `base64` source as a `data:` URL, a `url` source as it is.
fn image_of(block: &Value) -> Option<Image> {
    let file = match block.get("type").and_then(Value::as_str)? {
        "image" => None,
        "document" => {
            Some(block.get("title").and_then(Value::as_str).unwrap_or_default().to_owned())
        }
        _ => return None,
    };
    let source = block.get("source")?;
    let url = match source.get("type").and_then(Value::as_str)? {
        "base64" => format!(
            "data:{};base64,{}",
            source.get("media_type").and_then(Value::as_str)?,
            source.get("data").and_then(Value::as_str)?
        ),
        "url" => source.get("url").and_then(Value::as_str)?.to_owned(),
        _ => return None,
    };
    Some(Image { url, file })
}

/// The images of a user message's blocks, each with the index of the message it went to:
/// the tool result that held it (its results were read from `first` on, in order), or its
/// text (read last).
fn images_of_user(
    content: Option<&Value>,
    first: usize,
    messages: &[Message],
    out: &mut Vec<(usize, Image)>,
) {
    let Some(Value::Array(blocks)) = content else { return };
    let last = messages.len().saturating_sub(1);
    let mut results = first;
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_result") => {
                let inner = block.get("content").and_then(Value::as_array).into_iter().flatten();
                out.extend(inner.filter_map(image_of).map(|image| (results, image)));
                results += 1;
            }
            Some("image" | "document") => out.extend(image_of(block).map(|image| (last, image))),
            _ => {}
        }
    }
}

/// The text of a string or of an array of content blocks (images described in text).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => crate::api::join_pieces(blocks.iter().map(|block| {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned()
                }
                // Passed on as an image (`images_of_user`); one that cannot be is named.
                Some("image") if image_of(block).is_some() => String::new(),
                Some("image") => "[image]".to_owned(),
                // Passed on as a file (`image_of`); a plain-text document is its text.
                Some("document") if image_of(block).is_some() => String::new(),
                Some("document")
                    if block.pointer("/source/type").and_then(Value::as_str) == Some("text") =>
                {
                    block
                        .pointer("/source/data")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                }
                Some("document") => "[document]".to_owned(),
                Some("search_result") => block.get("content").map(text_of).unwrap_or_default(),
                _ => String::new(),
            }
        })),
        _ => String::new(),
    }
}

fn read_message(i: usize, value: &Value, out: &mut Vec<Message>) -> Result<(), ApiError> {
    let role = value.get("role").and_then(Value::as_str).unwrap_or_default();
    let content = value.get("content").cloned().unwrap_or(Value::Null);
    match role {
        "system" => out.push(Message::System(text_of(&content))),
        "user" => {
            let mut text_blocks = Vec::new();
            if let Value::Array(blocks) = &content {
                for block in blocks {
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        out.push(Message::ToolResult {
                            call_id: block
                                .get("tool_use_id")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            name: None,
                            content: block.get("content").map(text_of).unwrap_or_default(),
                            is_error: block
                                .get("is_error")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                        });
                    } else {
                        text_blocks.push(block.clone());
                    }
                }
                let images = text_blocks.iter().any(|b| image_of(b).is_some());
                let text = text_of(&Value::Array(text_blocks));
                if !text.is_empty() || images {
                    out.push(Message::User(text));
                }
            } else {
                out.push(Message::User(text_of(&content)));
            }
        }
        "assistant" => {
            let mut calls = Vec::new();
            let mut text_blocks = Vec::new();
            if let Value::Array(blocks) = &content {
                for (j, block) in blocks.iter().enumerate() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_use") => {
                            let input = block.get("input").cloned().unwrap_or(Value::Null);
                            if !input.is_object() {
                                return Err(invalid(format!(
                                    "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                                )));
                            }
                            calls.push(PriorCall {
                                id: block
                                    .get("id")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default()
                                    .to_owned(),
                                name: block
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default()
                                    .to_owned(),
                                arguments: input.to_string(),
                            });
                        }
                        Some("thinking" | "redacted_thinking") => {}
                        _ => text_blocks.push(block.clone()),
                    }
                }
            }
            let text = if content.is_string() {
                text_of(&content)
            } else {
                text_of(&Value::Array(text_blocks))
            };
            out.push(Message::Assistant { text, calls });
        }
        other => {
            return Err(invalid(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant', not '{other}'"
            )));
        }
    }
    Ok(())
}

/// The ids of a message's `tool_use` blocks.
fn tool_use_ids(message: Option<&Value>) -> Vec<&str> {
    let Some(Value::Array(blocks)) = message.and_then(|m| m.get("content")) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|b| b.get("id").and_then(Value::as_str))
        .collect()
}

/// Every `tool_use` must be answered by a `tool_result` in the next message, and every
/// `tool_result` must answer a `tool_use` of the message before (Anthropic's wording).
fn validate_history(messages: &[Value]) -> Result<(), ApiError> {
    for (i, message) in messages.iter().enumerate() {
        if message.get("role").and_then(Value::as_str) == Some("user") {
            let Some(Value::Array(blocks)) = message.get("content") else { continue };
            let previous = i.checked_sub(1).and_then(|p| messages.get(p));
            let asked = match previous {
                Some(m) if m.get("role").and_then(Value::as_str) == Some("assistant") => {
                    tool_use_ids(Some(m))
                }
                _ => Vec::new(),
            };
            for (j, block) in blocks.iter().enumerate() {
                if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let id = block.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
                if !asked.contains(&id) {
                    return Err(invalid(format!(
                        "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )));
                }
            }
            continue;
        }
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let ids = tool_use_ids(Some(message));
        if ids.is_empty() {
            continue;
        }
        let answered: Vec<&str> = match messages.get(i + 1).and_then(|m| m.get("content")) {
            Some(Value::Array(next)) => next
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .filter_map(|b| b.get("tool_use_id").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        };
        let missing: Vec<&str> = ids.iter().copied().filter(|id| !answered.contains(id)).collect();
        if !missing.is_empty() {
            return Err(invalid(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                i + 1,
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

fn read_tool(i: usize, value: &Value) -> Result<ToolSpec, ApiError> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("tools.{i}.name: Field required")))?;
    let valid = !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(invalid(format!(
            "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        )));
    }
    let Some(schema) = value.get("input_schema").filter(|s| s.is_object()) else {
        return Err(invalid(format!("tools.{i}.input_schema: Field required")));
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: value.get("description").and_then(Value::as_str).map(str::to_owned),
        parameters: Some(schema.clone()),
        strict: value.get("strict").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn read_tool_choice(
    value: Option<&Value>,
    tools: &[ToolSpec],
) -> Result<(ToolChoice, bool), ApiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok((if tools.is_empty() { ToolChoice::None } else { ToolChoice::Auto }, true));
    };
    let parallel =
        !value.get("disable_parallel_tool_use").and_then(Value::as_bool).unwrap_or(false);
    let choice = match value.get("type").and_then(Value::as_str) {
        Some("auto") => ToolChoice::Auto,
        Some("any") => ToolChoice::Required,
        Some("none") => ToolChoice::None,
        Some("tool") => {
            let name = value
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("tool_choice.name: Field required"))?;
            if !tools.iter().any(|t| t.name == name) {
                return Err(invalid(format!(
                    "tool_choice.name: tool `{name}` is not one of the given tools"
                )));
            }
            ToolChoice::Named(name.to_owned())
        }
        _ => {
            return Err(invalid(
                "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'",
            ));
        }
    };
    if matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) && tools.is_empty() {
        return Err(invalid("tool_choice: a tool choice other than auto or none needs tools"));
    }
    Ok((choice, parallel))
}

// ---- responses ----

#[derive(Debug, Serialize)]
pub(crate) struct MessageResponse {
    pub(crate) id: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) role: &'static str,
    pub(crate) model: String,
    pub(crate) content: Vec<Block>,
    pub(crate) stop_reason: Option<&'static str>,
    pub(crate) stop_sequence: Option<String>,
    pub(crate) usage: WireUsage,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block {
    Thinking { thinking: String, signature: String },
    Text { text: String },
    ToolUse { id: String, name: String, input: Box<RawValue> },
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct WireUsage {
    pub(crate) input_tokens: u64,
    pub(crate) cache_creation_input_tokens: u64,
    pub(crate) cache_read_input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) service_tier: &'static str,
}

/// Usage in Messages' terms: `input_tokens` are the prompt's tokens not read from the cache
/// (`prompt_tokens`, all of them, less `cached`).
pub(crate) fn usage(prompt_tokens: u64, cached: u64, output_tokens: u64) -> WireUsage {
    WireUsage {
        input_tokens: prompt_tokens.saturating_sub(cached),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached.min(prompt_tokens),
        output_tokens,
        service_tier: "standard",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_neutral_messages() {
        let body = json!({"model": "claude", "max_tokens": 100,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}], "is_error": true}]}
            ],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true}});
        let parsed = from_wire(&body, false).unwrap();
        assert_eq!(parsed.chat.messages[0], Message::System("Be brief.".into()));
        assert!(
            matches!(&parsed.chat.messages[3], Message::ToolResult { is_error: true, content, .. } if content == "18C")
        );
        assert_eq!(parsed.chat.tool_choice, ToolChoice::Required);
        assert!(!parsed.chat.parallel_tool_calls);
    }

    #[test]
    fn unanswered_tool_use_uses_anthropic_wording() {
        let body = json!({"model": "c", "max_tokens": 1, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}]},
            {"role": "user", "content": "next"}]});
        let err = from_wire(&body, false).unwrap_err();
        assert!(err.message().contains(
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_9"
        ));
    }

    #[test]
    fn tool_use_input_must_be_an_object() {
        let body = json!({"model": "c", "max_tokens": 1, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]});
        let err = from_wire(&body, false).unwrap_err();
        assert_eq!(
            err.message(),
            "messages.0.content.0.tool_use.input: Input should be a valid dictionary"
        );
    }
}
