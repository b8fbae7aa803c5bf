//! Ollama's `/api/chat` and `/api/generate` JSON read into a `ChatRequest`. Field names are
//! Ollama's: `messages` with `tool_calls` whose arguments are objects, `tool` results named by
//! `tool_name`, `images` as bare base64, `format` as `"json"` or a schema, `options`.

use serde_json::{Map, Value};

use crate::chat::{ChatRequest, Image, Message, OutputFormat, PriorCall, ToolSpec};
use crate::error::ApiError;

/// A parsed request: the neutral part, and what the reply needs.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) chat: ChatRequest,
    /// Ollama streams unless the request says `"stream": false`.
    pub(crate) stream: bool,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid(message, None)
}

fn object(body: &Value) -> Result<&Map<String, Value>, ApiError> {
    body.as_object().ok_or_else(|| invalid("the request body must be a JSON object"))
}

fn model(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => Ok(model.clone()),
        Some(Value::String(_)) | None => Err(invalid("model is required")),
        Some(_) => Err(invalid("model must be a string")),
    }
}

/// `/api/chat`.
pub(crate) fn chat(body: &Value) -> Result<Parsed, ApiError> {
    let body = object(body)?;
    let mut chat = ChatRequest { model: model(body)?, ..ChatRequest::default() };
    let messages = match body.get("messages") {
        Some(Value::Array(messages)) => messages.as_slice(),
        None | Some(Value::Null) => &[],
        Some(_) => return Err(invalid("messages must be an array of messages")),
    };
    let mut open: Vec<PriorCall> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            return Err(invalid(format!("messages[{i}] must be an object")));
        };
        let content = match message.get("content") {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(invalid(format!("messages[{i}].content must be a string"))),
        };
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        let read = match role {
            "system" => Message::System(content),
            "user" => {
                for image in images(message.get("images"), &format!("messages[{i}].images"))? {
                    chat.images.push((chat.messages.len(), image));
                }
                Message::User(content)
            }
            "assistant" => {
                let calls = prior_calls(message.get("tool_calls"), i, chat.messages.len())?;
                open.clone_from(&calls);
                Message::Assistant { text: content, calls }
            }
            "tool" => {
                let name = message
                    .get("tool_name")
                    .or_else(|| message.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                // Ollama names a result by its tool, not by a call id: it answers the first
                // open call of that name (else the first open call) of the last assistant turn.
                let at = open
                    .iter()
                    .position(|call| name.as_deref() == Some(call.name.as_str()))
                    .or((!open.is_empty()).then_some(0));
                let call_id = match at {
                    Some(at) => open.remove(at).id,
                    None => format!("call_{}_{i}", chat.messages.len()),
                };
                Message::ToolResult { call_id, name, content, is_error: false }
            }
            "" => return Err(invalid(format!("messages[{i}].role is required"))),
            other => {
                return Err(invalid(format!(
                    "messages[{i}].role: unknown role `{other}`; the roles are system, user, assistant and tool"
                )));
            }
        };
        chat.messages.push(read);
    }
    chat.tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, tool)| self::tool(i, tool))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(invalid("tools must be an array")),
    };
    common(body, &mut chat)?;
    Ok(Parsed { chat, stream: stream(body) })
}

/// `/api/generate`: `system` and `prompt` (with `images`) as a one-turn conversation.
pub(crate) fn generate(body: &Value) -> Result<Parsed, ApiError> {
    let body = object(body)?;
    let mut chat = ChatRequest { model: model(body)?, ..ChatRequest::default() };
    let text = |key: &str| match body.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        None | Some(Value::Null) => Ok(String::new()),
        Some(_) => Err(invalid(format!("{key} must be a string"))),
    };
    let system = text("system")?;
    if !system.is_empty() {
        chat.messages.push(Message::System(system));
    }
    for image in images(body.get("images"), "images")? {
        chat.images.push((chat.messages.len(), image));
    }
    chat.messages.push(Message::User(text("prompt")?));
    common(body, &mut chat)?;
    Ok(Parsed { chat, stream: stream(body) })
}

fn stream(body: &Map<String, Value>) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(true)
}

/// `format`, `options` and `think`, the same on both endpoints. `keep_alive` (how long
/// Ollama keeps a model loaded) means nothing to a gateway and is accepted.
fn common(body: &Map<String, Value>, chat: &mut ChatRequest) -> Result<(), ApiError> {
    chat.output = match body.get("format") {
        None | Some(Value::Null) => None,
        Some(Value::String(format)) if format.is_empty() => None,
        Some(Value::String(format)) if format == "json" => {
            Some(OutputFormat { name: "response".into(), schema: None, strict: false })
        }
        Some(Value::Object(schema)) => Some(OutputFormat {
            name: "response".into(),
            schema: Some(Value::Object(schema.clone())),
            strict: false,
        }),
        Some(_) => return Err(invalid("format must be \"json\" or a JSON schema object")),
    };
    chat.show_reasoning = match body.get("think") {
        Some(Value::Bool(think)) => *think,
        Some(Value::String(level)) => !level.is_empty(),
        _ => false,
    };
    match body.get("options") {
        None | Some(Value::Null) => {}
        Some(Value::Object(options)) => sampling(options, chat)?,
        Some(_) => return Err(invalid("options must be an object")),
    }
    Ok(())
}

