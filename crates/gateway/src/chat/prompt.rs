//! What the upstream sees in emulation mode: the tool contract in the system prompt, the
//! conversation with earlier calls and results rendered as text, and the correction that
//! goes with a retry.
//!
//! The contract asks for Hermes-style `<tool_call>` blocks, which most open models know.
//! Examples use placeholders, because small models copy concrete example values.

use std::ops::Range;

use serde_json::{Value, json};
use std::sync::Arc;

use toolshim_parse::{Config as ParseConfig, ReasoningCalls, Tool, ToolSet, WarningCode};

use crate::chat::types::{
    ChatRequest, Image, Message, OutputFormat, Retry, RetryReason, Settings, ToolChoice, ToolSpec,
};
use crate::config::CallFormat;
use crate::neutral::{Role, Turn, UpstreamRequest};

/// The request for the upstream: the system prompt with the tool contract, the
/// conversation as text turns, and, for a retry, the rejected reply and the correction.
pub(crate) fn render(
    req: &ChatRequest,
    settings: &Settings,
    retry: Option<&Retry>,
    native_format: bool,
    grammar: bool,
) -> UpstreamRequest {
    let format = settings.call_format;
    let (system, mut turns) = render_messages(req, format);
    if let Some(retry) = retry {
        if !retry.reply.trim().is_empty() {
            turns.push(Turn::text(Role::Assistant, retry.reply.clone()));
        }
        turns.push(Turn::text(Role::User, correction(req, retry, format)));
    }
    let mut sampling = req.sampling.clone();
    let stop = &mut sampling.stop;
    if shows_contract(req) && stop.len() < MAX_STOPS && !stop.iter().any(|s| s == RESULT_MARKER) {
        stop.push(RESULT_MARKER.to_owned());
    }
    // The upstream may enforce the format itself only when no tool call can be the reply.
    let response_format = req.output.clone().filter(|_| native_format && !shows_contract(req));
    // The grammar holds the reply to the contract; a reply that answers in a format instead
    // of calling is not in it, so not with one.
    let grammar = (grammar && shows_contract(req) && req.output.is_none())
        .then(|| {
            crate::chat::grammar::for_calls(
                &req.tools,
                &req.tool_choice,
                req.parallel_tool_calls,
                format,
            )
        })
        .flatten();
    UpstreamRequest {
        model: settings.upstream_model.clone(),
        system,
        turns,
        sampling,
        response_format,
        grammar,
        cache_breakpoints: req.cache_breakpoints,
        cache_key: req.cache_key.clone(),
        prefill: None,
    }
}

/// The system prompt's part on the answer's format.
fn format_contract(output: &OutputFormat, with_tools: bool) -> String {
    let when = if with_tools {
        "When you answer the user (rather than call a tool), your answer must be"
    } else {
        "Your answer must be"
    };
    match &output.schema {
        Some(schema) => format!(
            "# Answer format\n\n{when} a single JSON value that follows this JSON Schema, and nothing else: no prose, no code fence.\n<schema>\n{schema}\n</schema>"
        ),
        None => format!(
            "# Answer format\n\n{when} a single JSON object, and nothing else: no prose, no code fence."
        ),
    }
}

/// How a tool result begins in the prompt. It is a stop sequence too: small models go on after
/// their call and invent its result in this form, which must not reach the client. The
/// contract does not show it: shown there, a small model began its reply with it (a result
/// of a call it never made), and the stop sequence left the reply empty (issue 24: every
/// README example's first reply was empty and asked for again).
const RESULT_MARKER: &str = "Result of call";

/// OpenAI accepts at most this many stop sequences.
const MAX_STOPS: usize = 4;

/// The system prompt carries the tool contract.
fn shows_contract(req: &ChatRequest) -> bool {
    !req.tools.is_empty() && req.tool_choice != ToolChoice::None
}

/// An estimate of the prompt's tokens as the upstream will see it (about four characters a
/// token, plus a few per message), for usage reports before the upstream's own count arrives
/// and for `count_tokens`.
pub(crate) fn estimate_input_tokens(req: &ChatRequest, format: CallFormat) -> u64 {
    let (system, turns) = render_messages(req, format);
    estimate_tokens(&system, &turns)
}

