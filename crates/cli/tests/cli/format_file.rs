//! `toolshim parse --format-file` and `--export-format`: published response_templates (the
//! parser's test files, written from the templates' public definitions) and every built-in
//! format's export read the output they describe.

use super::{TestCommand, json};

const TEMPLATES: &str = "crates/parse/tests/templates";

#[test]
fn format_file_reads_published_templates() {
    let cases = [
        (
            "gemma4.json",
            "<|channel>thought\nParis.<channel|>On it.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
            "On it.",
        ),
        (
            "gpt_oss.json",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
            "",
        ),
        (
            "qwen3_coder.json",
            "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            "Checking.",
        ),
        (
            "command_a.json",
            "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]<|END_ACTION|>",
            "",
        ),
    ];
    for (file, input, content) in cases {
        let path = format!("{TEMPLATES}/{file}");
        for chunk in ["1", "3", "1000"] {
            let args = ["parse", "--format-file", path.as_str(), "--chunk-size", chunk];
            let out = json(&TestCommand::new(&args).stdin(input).ok());
            assert_eq!(out["calls"][0]["name"], "get_weather", "{file}: {out}");
            assert_eq!(out["calls"][0]["arguments"]["city"], "Paris", "{file}: {out}");
            assert_eq!(out["content"], content, "{file}: {out}");
        }
    }
}

#[test]
fn a_template_field_the_parser_cannot_read_is_a_usage_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("toolshim-format-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("kv.json");
    std::fs::write(&path, r#"{"fields": {"tool_calls": {"open": "<c>", "content": "kv-lines"}}}"#)
        .expect("the file is written");
    let shown = path.to_string_lossy().into_owned();
    let stderr = TestCommand::new(&["parse", "--format-file", &shown]).stdin("x").usage_error();
    assert!(stderr.contains("fields.tool_calls.content"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_exported_format_reads_back_through_format_file() {
    let dir = std::env::temp_dir().join(format!("toolshim-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let cases = [
        ("gemma4", "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>"),
        (
            "kimi_k2",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>",
        ),
        ("cwm", "<tool: f>\n{\"a\": \"x\"}\n</tool>"),
        ("default", "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x\"}}</tool_call>"),
    ];
    for (id, input) in cases {
        let file = TestCommand::new(&["parse", "--export-format", id]).ok();
        let path = dir.join(format!("{id}.json"));
        std::fs::write(&path, file).expect("the export is written");
        let shown = path.to_string_lossy().into_owned();
        let out = json(&TestCommand::new(&["parse", "--format-file", &shown]).stdin(input).ok());
        assert_eq!(out["calls"][0]["name"], "f", "{id}: {out}");
        assert_eq!(out["calls"][0]["arguments"]["a"], "x", "{id}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
