//! Format files: every built-in format written as data and read back parses the whole
//! corpus as the compiled rows do; published `response_template`s (written for these
//! tests from the templates' public definitions, `tests/templates/`) load and parse; what
//! the engine cannot express is an error naming the field.

use std::path::PathBuf;

use toolshim_parse::{Config, Dialects, ErrorKind, Parsed, ToolSet, formats};

use crate::corpus::{chunk_seeded, load_cases, parse_complete, stream_events};

fn template(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/templates").join(name);
    // A missing file fails the test that reads it: nothing loads from an empty text.
    std::fs::read_to_string(path).unwrap_or_default()
}

fn streamed(input: &str, config: &Config, seed: u64) -> Parsed {
    stream_events(chunk_seeded(input, seed), config).into_iter().collect()
}

/// Each catalogued format's registry, written as a format file and read back, is the same
/// registry (the file is a fixed point) and parses every corpus case as the compiled one.
#[test]
fn every_builtin_format_round_trips_and_parses_the_corpus_the_same() {
    let cases = load_cases().unwrap_or_else(|err| panic!("{err}"));
    let mut registries: Vec<(String, Dialects)> = formats()
        .iter()
        .filter_map(|format| format.dialects().map(|dialects| (format.id.to_owned(), dialects)))
        .collect();
    registries.push(("default".to_owned(), Dialects::default()));
    for (id, compiled) in registries {
        let text = compiled.to_format_file().unwrap_or_else(|err| panic!("{id}: {err}"));
        let loaded = Dialects::from_format_file(&text).unwrap_or_else(|err| panic!("{id}: {err}"));
        assert_eq!(loaded.to_format_file().ok().as_deref(), Some(text.as_str()), "{id}");
        assert!(compiled.ids().eq(loaded.ids()), "{id}: the ids differ");
        for case in &cases {
            let mut compiled_config = case.config.clone();
            compiled_config.dialects = compiled.clone();
            let mut loaded_config = case.config.clone();
            loaded_config.dialects = loaded.clone();
            let expected = parse_complete(&case.input, &compiled_config);
            let got = parse_complete(&case.input, &loaded_config);
            assert_eq!(got, expected, "{id} loaded from its file parses {} differently", case.name);
        }
    }
}

/// Loaded rows stream as compiled ones do: every chunking gives the complete result.
#[test]
fn loaded_rows_stream_like_the_compiled_ones() {
    let cases = load_cases().unwrap_or_else(|err| panic!("{err}"));
    let text = Dialects::default().to_format_file().unwrap_or_default();
    let loaded = Dialects::from_format_file(&text).unwrap_or_else(|err| panic!("{err}"));
    for (seed, case) in cases.iter().enumerate() {
        let mut config = case.config.clone();
        config.dialects = loaded.clone();
        let complete = parse_complete(&case.input, &config);
        assert_eq!(streamed(&case.input, &config, seed as u64), complete, "{}", case.name);
    }
}

fn weather_tools() -> Result<ToolSet, String> {
    let tools = r#"[{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]"#;
    ToolSet::from_json_str(tools).map_err(|err| err.to_string())
}

/// Parses `input` with the template's config, complete and in seeded chunkings, and
/// returns the calls as `name args` lines, the content and the reasoning.
fn read_with(file: &str, input: &str) -> Result<(Vec<String>, String, String), String> {
    let mut config = Config::format_from_template(&template(file))
        .map_err(|err| format!("{file}: {err} ({:?})", err.field()))?;
    config.tools = Some(weather_tools()?.into());
    let complete = parse_complete(input, &config);
    for seed in 0..8 {
        if streamed(input, &config, seed) != complete {
            return Err(format!("{file}: the chunking of seed {seed} parses differently"));
        }
    }
    let calls =
        complete.calls.iter().map(|call| format!("{} {}", call.name, call.arguments)).collect();
    Ok((calls, complete.content, complete.reasoning))
}

