//! Gemini's `generateContent` JSON read into a `ChatRequest`. Field names are Gemini's:
//! `contents` of `parts` (`text`, `inlineData`, `fileData`, `functionCall`,
//! `functionResponse`), `systemInstruction`, `tools[].functionDeclarations` (OpenAPI-subset
//! schemas, converted to JSON Schema here), `toolConfig.functionCallingConfig`,
//! `generationConfig`. The model and whether it streams come from the path.

use serde_json::{Map, Value, json};

use crate::api::family::Target;
use crate::chat::{ChatRequest, Image, Message, OutputFormat, PriorCall, ToolChoice, ToolSpec};
use crate::error::ApiError;

/// A parsed request: the neutral part, and what the reply needs.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) chat: ChatRequest,
    pub(crate) stream: bool,
    /// Hosted tools (`googleSearch`, `codeExecution`, …) left out, by kind.
    pub(crate) hosted: Vec<String>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid(message, None)
}

/// `models/NAME` or `NAME`, as the path or a body names a model.
pub(crate) fn model_name(name: &str) -> &str {
    name.strip_prefix("models/").unwrap_or(name)
}

pub(crate) fn from_wire(body: &Value, target: &Target) -> Result<Parsed, ApiError> {
    let Some(body) = body.as_object() else {
        return Err(invalid(
            "Invalid JSON payload received. The request body must be a JSON object.",
        ));
    };
    // `countTokens` may wrap a whole request.
    let body = match body.get("generateContentRequest") {
        Some(Value::Object(inner)) => inner,
        _ => body,
    };
    let mut chat =
        ChatRequest { model: model_name(&target.model).to_owned(), ..ChatRequest::default() };
    if let Some(system) = body.get("systemInstruction").or_else(|| body.get("system_instruction")) {
        let text = texts(system.get("parts"), "systemInstruction")?;
        if !text.is_empty() {
            chat.messages.push(Message::System(text));
        }
    }
    let contents = match body.get("contents") {
        Some(Value::Array(contents)) => contents.as_slice(),
        Some(Value::Object(_)) => std::slice::from_ref(&body["contents"]),
        None | Some(Value::Null) => &[],
        Some(_) => return Err(invalid("Invalid value at 'contents': expected a list of Content.")),
    };
    let mut open: Vec<PriorCall> = Vec::new();
    for (i, content) in contents.iter().enumerate() {
        content_of(i, content, &mut chat, &mut open)?;
    }
    if !chat.messages.iter().any(|m| !matches!(m, Message::System(_))) {
        return Err(invalid("* GenerateContentRequest.contents: contents is not specified"));
    }
    let mut hosted = Vec::new();
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return Err(invalid("Invalid value at 'tools': expected a list of Tool."));
        };
        for (i, tool) in tools.iter().enumerate() {
            let Some(tool) = tool.as_object() else {
                return Err(invalid(format!("Invalid value at 'tools[{i}]': expected a Tool.")));
            };
            for (kind, value) in tool {
                match kind.as_str() {
                    "functionDeclarations" | "function_declarations" => {
                        for (n, declaration) in value.as_array().into_iter().flatten().enumerate() {
                            chat.tools.push(declared(i, n, declaration)?);
                        }
                    }
                    other => hosted.push(other.to_owned()),
                }
            }
        }
    }
    chat.tool_choice =
        tool_choice(body.get("toolConfig").or_else(|| body.get("tool_config")), &chat.tools)?;
    if let Some(config) = body.get("generationConfig").or_else(|| body.get("generation_config")) {
        generation(config, &mut chat)?;
    }
    Ok(Parsed { chat, stream: target.stream, hosted })
}

/// The text of some parts, joined.
fn texts(parts: Option<&Value>, path: &str) -> Result<String, ApiError> {
    let mut text = String::new();
    for part in parts.and_then(Value::as_array).into_iter().flatten() {
        match part.get("text") {
            Some(Value::String(piece)) => text.push_str(piece),
            None => {}
            Some(_) => {
                return Err(invalid(format!(
                    "Invalid value at '{path}.parts.text': expected a string."
                )));
            }
        }
    }
    Ok(text)
}

