//! OpenAI Chat Completions JSON: the request read into a `ChatRequest` (`from_wire`), and
//! the response and chunk shapes written back. Field names are OpenAI's.

use serde_json::Value;

use crate::api::fields::{Fields, JsonType, Walker, fields, items};
use crate::chat::{
    ChatRequest, Image, Message, OutputFormat, PriorCall, ToolChoice, ToolListProblem, ToolSpec,
};
use crate::error::ApiError;
use crate::neutral::Sampling;

/// A parsed request: the neutral part and what only the encoder needs.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) chat: ChatRequest,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    /// The request used `functions`/`function_call`: answer with `function_call`.
    pub(crate) legacy: bool,
    /// The tools `tool_choice.allowed_tools` allows, when it narrowed the list.
    pub(crate) allowed: Option<Vec<String>>,
    /// The custom (freeform) tools: a call to one is answered with its raw `input`.
    pub(crate) custom: std::collections::HashSet<String>,
}

/// Sampling options passed to the upstream unchanged.
const SAMPLING: &[&str] = &[
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "top_k",
    "min_p",
    "repeat_penalty",
];

pub(crate) fn from_wire(body: &Value) -> Result<Parsed, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::invalid("The request body must be a JSON object.", None));
    };
    check_types(object)?;
    let model = match object.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                "Invalid type for 'model': expected a string.",
                Some("model"),
            ));
        }
        None => return Err(missing("model")),
    };
    let messages = match object.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid("[] is too short - 'messages'", Some("messages")));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "Invalid type for 'messages': expected an array.",
                Some("messages"),
            ));
        }
        None => return Err(missing("messages")),
    };
    let images = images(messages);
    let messages =
        messages.iter().enumerate().map(|(i, m)| message(i, m)).collect::<Result<Vec<_>, _>>()?;
    let messages = merge_assistant_turns(messages);
    validate_history(&messages)?;

    let mut legacy = false;
    let mut tools = match object.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => {
            tools.iter().enumerate().map(|(i, t)| tool(i, t)).collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "Invalid type for 'tools': expected an array.",
                Some("tools"),
            ));
        }
    };
    // Custom tools by name, and custom calls in the history (a custom call is answered as one).
    let mut custom: std::collections::HashSet<String> = items(object, "tools")
        .filter(|(_, t)| t.get("type").and_then(Value::as_str) == Some("custom"))
        .filter_map(|(_, t)| t.pointer("/custom/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    for (_, message) in items(object, "messages") {
        for (_, call) in message.as_object().map(|m| items(m, "tool_calls")).into_iter().flatten() {
            if call.get("type").and_then(Value::as_str) == Some("custom") {
                custom.extend(
                    call.pointer("/custom/name").and_then(Value::as_str).map(str::to_owned),
                );
            }
        }
    }
    if tools.is_empty() {
        if let Some(Value::Array(functions)) = object.get("functions") {
            legacy = !functions.is_empty();
            tools = functions
                .iter()
                .enumerate()
                .map(|(i, f)| function(&format!("functions[{i}]"), f))
                .collect::<Result<Vec<_>, _>>()?;
        }
    }
    if tools.is_empty() {
        // Tool history without `tools`: keep tool calling on for the tools seen before.
        tools = crate::chat::tools_from_history(&messages);
    }
    let param = if legacy { "functions" } else { "tools" };
    match crate::chat::check_tools(&tools) {
        Ok(()) => {}
        Err(ToolListProblem::Duplicate(name)) => {
            return Err(ApiError::invalid(
                format!(
                    "Invalid '{param}': function names must be unique, but '{name}' is declared more than once."
                ),
                Some(param),
            ));
        }
        Err(ToolListProblem::Empty) => {
            return Err(ApiError::invalid(
                "Invalid 'messages': a tool call in the conversation has an empty function name.",
                Some("messages"),
            ));
        }
    }
    let choice_value = if legacy { object.get("function_call") } else { object.get("tool_choice") };
    let tool_choice = tool_choice(choice_value, legacy, &tools)?;
    // `allowed_tools`: the model sees, and may call, only those tools.
    let mut narrowed = None;
    if let Some(allowed) =
        choice_value.and_then(|c| c.pointer("/allowed_tools/tools")).and_then(Value::as_array)
    {
        let names: Vec<&str> = allowed
            .iter()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.pointer("/custom/name"))
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
            })
            .collect();
        if let Some(unknown) = names.iter().find(|name| !tools.iter().any(|t| t.name == **name)) {
            return Err(ApiError::invalid(
                format!(
                    "Invalid value for 'tool_choice.allowed_tools.tools': function '{unknown}' is not one of the given tools."
                ),
                Some("tool_choice.allowed_tools.tools"),
            ));
        }
        tools.retain(|t| names.contains(&t.name.as_str()));
        narrowed = Some(tools.iter().map(|t| t.name.clone()).collect());
    }
    let parallel_tool_calls =
        !legacy && object.get("parallel_tool_calls").and_then(Value::as_bool).unwrap_or(true);
    let stream = object.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = stream
        && object
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    if let Some(n) = object.get("n").and_then(Value::as_i64) {
        if n < 1 {
            return Err(below_minimum("n", n));
        }
        if n > 1 {
            return Err(ApiError::invalid("Only n=1 is supported by this gateway.", Some("n")));
        }
    }
    for key in ["max_tokens", "max_completion_tokens"] {
        if let Some(n) = object.get(key).and_then(Value::as_i64).filter(|n| *n < 1) {
            return Err(below_minimum(key, n));
        }
    }
    let show_reasoning = asks_for_reasoning(object);
    let output = response_format(object.get("response_format"))?;
    let mut sampling = Sampling::default();
    for key in SAMPLING {
        if let (Some(slot), Some(Value::Number(n))) = (sampling.slot(key), object.get(*key)) {
            *slot = Some(n.clone());
        }
    }
    if sampling.max_tokens.is_none() {
        if let Some(Value::Number(n)) = object.get("max_completion_tokens") {
            sampling.max_tokens = Some(n.clone());
        }
    }
    sampling.stop = match object.get("stop") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(list)) => {
            list.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    };
    sampling.logit_bias = object.get("logit_bias").and_then(Value::as_object).cloned();
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
        stream,
        include_usage,
        legacy,
        allowed: narrowed,
        custom,
    })
}

