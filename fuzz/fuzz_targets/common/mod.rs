//! Checks shared by the fuzz targets.

use serde::de::IgnoredAny;
use toolshim_parse::{
    Builtin, Config, Event, ExampleGuard, Parsed, ReasoningCalls, StreamParser, TagPair, ToolSet,
};

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
    let with_tools = tools_config();
    let mut open = with_tools.clone();
    open.reasoning_calls = ReasoningCalls::Allow;
    open.example_guard = ExampleGuard::off();
    open.reasoning_open = true;
    open.dialects.add(Builtin::FreeText);
    open.dialects.add_pair(TagPair::new("<my_call>", "</my_call>"));
    vec![Config::default(), with_tools, open]
}

/// The defaults with the two tools declared.
#[allow(dead_code, reason = "not every target uses the settings")]
pub fn tools_config() -> Config {
    Config::with_tools(ToolSet::from_json_str(TOOLS).unwrap_or_default())
}

/// `input` streamed through a `StreamParser` in chunks of the lengths `lens` (each
/// modulo 17; 0 feeds an empty chunk; used in turn and cycled; none or only zeros
/// means one byte at a time), each chunk end moved forward to a char boundary, and
/// folded with `Parsed::from_events` after checking the `ArgsDelta` fragments.
#[allow(dead_code, reason = "not every target streams")]
pub fn stream(input: &str, lens: &[u8], config: &Config) -> Parsed {
    let mut lens: Vec<usize> = lens.iter().map(|&b| usize::from(b % 17)).collect();
    if lens.iter().all(|&len| len == 0) {
        lens = vec![1];
    }
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    let mut rest = input;
    for &len in lens.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let mut end = len.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        parser.feed(chunk, &mut events);
        rest = tail;
    }
    parser.finish(&mut events);
    check_args_deltas(&events);
    Parsed::from_events(events)
}

/// Each call's `ArgsDelta` fragments concatenate to its final arguments.
fn check_args_deltas(events: &[Event]) {
    let mut open: Vec<(usize, String)> = Vec::new();
    for event in events {
        match event {
            Event::CallStart { call_idx, .. } => open.push((*call_idx, String::new())),
            Event::ArgsDelta { call_idx, json } => {
                if let Some((_, args)) = open.iter_mut().find(|(idx, _)| idx == call_idx) {
                    args.push_str(json);
                }
            }
            Event::CallEnd { call_idx, call } => {
                if let Some(pos) = open.iter().position(|(idx, _)| idx == call_idx) {
                    let (_, args) = open.swap_remove(pos);
                    assert_eq!(
                        args, call.arguments,
                        "ArgsDelta fragments of call {call_idx} do not add up"
                    );
                }
            }
            _ => {}
        }
    }
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