/// One `Content`: a user turn (text, images, function responses) or a model turn (text,
/// function calls).
fn content_of(
    i: usize,
    content: &Value,
    chat: &mut ChatRequest,
    open: &mut Vec<PriorCall>,
) -> Result<(), ApiError> {
    let path = format!("contents[{i}]");
    let Some(parts) = content.get("parts").and_then(Value::as_array) else {
        return Err(invalid(format!("Invalid value at '{path}.parts': expected a list of Part.")));
    };
    let role = content.get("role").and_then(Value::as_str).unwrap_or("user");
    let model = match role {
        "user" | "function" | "tool" => false,
        "model" | "assistant" => true,
        other => {
            return Err(invalid(format!(
                "Please use a valid role: user, model. (`{other}` at '{path}.role')"
            )));
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    let mut images = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        let at = format!("{path}.parts[{n}]");
        // A thought the model wrote (Gemini sends thoughts back): not replayed.
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(piece) = part.get("text") {
            text.push_str(piece.as_str().ok_or_else(|| {
                invalid(format!("Invalid value at '{at}.text': expected a string."))
            })?);
        } else if let Some(call) = part.get("functionCall").or_else(|| part.get("function_call")) {
            let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(invalid(format!("'{at}.functionCall.name' is required.")));
            }
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}_{n}"), str::to_owned);
            let arguments = call
                .get("args")
                .filter(|a| !a.is_null())
                .map_or_else(|| "{}".to_owned(), Value::to_string);
            calls.push(PriorCall { id, name: name.to_owned(), arguments });
        } else if let Some(response) =
            part.get("functionResponse").or_else(|| part.get("function_response"))
        {
            let name = response.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let id = response.get("id").and_then(Value::as_str).map(str::to_owned);
            // By id, else the first open call of that name, else the first open call.
            let at = id
                .as_deref()
                .and_then(|id| open.iter().position(|c| c.id == id))
                .or_else(|| open.iter().position(|c| c.name == name))
                .or((!open.is_empty()).then_some(0));
            let call_id = match at {
                Some(at) => open.remove(at).id,
                None => id.unwrap_or_else(|| format!("call_{i}_{n}")),
            };
            let content = match response.get("response") {
                Some(Value::Object(object))
                    if object.len() == 1 && object.contains_key("output") =>
                {
                    match &object["output"] {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    }
                }
                Some(value) => value.to_string(),
                None => String::new(),
            };
            let is_error = response.get("response").is_some_and(|r| r.get("error").is_some());
            results.push(Message::ToolResult { call_id, name: Some(name), content, is_error });
        } else if let Some(data) = part.get("inlineData").or_else(|| part.get("inline_data")) {
            let mime = data
                .get("mimeType")
                .or_else(|| data.get("mime_type"))
                .and_then(Value::as_str)
                .unwrap_or("image/png");
            let bytes = data.get("data").and_then(Value::as_str).unwrap_or_default();
            let image = format!("data:{mime};base64,{bytes}");
            images.push(if mime.starts_with("image/") {
                Image::picture(image)
            } else {
                Image { url: image, file: Some(String::new()) }
            });
        } else if let Some(file) = part.get("fileData").or_else(|| part.get("file_data")) {
            let uri = file
                .get("fileUri")
                .or_else(|| file.get("file_uri"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            images.push(Image::picture(uri));
        }
        // Other parts (`thoughtSignature`, `executableCode`, …) carry nothing for the upstream.
    }
    if model {
        open.clone_from(&calls);
        chat.messages.push(Message::Assistant { text, calls });
        return Ok(());
    }
    chat.messages.extend(results);
    if !text.is_empty() || !images.is_empty() {
        let index = chat.messages.len();
        chat.images.extend(images.into_iter().map(|image| (index, image)));
        chat.messages.push(Message::User(text));
    }
    Ok(())
}

fn declared(i: usize, n: usize, declaration: &Value) -> Result<ToolSpec, ApiError> {
    let path = format!("tools[{i}].functionDeclarations[{n}]");
    let name = declaration.get("name").and_then(Value::as_str).unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
    if !valid {
        return Err(invalid(format!(
            "Invalid function name at '{path}.name': it must start with a letter or an underscore and hold only a-z, A-Z, 0-9, underscores, dots, colons and dashes, at most 128 characters."
        )));
    }
    let parameters = match (declaration.get("parametersJsonSchema"), declaration.get("parameters"))
    {
        (Some(schema), _) if schema.is_object() => Some(schema.clone()),
        (_, Some(schema)) if schema.is_object() => Some(json_schema(schema)),
        _ => None,
    };
    Ok(ToolSpec {
        name: name.to_owned(),
        description: declaration.get("description").and_then(Value::as_str).map(str::to_owned),
        parameters,
        strict: false,
    })
}

/// Gemini's OpenAPI-subset `Schema` as JSON Schema: types lower-cased (`STRING` is
/// `string`), `nullable` a `null` alternative, `propertyOrdering` and `example` left out;
/// everything else (`enum`, `format`, `items`, `properties`, `required`, `anyOf`, bounds)
/// kept, at every depth.
pub(crate) fn json_schema(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else { return schema.clone() };
    let mut out = Map::new();
    for (key, value) in object {
        let value = match key.as_str() {
            "type" => match value.as_str() {
                Some(kind) => json!(kind.to_ascii_lowercase()),
                None => value.clone(),
            },
            "properties" | "$defs" | "definitions" => match value.as_object() {
                Some(properties) => Value::Object(
                    properties.iter().map(|(k, v)| (k.clone(), json_schema(v))).collect(),
                ),
                None => value.clone(),
            },
            "items" | "additionalProperties" | "not" => json_schema(value),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value.as_array() {
                Some(items) => Value::Array(items.iter().map(json_schema).collect()),
                None => value.clone(),
            },
            "nullable" | "propertyOrdering" | "example" => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if object.get("nullable").and_then(Value::as_bool) == Some(true) {
        if let Some(Value::String(kind)) = out.get("type").cloned() {
            out.insert("type".into(), json!([kind, "null"]));
        }
    }
    Value::Object(out)
}

fn tool_choice(config: Option<&Value>, tools: &[ToolSpec]) -> Result<ToolChoice, ApiError> {
    let Some(calling) = config
        .and_then(|c| c.get("functionCallingConfig").or_else(|| c.get("function_calling_config")))
    else {
        return Ok(ToolChoice::Auto);
    };
    let allowed: Vec<&str> = calling
        .get("allowedFunctionNames")
        .or_else(|| calling.get("allowed_function_names"))
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in &allowed {
        if !tools.iter().any(|tool| tool.name == *name) {
            return Err(invalid(format!(
                "Invalid value at 'toolConfig.functionCallingConfig.allowedFunctionNames': `{name}` is not a declared function."
            )));
        }
    }
    let mode = calling.get("mode").and_then(Value::as_str).unwrap_or("AUTO");
    Ok(match mode.to_ascii_uppercase().as_str() {
        "AUTO" | "MODE_UNSPECIFIED" | "VALIDATED" => ToolChoice::Auto,
        "NONE" => ToolChoice::None,
        "ANY" => match allowed.as_slice() {
            [one] => ToolChoice::Named((*one).to_owned()),
            _ => ToolChoice::Required,
        },
        other => {
            return Err(invalid(format!(
                "Invalid value at 'toolConfig.functionCallingConfig.mode' ({other}): use AUTO, ANY, NONE or VALIDATED."
            )));
        }
    })
}

/// `generationConfig`: sampling, length, stops, structured output, thoughts.
fn generation(config: &Value, chat: &mut ChatRequest) -> Result<(), ApiError> {
    let Some(config) = config.as_object() else {
        return Err(invalid("Invalid value at 'generationConfig': expected a GenerationConfig."));
    };
    let sampling = &mut chat.sampling;
    for (key, value) in config {
        let name = match key.as_str() {
            "temperature" => "temperature",
            "topP" | "top_p" => "top_p",
            "topK" | "top_k" => "top_k",
            "maxOutputTokens" | "max_output_tokens" => "max_tokens",
            "seed" => "seed",
            "presencePenalty" | "presence_penalty" => "presence_penalty",
            "frequencyPenalty" | "frequency_penalty" => "frequency_penalty",
            "stopSequences" | "stop_sequences" => {
                sampling.stop = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
                continue;
            }
            _ => continue,
        };
        if let (Some(slot), Value::Number(n)) = (sampling.slot(name), value) {
            *slot = Some(n.clone());
        } else if !value.is_null() {
            return Err(invalid(format!(
                "Invalid value at 'generationConfig.{key}': expected a number."
            )));
        }
    }
    let mime = config
        .get("responseMimeType")
        .or_else(|| config.get("response_mime_type"))
        .and_then(Value::as_str);
    let schema = match (
        config.get("responseJsonSchema"),
        config.get("responseSchema").or_else(|| config.get("response_schema")),
    ) {
        (Some(schema), _) if schema.is_object() => Some(schema.clone()),
        (_, Some(schema)) if schema.is_object() => Some(json_schema(schema)),
        _ => None,
    };
    if mime == Some("application/json") || schema.is_some() {
        chat.output = Some(OutputFormat { name: "response".into(), schema, strict: false });
    }
    if let Some(thinking) = config.get("thinkingConfig").or_else(|| config.get("thinking_config")) {
        chat.show_reasoning = thinking
            .get("includeThoughts")
            .or_else(|| thinking.get("include_thoughts"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target { model: "models/gemini-x".into(), stream: false, sse: false }
    }

    #[test]
    fn a_function_round_trip_reads_as_the_neutral_conversation() {
        let body = json!({
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris?"}, {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/"}}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "18"}}}]}],
            "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "OBJECT",
                "properties": {"city": {"type": "STRING", "nullable": true}}, "required": ["city"], "propertyOrdering": ["city"]}}]},
                {"googleSearch": {}}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
            "generationConfig": {"temperature": 0.1, "maxOutputTokens": 50, "responseMimeType": "application/json"}});
        let parsed = from_wire(&body, &target()).unwrap();
        let chat = &parsed.chat;
        assert_eq!(chat.model, "gemini-x");
        assert!(matches!(&chat.messages[0], Message::System(s) if s == "Be brief."));
        assert_eq!(chat.images, vec![(1, Image::picture("data:image/jpeg;base64,/9j/"))]);
        let Message::Assistant { calls, .. } = &chat.messages[2] else {
            panic!("{:?}", chat.messages)
        };
        assert!(
            matches!(&chat.messages[3], Message::ToolResult { call_id, content, .. } if *call_id == calls[0].id && content == "18")
        );
        assert_eq!(
            chat.tools[0].parameters,
            Some(
                json!({"type": "object", "properties": {"city": {"type": ["string", "null"]}}, "required": ["city"]})
            )
        );
        assert_eq!(chat.tool_choice, ToolChoice::Named("get_weather".into()));
        assert_eq!(parsed.hosted, ["googleSearch"]);
        assert!(chat.output.is_some());
        assert_eq!(chat.sampling.max_tokens, Some(50.into()));
    }

    #[test]
    fn bad_requests_are_refused_in_geminis_words() {
        let bad = [
            (json!({"contents": []}), "contents is not specified"),
            (json!({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}), "valid role"),
            (json!({"contents": "x"}), "'contents'"),
            (
                json!({"contents": [{"parts": [{"text": "x"}]}], "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["nope"]}}}),
                "`nope` is not a declared function",
            ),
        ];
        for (body, expected) in bad {
            let err = from_wire(&body, &target()).unwrap_err();
            assert!(err.message().contains(expected), "{expected}: {}", err.message());
        }
    }
}