/// A request body for a passthrough upstream with `allowed_tools` applied: only the allowed
/// tools, and `tool_choice` as the mode it gave (`auto` or `required`), which every
/// upstream that takes tools understands.
pub(crate) fn narrowed(mut body: Value, allowed: &[String], choice: &ToolChoice) -> Value {
    if let Some(tools) = body.get_mut("tools").and_then(Value::as_array_mut) {
        tools.retain(|tool| {
            tool.pointer("/function/name")
                .and_then(Value::as_str)
                .is_some_and(|name| allowed.iter().any(|a| a == name))
        });
    }
    let mode = if *choice == ToolChoice::Required { "required" } else { "auto" };
    body["tool_choice"] = Value::String(mode.to_owned());
    body
}

use JsonType::{
    Array as Arr, Boolean as Bool, Integer as Int, Number as Num, Object as Obj, String as Str,
};

/// Every request field OpenAI defines, with its types.
const REQUEST: Fields = fields![
    model: Str, messages: Arr, stream: Bool, stream_options: Obj, tools: Arr,
    tool_choice: Str | Obj, parallel_tool_calls: Bool, functions: Arr, function_call: Str | Obj,
    max_tokens: Int, max_completion_tokens: Int, temperature: Num, top_p: Num, n: Int,
    stop: Str | Arr, response_format: Obj, seed: Int, user: Str, logprobs: Bool, top_logprobs: Int,
    reasoning_effort: Str, modalities: Arr, store: Bool, metadata: Obj, prediction: Obj,
    service_tier: Str, verbosity: Str, web_search_options: Obj, prompt_cache_key: Str,
    safety_identifier: Str, presence_penalty: Num, frequency_penalty: Num, logit_bias: Obj,
    audio: Obj,
    // Not OpenAI's, but forwarded to the upstream with the sampling options.
    top_k: Int, min_p: Num, repeat_penalty: Num,
];
const STREAM_OPTIONS: Fields = fields![include_usage: Bool, include_obfuscation: Bool];
const MESSAGE: Fields = fields![
    role: Str, content: Str | Arr, name: Str, tool_calls: Arr, tool_call_id: Str,
    function_call: Obj, refusal: Str, audio: Obj,
];
const CONTENT_PART: Fields = fields![
    type: Str, text: Str, refusal: Str,
    // A bare URL string is accepted too, as before.
    image_url: Str | Obj, input_audio: Obj, file: Obj,
];
const TOOL_CALL: Fields = fields![id: Str, type: Str, function: Obj, custom: Obj];
const CALLED_CUSTOM: Fields = fields![name: Str, input: Str];
/// `arguments` may also be an object (some clients send it unencoded; it is accepted).
const CALLED_FUNCTION: Fields = fields![name: Str, arguments: Str | Obj];
const TOOL: Fields = fields![type: Str, function: Obj, custom: Obj];
const CUSTOM: Fields = fields![name: Str, description: Str, format: Obj];
const FUNCTION: Fields = fields![name: Str, description: Str, parameters: Obj, strict: Bool];
const TOOL_CHOICE: Fields = fields![type: Str, function: Obj, allowed_tools: Obj, custom: Obj];
const ALLOWED_TOOLS: Fields = fields![mode: Str, tools: Arr];
const NAMED: Fields = fields![name: Str];