#[test]
fn gemma4_template_reads_token_strings_and_its_thought_channel() {
    let out = "<|channel>thought\nThe user wants Paris.<channel|>Checking.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}<tool_call|>";
    let (calls, content, reasoning) =
        read_with("gemma4.json", out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(calls, [r#"get_weather {"city":"Paris","days":2}"#]);
    assert_eq!(content, "Checking.");
    assert_eq!(reasoning, "The user wants Paris.");
}

#[test]
fn gpt_oss_template_reads_the_recipient_and_skips_the_content_type() {
    let out = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>";
    let (calls, _, reasoning) =
        read_with("gpt_oss.json", out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(calls, [r#"get_weather {"city":"Oslo"}"#]);
    assert_eq!(reasoning, "Need weather.");
}

#[test]
fn qwen3_coder_template_reads_parameters_typed_by_the_schema() {
    let out = "<think>ok</think>\nLet me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    let (calls, content, _) =
        read_with("qwen3_coder.json", out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(calls, [r#"get_weather {"city":"Tokyo","days":3}"#]);
    assert_eq!(content, "Let me check.");
}

#[test]
fn command_a_template_reads_each_action_of_the_list() {
    let out = "<|START_THINKING|>Two cities.<|END_THINKING|><|START_ACTION|>[\n{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}},\n{\"tool_call_id\": \"1\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Milan\"}}\n]<|END_ACTION|>";
    let (calls, _, reasoning) =
        read_with("command_a.json", out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(calls, [r#"get_weather {"city":"Rome"}"#, r#"get_weather {"city":"Milan"}"#]);
    assert_eq!(reasoning, "Two cities.");
}

#[test]
fn smollm3_template_reads_hermes_calls() {
    let out = "<think>\nSimple.\n</think>\nOn it.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>";
    let (calls, content, _) = read_with("smollm3.json", out).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(calls, [r#"get_weather {"city":"Lima"}"#]);
    assert_eq!(content, "On it.");
}

/// A `tokenizer_config.json` that holds the template is read as the template.
#[test]
fn a_tokenizer_config_holding_the_template_is_read() {
    let config = format!(
        r#"{{"model_max_length": 8192, "response_template": {}}}"#,
        template("smollm3.json")
    );
    let config = Config::format_from_template(&config).unwrap_or_else(|err| panic!("{err}"));
    let parsed =
        parse_complete("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", &config);
    assert_eq!(parsed.calls.len(), 1);
}

/// What rows cannot express is an error that names the field.
#[test]
fn what_the_engine_cannot_express_names_the_field() {
    let cases = [
        (
            r#"{"fields": {"tool_calls": {"open": "<c>", "content": "kv-lines"}}}"#,
            "fields.tool_calls.content",
        ),
        (
            r#"{"fields": {"tool_calls": {"open_pattern": "(?:<a>|<b>)(?P<name>\\w+)", "content": "json", "transform": {"name": "{name}", "arguments": "{content}"}}}}"#,
            "fields.tool_calls.open_pattern",
        ),
        (
            r#"{"fields": {"thinking": {"open": "<reflect>", "close": "</reflect>"}}}"#,
            "fields.thinking.open",
        ),
        (r#"{"fields": {"answer": {"open": "<a>"}}}"#, "fields.answer"),
        (
            r#"{"fields": {"tool_calls": {"open": "<c>", "content": "json", "transform": {"function": {"name": "{content.fn}", "arguments": "{content.args}"}}}}}"#,
            "fields.tool_calls.transform.function.name",
        ),
        (
            r#"{"response_template": {"fields": {"tool_calls": {"open": "<c>", "close_pattern": "</c>|</d>"}}}}"#,
            "response_template.fields.tool_calls.close_pattern",
        ),
        (
            r#"{"toolshim_format": 1, "dialects": [{"pair": {"id": "x", "start": ""}}]}"#,
            "dialects[0].pair.start",
        ),
        (r#"{"toolshim_format": 1, "dialects": ["markdown"]}"#, "dialects[0]"),
        (
            r#"{"toolshim_format": 1, "dialects": [{"pair": {"id": "x", "start": "<x>", "head": {"name": {"ends": [{"after": ">"}]}}}}]}"#,
            "dialects[0].pair.head.name.ends[0]",
        ),
    ];
    for (file, field) in cases {
        let err = match Config::format_from_template(file) {
            Ok(_) => panic!("{file} loaded"),
            Err(err) => err,
        };
        assert_eq!(err.kind(), ErrorKind::InvalidFormat, "{file}");
        assert_eq!(err.field(), Some(field), "{file}: {err}");
        assert!(err.to_string().starts_with(field), "{err}");
    }
}

/// toolshim's own rows, written in TOML.
#[cfg(feature = "toml")]
#[test]
fn rows_written_in_toml_load() {
    let file = r#"
toolshim_format = 1
dialects = [
  { pair = { id = "at_calls", start = "@@call ", ends = ["@@"], head = { name = { ends = [{ consume = ":" }] } } } },
  "json",
]
"#;
    let mut config = Config::default();
    config.dialects = Dialects::from_format_file(file).unwrap_or_else(|err| panic!("{err}"));
    let parsed = parse_complete("Ok. @@call get_weather:{\"city\": \"Bern\"}@@", &config);
    assert_eq!(parsed.calls[0].name, "get_weather");
    assert_eq!(parsed.content, "Ok. ");
}
