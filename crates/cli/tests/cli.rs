//! End-to-end tests of the `toolshim` binary, run through [`TestCommand`].
//!
//! Index:
//! - help, version and exit-code documentation
//! - usage errors: exit 2 with a message that says what to fix
//! - the output contract: keys, --pretty, --events, --chunk-size, stdin, closed stdout
//! - --exit-tools: the agent-loop "outcome" (calls and exits apart, text, failed with raw kept)
//! - serve: configuration problems, help, and SIGTERM with streams in flight (a scripted
//!   upstream on 127.0.0.1:0 and raw HTTP/1.1 clients)
//! - serve under load: a short run of the load scenario (`benches/load.rs`), every reply
//!   checked, and a large argument that must stream through
//! - ENGINE-DEPENDENT (fail against the placeholder `StreamParser`, which emits all input as
//!   text; they pass once the engine lands): `big_integer_in_arguments_survives_exactly`,
//!   `hermes_example_gives_two_calls_with_their_arguments`,
//!   `call_objects_have_keys_in_contract_order`, `call_events_stream_the_arguments`,
//!   `unknown_tool_is_rejected_and_hide_rejected_removes_its_text`.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns fail the test the same way an assertion does"
)]

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::{Value, value::RawValue};

#[path = "../benches/dos.rs"]
mod dos;
/// `--format-file` and `--export-format`.
#[path = "cli/format_file.rs"]
mod format_file;
/// `toolshim serve`: its help and configuration errors, draining on SIGTERM, keys and
/// addresses, attempts without a key.
#[path = "cli/serve.rs"]
mod serve;
use serve::{SERVE_DEADLINE, Server, serve};
#[path = "../benches/loadgen.rs"]
mod loadgen;

/// The workspace root: tests run there so `examples/…` paths work as in `--help`.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A `toolshim` invocation: arguments, optional stdin, run in the workspace root.
struct TestCommand {
    cmd: Command,
    stdin: Vec<u8>,
}

impl TestCommand {
    fn new(args: &[&str]) -> TestCommand {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolshim"));
        cmd.args(args).current_dir(workspace_root());
        TestCommand { cmd, stdin: Vec::new() }
    }

    fn stdin(mut self, input: impl Into<Vec<u8>>) -> TestCommand {
        self.stdin = input.into();
        self
    }