/// The same estimate for a prompt as rendered (a retry's included), for the usage of an
/// attempt whose upstream reported none.
pub(crate) fn estimate_tokens(system: &str, turns: &[Turn]) -> u64 {
    let chars: usize =
        system.chars().count() + turns.iter().map(|t| t.text.chars().count()).sum::<usize>();
    let n_messages = turns.len() + usize::from(!system.is_empty());
    (chars as u64).div_ceil(4) + 4 * n_messages as u64
}

/// The conversation as a system text and plain text turns.
pub(crate) fn render_messages(req: &ChatRequest, format: CallFormat) -> (String, Vec<Turn>) {
    let mut system = String::new();
    for message in &req.messages {
        if let Message::System(text) = message {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(text);
        }
    }
    if let Some(output) = &req.output {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&format_contract(output, shows_contract(req)));
    }
    if shows_contract(req) {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&tool_contract(
            &req.tools,
            &req.tool_choice,
            req.parallel_tool_calls,
            format,
        ));
    }
    let mut out = Vec::new();
    // Consecutive tool results become one user message, which says what to do with them:
    // without that, small models repeat the call they see in the history instead of
    // answering. Every group says it, not only the last one, so that a turn's prompt is the
    // start of the next turn's (an upstream's prefix cache needs that).
    let next = next_step(&req.tools, &req.tool_choice);
    let mut results = String::new();
    // The images of the results: they go with the results' turn.
    let mut result_images = Vec::new();
    let flush = |results: &mut String, images: &mut Vec<Image>, out: &mut Vec<Turn>| {
        if !results.is_empty() {
            if let Some(next) = next {
                results.push_str("\n\n");
                results.push_str(next);
            }
            let (text, images) = (std::mem::take(results), std::mem::take(images));
            out.push(Turn { role: Role::User, text, images });
        }
    };
    for (i, message) in req.messages.iter().enumerate() {
        match message {
            Message::System(_) => {}
            Message::User(text) => {
                flush(&mut results, &mut result_images, &mut out);
                let images = req.images_of(i).cloned().collect();
                out.push(Turn { role: Role::User, text: text.clone(), images });
            }
            Message::Assistant { text, calls } => {
                flush(&mut results, &mut result_images, &mut out);
                let mut content = text.clone();
                for call in calls {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&render_call(format, &call.id, &call.name, &call.arguments));
                }
                out.push(Turn::text(Role::Assistant, content));
            }
            Message::ToolResult { call_id, name, content, is_error } => {
                if !results.is_empty() {
                    results.push_str("\n\n");
                }
                results.push_str(&render_result(req, call_id, name.as_deref(), content, *is_error));
                result_images.extend(req.images_of(i).cloned());
            }
        }
    }
    flush(&mut results, &mut result_images, &mut out);
    (system, out)
}

/// What the reply after the last tool results should do, as the prompt says it.
fn next_step(tools: &[ToolSpec], choice: &ToolChoice) -> Option<&'static str> {
    match choice {
        ToolChoice::Auto if !tools.is_empty() => Some(
            "Now answer the user in plain text using the results above, or call another tool if you \
             still need one.",
        ),
        ToolChoice::Auto | ToolChoice::None => {
            Some("Now answer the user in plain text using the results above.")
        }
        // The contract says a call must come.
        ToolChoice::Required | ToolChoice::Named(_) => None,
    }
}

/// A call in the same format the model is asked to write.
fn render_call(format: CallFormat, id: &str, name: &str, arguments: &str) -> String {
    let arguments = serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::String(arguments.to_owned()));
    match format {
        CallFormat::ToolCall | CallFormat::Auto => {
            let call = json!({"id": id, "name": name, "arguments": arguments});
            format!("<tool_call>\n{call}\n</tool_call>")
        }
        CallFormat::Json => json!({"id": id, "name": name, "arguments": arguments}).to_string(),
        CallFormat::Mistral => {
            let call = json!([{"name": name, "arguments": arguments, "id": id}]);
            format!("[TOOL_CALLS]{call}")
        }
        CallFormat::Llama => json!({"name": name, "parameters": arguments, "id": id}).to_string(),
        CallFormat::Xml => {
            let mut text =
                format!("<function_calls>\n<invoke name=\"{}\" id=\"{}\">\n", attr(name), attr(id));
            if let Value::Object(map) = &arguments {
                for (key, value) in map {
                    let value = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                    text.push_str(&format!(
                        "<parameter name=\"{}\">{value}</parameter>\n",
                        attr(key)
                    ));
                }
            }
            text.push_str("</invoke>\n</function_calls>");
            text
        }
        CallFormat::Qwen3Coder => {
            // Strings as they are, other values as JSON; the template shows no call ids.
            let mut text = format!("<tool_call>\n<function={name}>\n");
            if let Value::Object(map) = &arguments {
                for (key, value) in map {
                    let value = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                    text.push_str(&format!("<parameter={key}>\n{value}\n</parameter>\n"));
                }
            }
            text.push_str("</function>\n</tool_call>");
            text
        }
    }
}

