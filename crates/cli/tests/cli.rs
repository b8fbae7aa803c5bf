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

// ---- serve ----

/// `toolshim serve …` with no TOOLSHIM_* variables from the test's own environment.
fn serve(args: &[&str]) -> TestCommand {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut command = TestCommand::new(&all);
    for var in [
        "TOOLSHIM_UPSTREAM_URL",
        "TOOLSHIM_LISTEN",
        "TOOLSHIM_MODE",
        "TOOLSHIM_API_KEYS",
        "TOOLSHIM_MAX_RETRIES",
    ] {
        command.cmd.env_remove(var);
    }
    command
}

#[test]
fn serve_reports_every_configuration_problem_at_once() {
    let stderr =
        serve(&["--listen", "nowhere", "--mode", "fast", "--max-retries", "99"]).usage_error();
    for key in ["listen:", "mode:", "upstream.url:", "max_retries:"] {
        assert!(stderr.contains(key), "{key} missing from:\n{stderr}");
    }
}

#[test]
fn serve_names_an_unknown_config_key() {
    let dir = scratch_dir("serve_names_an_unknown_config_key");
    let path = write_file(&dir, "toolshim.toml", b"lisen = \"127.0.0.1:1\"\n");
    let stderr = serve(&["--config", &path]).usage_error();
    assert!(stderr.contains("lisen"), "{stderr}");
}

#[test]
fn serve_help_documents_environment_config_and_exit_codes() {
    let help = serve(&["--help"]).ok();
    for needle in [
        "--upstream",
        "--listen",
        "--mode",
        "--api-key",
        "--max-retries",
        "--config",
        "TOOLSHIM_UPSTREAM_API_KEY",
        "call_format",
        "reasoning_calls",
        "native_refusal_secs",
        "[upstreams.NAME]",
        "default_upstream",
        "docs/config.md",
        "Exit codes",
    ] {
        assert!(help.contains(needle), "{needle} missing from serve --help");
    }
}

// ---- serve: shutdown on SIGTERM ----

/// A one-shot upstream on 127.0.0.1:0: answers one chat request with `pieces` streamed as
/// OpenAI SSE, one delta every `every`, then `[DONE]`, and closes. Write errors (the gateway
/// went away) end it quietly.
fn slow_upstream(pieces: Vec<String>, every: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // The gateway's startup probe asks for the model list first: no list here.
        let mut stream = loop {
            let (mut stream, _) = listener.accept().unwrap();
            if read_request(&mut stream).starts_with("get ") {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                continue;
            }
            break stream;
        };
        let chunk = |delta: Value, finish: Value| {
            let chunk = serde_json::json!({"id": "chatcmpl-up", "object": "chat.completion.chunk",
                "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {chunk}\n\n")
        };
        let mut frames = vec![chunk(serde_json::json!({"role": "assistant"}), Value::Null)];
        frames.extend(pieces.iter().map(|p| chunk(serde_json::json!({"content": p}), Value::Null)));
        frames.push(chunk(serde_json::json!({}), serde_json::json!("stop")) + "data: [DONE]\n\n");
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        for frame in frames {
            // The scripted pace of the reply.
            std::thread::sleep(every);
            if stream.write_all(frame.as_bytes()).and_then(|()| stream.flush()).is_err() {
                return;
            }
        }
    });
    addr
}

/// Reads one HTTP/1.1 request (head and `content-length` body) from `stream`; its head, in
/// lower case.
fn read_request(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0; 4096];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the request ended early");
        received.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    while received.len() < head_end + length {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the request body ended early");
        received.extend_from_slice(&buf[..n]);
    }
    head
}

/// A running `toolshim serve` with its address; killed on drop if still running.
struct Server {
    /// `None` once waited for.
    child: Option<std::process::Child>,
    addr: SocketAddr,
    /// Every line the server wrote to standard error so far.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Server {
    /// Starts `toolshim serve` against `upstream` with this drain timeout; waits for its address.
    fn start(test: &str, upstream: SocketAddr, drain_secs: f64) -> Server {
        let config = format!("drain_timeout_secs = {drain_secs}\n");
        Server::start_with(
            test,
            &config,
            &["--upstream", &format!("http://{upstream}")],
            &[("RUST_LOG", "warn")],
        )
    }