    fn run(mut self) -> Outcome {
        let mut child = self
            .cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolshim starts");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = std::mem::take(&mut self.stdin);
        // A thread, so a big input cannot deadlock against a full stdout pipe.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let output = child.wait_with_output().expect("toolshim runs");
        writer.join().expect("the stdin writer does not panic");
        Outcome {
            code: output.status.code().expect("toolshim exits normally"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Runs and expects exit 0 with nothing on stderr; returns stdout.
    fn ok(self) -> String {
        let outcome = self.run();
        assert_eq!(outcome.code, 0, "stderr: {}", outcome.stderr);
        assert_eq!(outcome.stderr, "");
        outcome.stdout
    }

    /// Runs and expects a usage error (exit 2, nothing on stdout); returns stderr.
    fn usage_error(self) -> String {
        let outcome = self.run();
        assert_eq!(outcome.code, 2, "stdout: {}\nstderr: {}", outcome.stdout, outcome.stderr);
        assert_eq!(outcome.stdout, "");
        assert!(outcome.stderr.starts_with("error: "), "{}", outcome.stderr);
        outcome.stderr
    }
}

#[derive(Debug)]
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A fresh directory for files a test writes.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_file(dir: &Path, name: &str, contents: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The keys of a JSON object, in the order they appear in its text.
fn keys_in_order(object: &str) -> Vec<String> {
    object_entries(object).into_iter().map(|(key, _)| key).collect()
}

/// The entries of a JSON object, in text order, with their values as raw JSON text.
fn object_entries(object: &str) -> Vec<(String, &RawValue)> {
    let rest = object.trim().strip_prefix('{').expect("an object");
    let mut entries = Vec::new();
    let mut rest = rest.trim_start();
    if let Some(after) = rest.strip_prefix('}') {
        assert_eq!(after.trim(), "");
        return entries;
    }
    loop {
        let mut keys = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let key = keys.next().expect("a key").expect("a string key");
        rest = rest.get(keys.byte_offset()..).unwrap().trim_start().strip_prefix(':').unwrap();
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let value = values.next().expect("a value").expect("valid JSON");
        entries.push((key, value));
        rest = rest.get(values.byte_offset()..).unwrap().trim_start();
        match rest.strip_prefix(',') {
            Some(after) => rest = after,
            None => {
                assert_eq!(rest.strip_prefix('}').map(str::trim), Some(""), "trailing text");
                return entries;
            }
        }
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"))
}

const OBJECT_KEYS: [&str; 7] =
    ["calls", "incomplete", "content", "reasoning", "rejected", "warnings", "saw_tool_syntax"];
const FLAGS: [&str; 16] = [
    "FILE",
    "--tools",
    "--chunk-size",
    "--events",
    "--pretty",
    "--hide-rejected",
    "--exit-tools",
    "--dialects",
    "--tag-pair",
    "--free-text",
    "--reasoning-open",
    "--reasoning-calls",
    "--no-example-guard",
    "--format",
    "--model",
    "--list-formats",
];
const EXAMPLES: [&str; 2] = ["examples/hermes.txt", "examples/bare_json.txt"];

// ---- help, version and exit-code documentation ----

#[test]
fn parse_help_explains_every_flag_exit_codes_and_examples() {
    for help in ["--help", "-h"] {
        let text = TestCommand::new(&["parse", help]).ok();
        for flag in FLAGS {
            assert!(text.contains(flag), "`parse {help}` does not mention {flag}:\n{text}");
        }
        assert!(text.contains("Exit codes:"), "{text}");
        for code in ["0  ", "1  ", "2  "] {
            assert!(text.contains(code), "exit code {code} is not documented:\n{text}");
        }
        assert!(text.contains("toolshim parse examples/hermes.txt --tools examples/tools.json"));
        assert!(text.contains("--chunk-size 3 --events"));
    }
}

#[test]
fn top_level_help_describes_toolshim_and_lists_subcommands() {
    let text = TestCommand::new(&["--help"]).ok();
    assert!(text.contains("tool calls"), "{text}");
    assert!(text.contains("parse"), "{text}");
    // Without a subcommand toolshim shows the same help, as a usage error.
    let outcome = TestCommand::new(&[]).run();
    assert_eq!(outcome.code, 2);
    assert!(outcome.stderr.contains("parse"), "{}", outcome.stderr);
}

#[test]
fn version_is_printed() {
    let text = TestCommand::new(&["--version"]).ok();
    assert_eq!(text, format!("toolshim {}\n", env!("CARGO_PKG_VERSION")));
}

// ---- usage errors ----

#[test]
fn missing_input_file_is_a_usage_error() {
    let stderr = TestCommand::new(&["parse", "examples/no-such-file.txt"]).usage_error();
    assert!(stderr.contains("cannot read the input file examples/no-such-file.txt"), "{stderr}");
}

#[test]
fn missing_tools_file_is_a_usage_error() {
    let stderr = TestCommand::new(&["parse", "--tools", "no-such-tools.json"]).usage_error();
    assert!(stderr.contains("--tools no-such-tools.json: cannot read the file"), "{stderr}");
}

#[test]
fn tools_file_that_is_not_json_is_a_usage_error() {
    let dir = scratch_dir("tools_not_json");
    let tools = write_file(&dir, "tools.json", b"[{\"name\": ");
    let stderr = TestCommand::new(&["parse", "--tools", &tools]).stdin("hi").usage_error();
    assert!(stderr.contains(&format!("--tools {tools}: ")), "{stderr}");
    assert!(stderr.contains("not valid JSON"), "{stderr}");
}

#[test]
fn tool_without_a_name_is_a_usage_error_that_shows_the_expected_shape() {
    let dir = scratch_dir("tool_without_name");
    let tools = write_file(&dir, "tools.json", br#"[{"type": "function", "parameters": {}}]"#);
    let stderr = TestCommand::new(&["parse", "--tools", &tools]).stdin("hi").usage_error();
    assert!(stderr.contains(&format!("error: --tools {tools}: tool 0 has no `name`")), "{stderr}");
    assert!(stderr.contains("expected an OpenAI tool"), "{stderr}");
}

#[test]
fn chunk_size_zero_is_a_usage_error() {
    let stderr = TestCommand::new(&["parse", "--chunk-size", "0"]).stdin("hi").usage_error();
    assert!(stderr.contains("--chunk-size"), "{stderr}");
    assert!(stderr.contains("at least 1"), "{stderr}");
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let stderr = TestCommand::new(&["parse", "--bogus"]).stdin("hi").usage_error();
    assert!(stderr.contains("--bogus"), "{stderr}");
    assert!(stderr.contains("Usage: toolshim parse"), "{stderr}");
}

#[test]
fn input_that_is_not_utf8_is_a_usage_error() {
    let stderr = TestCommand::new(&["parse"]).stdin(b"ok \xff\xfe".to_vec()).usage_error();
    assert!(stderr.contains("standard input is not UTF-8 text"), "{stderr}");
    assert!(stderr.contains("offset 3"), "{stderr}");

    let dir = scratch_dir("not_utf8");
    let file = write_file(&dir, "latin1.txt", b"caf\xe9");
    let stderr = TestCommand::new(&["parse", &file]).usage_error();
    assert!(stderr.contains(&format!("the input file {file} is not UTF-8 text")), "{stderr}");
}

// ---- the output contract ----

#[test]
fn stdin_is_read_without_a_file_and_with_dash() {
    let input = std::fs::read_to_string(workspace_root().join("examples/hermes.txt")).unwrap();
    let from_file = TestCommand::new(&["parse", "examples/hermes.txt"]).ok();
    assert_eq!(TestCommand::new(&["parse"]).stdin(input.clone()).ok(), from_file);
    assert_eq!(TestCommand::new(&["parse", "-"]).stdin(input).ok(), from_file);
}

#[test]
fn plain_text_comes_back_as_content() {
    let stdout = TestCommand::new(&["parse"]).stdin("Just \"text\", no calls.\n").ok();
    assert_eq!(
        stdout,
        "{\"calls\":[],\"incomplete\":[],\"content\":\"Just \\\"text\\\", no calls.\\n\",\"reasoning\":\"\",\
         \"rejected\":[],\"warnings\":[],\"saw_tool_syntax\":false}\n"
    );
}

#[test]
fn output_is_one_line_with_keys_in_contract_order() {
    for example in EXAMPLES {
        for args in
            [vec!["parse", example], vec!["parse", example, "--tools", "examples/tools.json"]]
        {
            let stdout = TestCommand::new(&args).ok();
            let line = stdout.strip_suffix('\n').expect("ends with a newline");
            assert!(!line.contains('\n'), "{stdout}");
            assert_eq!(keys_in_order(line), OBJECT_KEYS);
        }
    }
}

#[test]
fn pretty_output_is_the_same_json_indented_by_two() {
    for example in EXAMPLES {
        let compact = TestCommand::new(&["parse", example]).ok();
        let pretty = TestCommand::new(&["parse", example, "--pretty"]).ok();
        assert!(pretty.starts_with("{\n  \"calls\": ["), "{pretty}");
        assert!(pretty.ends_with("\n}\n"), "{pretty}");
        assert_eq!(keys_in_order(&pretty), OBJECT_KEYS);
        assert_eq!(json(&pretty), json(&compact));
    }
}

#[test]
fn events_are_json_lines_with_a_type_that_fold_to_the_object() {
    for example in EXAMPLES {
        for chunking in [&[][..], &["--chunk-size", "3"][..], &["--chunk-size", "1"][..]] {
            let mut args = vec!["parse", example, "--events", "--pretty"];
            args.extend_from_slice(chunking);
            let stdout = TestCommand::new(&args).ok();
            let object = json(&TestCommand::new(&["parse", example]).ok());
            let (mut content, mut reasoning) = (String::new(), String::new());
            for line in stdout.lines() {
                let event = json(line);
                let kind = event["type"].as_str().unwrap_or_else(|| panic!("no type: {line}"));
                assert_eq!(keys_in_order(line)[0], "type");
                match kind {
                    "text" => content.push_str(event["text"].as_str().unwrap()),
                    "reasoning" => reasoning.push_str(event["text"].as_str().unwrap()),
                    "call_start" | "args_delta" | "call_end" | "rejected" | "warning" => {}
                    other => panic!("unknown event type {other}: {line}"),
                }
            }
            assert_eq!(content, object["content"].as_str().unwrap(), "{example} {chunking:?}");
            assert_eq!(reasoning, object["reasoning"].as_str().unwrap(), "{example} {chunking:?}");
        }
    }
}

#[test]
fn chunk_size_one_gives_byte_identical_output() {
    for example in EXAMPLES {
        for tools in [&[][..], &["--tools", "examples/tools.json"][..]] {
            let mut args = vec!["parse", example];
            args.extend_from_slice(tools);
            let whole = TestCommand::new(&args).ok();
            for size in ["1", "2", "7"] {
                let mut chunked = args.clone();
                chunked.extend(["--chunk-size", size]);
                assert_eq!(TestCommand::new(&chunked).ok(), whole, "{chunked:?}");
            }
        }
    }
}

#[test]
fn closed_stdout_exits_zero_quietly() {
    // Far more output than a pipe buffer holds, written after the reader is gone.
    let input = "x".repeat(20_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolshim"))
        .args(["parse", "--events", "--chunk-size", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[cfg(target_os = "linux")]
#[test]
fn write_error_exits_one() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return;
    };
    let output = Command::new(env!("CARGO_BIN_EXE_toolshim"))
        .args(["parse", "examples/hermes.txt"])
        .current_dir(workspace_root())
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: cannot write the output: "), "{stderr}");
}

// ---- --exit-tools: the agent-loop outcome ----

/// `toolshim parse --tools examples/tools.json --exit-tools finish,give_up` on `input`: the
/// output object, after checking that "outcome" is its last key.
fn parse_with_exit_tools(input: &str) -> Value {
    let args = ["parse", "--tools", "examples/tools.json", "--exit-tools", "finish,give_up"];
    let stdout = TestCommand::new(&args).stdin(input).ok();
    let mut keys = OBJECT_KEYS.to_vec();
    keys.push("outcome");
    assert_eq!(keys_in_order(&stdout), keys, "{stdout}");
    json(&stdout)
}

fn names(calls: &Value) -> Vec<&str> {
    calls.as_array().unwrap().iter().map(|call| call["name"].as_str().unwrap()).collect()
}

#[test]
fn exit_tool_call_is_an_exit_not_a_call_to_run() {
    let input = "Paris it is.\n\
        <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n\
        <tool_call>{\"name\": \"finish\", \"arguments\": {\"answer\": \"sunny\"}}</tool_call>";
    let object = parse_with_exit_tools(input);
    // `finish` is not in examples/tools.json: --exit-tools declares it, so it is accepted.
    assert_eq!(names(&object["calls"]), ["get_weather", "finish"], "{object}");
    assert_eq!(object["rejected"], serde_json::json!([]));
    let outcome = &object["outcome"];
    assert_eq!(outcome["kind"], "calls", "{object}");
    assert_eq!(names(&outcome["calls"]), ["get_weather"]);
    assert_eq!(names(&outcome["exits"]), ["finish"]);
    assert_eq!(outcome["exits"][0]["arguments"], serde_json::json!({"answer": "sunny"}));
    assert_eq!(outcome["calls"][0], object["calls"][0]);
}

#[test]
fn unknown_tool_call_fails_and_keeps_the_raw_output_verbatim() {
    let input = "Let me \"try\" 🦀\r\n<tool_call>\n{\"name\": \"get_stock_price\", \
                 \"arguments\": {\"symbol\": \"ACME\"}}\n</tool_call>\t\n";
    let object = parse_with_exit_tools(input);
    let outcome = &object["outcome"];
    assert_eq!(outcome["kind"], "failed", "{object}");
    assert_eq!(outcome["reason"], "unknown_tools");
    assert_eq!(outcome["unknown_tools"], serde_json::json!(["get_stock_price"]));
    assert!(outcome["message"].as_str().unwrap().contains("`get_stock_price`"), "{outcome}");
    assert_eq!(outcome["raw"].as_str().unwrap().as_bytes(), input.as_bytes());
}

#[test]
fn tool_syntax_without_a_call_fails_and_plain_text_is_an_answer() {
    let object = parse_with_exit_tools("<tool_call>{\"arguments\": {}}</tool_call>");
    assert_eq!(object["outcome"]["kind"], "failed", "{object}");
    assert_eq!(object["outcome"]["reason"], "no_call_parsed");
    assert_eq!(object["outcome"]["unknown_tools"], serde_json::json!([]));

    let object = parse_with_exit_tools("It is sunny in Paris.");
    assert_eq!(object["outcome"], serde_json::json!({"kind": "text"}));
}

#[test]
fn exit_tools_without_a_tool_list_accept_any_other_name_as_normal() {
    let input = "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>\n\
                 <tool_call>{\"name\": \"give_up\", \"arguments\": {}}</tool_call>";
    for args in [
        &["parse", "--exit-tools", "finish,give_up"][..],
        &["parse", "--exit-tools", "finish", "--exit-tools", " give_up", "--chunk-size", "2"][..],
    ] {
        let object = json(&TestCommand::new(args).stdin(input).ok());
        assert_eq!(names(&object["outcome"]["calls"]), ["search"], "{args:?}: {object}");
        assert_eq!(names(&object["outcome"]["exits"]), ["give_up"], "{args:?}: {object}");
    }
}

#[test]
fn outcome_is_absent_without_exit_tools() {
    let input = "<tool_call>{\"name\": \"finish\", \"arguments\": {}}</tool_call>";
    for args in [&["parse"][..], &["parse", "--tools", "examples/tools.json"][..]] {
        let stdout = TestCommand::new(args).stdin(input).ok();
        assert_eq!(keys_in_order(&stdout), OBJECT_KEYS, "{stdout}");
    }
    let pretty =
        TestCommand::new(&["parse", "--exit-tools", "finish", "--pretty"]).stdin(input).ok();
    let expected_tail = concat!(
        "  \"outcome\": {\n",
        "    \"kind\": \"calls\",\n",
        "    \"calls\": [],\n",
        "    \"exits\": [\n",
        "      {\n",
        "        \"id\": null,\n",
        "        \"name\": \"finish\",\n",
        "        \"arguments\": {}\n",
        "      }\n",
        "    ]\n",
        "  }\n",
        "}\n",
    );
    assert!(pretty.ends_with(expected_tail), "{pretty}");
}

#[test]
fn empty_exit_tool_name_and_exit_tools_with_events_are_usage_errors() {
    let stderr = TestCommand::new(&["parse", "--exit-tools", "finish,"]).stdin("hi").usage_error();
    assert!(stderr.contains("--exit-tools: a tool name is empty"), "{stderr}");
    let args = ["parse", "--exit-tools", "finish", "--events"];
    let stderr = TestCommand::new(&args).stdin("hi").usage_error();
    assert!(stderr.contains("--events"), "{stderr}");
}

// ---- ENGINE-DEPENDENT: these fail against the placeholder StreamParser ----

#[test]
fn big_integer_in_arguments_survives_exactly() {
    let input = r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "station": 123456789012345678901234567890}}</tool_call>"#;
    let stdout = TestCommand::new(&["parse"]).stdin(input).ok();
    assert!(
        stdout.contains(r#""arguments":{"city":"Paris","station":123456789012345678901234567890}"#),
        "{stdout}"
    );
}

#[test]
fn hermes_example_gives_two_calls_with_their_arguments() {
    let stdout =
        TestCommand::new(&["parse", "examples/hermes.txt", "--tools", "examples/tools.json"]).ok();
    let object = json(&stdout);
    let calls: Vec<(&str, String)> = object["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| (call["name"].as_str().unwrap(), call["arguments"].to_string()))
        .collect();
    assert_eq!(
        calls,
        [
            ("get_weather", r#"{"city":"Paris","unit":"celsius"}"#.to_owned()),
            ("get_time", r#"{"timezone":"Europe/Paris"}"#.to_owned()),
        ],
        "{stdout}"
    );
    assert!(object["content"].as_str().unwrap().starts_with("I'll check the weather"));
    assert!(!object["content"].as_str().unwrap().contains("<tool_call>"), "{stdout}");
    assert_eq!(object["saw_tool_syntax"], true);
}

#[test]
fn call_objects_have_keys_in_contract_order() {
    let stdout = TestCommand::new(&["parse", "examples/hermes.txt"]).ok();
    let entries = object_entries(&stdout);
    let calls: Vec<&RawValue> = serde_json::from_str(entries[0].1.get()).unwrap();
    assert_eq!(calls.len(), 2, "{stdout}");
    for call in calls {
        assert_eq!(keys_in_order(call.get()), ["id", "name", "arguments"]);
    }
}

#[test]
fn call_events_stream_the_arguments() {
    let stdout =
        TestCommand::new(&["parse", "examples/hermes.txt", "--events", "--chunk-size", "3"]).ok();
    let events: Vec<Value> = stdout.lines().map(json).collect();
    for call_idx in 0..2 {
        let of_call = |kind: &str| {
            events
                .iter()
                .filter(|event| event["type"] == kind && event["call_idx"] == call_idx)
                .cloned()
                .collect::<Vec<_>>()
        };
        let (starts, deltas, ends) =
            (of_call("call_start"), of_call("args_delta"), of_call("call_end"));
        assert_eq!((starts.len(), ends.len()), (1, 1), "call {call_idx}: {stdout}");
        let streamed: String = deltas.iter().map(|delta| delta["json"].as_str().unwrap()).collect();
        assert_eq!(json(&streamed), ends[0]["call"]["arguments"], "call {call_idx}");
        assert_eq!(starts[0]["name"], ends[0]["call"]["name"]);
    }
}

#[test]
fn unknown_tool_is_rejected_and_hide_rejected_removes_its_text() {
    let input = "Checking.\n<tool_call>\n{\"name\": \"get_stock_price\", \"arguments\": {\"symbol\": \"ACME\"}}\n</tool_call>";
    let kept =
        json(&TestCommand::new(&["parse", "--tools", "examples/tools.json"]).stdin(input).ok());
    assert_eq!(kept["calls"], serde_json::json!([]));
    assert_eq!(kept["rejected"][0]["name"], "get_stock_price", "{kept}");
    assert!(kept["content"].as_str().unwrap().contains("get_stock_price"), "{kept}");

    let args = ["parse", "--tools", "examples/tools.json", "--hide-rejected"];
    let hidden = json(&TestCommand::new(&args).stdin(input).ok());
    assert_eq!(hidden["rejected"][0]["name"], "get_stock_price", "{hidden}");
    assert!(!hidden["content"].as_str().unwrap().contains("get_stock_price"), "{hidden}");
}

// ---- dialect and policy flags ----

#[test]
fn tag_pair_reads_calls_between_custom_markers() {
    let input = "Let me see. <my_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</my_call>";
    let out = json(
        &TestCommand::new(&["parse", "--tag-pair", "<my_call>", "</my_call>"]).stdin(input).ok(),
    );
    assert_eq!(out["calls"][0]["name"], "f");
    assert_eq!(out["calls"][0]["arguments"], serde_json::json!({"a": 1}));
    assert_eq!(out["content"], "Let me see. ");
    // Without the flag the markers are text around a bare JSON call.
    let plain = json(&TestCommand::new(&["parse"]).stdin(input).ok());
    assert_eq!(plain["content"], "Let me see. <my_call></my_call>");
}

#[test]
fn dialects_flag_selects_and_rejects_unknown_ids() {
    let input = "get_time(timezone='UTC')";
    let out = json(&TestCommand::new(&["parse"]).stdin(input).ok());
    assert_eq!(out["calls"][0]["name"], "get_time");
    let out = json(&TestCommand::new(&["parse", "--dialects", "json,markup"]).stdin(input).ok());
    assert_eq!(out["calls"], serde_json::json!([]));
    assert_eq!(out["content"], input);
    let stderr =
        TestCommand::new(&["parse", "--dialects", "json,bogus"]).stdin(input).usage_error();
    assert!(stderr.contains("unknown dialect `bogus`") && stderr.contains("free_text"), "{stderr}");
}

#[test]
fn reasoning_and_guard_flags_change_what_counts_as_a_call() {
    let call = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    let input = format!("<think>maybe {call}</think>no");
    let out = json(&TestCommand::new(&["parse"]).stdin(input.clone()).ok());
    assert_eq!(out["calls"], serde_json::json!([]));
    assert_eq!(out["warnings"][0]["code"], "call_in_reasoning");
    let out = json(&TestCommand::new(&["parse", "--reasoning-calls"]).stdin(input).ok());
    assert_eq!(out["calls"][0]["name"], "f");

    let out = json(&TestCommand::new(&["parse", "--reasoning-open"]).stdin("hmm</think>hi").ok());
    assert_eq!((out["reasoning"].as_str(), out["content"].as_str()), (Some("hmm"), Some("hi")));

    let example = "For example:\n```json\n{\"name\": \"f\", \"arguments\": {}}\n```";
    let out = json(&TestCommand::new(&["parse"]).stdin(example).ok());
    assert_eq!(out["calls"], serde_json::json!([]));
    assert_eq!(out["warnings"][0]["code"], "example");
    let out = json(&TestCommand::new(&["parse", "--no-example-guard"]).stdin(example).ok());
    assert_eq!(out["calls"][0]["name"], "f");
}

#[test]
fn free_text_needs_tools_and_guesses_from_prose() {
    let input = "I'll call get_weather with city Paris.";
    let stderr = TestCommand::new(&["parse", "--free-text"]).stdin(input).usage_error();
    assert!(stderr.contains("--free-text") && stderr.contains("--tools"), "{stderr}");
    let args = ["parse", "--free-text", "--tools", "examples/tools.json"];
    let out = json(&TestCommand::new(&args).stdin(input).ok());
    assert_eq!(out["calls"][0]["name"], "get_weather");
    assert_eq!(out["calls"][0]["arguments"]["city"], "Paris");
    assert_eq!(out["content"], input, "the prose stays visible");
}

// ---- model-native formats ----

#[test]
fn format_pins_one_format_and_rejects_unknown_ones() {
    let deepseek = "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let out = json(&TestCommand::new(&["parse", "--format", "deepseek_v31"]).stdin(deepseek).ok());
    assert_eq!(out["calls"][0]["name"], "get_weather");
    assert_eq!(out["content"], "Checking.");
    let out = json(&TestCommand::new(&["parse", "--format", "F24"]).stdin(deepseek).ok());
    assert_eq!(out["calls"][0]["arguments"]["city"], "Tokyo", "catalog ids work too");

    let hermes = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    let out = json(&TestCommand::new(&["parse", "--format", "deepseek_v3"]).stdin(hermes).ok());
    assert_eq!(out["calls"], serde_json::json!([]), "a pinned format reads nothing else");
    assert_eq!(out["content"], hermes);

    let stderr = TestCommand::new(&["parse", "--format", "nope"]).stdin("x").usage_error();
    assert!(stderr.contains("unknown format `nope`") && stderr.contains("kimi_k2"), "{stderr}");
    let gemma = "<|tool_call>call:get_time{timezone:<|\"|>Asia/Tokyo<|\"|>}<tool_call|>";
    let out = json(&TestCommand::new(&["parse", "--format", "gemma4"]).stdin(gemma).ok());
    assert_eq!(out["calls"][0]["arguments"]["timezone"], "Asia/Tokyo");
    let out = json(&TestCommand::new(&["parse", "--format", "functiongemma"]).stdin(gemma).ok());
    assert_eq!(out["calls"], serde_json::json!([]), "FunctionGemma's markers differ");
}

#[test]
fn model_selects_its_format_and_unknown_models_keep_detection() {
    let kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"timezone\": \"UTC\"}<|tool_call_end|><|tool_calls_section_end|>";
    let out = json(
        &TestCommand::new(&["parse", "--model", "moonshotai/Kimi-K2-Instruct"]).stdin(kimi).ok(),
    );
    assert_eq!(out["calls"][0]["name"], "get_time");
    assert_eq!(out["calls"][0]["id"], "functions.get_time:0");
    let hermes = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    let out = json(
        &TestCommand::new(&["parse", "--model", "moonshotai/Kimi-K2-Instruct"]).stdin(hermes).ok(),
    );
    assert_eq!(out["calls"], serde_json::json!([]));
    let out =
        json(&TestCommand::new(&["parse", "--model", "some-unknown-model"]).stdin(hermes).ok());
    assert_eq!(out["calls"][0]["name"], "f");
}

#[test]
fn list_formats_prints_every_catalog_id_and_the_model_table() {
    let text = TestCommand::new(&["parse", "--list-formats"]).ok();
    for n in 1..=38 {
        assert!(text.contains(&format!(" F{n} ")), "F{n} missing:\n{text}");
    }
    for n in 1..=20 {
        assert!(text.contains(&format!(" L{n} ")), "L{n} missing");
    }
    assert!(text.contains("qwen3-coder") && text.contains("qwen3_coder"), "{text}");
}

/// The load scenario of `benches/load.rs` in brief, for correctness: concurrent
/// streaming and non-streaming tool-call requests, straight to the scripted upstream
/// and through `toolshim serve`, every reply checked (through the gateway: exactly the
/// scripted `get_weather` call); then a 256 KiB `write_file` argument that must reach
/// the client while the upstream is still writing it.
#[test]
fn serve_under_load_answers_every_request_with_its_call() {
    use loadgen::{Check, Target, percentile};
    use std::sync::Arc;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_toolshim"));
    let script = loadgen::Script::call(20, Duration::from_millis(2));
    let upstream = loadgen::Upstream::start(&script, 1).unwrap();
    let gateway = loadgen::Gateway::start(bin, &upstream.url()).unwrap();
    let client = loadgen::client(64).unwrap();
    let sampler = loadgen::RssSampler::start(gateway.pid());
    for (stream, concurrency) in [(true, 64), (false, 16)] {
        for (base, check) in [(upstream.url(), Check::Upstream), (gateway.url(), Check::Call)] {
            let target = Arc::new(Target::chat(&base, stream, check));
            let run = loadgen::drive(&client, &target, concurrency, Duration::from_millis(1500));
            let outcome = runtime.block_on(run);
            let what = format!("{base} stream={stream} concurrency={concurrency}");
            assert_eq!(outcome.errors, 0, "{what}: {:?}", outcome.first_error);
            assert!(outcome.ok >= concurrency as u64, "{what}: only {} replies", outcome.ok);
            assert!(outcome.per_second() > 0.0);
            assert!(percentile(&outcome.ttfb, 50.0) <= percentile(&outcome.total, 99.0), "{what}");
            let calls = if stream { outcome.ok as usize } else { 0 };
            assert_eq!(outcome.call.len(), calls, "{what}: when the call's name was known");
        }
    }
    // Responses requests kept by the gateway's store (issue 26), every reply the call.
    let target = Arc::new(Target::responses(&gateway.url(), true));
    let outcome = runtime.block_on(loadgen::drive(&client, &target, 8, Duration::from_millis(800)));
    assert_eq!(outcome.errors, 0, "stored responses: {:?}", outcome.first_error);
    assert!(outcome.ok >= 8, "stored responses: only {} replies", outcome.ok);
    let peak = sampler.stop();
    if cfg!(target_os = "linux") {
        assert!(peak > 0, "the gateway's RSS could not be read");
        let cpu = loadgen::cpu_time(gateway.pid()).unwrap_or_default();
        assert!(cpu > Duration::ZERO, "the gateway's CPU time could not be read");
    }
    drop(gateway);

    let size = 256 << 10;
    let script = loadgen::write_file_script(size, 64, Duration::from_millis(4));
    let upstream = loadgen::Upstream::start(&script, 1).unwrap();
    let gateway = loadgen::Gateway::start(bin, &upstream.url()).unwrap();
    let large = runtime
        .block_on(loadgen::large_argument(&client, &gateway.url(), &upstream, size))
        .unwrap();
    assert_eq!(large.bytes, size);
    assert!(large.first_argument_byte < large.total && large.tail <= large.total, "{large:?}");
    assert!(
        large.share_before_upstream_end > 0.5,
        "the argument arrived at the end, not as it was written: {large:?}"
    );
}

/// `GET path` on a fresh connection: the status code and the body (the responses read here
/// have a content-length).
fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SERVE_DEADLINE)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body).to_owned();
    (status, body)
}

/// Issue 18: a config file with several upstreams and no --upstream starts; the model list
/// is its routes and /readyz probes each upstream.
#[test]
fn serve_routes_models_to_several_upstreams_from_a_config_file() {
    let down = closed_port_std();
    let config = format!(
        "default_upstream = \"local\"\n\
         [upstreams.local]\nurl = \"http://{down}\"\nmodels = [\"qwen2.5-coder\"]\n\
         [upstreams.local.aliases]\n\"gpt-5.5\" = \"qwen2.5-coder\"\n\
         [upstreams.hosted]\nurl = \"http://{down}/v1\"\nmodels = [\"claude-*\"]\nfallback = [\"local\"]\n"
    );
    let server = Server::start_with("serve_routes_models_to_several_upstreams", &config, &[], &[]);
    let (status, body) = http_get(server.addr, "/v1/models");
    assert_eq!(status, 200, "{body}");
    let ids: Vec<String> =
        json(&body)["data"].as_array().unwrap().iter().map(|m| m["id"].to_string()).collect();
    assert_eq!(ids, ["\"gpt-5.5\"", "\"qwen2.5-coder\""], "{body}");
    let (status, body) = http_get(server.addr, "/readyz");
    assert_eq!(status, 503, "{body}");
    let ready = json(&body);
    assert_eq!(ready["upstreams"]["local"]["status"], "unavailable", "{body}");
    assert_eq!(ready["upstreams"]["hosted"]["status"], "unavailable", "{body}");
    // A route to an upstream that does not exist is refused before the server starts.
    let dir = scratch_dir("serve_routes_models_to_several_upstreams_bad");
    let path = write_file(
        &dir,
        "bad.toml",
        b"[upstreams.a]\nurl = \"http://127.0.0.1:9\"\nmodels = [\"m\"]\nfallback = [\"b\"]\n",
    );
    let stderr = serve(&["--config", &path]).usage_error();
    assert!(stderr.contains("upstreams.a.fallback") && stderr.contains("`b`"), "{stderr}");
}

/// A port nothing listens on.
fn closed_port_std() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}