/// Ollama's sampling options under the neutral names; its runtime options (`num_ctx`,
/// `num_gpu`, `num_thread`, …) tune a local runner and are accepted without effect.
fn sampling(options: &Map<String, Value>, chat: &mut ChatRequest) -> Result<(), ApiError> {
    let sampling = &mut chat.sampling;
    for (key, value) in options {
        let name = match key.as_str() {
            "num_predict" => "max_tokens",
            "stop" => {
                sampling.stop = match value {
                    Value::String(stop) => vec![stop.clone()],
                    Value::Array(stops) => {
                        stops.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                    }
                    _ => return Err(invalid("options.stop must be a string or an array")),
                };
                continue;
            }
            other => other,
        };
        let Some(slot) = sampling.slot(name) else { continue };
        match value {
            // `num_predict` of -1 (or -2) is "no limit": none is passed on.
            Value::Number(n) if name == "max_tokens" && n.as_i64().is_some_and(|n| n < 0) => {}
            Value::Number(n) => *slot = Some(n.clone()),
            Value::Null => {}
            _ => return Err(invalid(format!("options.{key} must be a number"))),
        }
    }
    Ok(())
}

fn tool(i: usize, tool: &Value) -> Result<ToolSpec, ApiError> {
    match tool.get("type").and_then(Value::as_str) {
        None | Some("function") => {}
        Some(other) => {
            return Err(invalid(format!(
                "tools[{i}].type: `{other}` is not supported; use function"
            )));
        }
    }
    let function =
        tool.get("function").ok_or_else(|| invalid(format!("tools[{i}].function is required")))?;
    crate::api::openai::wire::function(&format!("tools[{i}].function"), function)
        .map_err(|err| invalid(err.message()))
}

/// An assistant turn's `tool_calls` (arguments as objects, or JSON text), each given an id
/// the later `tool` messages are matched to.
fn prior_calls(value: Option<&Value>, i: usize, at: usize) -> Result<Vec<PriorCall>, ApiError> {
    let calls = array(value, || format!("messages[{i}].tool_calls must be an array"))?;
    calls
        .iter()
        .enumerate()
        .map(|(n, call)| {
            let function = call.get("function").unwrap_or(call);
            let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(invalid(format!(
                    "messages[{i}].tool_calls[{n}].function.name is required"
                )));
            }
            let arguments = match function.get("arguments") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(text)) => text.clone(),
                Some(value) => value.to_string(),
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{at}_{n}"), str::to_owned);
            Ok(PriorCall { id, name: name.to_owned(), arguments })
        })
        .collect()
}

/// An optional array field's items (none when it is absent or null); anything else is the
/// error `wrong` describes.
fn array(value: Option<&Value>, wrong: impl FnOnce() -> String) -> Result<&[Value], ApiError> {
    match value {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(wrong())),
    }
}

/// `images`: base64 data, without a `data:` prefix (the media type read from the data's
/// first bytes).
fn images(value: Option<&Value>, path: &str) -> Result<Vec<Image>, ApiError> {
    let images = array(value, || format!("{path} must be an array of base64 strings"))?;
    images
        .iter()
        .enumerate()
        .map(|(n, image)| match image.as_str() {
            Some(data) if data.starts_with("data:") => Ok(Image::picture(data)),
            Some(data) => Ok(Image::picture(format!("data:{};base64,{data}", media_type(data)))),
            None => Err(invalid(format!("{path}[{n}] must be a base64 string"))),
        })
        .collect()
}

/// The media type of base64 image data, from its magic bytes.
fn media_type(data: &str) -> &'static str {
    match data.as_bytes() {
        [b'/', b'9', b'j', ..] => "image/jpeg",
        [b'R', b'0', b'l', b'G', ..] => "image/gif",
        [b'U', b'k', b'l', b'G', ..] => "image/webp",
        _ => "image/png",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_round_trip_reads_as_the_neutral_conversation() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?", "images": ["iVBORw0KGgo="]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
            {"role": "tool", "content": "18", "tool_name": "get_weather"},
            {"role": "tool", "content": "24", "tool_name": "get_weather"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "format": {"type": "object"}, "options": {"temperature": 0.2, "num_predict": -1, "num_ctx": 4096, "stop": ["END"]},
            "keep_alive": "5m"});
        let parsed = chat(&body).unwrap();
        assert!(parsed.stream, "Ollama streams unless told not to");
        let messages = &parsed.chat.messages;
        let Message::Assistant { calls, .. } = &messages[1] else { panic!("{messages:?}") };
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        let ids: Vec<&str> = messages[2..]
            .iter()
            .map(|m| match m {
                Message::ToolResult { call_id, .. } => call_id.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, [calls[0].id.as_str(), calls[1].id.as_str()]);
        assert_eq!(parsed.chat.images[0].1.url, "data:image/png;base64,iVBORw0KGgo=");
        assert_eq!(
            parsed.chat.sampling.temperature,
            Some(serde_json::Number::from_f64(0.2).unwrap())
        );
        assert_eq!(parsed.chat.sampling.max_tokens, None);
        assert_eq!(parsed.chat.sampling.stop, ["END"]);
        assert!(parsed.chat.output.as_ref().is_some_and(|o| o.schema.is_some()));
    }

    #[test]
    fn bad_requests_say_what_is_wrong_in_ollamas_words() {
        let bad = [
            (json!({"messages": []}), "model is required"),
            (json!({"model": "m", "messages": {}}), "messages must be an array"),
            (
                json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
                "unknown role `robot`",
            ),
            (json!({"model": "m", "format": 3}), "format must be"),
            (
                json!({"model": "m", "options": {"temperature": "hot"}}),
                "options.temperature must be a number",
            ),
        ];
        for (body, expected) in bad {
            let err = chat(&body).unwrap_err();
            assert!(err.message().contains(expected), "{expected}: {}", err.message());
        }
    }
}