    /// Starts `toolshim serve --mode emulate` with this config file, more arguments (with
    /// `--listen 127.0.0.1:0` unless they have a `--listen`) and environment; waits for its
    /// address.
    fn start_with(test: &str, config: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = scratch_dir(test);
        let config = write_file(&dir, "toolshim.toml", config.as_bytes());
        let mut all = vec!["--config", &config, "--mode", "emulate"];
        if !args.contains(&"--listen") {
            all.extend_from_slice(&["--listen", "127.0.0.1:0"]);
        }
        all.extend_from_slice(args);
        let mut command = serve(&all).cmd;
        command.env("RUST_LOG", "warn").stdin(Stdio::null()).stdout(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.stderr(Stdio::piped()).spawn().expect("toolshim starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = std::sync::Arc::clone(&log);
        // Reads stderr to its end, so the pipe never fills; reports the address once.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("toolshim: listening on http://") {
                    let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = rx.recv_timeout(SERVE_DEADLINE).expect("toolshim serve reports its address");
        Server { child: Some(child), addr, log }
    }

    /// The server's standard error so far, one string.
    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits (up to `within`) until the log has a line containing `text`.
    fn wait_log(&self, text: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Sends SIGTERM.
    fn terminate(&self) {
        let pid = self.child.as_ref().expect("still running").id();
        let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        assert!(status.unwrap().success(), "kill -TERM failed");
    }

    /// Waits (up to `within`) for the process to exit; its exit code.
    fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let mut child = self.child.take().expect("waited for once");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        rx.recv_timeout(within).ok().map(|status| status.unwrap().code().expect("an exit code"))
    }
}

/// Upper bound for any wait in these tests; a hang fails instead of blocking the run.
const SERVE_DEADLINE: Duration = Duration::from_secs(10);

/// Sends a streaming chat request; returns the connection once the first SSE event arrived,
/// and the bytes read so far.
fn start_stream(addr: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SERVE_DEADLINE)).unwrap();
    let body =
        r#"{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Count."}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut received = Vec::new();
    let mut buf = [0; 4096];
    while !received.windows(4).any(|w| w == b"\n\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended before its first event");
        received.extend_from_slice(&buf[..n]);
    }
    (stream, received)
}

/// The body of a chunked HTTP/1.1 response, as far as its chunks are complete.
fn chunked_body(response: &[u8]) -> String {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    let mut rest = &response[head_end..];
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16);
        let size = size.unwrap();
        let Some(chunk) = rest.get(line_end + 2..line_end + 2 + size) else { break };
        body.extend_from_slice(chunk);
        rest = &rest[(line_end + 4 + size).min(rest.len())..];
    }
    String::from_utf8(body).unwrap()
}

/// Tries to connect until the server refuses, or the deadline passes.
fn refuses_connections(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + SERVE_DEADLINE;
    while Instant::now() < deadline {
        match TcpStream::connect(addr) {
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => return true,
            _ => std::thread::yield_now(),
        }
    }
    false
}

/// SIGTERM with a stream in flight: new connections are refused at once, the stream runs to
/// its end (`[DONE]`, every piece of text), and the process exits 0 as soon as it is done,
/// well within its drain timeout.
#[test]
fn serve_drains_streams_on_sigterm() {
    let pieces: Vec<String> = (1..=10).map(|n| format!("{n} ")).collect();
    let upstream = slow_upstream(pieces.clone(), Duration::from_millis(50));
    let mut server = Server::start("serve_drains_streams_on_sigterm", upstream, 20.0);
    let (mut stream, mut received) = start_stream(server.addr);
    let terminated = Instant::now();
    server.terminate();
    assert!(refuses_connections(server.addr), "new connections are still accepted");
    stream.read_to_end(&mut received).unwrap();
    let body = chunked_body(&received);
    assert!(body.ends_with("data: [DONE]\n\n"), "the stream did not finish: {body}");
    let content: String = body
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(content, pieces.concat());
    assert_eq!(server.exit_code(SERVE_DEADLINE), Some(0));
    assert!(terminated.elapsed() < Duration::from_secs(5), "{:?}", terminated.elapsed());
}

