//! The Responses API's tools: function, custom and namespaced tools flattened (custom tools
//! take one raw-text input, namespaced ones a flat name that maps back), hosted ones left out,
//! tools a tool search loaded, and `tool_choice`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::wire::*;
use crate::api::openai::wire::{function, missing};
use crate::chat::{ToolChoice, ToolSpec};
use crate::error::ApiError;

/// The request's tools as a Response echoes them: function tools with `strict` present.
pub(super) fn echo_tools(tools: Option<&Value>) -> Value {
    let Some(Value::Array(tools)) = tools else { return json!([]) };
    Value::Array(
        tools
            .iter()
            .map(|tool| {
                let mut tool = tool.clone();
                if tool.get("type").and_then(Value::as_str) == Some("function") {
                    if tool.get("strict").is_none() {
                        tool["strict"] = json!(true);
                    }
                    if tool.get("parameters").is_none() {
                        tool["parameters"] = Value::Null;
                    }
                }
                tool
            })
            .collect(),
    )
}

/// One entry of `tools`: a function or custom tool (under a namespace, when `namespace` is
/// given), a namespace of them, or a hosted tool (left out, counted).
pub(super) fn read_tool(
    path: &str,
    value: &Value,
    namespace: Option<(&str, &str)>,
    tools: &mut Vec<ToolSpec>,
    origins: &mut BTreeMap<String, ToolOrigin>,
    hosted: &mut Vec<String>,
) -> Result<(), ApiError> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| missing(&format!("{path}.type")))?;
    let flat = |name: &str| match namespace {
        Some((ns, _)) => format!("{ns}{NAMESPACE_SEPARATOR}{name}"),
        None => name.to_owned(),
    };
    let describe = |description: Option<String>| match namespace {
        Some((_, ns_description)) if !ns_description.is_empty() => {
            Some(format!("{ns_description} {}", description.unwrap_or_default()).trim().to_owned())
        }
        _ => description,
    };
    match kind {
        "function" => {
            let mut spec = function(path, value)?;
            let name = spec.name.clone();
            spec.name = flat(&name);
            spec.description = describe(spec.description);
            let origin = ToolOrigin {
                kind: ToolKind::Function,
                namespace: namespace.map(|(ns, _)| ns.to_owned()),
                name,
            };
            origins.insert(spec.name.clone(), origin);
            tools.push(spec);
        }
        "custom" => {
            let name = value
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(&format!("{path}.name")))?;
            if name.is_empty() {
                return Err(missing(&format!("{path}.name")));
            }
            let description = value.get("description").and_then(Value::as_str).map(str::to_owned);
            let spec = ToolSpec {
                name: flat(name),
                description: describe(Some(custom_description(description.as_deref()))),
                parameters: Some(custom_parameters(value.get("format"))),
                strict: false,
            };
            origins.insert(
                spec.name.clone(),
                ToolOrigin {
                    kind: ToolKind::Custom,
                    namespace: namespace.map(|(ns, _)| ns.to_owned()),
                    name: name.to_owned(),
                },
            );
            tools.push(spec);
        }
        "tool_search" if is_client(value) && namespace.is_none() => {
            let spec = ToolSpec {
                name: TOOL_SEARCH.to_owned(),
                description: Some(
                    value
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("Searches for more tools and makes the ones found callable.")
                        .to_owned(),
                ),
                parameters: Some(value.get("parameters").cloned().unwrap_or_else(|| {
                    json!({"type": "object", "properties": {"query": {"type": "string"},
                        "limit": {"type": "number"}}, "required": ["query"]})
                })),
                strict: false,
            };
            origins.insert(
                spec.name.clone(),
                ToolOrigin { kind: ToolKind::ToolSearch, namespace: None, name: spec.name.clone() },
            );
            tools.push(spec);
        }
        "namespace" if namespace.is_none() => {
            let name = value
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(&format!("{path}.name")))?;
            let description = value.get("description").and_then(Value::as_str).unwrap_or_default();
            for (j, inner) in
                value.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                read_tool(
                    &format!("{path}.tools[{j}]"),
                    inner,
                    Some((name, description)),
                    tools,
                    origins,
                    hosted,
                )?;
            }
        }
        other if is_hosted(other) => hosted.push(other.to_owned()),
        other => {
            return Err(invalid(
                format!(
                    "Invalid value: '{other}'. A namespace holds function and custom tools only."
                ),
                &format!("{path}.type"),
            ));
        }
    }
    Ok(())
}