/// The types of every field OpenAI defines, as OpenAI words a mistake:
/// `Invalid type for 'messages[0].content': expected …, but got … instead.`
const WALK: Walker = Walker { error: type_error };

fn check_types(body: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    WALK.fields("", body, REQUEST)?;
    WALK.inner("", body, "stream_options", STREAM_OPTIONS)?;
    for (i, message) in items(body, "messages") {
        let path = format!("messages[{i}]");
        let message = WALK.object(&path, message, MESSAGE)?;
        for (j, part) in items(message, "content").filter(|(_, part)| !part.is_string()) {
            WALK.object(&format!("{path}.content[{j}]"), part, CONTENT_PART)?;
        }
        for (j, call) in items(message, "tool_calls") {
            let path = format!("{path}.tool_calls[{j}]");
            let call = WALK.object(&path, call, TOOL_CALL)?;
            WALK.inner(&path, call, "function", CALLED_FUNCTION)?;
            WALK.inner(&path, call, "custom", CALLED_CUSTOM)?;
        }
        WALK.inner(&path, message, "function_call", CALLED_FUNCTION)?;
    }
    for (i, tool) in items(body, "tools") {
        let path = format!("tools[{i}]");
        let tool = WALK.object(&path, tool, TOOL)?;
        WALK.inner(&path, tool, "function", FUNCTION)?;
        WALK.inner(&path, tool, "custom", CUSTOM)?;
    }
    for (i, function) in items(body, "functions") {
        WALK.object(&format!("functions[{i}]"), function, FUNCTION)?;
    }
    if let Some(Value::Object(choice)) = body.get("tool_choice") {
        WALK.fields("tool_choice", choice, TOOL_CHOICE)?;
        WALK.inner("tool_choice", choice, "function", NAMED)?;
        WALK.inner("tool_choice", choice, "allowed_tools", ALLOWED_TOOLS)?;
    }
    WALK.inner("", body, "function_call", NAMED)?;
    Ok(())
}