/// SIGTERM with a stream that outlasts the drain timeout: once the timeout has passed the
/// stream is cut off with an in-band error, and the process exits 3 (work was cut).
#[test]
fn serve_exits_after_its_drain_timeout_on_sigterm() {
    let pieces: Vec<String> = (1..=100).map(|n| format!("{n} ")).collect();
    let upstream = slow_upstream(pieces, Duration::from_millis(100));
    let mut server = Server::start("serve_exits_after_its_drain_timeout_on_sigterm", upstream, 0.5);
    let (mut stream, mut received) = start_stream(server.addr);
    let terminated = Instant::now();
    server.terminate();
    assert_eq!(server.exit_code(SERVE_DEADLINE), Some(3));
    let elapsed = terminated.elapsed();
    assert!(elapsed >= Duration::from_millis(400), "exited before the drain timeout: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "exited {elapsed:?} after SIGTERM");
    let _ = stream.read_to_end(&mut received);
    let body = chunked_body(&received);
    assert!(!body.contains("[DONE]"), "the stream was cut off: {body}");
    let last = body.trim_end().rsplit("\n\n").next().unwrap_or_default();
    assert!(
        last.starts_with("data: {\"error\"") && last.contains("shutting_down"),
        "the cut stream ends with an in-band error: {body}"
    );
}

// ---- issue 14: safe to expose ----

/// An upstream that answers every request 401 with a body that echoes the key it was sent
/// (as some servers do); GETs get the same.
fn key_echoing_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let head = read_request(&mut stream);
            let key = head
                .lines()
                .find_map(|line| line.strip_prefix("authorization: bearer "))
                .unwrap_or("none")
                .trim()
                .to_owned();
            let body =
                format!(r#"{{"error": {{"message": "Incorrect API key provided: {key}"}}}}"#);
            let response = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    addr
}

/// Sends one non-streaming chat request with this request id; the raw response.
fn chat_once(addr: SocketAddr, request_id: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SERVE_DEADLINE)).unwrap();
    let body = r#"{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: {request_id}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The upstream key never reaches the log, even at debug level and when the upstream's
/// error body echoes it; the failure is logged with the request's id, the upstream URL and
/// the cause, and the client is told that the gateway's own key was refused.
#[test]
fn serve_never_logs_the_upstream_key_and_names_the_cause() {
    let upstream = key_echoing_upstream();
    let key = "sk-test-secret-4c1d9e";
    let server = Server::start_with(
        "serve_never_logs_the_upstream_key_and_names_the_cause",
        "",
        &["--upstream", &format!("http://{upstream}")],
        &[("RUST_LOG", "debug"), ("TOOLSHIM_UPSTREAM_API_KEY", key)],
    );
    let response = chat_once(server.addr, "it-req-7");
    assert!(response.starts_with("HTTP/1.1 502"), "{response}");
    assert!(response.contains("gateway's own credentials"), "{response}");
    assert!(!response.contains(key), "{response}");
    assert!(server.wait_log("request failed", SERVE_DEADLINE), "{}", server.log());
    let log = server.log();
    assert!(!log.contains(key), "the key is in the log:\n{log}");
    let failed = log.lines().find(|line| line.contains("request failed")).unwrap();
    let url = format!("http://{upstream}/v1/chat/completions");
    for part in ["it-req-7", "status 401", &url] {
        assert!(failed.contains(part), "{part} missing from: {failed}");
    }
}

/// At startup the gateway checks the upstream and says, with its URL and the cause, that it
/// cannot be reached; and it warns when it listens beyond loopback without keys.
#[test]
fn serve_warns_at_startup_about_an_unreachable_upstream_and_open_access() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = Server::start_with(
        "serve_warns_at_startup_about_an_unreachable_upstream_and_open_access",
        "",
        &["--upstream", &format!("http://{closed}"), "--listen", "0.0.0.0:0"],
        &[],
    );
    assert!(server.wait_log("cannot be reached", SERVE_DEADLINE), "{}", server.log());
    let log = server.log();
    let line = log.lines().find(|line| line.contains("cannot be reached")).unwrap();
    assert!(line.contains(&format!("http://{closed}/v1/chat/completions")), "{line}");
    assert!(line.contains("connection refused"), "{line}");
    assert!(log.contains("no gateway API keys are set"), "{log}");
}