/// The tools the history's `tool_search_output` items loaded (Codex's sub-agent and MCP
/// tools are deferred behind its `tool_search`): declared like those of `tools`, once each.
pub(super) fn loaded_tools(
    input: &[Value],
    tools: &mut Vec<ToolSpec>,
    origins: &mut BTreeMap<String, ToolOrigin>,
    hosted: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut loaded = Vec::new();
    let mut loaded_origins = BTreeMap::new();
    for (i, item) in input.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) != Some("tool_search_output")
            || !is_client(item)
        {
            continue;
        }
        for (j, tool) in
            item.get("tools").and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            let path = format!("input[{i}].tools[{j}]");
            read_tool(&path, tool, None, &mut loaded, &mut loaded_origins, hosted)?;
        }
    }
    for spec in loaded {
        if tools.iter().any(|t| t.name == spec.name) {
            continue;
        }
        if let Some(origin) = loaded_origins.remove(&spec.name) {
            origins.insert(spec.name.clone(), origin);
        }
        tools.push(spec);
    }
    Ok(())
}

/// How a freeform tool is described to a model that writes JSON calls.
pub(crate) fn custom_description(description: Option<&str>) -> String {
    let mut text = description.unwrap_or_default().trim().to_owned();
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(
        "(Freeform tool: put its whole input, exactly as the tool expects it, in the one string argument `input`.)",
    );
    text
}

