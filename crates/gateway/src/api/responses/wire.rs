//! The Responses API request: `input` items into the pipeline's `ChatRequest` (`items.rs`),
//! tools flattened (`tools.rs`: custom tools take one raw-text input, namespaced tools get a
//! flat name that maps back), hosted tools left out, OpenAI-worded validation.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::items::*;
use super::tools::*;
use crate::api::fields::{Fields, JsonType, Walker, fields, items};
use crate::api::openai::wire::{image_of_part, missing, type_error};
use crate::chat::{ChatRequest, Message, ToolListProblem};
use crate::error::ApiError;
use crate::neutral::Sampling;

/// What kind of tool a flat name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    /// A function tool: the call's arguments are JSON.
    Function,
    /// A freeform tool: the call's one input is raw text (`custom_tool_call`).
    Custom,
    /// Codex's `tool_search` (`execution: "client"`), which the client runs itself: the model
    /// calls it as a function, the call goes out as a `tool_search_call`, and the tools its
    /// `tool_search_output` loads become callable.
    ToolSearch,
}

/// The tool a flat name (as the model sees it) stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolOrigin {
    pub(crate) kind: ToolKind,
    /// The namespace tool it came from, if any.
    pub(crate) namespace: Option<String>,
    /// Its name within that namespace (or its only name).
    pub(crate) name: String,
}

/// A parsed Responses request.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) chat: ChatRequest,
    pub(crate) stream: bool,
    /// Flat tool name → the tool it stands for.
    pub(crate) tools: BTreeMap<String, ToolOrigin>,
    /// Hosted tools that were left out of the prompt, by type.
    pub(crate) hosted: Vec<String>,
    /// What the response object echoes back of the request.
    pub(crate) echo: Echo,
}

/// The request fields a `Response` object repeats.
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    pub(crate) instructions: Value,
    pub(crate) tools: Value,
    pub(crate) tool_choice: Value,
    pub(crate) parallel_tool_calls: bool,
    pub(crate) max_output_tokens: Value,
    /// Echoed, not enforced: it limits calls to hosted tools, which the gateway never runs.
    pub(crate) max_tool_calls: Value,
    /// The tier the request asked for, if any.
    pub(crate) service_tier: Option<String>,
    pub(crate) temperature: Value,
    pub(crate) top_p: Value,
    pub(crate) store: bool,
    pub(crate) metadata: Value,
    pub(crate) text: Value,
    pub(crate) reasoning: Value,
    pub(crate) user: Value,
    /// The response this one follows (set once the store resolved it).
    pub(crate) previous_response_id: Value,
    /// The conversation it belongs to (`{"id": …}`, set once the store resolved it).
    pub(crate) conversation: Value,
}

/// The name the model calls Codex's `tool_search` by.
pub(super) const TOOL_SEARCH: &str = "tool_search";

/// Whether a `tool_search` tool or item is one the client runs (`execution: "client"`);
/// one the server would run is a hosted tool.
pub(super) fn is_client(value: &Value) -> bool {
    value.get("execution").and_then(Value::as_str) == Some("client")
}

/// The `service_tier` values the API knows.
pub(super) const SERVICE_TIERS: &[&str] = &["auto", "default", "flex", "scale", "priority"];

/// The separator of a namespace and a tool's name in the flat name the model sees.
pub(super) const NAMESPACE_SEPARATOR: &str = "__";

/// The tool types the gateway cannot run (the hosted ones, and those the client runs with a
/// protocol of its own): left out of the prompt, never a 400.
pub(super) fn is_hosted(kind: &str) -> bool {
    !matches!(kind, "function" | "custom" | "namespace")
}

use JsonType::{
    Array as Arr, Boolean as Bool, Integer as Int, Number as Num, Object as Obj, String as Str,
};

pub(super) const REQUEST: Fields = fields![
    model: Str, input: Str | Arr, instructions: Str, tools: Arr, tool_choice: Str | Obj,
    parallel_tool_calls: Bool, stream: Bool, store: Bool, previous_response_id: Str,
    conversation: Str | Obj, include: Arr, reasoning: Obj, text: Obj, max_output_tokens: Int,
    max_tool_calls: Int, temperature: Num, top_p: Num, truncation: Str, metadata: Obj,
    prompt_cache_key: Str, safety_identifier: Str, service_tier: Str, user: Str,
    stream_options: Obj, background: Bool,
];
pub(super) const ITEM: Fields = fields![
    type: Str, execution: Str, tools: Arr, role: Str, content: Str | Arr, call_id: Str, name: Str,
    namespace: Str, arguments: Str | Obj, input: Str, output: Str | Arr,
];
pub(super) const TOOL: Fields = fields![
    type: Str, execution: Str, name: Str, description: Str, parameters: Obj, strict: Bool,
    format: Obj, tools: Arr,
];
pub(super) const TOOL_CHOICE: Fields = fields![
    type: Str, name: Str, namespace: Str, mode: Str, tools: Arr,
];