fn attr(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;")
}

/// How each format is named and shown in the tool contract.
struct Syntax {
    /// "a <tool_call> block", …
    block: &'static str,
    /// The call template with placeholders.
    template: &'static str,
    /// How several calls go in one reply, when not as one block each.
    several: Option<&'static str>,
}

/// Each format's call template, with placeholders.
const TOOL_CALL_TEMPLATE: &str = "<tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {\"<argument name>\": \"<value taken from the user's request>\"}}\n</tool_call>";
const JSON_TEMPLATE: &str = "{\"name\": \"<tool name>\", \"arguments\": {\"<argument name>\": \"<value taken from the user's request>\"}}";
const XML_TEMPLATE: &str = "<function_calls>\n<invoke name=\"<tool name>\">\n<parameter name=\"<argument name>\"><value taken from the user's request></parameter>\n</invoke>\n</function_calls>";
const MISTRAL_TEMPLATE: &str = "[TOOL_CALLS][{\"name\": \"<tool name>\", \"arguments\": {\"<argument name>\": \"<value taken from the user's request>\"}}]";
const LLAMA_TEMPLATE: &str = "{\"name\": \"<tool name>\", \"parameters\": {\"<argument name>\": \"<value taken from the user's request>\"}}";
const QWEN3_CODER_TEMPLATE: &str = "<tool_call>\n<function=<tool name>>\n<parameter=<argument name>>\n<value taken from the user's request>\n</parameter>\n</function>\n</tool_call>";

fn syntax(format: CallFormat) -> Syntax {
    let (block, template, several) = match format {
        CallFormat::ToolCall | CallFormat::Auto => {
            ("a <tool_call> block", TOOL_CALL_TEMPLATE, None)
        }
        CallFormat::Json => ("a JSON object on a line of its own", JSON_TEMPLATE, None),
        CallFormat::Xml => ("a <function_calls> block", XML_TEMPLATE, None),
        CallFormat::Mistral => (
            "[TOOL_CALLS] and a JSON list",
            MISTRAL_TEMPLATE,
            Some("one [TOOL_CALLS] list with an object for each"),
        ),
        CallFormat::Llama => ("a JSON object on a line of its own", LLAMA_TEMPLATE, None),
        CallFormat::Qwen3Coder => ("a <tool_call> block", QWEN3_CODER_TEMPLATE, None),
    };
    Syntax { block, template, several }
}

/// A tool result, worded as the continuation of a call.
fn render_result(
    req: &ChatRequest,
    call_id: &str,
    name: Option<&str>,
    content: &str,
    is_error: bool,
) -> String {
    let name = name
        .map(str::to_owned)
        .or_else(|| call_name(req, call_id))
        .unwrap_or_else(|| "unknown tool".into());
    let content = neutralize(content.trim(), &req.tools);
    if is_error {
        format!(
            "Error from call {call_id} ({name}):\n{content}\nThe call failed; fix the arguments and try again, or answer without it."
        )
    } else if content.is_empty() {
        format!(
            "{RESULT_MARKER} {call_id} ({name}): (empty result; the call succeeded and returned nothing)"
        )
    } else {
        format!("{RESULT_MARKER} {call_id} ({name}):\n{content}")
    }
}

fn call_name(req: &ChatRequest, call_id: &str) -> Option<String> {
    req.messages.iter().find_map(|message| match message {
        Message::Assistant { calls, .. } => {
            calls.iter().find(|c| c.id == call_id).map(|c| c.name.clone())
        }
        _ => None,
    })
}