/// The one-argument schema a freeform tool gets: `input`, a string, with its grammar.
pub(crate) fn custom_parameters(format: Option<&Value>) -> Value {
    let mut input =
        json!({"type": "string", "description": "The tool's whole input, as raw text."});
    if let Some(format) =
        format.filter(|f| f.get("type").and_then(Value::as_str) == Some("grammar"))
    {
        let syntax = format
            .pointer("/grammar/syntax")
            .or_else(|| format.get("syntax"))
            .and_then(Value::as_str)
            .unwrap_or("grammar");
        let definition = format
            .pointer("/grammar/definition")
            .or_else(|| format.get("definition"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !definition.is_empty() {
            input["description"] = json!(format!(
                "The tool's whole input, as raw text that follows this {syntax} grammar:\n{definition}"
            ));
        }
    }
    json!({"type": "object", "properties": {"input": input}, "required": ["input"]})
}

/// `tool_choice` in all its forms; `allowed_tools` narrows the tool list to its tools. Every
/// tool it names must be declared, with the type it is named with.
pub(super) fn read_tool_choice(
    value: Option<&Value>,
    tools: Vec<ToolSpec>,
    origins: &BTreeMap<String, ToolOrigin>,
) -> Result<(ToolChoice, Vec<ToolSpec>), ApiError> {
    let param = "tool_choice";
    let (choice, tools) = match value {
        None | Some(Value::Null) => {
            (if tools.is_empty() { ToolChoice::None } else { ToolChoice::Auto }, tools)
        }
        Some(Value::String(text)) => {
            let choice = match text.as_str() {
                "none" => ToolChoice::None,
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                other => {
                    return Err(invalid(
                        format!(
                            "Invalid value: '{other}'. Supported values are: 'none', 'auto', and 'required'."
                        ),
                        param,
                    ));
                }
            };
            (choice, tools)
        }
        Some(Value::Object(object)) => {
            let kind = object.get("type").and_then(Value::as_str).unwrap_or_default();
            match kind {
                "function" | "custom" => {
                    let flat = named(object, param, &tools, origins, |unknown| {
                        invalid(
                            format!("Tool choice '{unknown}' not found in 'tools' parameter."),
                            param,
                        )
                    })?;
                    (ToolChoice::Named(flat), tools)
                }
                "allowed_tools" => allowed_tools(object, tools, origins)?,
                hosted if is_hosted(hosted) && !hosted.is_empty() => {
                    return Err(invalid(
                        format!(
                            "Tool choice '{hosted}' forces a hosted tool, which this gateway cannot run; use 'auto' or name a function or custom tool."
                        ),
                        param,
                    ));
                }
                _ => return Err(invalid(format!("Invalid value for '{param}'."), param)),
            }
        }
        Some(_) => return Err(invalid(format!("Invalid type for '{param}'."), param)),
    };
    if matches!(choice, ToolChoice::Required | ToolChoice::Named(_)) && tools.is_empty() {
        return Err(invalid(
            format!(
                "Invalid value for '{param}': '{param}' requires 'tools' with at least one function or custom tool."
            ),
            param,
        ));
    }
    Ok((choice, tools))
}

/// `{"type": "allowed_tools", "mode", "tools"}`: the tool list narrowed to the tools it
/// names (hosted ones among them are left out, as in `tools`), and the mode.
pub(super) fn allowed_tools(
    object: &serde_json::Map<String, Value>,
    tools: Vec<ToolSpec>,
    origins: &BTreeMap<String, ToolOrigin>,
) -> Result<(ToolChoice, Vec<ToolSpec>), ApiError> {
    let mode = match object.get("mode").and_then(Value::as_str) {
        None | Some("auto") => ToolChoice::Auto,
        Some("required") => ToolChoice::Required,
        Some(other) => {
            return Err(invalid(
                format!("Invalid value: '{other}'. Supported values are: 'auto' and 'required'."),
                "tool_choice.mode",
            ));
        }
    };
    let Some(Value::Array(entries)) = object.get("tools") else {
        return Err(missing("tool_choice.tools"));
    };
    let mut allowed = Vec::new();
    for (j, entry) in entries.iter().enumerate() {
        let path = format!("tool_choice.tools[{j}]");
        let Value::Object(entry) = entry else { continue };
        match entry.get("type").and_then(Value::as_str) {
            Some(kind @ ("function" | "custom")) => {
                let flat = named(entry, &path, &tools, origins, |unknown| {
                    invalid(
                        format!(
                            "Invalid value for 'tool_choice.tools': {kind} '{unknown}' is not one of the given tools."
                        ),
                        "tool_choice.tools",
                    )
                })?;
                allowed.push(flat);
            }
            Some(kind) if is_hosted(kind) && !kind.is_empty() => {}
            Some(_) => return Err(invalid(format!("Invalid value for '{path}.type'."), &path)),
            None => return Err(missing(&format!("{path}.type"))),
        }
    }
    let tools: Vec<ToolSpec> = tools.into_iter().filter(|t| allowed.contains(&t.name)).collect();
    let mode = match mode {
        ToolChoice::Auto if tools.is_empty() => ToolChoice::None,
        mode => mode,
    };
    Ok((mode, tools))
}

/// The flat name of the tool `{"type", "name", "namespace"?}` names: the name itself, or a
/// namespaced tool's own name (with its `namespace`, or without when only one namespace
/// has it). A name no declared tool has is the error `unknown` makes of it; a tool of the
/// other type, or a name several namespaces share, is a 400 of its own.
pub(super) fn named(
    object: &serde_json::Map<String, Value>,
    path: &str,
    tools: &[ToolSpec],
    origins: &BTreeMap<String, ToolOrigin>,
    unknown: impl Fn(&str) -> ApiError,
) -> Result<String, ApiError> {
    let custom = object.get("type").and_then(Value::as_str) == Some("custom");
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| missing(&format!("{path}.name")))?;
    let namespace = object.get("namespace").and_then(Value::as_str);
    let declared = |flat: &str| tools.iter().any(|t| t.name == flat);
    let candidates: Vec<(&String, &ToolOrigin)> = origins
        .iter()
        .filter(|(flat, _)| declared(flat))
        .filter(|(flat, origin)| match namespace {
            Some(ns) => origin.namespace.as_deref() == Some(ns) && origin.name == name,
            None => *flat == name || origin.name == name,
        })
        .collect();
    let found = match candidates.iter().find(|(flat, _)| *flat == name) {
        Some(exact) => *exact,
        None => match candidates.as_slice() {
            [one] => *one,
            [] => return Err(unknown(name)),
            several => {
                let namespaces: Vec<&str> =
                    several.iter().filter_map(|(_, o)| o.namespace.as_deref()).collect();
                return Err(invalid(
                    format!(
                        "Tool choice '{name}' is ambiguous: the namespaces {} each have it; add 'namespace'.",
                        namespaces.join(", ")
                    ),
                    path,
                ));
            }
        },
    };
    let (flat, origin) = found;
    if (origin.kind == ToolKind::Custom) != custom {
        let (is, use_type) = match origin.kind {
            ToolKind::Function | ToolKind::ToolSearch => ("a function tool", "function"),
            ToolKind::Custom => ("a custom tool", "custom"),
        };
        return Err(invalid(
            format!(
                "Invalid value for '{path}': '{name}' is {is}; name it with {{\"type\": \"{use_type}\", \"name\": \"{name}\"}}."
            ),
            path,
        ));
    }
    Ok(flat.clone())
}