pub(crate) fn type_error(path: &str, types: &[JsonType], value: &Value) -> ApiError {
    let name = |t: JsonType| match t {
        Str => "a string",
        Int => "an integer",
        Num => "a decimal",
        Bool => "a boolean",
        Arr => "an array",
        Obj => "an object",
    };
    let expected = match types {
        [one] => name(*one).to_owned(),
        many => {
            format!("one of {}", many.iter().map(|t| name(*t)).collect::<Vec<_>>().join(" or "))
        }
    };
    let got = JsonType::of(value).map_or("null", name);
    ApiError::InvalidRequest {
        message: format!("Invalid type for '{path}': expected {expected}, but got {got} instead."),
        param: Some(path.to_owned()),
        code: Some("invalid_type".into()),
    }
}

/// `response_format`: a JSON schema, any JSON object, or plain text (none).
pub(crate) fn response_format(value: Option<&Value>) -> Result<Option<OutputFormat>, ApiError> {
    let Some(format) = value.filter(|v| !v.is_null()) else { return Ok(None) };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => {
            Ok(Some(OutputFormat { name: "json_object".into(), schema: None, strict: false }))
        }
        Some("json_schema") => {
            let spec = format
                .get("json_schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| missing("response_format.json_schema"))?;
            Ok(Some(OutputFormat {
                name: spec.get("name").and_then(Value::as_str).unwrap_or("response").to_owned(),
                schema: Some(spec.get("schema").cloned().unwrap_or_else(|| serde_json::json!({}))),
                strict: spec.get("strict").and_then(Value::as_bool).unwrap_or(false),
            }))
        }
        Some(other) => Err(ApiError::invalid(
            format!(
                "Invalid value: '{other}'. Supported values are: 'text', 'json_object', and 'json_schema'."
            ),
            Some("response_format.type"),
        )),
        None => Err(missing("response_format.type")),
    }
}

/// Whether an OpenAI-compatible request asks for the model's reasoning, in any of the ways
/// clients do: `reasoning_effort` (OpenAI), `include_reasoning` (vLLM), `reasoning_format`
/// (llama.cpp), a `reasoning` object (OpenRouter).
fn asks_for_reasoning(object: &serde_json::Map<String, Value>) -> bool {
    let present = |key: &str| object.get(key).is_some_and(|v| !v.is_null());
    present("reasoning_effort")
        || object.get("include_reasoning").and_then(Value::as_bool) == Some(true)
        || object.get("reasoning_format").and_then(Value::as_str).is_some_and(|f| f != "none")
        || object.get("reasoning").is_some_and(|r| {
            r.is_object() && r.get("enabled").and_then(Value::as_bool) != Some(false)
        })
}

/// OpenAI's words for an integer below its minimum of 1.
pub(crate) fn below_minimum(param: &str, n: i64) -> ApiError {
    ApiError::InvalidRequest {
        message: format!(
            "Invalid '{param}': integer below minimum value. Expected a value >= 1, but got {n} instead."
        ),
        param: Some(param.to_owned()),
        code: Some("integer_below_min_value".into()),
    }
}

pub(crate) fn missing(param: &str) -> ApiError {
    ApiError::InvalidRequest {
        message: format!("Missing required parameter: '{param}'."),
        param: Some(param.to_owned()),
        code: Some("missing_required_parameter".into()),
    }
}