pub(super) const WALK: Walker = Walker { error: type_error };

pub(super) fn check_types(body: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    WALK.fields("", body, REQUEST)?;
    if let Some(Value::Array(input)) = body.get("input") {
        for (i, item) in input.iter().enumerate() {
            WALK.object(&format!("input[{i}]"), item, ITEM)?;
        }
    }
    for (i, tool) in items(body, "tools") {
        let tool = WALK.object(&format!("tools[{i}]"), tool, TOOL)?;
        for (j, inner) in items(tool, "tools") {
            WALK.object(&format!("tools[{i}].tools[{j}]"), inner, TOOL)?;
        }
    }
    // The tools a `tool_search_output` item loads.
    if let Some(Value::Array(input)) = body.get("input") {
        for (i, item) in input.iter().enumerate() {
            let Value::Object(item) = item else { continue };
            for (j, tool) in items(item, "tools") {
                let tool = WALK.object(&format!("input[{i}].tools[{j}]"), tool, TOOL)?;
                for (k, inner) in items(tool, "tools") {
                    WALK.object(&format!("input[{i}].tools[{j}].tools[{k}]"), inner, TOOL)?;
                }
            }
        }
    }
    if let Some(Value::Object(choice)) = body.get("tool_choice") {
        WALK.fields("tool_choice", choice, TOOL_CHOICE)?;
        for (i, tool) in items(choice, "tools") {
            WALK.object(&format!("tool_choice.tools[{i}]"), tool, TOOL_CHOICE)?;
        }
    }
    Ok(())
}

pub(super) fn invalid(message: impl Into<String>, param: &str) -> ApiError {
    ApiError::invalid(message, Some(param))
}

pub(super) fn invalid_coded(message: impl Into<String>, param: &str, code: &str) -> ApiError {
    ApiError::InvalidRequest {
        message: message.into(),
        param: Some(param.to_owned()),
        code: Some(code.to_owned()),
    }
}

