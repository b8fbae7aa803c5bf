//! Checks shared by the fuzz targets.

use serde::de::IgnoredAny;
use toolshim_parse::{Builtin, Config, ExampleGuard, Parsed, ReasoningCalls, TagPair, ToolSet};

#[allow(dead_code, reason = "not every target uses the settings")]
const TOOLS: &str = r#"[
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
    "properties": {"timezone": {"type": "string"}}}}}
]"#;

/// The settings the targets run with: the defaults; a tool list; every optional
/// dialect and policy switched the other way (free-text calls, calls in reasoning,
/// no example guard, a custom tag pair, reasoning open at the start).
#[allow(dead_code, reason = "not every target uses the settings")]
pub fn configs() -> Vec<Config> {
    let tools = ToolSet::from_json_str(TOOLS).unwrap_or_default();
    let with_tools = Config::with_tools(tools);
    let mut open = Config {
        reasoning_calls: ReasoningCalls::Allow,
        example_guard: ExampleGuard::off(),
        reasoning_open: true,
        ..with_tools.clone()
    };
    open.dialects.add(Builtin::FreeText);
    open.dialects.add_pair(TagPair::new("<my_call>", "</my_call>"));
    vec![Config::default(), with_tools, open]
}

/// Whether `text` is one JSON object by the grammar of RFC 8259. serde_json's
/// `IgnoredAny` checks the grammar without range-checking numbers, which the
/// arguments keep exactly as written (`1e999` is valid JSON, though no f64).
pub fn json_object(text: &str) -> Result<(), String> {
    if !text.trim_start().starts_with('{') {
        return Err("not an object".to_owned());
    }
    serde_json::from_str::<IgnoredAny>(text).map(|_| ()).map_err(|err| err.to_string())
}

/// Invariants that hold for every result of `parse` on any `input`.
pub fn check_invariants(input: &str, parsed: &Parsed) {
    for call in &parsed.calls {
        if let Err(why) = json_object(&call.arguments) {
            panic!(
                "arguments of {:?} are not a JSON object ({why}): {:?}",
                call.name, call.arguments
            );
        }
        assert!(
            call.span.start <= call.span.end && call.span.end <= input.len(),
            "span {:?} of {:?} is outside the input (len {})",
            call.span,
            call.name,
            input.len()
        );
    }
    assert!(
        parsed.content.len() <= input.len(),
        "content ({} bytes) is longer than the input ({} bytes)",
        parsed.content.len(),
        input.len()
    );
}