/// The image of a content part (`image_url`, or the Responses API's `input_image`): its URL,
/// an `http(s)` one or a `data:` one.
pub(crate) fn image_of_part(part: &Value) -> Option<Image> {
    fn text(value: Option<&Value>) -> Option<&str> {
        value.and_then(Value::as_str).filter(|t| !t.is_empty())
    }
    match part.get("type").and_then(Value::as_str)? {
        "image_url" | "input_image" => {
            let url = match part.get("image_url")? {
                Value::String(url) => url,
                value => value.get("url")?.as_str()?,
            };
            (!url.is_empty()).then(|| Image::picture(url))
        }
        // A file given by its contents (Chat Completions `file.file_data`, Responses
        // `file_data` or `file_url`); one given by a file id cannot be passed on.
        kind @ ("file" | "input_file") => {
            let fields = if kind == "file" { part.get("file")? } else { part };
            let url = text(fields.get("file_data")).or_else(|| text(fields.get("file_url")))?;
            let name = text(fields.get("filename")).unwrap_or_default();
            Some(Image { url: url.to_owned(), file: Some(name.to_owned()) })
        }
        _ => None,
    }
}

/// The images of the user and tool messages, each with the index its message has once
/// consecutive assistant messages are merged (`merge_assistant_turns`).
fn images(raw: &[Value]) -> Vec<(usize, Image)> {
    let mut out = Vec::new();
    let mut merged = 0;
    let mut previous = "";
    for (i, message) in raw.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "assistant" && previous == "assistant" {
            merged += 1;
        }
        previous = role;
        if let Some(Value::Array(parts)) = message.get("content") {
            if role == "user" || role == "tool" {
                out.extend(parts.iter().filter_map(image_of_part).map(|image| (i - merged, image)));
            }
        }
    }
    out
}

/// The text of a `content` field: a string, or the text parts of an array (audio and files as
/// placeholders the model can see; images go as images, `image_of_part`).
pub(crate) fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => crate::api::join_pieces(parts.iter().map(|part| {
            match part.get("type").and_then(Value::as_str) {
                Some("text") | Some("input_text") | Some("output_text") => {
                    part.get("text").and_then(Value::as_str).unwrap_or_default().to_owned()
                }
                Some("refusal") => {
                    part.get("refusal").and_then(Value::as_str).unwrap_or_default().to_owned()
                }
                Some("image_url") | Some("input_image") if image_of_part(part).is_some() => {
                    String::new()
                }
                Some("image_url") | Some("input_image") => "[image]".to_owned(),
                Some("input_audio") => "[audio]".to_owned(),
                // Passed on as a file (`image_of_part`).
                Some("file") | Some("input_file") if image_of_part(part).is_some() => String::new(),
                // A file by id: its name, when the part gives one, is all the model is shown.
                Some("file") | Some("input_file") => {
                    match part
                        .get("filename")
                        .or_else(|| part.pointer("/file/filename"))
                        .and_then(Value::as_str)
                        .filter(|name| !name.is_empty())
                    {
                        Some(name) => format!("[file: {name}]"),
                        None => "[file]".to_owned(),
                    }
                }
                _ => part.as_str().unwrap_or_default().to_owned(),
            }
        })),
        _ => String::new(),
    }
}

fn message(i: usize, value: &Value) -> Result<Message, ApiError> {
    let role = value.get("role").and_then(Value::as_str).ok_or_else(|| {
        ApiError::invalid(
            format!("Missing required parameter: 'messages[{i}].role'."),
            Some(&format!("messages[{i}].role")),
        )
    })?;
    let content = value.get("content");
    Ok(match role {
        "system" | "developer" => Message::System(text_of(content)),
        "user" => Message::User(text_of(content)),
        "assistant" => {
            let mut calls = Vec::new();
            if let Some(Value::Array(tool_calls)) = value.get("tool_calls") {
                for call in tool_calls {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                    if let Some(custom) = call.get("custom").filter(|_| call["type"] == "custom") {
                        // A custom call's raw input, as the tool's one argument.
                        let name = custom.get("name").and_then(Value::as_str).unwrap_or_default();
                        let input = custom.get("input").and_then(Value::as_str).unwrap_or_default();
                        let arguments = serde_json::json!({"input": input}).to_string();
                        calls.push(PriorCall { id, name: name.to_owned(), arguments });
                        continue;
                    }
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    let arguments = arguments_text(call.pointer("/function/arguments"));
                    calls.push(PriorCall { id, name, arguments });
                }
            }
            if let Some(call) = value.get("function_call").filter(|c| c.is_object()) {
                let name = call.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                calls.push(PriorCall {
                    id: format!("function_{name}"),
                    name,
                    arguments: arguments_text(call.get("arguments")),
                });
            }
            Message::Assistant { text: text_of(content), calls }
        }
        "tool" => Message::ToolResult {
            call_id: value
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: None,
            content: text_of(content),
            is_error: false,
        },
        "function" => {
            let name = value.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            Message::ToolResult {
                call_id: format!("function_{name}"),
                name: Some(name),
                content: text_of(content),
                is_error: false,
            }
        }
        other => {
            return Err(ApiError::invalid(
                format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                ),
                Some(&format!("messages[{i}].role")),
            ));
        }
    })
}