/// Blank or padded gateway keys refuse to start, naming where they came from; so do bad
/// ports; host names are fine; every problem of a config file comes at once (those of the
/// values that could be read too), each with its line.
#[test]
fn serve_refuses_bad_keys_and_addresses_naming_their_source() {
    // A blank variable, a lone comma (two blank keys) and a blank between keys.
    for (keys, says) in [
        (" ", "the key is blank"),
        (",", "key 1 of 2 is blank"),
        ("sk-a,,sk-b", "key 2 of 3 is blank"),
    ] {
        let mut blank = serve(&["--upstream", "http://127.0.0.1:1"]);
        blank.cmd.env("TOOLSHIM_API_KEYS", keys);
        let stderr = blank.usage_error();
        assert!(
            stderr.contains(&format!("api_keys: {says}"))
                && stderr.contains("(from environment variable TOOLSHIM_API_KEYS)"),
            "{keys:?}: {stderr}"
        );
    }
    let stderr = serve(&["--upstream", "http://127.0.0.1:1", "--api-key", " sk-a"]).usage_error();
    assert!(stderr.contains("white space") && stderr.contains("flag --api-key"), "{stderr}");
    let stderr = serve(&["--upstream", "http://127.0.0.1:1", "--api-key", ""]).usage_error();
    assert!(stderr.contains("blank"), "{stderr}");
    let stderr =
        serve(&["--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:70000"]).usage_error();
    assert!(stderr.contains("no valid port") && stderr.contains("flag --listen"), "{stderr}");
    let dir = scratch_dir("serve_refuses_bad_keys_and_addresses_naming_their_source");
    let path = write_file(
        &dir,
        "toolshim.toml",
        b"api_keys = [\"\"]\nmode = \"fast\"\n[upstream]\nurll = \"x\"\n",
    );
    let stderr = serve(&["--config", &path]).usage_error();
    // The values that could be read are checked too: every problem at once.
    for expected in [
        "line 2: mode:",
        "line 4: unknown key `upstream.urll`",
        "api_keys: the key is blank; a blank key would turn authentication off (from ",
        "toolshim.toml line 1)",
    ] {
        assert!(stderr.contains(expected), "{expected} missing from: {stderr}");
    }
    let server = Server::start_with(
        "serve_listens_on_a_host_name",
        "",
        &["--upstream", "http://127.0.0.1:1", "--listen", "localhost:0"],
        &[],
    );
    assert!(server.addr.ip().is_loopback(), "{}", server.addr);
}

/// Attempts to take the gateway down without a key, briefly (the full run is the load
/// bench's `dos` scenario): half-sent heads are closed after the header-read timeout while
/// /healthz answers, idle connections after the keep-alive timeout, unauthenticated 16 MiB
/// bodies get their 401 without being read (RSS stays flat), and a gateway at
/// `ulimit -n 256` with 300 half heads serves /healthz well before they time out.
#[test]
fn serve_withstands_attempts_without_a_key() {
    let bin = Path::new(env!("CARGO_BIN_EXE_toolshim"));
    let script = loadgen::Script::call(2, Duration::ZERO);
    let upstream = loadgen::Upstream::start(&script, 1).unwrap();
    let dir = scratch_dir("serve_withstands_attempts_without_a_key");
    let config = write_file(
        &dir,
        "toolshim.toml",
        b"header_read_timeout_secs = 1\nkeep_alive_timeout_secs = 1\n",
    );
    let extra = ["--api-key", "sk-test", "--config", &config];
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    let gateway = loadgen::Gateway::start_with(bin, &upstream.url(), &extra, None).unwrap();
    let addr = gateway.addr;
    let before = loadgen::rss_kib(gateway.pid()).unwrap();
    let (closed, health) = runtime.block_on(async {
        let streams = dos::open(addr, 100, dos::HALF_HEAD).await;
        let health = dos::health(addr).await;
        (dos::closed_after(streams, Duration::from_secs(5)).await, health)
    });
    assert_eq!(health.0, 200, "/healthz beside 100 half heads");
    assert!(closed.iter().all(|c| c.is_some_and(|t| t < Duration::from_secs(4))), "{closed:?}");
    let closed = runtime.block_on(async {
        let streams = dos::open(addr, 300, b"").await;
        dos::closed_after(streams, Duration::from_secs(5)).await
    });
    assert!(closed.iter().all(Option::is_some), "idle connections stay open");
    let sampler = loadgen::RssSampler::start(gateway.pid());
    let answers = runtime.block_on(dos::unauthenticated_bodies(addr, 10, 16 << 20));
    let peak = sampler.stop();
    assert!(answers.iter().all(|(status, _)| *status == 401), "{answers:?}");
    assert!(peak < before + 16 * 1024, "RSS went from {before} KiB to {peak} KiB");
    drop(gateway);

    // Under the fd limit, with heads that would wait 10 s: /healthz is served well before
    // that, because waiting connections make room for new ones.
    let slow = write_file(&dir, "slow.toml", b"header_read_timeout_secs = 10\n");
    let extra = ["--api-key", "sk-test", "--config", &slow];
    let limited = loadgen::Gateway::start_with(bin, &upstream.url(), &extra, Some(256)).unwrap();
    let addr = limited.addr;
    let served_after = runtime.block_on(async {
        let streams = dos::open(addr, 300, dos::HALF_HEAD).await;
        let started = Instant::now();
        let served = loop {
            if dos::health(addr).await.0 == 200 {
                break Some(started.elapsed());
            }
            if started.elapsed() > Duration::from_secs(3) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        drop(streams);
        served
    });
    let served_after = served_after.expect("/healthz was not served within 3 s of the burst");
    assert!(served_after < Duration::from_secs(2), "/healthz first served after {served_after:?}");
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