/// Reads a Responses request.
pub(crate) fn from_wire(body: &Value) -> Result<Parsed, ApiError> {
    let Value::Object(object) = body else {
        return Err(ApiError::invalid("The request body must be a JSON object.", None));
    };
    check_types(object)?;
    let model = match object.get("model").and_then(Value::as_str) {
        Some(model) if !model.is_empty() => model.to_owned(),
        _ => return Err(missing("model")),
    };
    if let Some(id) = object.get("previous_response_id").and_then(Value::as_str) {
        return Err(invalid_coded(
            format!(
                "Previous response with id '{id}' not found. This gateway keeps no responses (store.url = \"off\"): send the whole conversation in 'input' instead."
            ),
            "previous_response_id",
            "previous_response_not_found",
        ));
    }
    if object.get("conversation").is_some_and(|c| !c.is_null()) {
        return Err(invalid(
            "Conversations are not supported: this gateway keeps no state (store.url = \"off\"). Send the whole conversation in 'input' instead.",
            "conversation",
        ));
    }
    if object.get("background").and_then(Value::as_bool) == Some(true) {
        return Err(invalid(
            "Background responses are not supported: this gateway keeps no state. Send the request without 'background'.",
            "background",
        ));
    }

    let mut tools = Vec::new();
    let mut origins = BTreeMap::new();
    let mut hosted = Vec::new();
    for (i, tool) in items(object, "tools") {
        read_tool(&format!("tools[{i}]"), tool, None, &mut tools, &mut origins, &mut hosted)?;
    }
    if let Some(Value::Array(input)) = object.get("input") {
        loaded_tools(input, &mut tools, &mut origins, &mut hosted)?;
    }

    let mut messages = Vec::new();
    let mut images = Vec::new();
    if let Some(instructions) = object.get("instructions").and_then(Value::as_str) {
        if !instructions.is_empty() {
            messages.push(Message::System(instructions.to_owned()));
        }
    }
    match object.get("input") {
        Some(Value::String(text)) => messages.push(Message::User(text.clone())),
        Some(Value::Array(input)) => {
            for (i, item) in input.iter().enumerate() {
                let before = messages.len();
                read_item(i, item, &origins, &mut messages)?;
                // The images of a user message or a tool's output go with the message it
                // became.
                let parts = item.get("content").or_else(|| item.get("output"));
                if let (Some(Value::Array(parts)), true) = (parts, messages.len() > before) {
                    let at = messages.len() - 1;
                    let user = matches!(
                        messages.last(),
                        Some(Message::User(_) | Message::ToolResult { .. })
                    );
                    if user {
                        images.extend(
                            parts.iter().filter_map(image_of_part).map(|image| (at, image)),
                        );
                    }
                }
            }
            check_pairs(input)?;
        }
        _ => return Err(missing("input")),
    }
    if !messages.iter().any(|m| !matches!(m, Message::System(_))) {
        return Err(invalid("'input' must hold at least one message or item.", "input"));
    }

    // Tool history without tools: keep tool calling on for the tools seen before.
    if tools.is_empty() {
        tools = crate::chat::tools_from_history(&messages);
        for tool in &tools {
            origins.entry(tool.name.clone()).or_insert_with(|| ToolOrigin {
                kind: ToolKind::Function,
                namespace: None,
                name: tool.name.clone(),
            });
        }
    }
    match crate::chat::check_tools(&tools) {
        Ok(()) => {}
        Err(ToolListProblem::Duplicate(name)) => {
            return Err(invalid(
                format!(
                    "Invalid 'tools': tool names must be unique, but '{name}' is declared more than once."
                ),
                "tools",
            ));
        }
        Err(ToolListProblem::Empty) => {
            return Err(invalid(
                "Invalid 'input': a tool call in the conversation has an empty name.",
                "input",
            ));
        }
    }

    let (tool_choice, tools) = read_tool_choice(object.get("tool_choice"), tools, &origins)?;
    let parallel_tool_calls =
        object.get("parallel_tool_calls").and_then(Value::as_bool).unwrap_or(true);
    // Reasoning the parser finds is always a reasoning item here.
    let show_reasoning = true;
    let output = text_format(object.get("text").and_then(|t| t.get("format")))?;
    let mut sampling = Sampling::default();
    for (from, to) in
        [("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens")]
    {
        if let (Some(slot), Some(Value::Number(n))) = (sampling.slot(to), object.get(from)) {
            *slot = Some(n.clone());
        }
    }
    if let Some(n) = object.get("max_output_tokens").and_then(Value::as_i64) {
        if n < 1 {
            return Err(invalid(
                format!(
                    "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 1, but got {n} instead."
                ),
                "max_output_tokens",
            ));
        }
    }
    let service_tier = object.get("service_tier").and_then(Value::as_str);
    if let Some(tier) = service_tier {
        if !SERVICE_TIERS.contains(&tier) {
            return Err(invalid(
                format!(
                    "Invalid value: '{tier}'. Supported values are: 'auto', 'default', 'flex', 'scale', and 'priority'."
                ),
                "service_tier",
            ));
        }
    }
    let get = |key: &str| object.get(key).cloned().unwrap_or(Value::Null);
    let echo = Echo {
        instructions: get("instructions"),
        tools: echo_tools(object.get("tools")),
        tool_choice: object.get("tool_choice").cloned().unwrap_or_else(|| json!("auto")),
        parallel_tool_calls,
        max_output_tokens: get("max_output_tokens"),
        max_tool_calls: get("max_tool_calls"),
        service_tier: service_tier.map(str::to_owned),
        temperature: object.get("temperature").cloned().unwrap_or(json!(1.0)),
        top_p: object.get("top_p").cloned().unwrap_or(json!(1.0)),
        // As asked; when not asked, false: the gateway stores nothing.
        store: object.get("store").and_then(Value::as_bool).unwrap_or(false),
        metadata: object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        text: object.get("text").cloned().unwrap_or_else(|| json!({"format": {"type": "text"}})),
        reasoning: object
            .get("reasoning")
            .cloned()
            .unwrap_or_else(|| json!({"effort": null, "summary": null})),
        user: get("user"),
        previous_response_id: Value::Null,
        conversation: Value::Null,
    };
    Ok(Parsed {
        chat: ChatRequest {
            model,
            messages,
            tools,
            tool_choice,
            parallel_tool_calls,
            sampling,
            show_reasoning,
            cache_breakpoints: false,
            cache_key: object.get("prompt_cache_key").and_then(Value::as_str).map(str::to_owned),
            images,
            output,
        },
        stream: object.get("stream").and_then(Value::as_bool).unwrap_or(false),
        tools: origins,
        hosted,
        echo,
    })
}