pub(crate) fn arguments_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => "{}".into(),
        Some(other) => other.to_string(),
    }
}

/// OpenAI's own checks on tool history, with its wording.
fn validate_history(messages: &[Message]) -> Result<(), ApiError> {
    let mut open: Vec<String> = Vec::new();
    let mut open_at = 0;
    for (i, message) in messages.iter().enumerate() {
        match message {
            Message::ToolResult { call_id, .. } if !call_id.starts_with("function_") => {
                if !open.iter().any(|id| id == call_id) {
                    return Err(ApiError::invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                        Some(&format!("messages.[{i}].role")),
                    ));
                }
                open.retain(|id| id != call_id);
            }
            Message::ToolResult { .. } => {}
            _ if !open.is_empty() => return Err(unanswered(&open, open_at)),
            _ => {}
        }
        if let Message::Assistant { calls, .. } = message {
            open = calls
                .iter()
                .filter(|c| !c.id.starts_with("function_"))
                .map(|c| c.id.clone())
                .collect();
            open_at = i;
        }
    }
    if !open.is_empty() {
        return Err(unanswered(&open, open_at));
    }
    Ok(())
}

/// Consecutive assistant messages as one: Codex's older chat wire sends a turn's tool calls
/// and its text as two (`assistant{tool_calls}`, `assistant{content}`, then the `tool`
/// messages). The history becomes text for the upstream anyway.
fn merge_assistant_turns(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        match (out.last_mut(), message) {
            (
                Some(Message::Assistant { text, calls }),
                Message::Assistant { text: more, calls: more_calls },
            ) => {
                if !more.is_empty() {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&more);
                }
                calls.extend(more_calls);
            }
            (_, message) => out.push(message),
        }
    }
    out
}

/// OpenAI's error for tool calls without results.
fn unanswered(open: &[String], at: usize) -> ApiError {
    ApiError::invalid(
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            open.join(", ")
        ),
        Some(&format!("messages.[{at}].role")),
    )
}

fn tool(i: usize, value: &Value) -> Result<ToolSpec, ApiError> {
    match value.get("type").and_then(Value::as_str) {
        Some("function") => {}
        // A freeform tool: one raw-text input, as on the Responses API.
        Some("custom") => {
            let Some(custom) = value.get("custom") else {
                return Err(missing(&format!("tools[{i}].custom")));
            };
            let name = custom.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(missing(&format!("tools[{i}].custom.name")));
            }
            let description = custom.get("description").and_then(Value::as_str);
            return Ok(ToolSpec {
                name: name.to_owned(),
                description: Some(crate::api::responses::tools::custom_description(description)),
                parameters: Some(crate::api::responses::tools::custom_parameters(
                    custom.get("format"),
                )),
                strict: false,
            });
        }
        Some(other) => {
            return Err(ApiError::invalid(
                format!(
                    "Tools of type '{other}' are not supported by this gateway; use 'function' or 'custom' tools."
                ),
                Some(&format!("tools[{i}].type")),
            ));
        }
        None => return Err(missing(&format!("tools[{i}].type"))),
    }
    let Some(function_value) = value.get("function") else {
        return Err(missing(&format!("tools[{i}].function")));
    };
    function(&format!("tools[{i}].function"), function_value)
}