/// The parsers that find call syntax in history: every dialect and model-native format,
/// examples and calls inside reasoning included (quoted back by a model, they would lose the
/// context that made them harmless); once with any tool name, and once with the request's
/// tools, since some forms are calls only when they name a declared tool (a tool's name at
/// the start of an output, a call object with extra keys).
fn syntax_finders(tools: &[ToolSpec]) -> Vec<ParseConfig> {
    let mut any = ParseConfig::default();
    any.example_guard.enabled = false;
    any.reasoning_calls = ReasoningCalls::Allow;
    let declared = tools
        .iter()
        .map(|tool| Tool::new(tool.name.clone(), tool.parameters.clone()))
        .collect::<Vec<_>>();
    match ToolSet::new(declared) {
        Ok(set) if !tools.is_empty() => {
            let mut with_tools = any.clone();
            with_tools.tools = Some(Arc::new(set));
            vec![any, with_tools]
        }
        _ => vec![any],
    }
}

/// How often the finder runs over one text before the fallback.
const NEUTRALIZE_ROUNDS: usize = 8;

/// A zero-width space: breaks a marker for the parser, invisible to a reader.
const BREAK: char = '\u{200B}';

/// Keeps call syntax inside a tool result from reading as a call if the model quotes it back.
/// The parser itself finds every call and piece of call syntax, and a zero-width space goes
/// after the first character of each; that repeats until the parser finds nothing (a fenced
/// call may hold a bare one). If that has not happened after `NEUTRALIZE_ROUNDS`, the
/// brackets and bars of what is still found become their full-width look-alikes.
pub(crate) fn neutralize(text: &str, tools: &[ToolSpec]) -> String {
    let finders = syntax_finders(tools);
    let mut text = text.to_owned();
    for round in 0..=NEUTRALIZE_ROUNDS {
        let mut starts: Vec<Range<usize>> = Vec::new();
        for config in &finders {
            let parsed = toolshim_parse::parse(&text, config);
            starts.extend(
                parsed
                    .calls
                    .iter()
                    .map(|c| c.span.clone())
                    .chain(parsed.rejected.iter().map(|r| r.span.clone()))
                    .chain(
                        parsed
                            .warnings
                            .iter()
                            .filter(|w| is_syntax(w.code))
                            .map(|w| w.span.clone()),
                    )
                    .filter(|span| !span.is_empty()),
            );
        }
        if starts.is_empty() {
            return text;
        }
        starts.sort_by_key(|span| span.start);
        starts.dedup_by_key(|span| span.start);
        if round == NEUTRALIZE_ROUNDS {
            return defang(&text, &starts);
        }
        for span in starts.iter().rev() {
            let Some(first) = text.get(span.start..).and_then(|rest| rest.chars().next()) else {
                continue;
            };
            let mut at = span.start + first.len_utf8();
            // Already broken there (a call that starts with the break): break the next
            // character instead, so every round changes the text.
            while text.get(at..).is_some_and(|rest| rest.starts_with(BREAK)) {
                at += BREAK.len_utf8();
                match text.get(at..).and_then(|rest| rest.chars().next()) {
                    Some(next) => at += next.len_utf8(),
                    None => break,
                }
            }
            if text.is_char_boundary(at) {
                text.insert(at, BREAK);
            }
        }
    }
    text
}

/// Whether a warning marks tool syntax (a call that could not be used, or one the guard or
/// a limit stopped) rather than a repair inside an accepted call.
fn is_syntax(code: WarningCode) -> bool {
    matches!(
        code,
        WarningCode::MalformedCall
            | WarningCode::InvalidArguments
            | WarningCode::Truncated
            | WarningCode::MissingEndMarker
            | WarningCode::Example
            | WarningCode::CallInReasoning
            | WarningCode::LimitReached
    )
}

/// The fallback: in each span, ASCII brackets, braces, bars and backticks become their
/// full-width forms, which no dialect reads.
fn defang(text: &str, spans: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut spans = spans.iter().peekable();
    for (at, c) in text.char_indices() {
        while spans.peek().is_some_and(|span| span.end <= at) {
            spans.next();
        }
        let inside = spans.peek().is_some_and(|span| span.contains(&at));
        out.push(match c {
            '<' if inside => '＜',
            '>' if inside => '＞',
            '[' if inside => '［',
            ']' if inside => '］',
            '{' if inside => '｛',
            '}' if inside => '｝',
            '|' if inside => '｜',
            '`' if inside => '｀',
            other => other,
        });
    }
    out
}