/// `text.format`: a JSON schema (flat: `name`, `schema`, `strict`), any JSON object, or text.
pub(super) fn text_format(
    value: Option<&Value>,
) -> Result<Option<crate::chat::OutputFormat>, ApiError> {
    let Some(format) = value.filter(|v| !v.is_null()) else { return Ok(None) };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(crate::chat::OutputFormat {
            name: "json_object".into(),
            schema: None,
            strict: false,
        })),
        Some("json_schema") => Ok(Some(crate::chat::OutputFormat {
            name: format.get("name").and_then(Value::as_str).unwrap_or("response").to_owned(),
            schema: Some(
                format.get("schema").cloned().ok_or_else(|| missing("text.format.schema"))?,
            ),
            strict: format.get("strict").and_then(Value::as_bool).unwrap_or(false),
        })),
        Some(other) => Err(invalid(
            format!(
                "Invalid value: '{other}'. Supported values are: 'text', 'json_object', and 'json_schema'."
            ),
            "text.format.type",
        )),
        None => Err(missing("text.format.type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::ToolChoice;

    fn parse(body: Value) -> Result<Parsed, ApiError> {
        from_wire(&body)
    }

    #[test]
    fn codex_shaped_tools_are_flattened_and_hosted_ones_left_out() {
        let parsed = parse(json!({"model": "m", "input": "hi", "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}, "strict": false},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "namespace", "name": "multi_agent_v1", "description": "Agents.", "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
            {"type": "web_search", "external_web_access": false},
            {"type": "tool_search", "execution": "client"}]}))
        .unwrap();
        let names: Vec<&str> = parsed.chat.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["exec_command", "apply_patch", "multi_agent_v1__spawn_agent", "tool_search"]
        );
        assert_eq!(parsed.hosted, ["web_search"]);
        assert_eq!(parsed.tools["tool_search"].kind, ToolKind::ToolSearch);
        let origin = &parsed.tools["multi_agent_v1__spawn_agent"];
        assert_eq!(
            (origin.namespace.as_deref(), origin.name.as_str()),
            (Some("multi_agent_v1"), "spawn_agent")
        );
        assert_eq!(parsed.tools["apply_patch"].kind, ToolKind::Custom);
        let schema = parsed.chat.tools[1].parameters.as_ref().unwrap();
        assert!(
            schema["properties"]["input"]["description"]
                .as_str()
                .unwrap()
                .contains("lark grammar:\nstart: x")
        );
    }

    #[test]
    fn history_items_become_messages() {
        let parsed = parse(json!({"model": "m", "instructions": "Be brief.", "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"role": "user", "content": "Patch it."},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call", "call_id": "call_2", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "a.txt"}]}],
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"}]}))
        .unwrap();
        let m = &parsed.chat.messages;
        assert_eq!(m[0], Message::System("Be brief.".into()));
        assert_eq!(m[1], Message::System("Rules.".into()));
        assert_eq!(m[2], Message::User("Patch it.".into()));
        let Message::Assistant { calls, .. } = &m[3] else { panic!("{m:?}") };
        assert_eq!(calls.len(), 2, "consecutive calls make one assistant turn");
        assert_eq!(calls[0].arguments, r#"{"input":"*** Begin Patch"}"#);
        assert!(
            matches!(&m[4], Message::ToolResult { name: Some(n), content, .. } if n == "apply_patch" && content == "Done!")
        );
        assert!(matches!(&m[5], Message::ToolResult { content, .. } if content == "a.txt"));
    }

    #[test]
    fn stateful_features_and_unpaired_items_are_clear_400s() {
        let err = parse(json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}))
            .unwrap_err();
        assert!(
            matches!(&err, ApiError::InvalidRequest { code: Some(c), .. } if c == "previous_response_not_found"),
            "{err:?}"
        );
        assert!(parse(json!({"model": "m", "input": "hi", "conversation": "conv_1"})).is_err());
        let err = parse(json!({"model": "m", "input": [{"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{}"}]})).unwrap_err();
        assert_eq!(err.message(), "No tool output found for function call call_9.");
        let err = parse(json!({"model": "m", "input": [{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "call_8", "output": "x"}]})).unwrap_err();
        assert_eq!(
            err.message(),
            "No tool call found for function call output with call_id call_8."
        );
        let err = parse(json!({"model": "m", "input": "hi", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}})).unwrap_err();
        assert!(err.message().contains("hosted tool"), "{err:?}");
    }

    #[test]
    fn allowed_tools_narrow_the_list_and_set_the_mode() {
        let parsed = parse(json!({"model": "m", "input": "hi",
            "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}],
            "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "b"}]}}))
        .unwrap();
        assert_eq!(parsed.chat.tool_choice, ToolChoice::Required);
        assert_eq!(parsed.chat.tools.len(), 1);
        assert_eq!(parsed.chat.tools[0].name, "b");
    }

    fn choice_error(tools: Value, choice: Value) -> ApiError {
        parse(json!({"model": "m", "input": "hi", "tools": tools, "tool_choice": choice}))
            .unwrap_err()
    }

    #[test]
    fn allowed_tools_must_name_declared_tools_of_their_type() {
        let tools = json!([{"type": "function", "name": "a"}, {"type": "custom", "name": "patch"}, {"type": "web_search"}]);
        let err = choice_error(
            tools.clone(),
            json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "nope"}]}),
        );
        assert_eq!(
            err.message(),
            "Invalid value for 'tool_choice.tools': function 'nope' is not one of the given tools."
        );
        assert!(
            matches!(&err, ApiError::InvalidRequest { param: Some(p), .. } if p == "tool_choice.tools")
        );
        // Required, with nothing left to call: the same 400 as `required` without tools.
        let err = choice_error(
            tools.clone(),
            json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]}),
        );
        assert!(err.message().contains("requires 'tools'"), "{err:?}");
        let err = choice_error(
            tools.clone(),
            json!({"type": "allowed_tools", "mode": "sometimes", "tools": []}),
        );
        assert!(err.message().contains("'sometimes'"), "{err:?}");
        let err = choice_error(tools.clone(), json!({"type": "allowed_tools", "mode": "auto"}));
        assert_eq!(err.message(), "Missing required parameter: 'tool_choice.tools'.");
        // A custom tool named as a function, and a function named as a custom tool.
        let err = choice_error(
            tools.clone(),
            json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "patch"}]}),
        );
        assert!(err.message().contains("'patch' is a custom tool"), "{err:?}");
        let err = choice_error(tools.clone(), json!({"type": "custom", "name": "a"}));
        assert!(err.message().contains("'a' is a function tool"), "{err:?}");
        let err = choice_error(tools, json!({"type": "function", "name": "b"}));
        assert_eq!(err.message(), "Tool choice 'b' not found in 'tools' parameter.");
        // Auto with only hosted tools allowed: nothing to call, no error.
        let parsed = parse(json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "a"}, {"type": "web_search"}],
            "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]}}))
        .unwrap();
        assert_eq!((parsed.chat.tool_choice, parsed.chat.tools.len()), (ToolChoice::None, 0));
    }

    #[test]
    fn a_namespaced_tool_is_named_by_its_flat_name_its_own_or_with_its_namespace() {
        let tools = json!([
            {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn"}, {"type": "function", "name": "wait"}]},
            {"type": "namespace", "name": "jobs", "tools": [{"type": "function", "name": "wait"}]}]);
        let choose = |choice: Value| {
            parse(json!({"model": "m", "input": "hi", "tools": tools, "tool_choice": choice}))
                .map(|p| p.chat.tool_choice)
        };
        let named = |flat: &str| Ok(ToolChoice::Named(flat.to_owned()));
        assert_eq!(
            choose(json!({"type": "function", "name": "agents__spawn"})),
            named("agents__spawn")
        );
        assert_eq!(choose(json!({"type": "function", "name": "spawn"})), named("agents__spawn"));
        assert_eq!(
            choose(json!({"type": "function", "name": "wait", "namespace": "jobs"})),
            named("jobs__wait")
        );
        let err = choose(json!({"type": "function", "name": "wait"})).unwrap_err();
        assert!(
            err.message().contains("ambiguous") && err.message().contains("agents, jobs"),
            "{err:?}"
        );
    }

    #[test]
    fn echoed_fields_and_service_tiers() {
        let parsed = parse(
            json!({"model": "m", "input": "hi", "max_tool_calls": 2, "service_tier": "flex"}),
        )
        .unwrap();
        assert_eq!(parsed.echo.max_tool_calls, 2);
        assert_eq!(parsed.echo.service_tier.as_deref(), Some("flex"));
        assert!(!parsed.echo.store, "nothing is stored when store is not asked for");
        assert!(parse(json!({"model": "m", "input": "hi", "store": true})).unwrap().echo.store);
        let err = parse(json!({"model": "m", "input": "hi", "service_tier": "turbo"})).unwrap_err();
        assert!(
            matches!(&err, ApiError::InvalidRequest { param: Some(p), .. } if p == "service_tier")
        );
    }

    #[test]
    fn images_and_files_go_as_parts_and_those_by_id_are_placeholders_the_model_sees() {
        let parsed = parse(json!({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "Compare:"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            {"type": "input_image", "file_id": "file_2"},
            {"type": "input_file", "filename": "report.pdf", "file_data": "data:application/pdf;base64,AAAA"},
            {"type": "input_file", "file_id": "file_1"}]},
            {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [
                {"type": "input_image", "image_url": "https://example.com/shot.png"}]}]}))
        .unwrap();
        assert_eq!(
            parsed.chat.messages[0],
            Message::User("Compare:\n[image]\n[file]".into()),
            "an image or a file by file id cannot be passed on: it is named"
        );
        let urls: Vec<(usize, &str, Option<&str>)> = parsed
            .chat
            .images
            .iter()
            .map(|(at, image)| (*at, image.url.as_str(), image.file.as_deref()))
            .collect();
        assert_eq!(
            urls,
            [
                (0, "data:image/png;base64,AAAA", None),
                (0, "data:application/pdf;base64,AAAA", Some("report.pdf")),
                (2, "https://example.com/shot.png", None)
            ],
            "each with the message it came with"
        );
    }

    /// Codex's deferred tools: a `tool_search_call` and the `tool_search_output` that loads a
    /// namespace; the loaded tools are declared (once, when two searches load them), and the
    /// pair is history.
    #[test]
    fn tools_a_tool_search_loaded_are_declared() {
        let loaded = json!({"type": "tool_search_output", "id": "tso_1", "call_id": "call_ts", "status": "completed", "execution": "client",
            "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "close_agent", "parameters": {"type": "object", "properties": {"target": {"type": "string"}}}}]}]});
        let search = json!({"type": "tool_search_call", "id": "tsc_1", "call_id": "call_ts", "status": "completed", "execution": "client", "arguments": {"query": "agent"}});
        let (mut search2, mut loaded2) = (search.clone(), loaded.clone());
        search2["call_id"] = json!("call_ts2");
        loaded2["call_id"] = json!("call_ts2");
        let parsed = parse(json!({"model": "m", "input": [{"role": "user", "content": "Close it."}, search, loaded, search2, loaded2],
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "tool_search", "execution": "client", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]}))
        .unwrap();
        // Loaded twice, declared once.
        let names: Vec<&str> = parsed.chat.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["exec_command", "tool_search", "multi_agent_v1__close_agent"]);
        let origin = &parsed.tools["multi_agent_v1__close_agent"];
        assert_eq!(
            (origin.namespace.as_deref(), origin.kind),
            (Some("multi_agent_v1"), ToolKind::Function)
        );
        let Message::Assistant { calls, .. } = &parsed.chat.messages[1] else { panic!() };
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("tool_search", r#"{"query":"agent"}"#)
        );
        assert!(
            matches!(&parsed.chat.messages[2], Message::ToolResult { name: Some(n), content, .. }
            if n == "tool_search" && content.contains("multi_agent_v1__close_agent"))
        );
        // A search the server ran is a hosted tool's history: left out, not paired.
        let server = parse(json!({"model": "m", "input": [{"role": "user", "content": "hi"},
            {"type": "tool_search_call", "call_id": "call_s", "execution": "server", "arguments": {}}],
            "tools": [{"type": "tool_search"}]}))
        .unwrap();
        assert_eq!(server.hosted, ["tool_search"]);
        assert_eq!(server.chat.messages.len(), 1);
    }
}