pub(crate) fn function(path: &str, value: &Value) -> Result<ToolSpec, ApiError> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| missing(&format!("{path}.name")))?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(ApiError::invalid(
            format!(
                "Invalid '{path}.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            ),
            Some(&format!("{path}.name")),
        ));
    }
    Ok(ToolSpec {
        name: name.to_owned(),
        description: value.get("description").and_then(Value::as_str).map(str::to_owned),
        parameters: value.get("parameters").filter(|p| p.is_object()).cloned(),
        strict: value.get("strict").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn tool_choice(
    value: Option<&Value>,
    legacy: bool,
    tools: &[ToolSpec],
) -> Result<ToolChoice, ApiError> {
    let param = if legacy { "function_call" } else { "tool_choice" };
    let choice = match value {
        None | Some(Value::Null) => {
            if tools.is_empty() {
                ToolChoice::None
            } else {
                ToolChoice::Auto
            }
        }
        Some(Value::String(text)) => match text.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" if !legacy => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'none', 'auto', and 'required'."
                    ),
                    Some(param),
                ));
            }
        },
        Some(Value::Object(object)) => {
            let name = object
                .get("name")
                .or_else(|| object.get("function").and_then(|f| f.get("name")))
                .or_else(|| object.get("custom").and_then(|f| f.get("name")))
                .and_then(Value::as_str);
            match (object.get("type").and_then(Value::as_str), name) {
                (Some("allowed_tools"), _) => {
                    match object
                        .get("allowed_tools")
                        .and_then(|a| a.get("mode"))
                        .and_then(Value::as_str)
                    {
                        Some("required") => ToolChoice::Required,
                        _ => ToolChoice::Auto,
                    }
                }
                (_, Some(name)) => ToolChoice::Named(name.to_owned()),
                _ => {
                    return Err(ApiError::invalid(
                        format!("Invalid value for '{param}'."),
                        Some(param),
                    ));
                }
            }
        }
        Some(_) => {
            return Err(ApiError::invalid(format!("Invalid type for '{param}'."), Some(param)));
        }
    };
    if let ToolChoice::Named(name) = &choice {
        if !tools.iter().any(|t| &t.name == name) {
            return Err(ApiError::invalid(
                format!(
                    "Invalid value for '{param}': function '{name}' is not one of the given tools."
                ),
                Some(param),
            ));
        }
    }
    if choice != ToolChoice::None && choice != ToolChoice::Auto && tools.is_empty() {
        return Err(ApiError::invalid(
            format!(
                "Invalid value for '{param}': '{param}' is only allowed when 'tools' are specified."
            ),
            Some(param),
        ));
    }
    Ok(choice)
}

// ---- responses: `reply.rs` ----

pub(crate) use crate::api::openai::reply::*;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_history_without_tools_keeps_tools_on() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
        ]});
        let parsed = from_wire(&body).unwrap();
        assert_eq!(parsed.chat.tools.len(), 1);
        assert_eq!(parsed.chat.tool_choice, ToolChoice::Auto);
    }

    #[test]
    fn history_errors_use_openai_wording() {
        let body = json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]});
        let err = from_wire(&body).unwrap_err();
        assert!(err.message().contains("preceeding message with 'tool_calls'"));
        let body = json!({"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "next"}
        ]});
        let err = from_wire(&body).unwrap_err();
        assert!(err.message().contains("call_9"));
    }

    #[test]
    fn named_choice_must_be_a_tool() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "a"}}],
            "tool_choice": {"type": "function", "function": {"name": "b"}}});
        assert!(matches!(from_wire(&body), Err(ApiError::InvalidRequest { .. })));
    }
}