/// The tool section of the system prompt.
fn tool_contract(
    tools: &[ToolSpec],
    choice: &ToolChoice,
    parallel: bool,
    format: CallFormat,
) -> String {
    let syntax = syntax(format);
    let block = syntax.block;
    let mut text = String::from(
        "# Tools\n\nYou can call the following tools. Each is described by a JSON object with its name, \
         what it does, and a JSON Schema for its arguments.\n<tools>\n",
    );
    for tool in tools {
        let mut entry = serde_json::Map::new();
        entry.insert("name".into(), Value::String(tool.name.clone()));
        if let Some(description) = &tool.description {
            entry.insert("description".into(), Value::String(description.clone()));
        }
        entry.insert("parameters".into(), compact_schema(tool.parameters.as_ref()));
        text.push_str(&Value::Object(entry).to_string());
        text.push('\n');
    }
    text.push_str("</tools>\n\n");
    text.push_str(&format!(
        "To call a tool, write {block}, exactly in this form:\n{}\n\n\
         Rules:\n\
         - Use only the tool names listed above. The arguments must follow the tool's schema.\n\
         - When you call tools, write the calls and stop: the tools run, and their results come back to you \
         in the next message. Then continue: answer the user, or call another tool.\n",
        syntax.template
    ));
    if parallel {
        let several = syntax.several.map_or_else(|| format!("{block} each"), str::to_owned);
        text.push_str(&format!(
            "- Independent calls can go in one reply, {several}. When a call needs the result of another, \
             make the first call alone and wait for its result.\n"
        ));
    } else {
        text.push_str("- Call at most one tool per reply.\n");
    }
    match choice {
        ToolChoice::Required => text.push_str("- In this reply you must call at least one tool.\n"),
        ToolChoice::Named(name) => {
            text.push_str(&format!("- In this reply you must call the tool `{name}`.\n"));
        }
        ToolChoice::Auto | ToolChoice::None => text.push_str(&format!(
            "- Call a tool only when the request needs what it does (live data, or an action). When you can \
             answer from what you know (facts, arithmetic, writing, translation), answer in plain text, \
             without any call.\n\
             - Never say that you cannot use tools: you can, by writing {block}.\n"
        )),
    }
    text.push_str(
        "\nThe placeholders in <angle brackets> stand for real names and values; never copy them.",
    );
    text
}

/// The schema without the parts that only cost tokens (titles, `$schema`).
fn compact_schema(schema: Option<&Value>) -> Value {
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(key, _)| !matches!(key.as_str(), "title" | "$schema" | "examples"))
                    .map(|(key, value)| (key.clone(), strip(value)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    schema.map_or_else(|| json!({"type": "object", "properties": {}}), strip)
}

/// The stricter message that goes with a retry.
/// What a model is told when its call's arguments break the tool's schema (`faults`).
pub(crate) fn invalid_arguments(faults: &str) -> String {
    format!(
        "The arguments of your tool call do not fit the tool's parameters: {faults}. Call the tool again with arguments that fit: real values for the request, the parameters' exact names, nothing the schema does not declare."
    )
}

/// The correction of a reply whose only call names a tool that does not exist.
pub(crate) fn unknown_tool(req: &ChatRequest) -> String {
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    let fallback = match &req.tool_choice {
        ToolChoice::Auto | ToolChoice::None => {
            " If none of them fits the request, answer the user in your own words, without a tool."
        }
        ToolChoice::Required | ToolChoice::Named(_) => "",
    };
    format!(
        "Your reply called a tool that does not exist. The only tools are: {}.{fallback}",
        names.join(", ")
    )
}

fn correction(req: &ChatRequest, retry: &Retry, format: CallFormat) -> String {
    if retry.reason == RetryReason::InvalidOutput {
        let detail = retry.detail.as_deref().unwrap_or("it is not the JSON asked for");
        return format!(
            "Your answer does not have the required format: {detail}.\nWrite the answer again: only the JSON value the answer format asks for."
        );
    }
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    let syntax = syntax(format);
    let what = match retry.reason {
        RetryReason::InvalidOutput => String::new(),
        RetryReason::Refusal => {
            format!(
                "You said you cannot use tools, but you can: you call a tool by writing {}.",
                syntax.block
            )
        }
        RetryReason::MissingCall => match &req.tool_choice {
            ToolChoice::Named(name) => {
                format!("Your reply did not call the tool `{name}`, which this reply must call.")
            }
            _ => {
                "Your reply did not call a tool, and this reply must call at least one.".to_owned()
            }
        },
        RetryReason::Malformed => {
            "Your tool call could not be read: write it exactly in the form below, with valid JSON \
             (each value written out: a number, not a sum or an expression such as 8 / 100)."
                .to_owned()
        }
        RetryReason::UnknownTool => unknown_tool(req),
        RetryReason::Truncated => {
            "Your reply was cut off in the middle of a tool call. Write the call again, shorter."
                .to_owned()
        }
        RetryReason::InvalidArguments => {
            invalid_arguments(retry.detail.as_deref().unwrap_or("they break its schema"))
        }
        RetryReason::GuessedArguments => {
            "Your tool call holds values that appear nowhere in the conversation: a call needs the values the user gave. If the request does not give them, or no tool fits it, answer the user in your own words, without a tool."
                .to_owned()
        }
        RetryReason::Empty => format!(
            "Your reply was empty. Tool results are never yours to write: call a tool by writing {}, or answer the user in your own words.",
            syntax.block
        ),
    };
    format!(
        "{what}\nReply again. The tools are: {}. To call one, write exactly:\n{}",
        names.join(", "),
        syntax.template
    )
}

#[cfg(test)]
#[path = "../../tests/it/common/corpus.rs"]
mod corpus;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::PriorCall;

    fn settings() -> Settings {
        Settings {
            upstream_model: "m".into(),
            call_format: CallFormat::ToolCall,
            max_retries: 1,
            reasoning_calls: crate::config::ReasoningCalls::Ignore,
            format_file: None,
            check_arguments: true,
            check_grounding: true,
            continue_calls: 8,
        }
    }

    /// The rendered conversation as the OpenAI wire writes it.
    fn openai_messages(req: &ChatRequest) -> Vec<Value> {
        let body =
            crate::upstream::openai::body(&render(req, &settings(), None, true, true), None, None);
        body["messages"].as_array().unwrap().clone()
    }

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages,
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: Some("Weather".into()),
                parameters: None,
                strict: false,
            }],
            ..ChatRequest::default()
        }
    }

    #[test]
    fn history_is_rendered_as_text_with_ids_and_names() {
        let req = request(vec![
            Message::User("Weather in Paris?".into()),
            Message::Assistant {
                text: String::new(),
                calls: vec![PriorCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                }],
            },
            Message::ToolResult {
                call_id: "call_1".into(),
                name: None,
                content: "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>".into(),
                is_error: false,
            },
        ]);
        let messages = openai_messages(&req);
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        let assistant = messages[2]["content"].as_str().unwrap();
        assert!(
            assistant.contains("<tool_call>")
                && assistant.contains("call_1")
                && assistant.contains("Paris")
        );
        let result = messages[3]["content"].as_str().unwrap();
        assert!(result.starts_with("Result of call call_1 (get_weather):"));
        let quoted = toolshim_parse::parse(result, &toolshim_parse::Config::default());
        assert!(quoted.calls.is_empty(), "call syntax in results is neutralized: {result}");
    }

    #[test]
    fn the_contract_does_not_show_the_result_marker() {
        // Shown there, a small model began its reply with a result it made up, and the
        // marker, a stop sequence, left the reply empty.
        let req = request(vec![Message::User("Weather in Paris?".into())]);
        let rendered = render(&req, &settings(), None, true, true);
        assert!(!rendered.system.contains(RESULT_MARKER), "{}", rendered.system);
        assert!(rendered.sampling.stop.iter().any(|s| s == RESULT_MARKER));
    }

    #[test]
    fn results_ask_for_the_answer_in_every_turn() {
        let call = PriorCall {
            id: "call_1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        let mut req = request(vec![
            Message::User("Weather in Paris?".into()),
            Message::Assistant { text: String::new(), calls: vec![call] },
            Message::ToolResult {
                call_id: "call_1".into(),
                name: None,
                content: "18C".into(),
                is_error: false,
            },
        ]);
        let last = |req: &ChatRequest| {
            let messages = openai_messages(req);
            messages.last().unwrap()["content"].as_str().unwrap().to_owned()
        };
        assert!(last(&req).ends_with("or call another tool if you still need one."));
        req.tool_choice = ToolChoice::Required;
        assert!(last(&req).ends_with("18C"), "a call must come: {}", last(&req));
        req.tool_choice = ToolChoice::Auto;
        req.messages.push(Message::Assistant { text: "18C in Paris.".into(), calls: vec![] });
        let messages = openai_messages(&req);
        let results = messages[3]["content"].as_str().unwrap();
        assert!(
            results.ends_with("or call another tool if you still need one."),
            "results earlier in the history keep what they said (a prefix cache needs it): {results}"
        );
    }

    #[test]
    fn result_marker_is_added_to_the_stop_sequences() {
        let stops = |stop: &[&str]| {
            let mut req = request(vec![Message::User("Hi".into())]);
            req.sampling.stop = stop.iter().map(|s| (*s).to_owned()).collect();
            render(&req, &settings(), None, true, true).sampling.stop
        };
        assert_eq!(stops(&[]), ["Result of call"]);
        assert_eq!(stops(&["END"]), ["END", "Result of call"]);
        assert_eq!(stops(&["END", "Result of call"]), ["END", "Result of call"]);
        assert_eq!(stops(&["a", "b", "c", "d"]), ["a", "b", "c", "d"], "the client's four stay");
        let mut req = request(vec![]);
        assert!(shows_contract(&req));
        req.tool_choice = ToolChoice::None;
        assert!(!shows_contract(&req));
    }

    #[test]
    fn contract_states_the_choice() {
        let text = tool_contract(
            &request(vec![]).tools,
            &ToolChoice::Named("get_weather".into()),
            false,
            CallFormat::ToolCall,
        );
        assert!(text.contains("must call the tool `get_weather`"));
        assert!(text.contains("at most one tool"));
    }

    #[test]
    fn every_format_renders_calls_the_parser_reads_back() {
        for format in [CallFormat::ToolCall, CallFormat::Json, CallFormat::Xml] {
            let text = render_call(format, "call_1", "get_weather", r#"{"city":"Paris","days":2}"#);
            let parsed = toolshim_parse::parse(&text, &toolshim_parse::Config::default());
            assert_eq!(parsed.calls.len(), 1, "{format:?}: {text}");
            assert_eq!(parsed.calls[0].name, "get_weather");
            let args: Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap();
            assert_eq!(args["city"], "Paris", "{format:?}");
            assert!(parsed.content.trim().is_empty(), "{format:?}: {:?}", parsed.content);
            let contract = tool_contract(&request(vec![]).tools, &ToolChoice::Auto, true, format);
            assert!(contract.contains(syntax(format).template));
        }
    }

    /// Issue 14: call syntax of every dialect and model-native format in the corpus, put in
    /// a tool result, reads as no call at all once rendered into the prompt, even with the
    /// tools it names declared.
    #[test]
    fn issue_14_call_syntax_in_results_is_neutralized_in_every_dialect() {
        let cases = crate::chat::prompt::corpus::corpus_calls();
        assert!(cases.len() > 300, "{}", cases.len());
        let mut failures = Vec::new();
        for (path, body, names) in &cases {
            let specs: Vec<ToolSpec> = names
                .iter()
                .map(|n| ToolSpec {
                    name: n.clone(),
                    description: None,
                    parameters: None,
                    strict: false,
                })
                .collect();
            let neutral = neutralize(body, &specs);
            let tools = names.iter().map(|n| toolshim_parse::Tool::new(n.clone(), None)).collect();
            let set = toolshim_parse::ToolSet::new(tools).unwrap();
            let mut with_tools = toolshim_parse::Config::default();
            with_tools.tools = Some(std::sync::Arc::new(set.clone()));
            for config in [toolshim_parse::Config::default(), with_tools] {
                let parsed = toolshim_parse::parse(&neutral, &config);
                if !parsed.calls.is_empty() {
                    failures.push(format!(
                        "{path}: {:?}",
                        parsed.calls.iter().map(|c| &c.name).collect::<Vec<_>>()
                    ));
                }
            }
            let visible: String = neutral.chars().filter(|c| *c != BREAK).collect();
            if visible != *body && !neutral.contains('＜') && !neutral.contains('｛') {
                failures.push(format!("{path}: text changed beyond the breaks"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} cases:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
