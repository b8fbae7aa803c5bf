#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns fail the test the same way an assertion does"
)]

use toolshim_parse::{
    AgentTools, Config, Outcome, Parsed, Tool, ToolCall, ToolParseError, ToolSet, agent_outcome,
    parse,
};

/// The agent of every test: `get_weather` and `get_time` are normal tools, `finish` and
/// `give_up` end the loop.
fn agent() -> AgentTools {
    AgentTools::new(["get_weather", "get_time"], ["finish", "give_up"])
}

/// A config that declares the normal tools and, through the agent, the exit tools.
fn config() -> Config {
    let declared =
        ToolSet::new(vec![Tool::new("get_weather", None), Tool::new("get_time", None)]).unwrap();
    Config::with_tools(agent().declare_exit_tools(&declared).unwrap())
}

/// Parses `raw` with `config` and returns its outcome for [`agent`].
fn check(raw: &str, config: &Config) -> Outcome {
    agent_outcome(&parse(raw, config), raw, &agent())
}

fn call(name: &str, arguments: &str) -> String {
    format!("<tool_call>{{\"name\": \"{name}\", \"arguments\": {arguments}}}</tool_call>")
}

fn names(calls: &[ToolCall]) -> Vec<&str> {
    calls.iter().map(|call| call.name.as_str()).collect()
}

/// The calls and exits of an [`Outcome::Calls`], by name.
fn calls_and_exits(outcome: &Outcome) -> (Vec<&str>, Vec<&str>) {
    match outcome {
        Outcome::Calls { calls, exits } => (names(calls), names(exits)),
        other => panic!("expected calls, got {other:?}"),
    }
}

/// The reason of an [`Outcome::Failed`], after checking that it kept `raw` byte for byte.
fn failure(outcome: Outcome, raw: &str) -> ToolParseError {
    match outcome {
        Outcome::Failed { reason, raw: kept } => {
            assert_eq!(kept.as_bytes(), raw.as_bytes());
            reason
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn unknown(names: &[&str]) -> ToolParseError {
    ToolParseError::UnknownTools { names: names.iter().map(|&name| name.to_owned()).collect() }
}

#[test]
fn normal_calls_need_results_and_there_are_no_exits() {
    let weather = call("get_weather", r#"{"city":"Paris"}"#);
    let raw = format!("Checking.\n{weather}\n{}", call("get_time", r#"{"timezone":"UTC"}"#));
    let outcome = check(&raw, &config());
    assert_eq!(calls_and_exits(&outcome), (vec!["get_weather", "get_time"], vec![]));
    let Outcome::Calls { calls, .. } = outcome else { unreachable!() };
    assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
}

#[test]
fn exit_call_is_a_signal_not_a_call() {
    let raw = call("finish", r#"{"answer":"done"}"#);
    let outcome = check(&raw, &config());
    assert_eq!(calls_and_exits(&outcome), (vec![], vec!["finish"]));
    let Outcome::Calls { exits, .. } = outcome else { unreachable!() };
    assert_eq!(exits[0].arguments, r#"{"answer":"done"}"#);
}

#[test]
fn normal_and_exit_calls_in_one_output_keep_both_lists_in_order() {
    let raw = [
        call("get_weather", r#"{"city":"Paris"}"#),
        call("give_up", "{}"),
        call("get_time", "{}"),
        call("finish", "{}"),
    ]
    .join("\n");
    let outcome = check(&raw, &config());
    assert_eq!(
        calls_and_exits(&outcome),
        (vec!["get_weather", "get_time"], vec!["give_up", "finish"])
    );
}

#[test]
fn misspelled_exit_call_is_matched_to_the_declared_exit_tool() {
    let raw = call("functions.Finish", "{}");
    assert_eq!(calls_and_exits(&check(&raw, &config())), (vec![], vec!["finish"]));
}

#[test]
fn accepted_call_to_an_unlisted_name_fails_and_keeps_raw() {
    // No tool list: the parser accepts every name, the agent knows only its own.
    let raw = format!("{}\r\n{}  ", call("get_weather", "{}"), call("delete_all", "{ 'x': 1 }"));
    let reason = failure(check(&raw, &Config::default()), &raw);
    assert_eq!(reason, unknown(&["delete_all"]));
}

#[test]
fn call_rejected_by_the_tool_set_fails() {
    let raw = format!(
        "{}\n{}\n{}",
        call("rm_rf", "{}"),
        call("get_time", "{}"),
        call("launch", r#"{"target":"moon"}"#)
    );
    let parsed = parse(&raw, &config());
    assert_eq!(parsed.rejected.len(), 2, "{parsed:?}");
    let reason = failure(agent_outcome(&parsed, &raw, &agent()), &raw);
    assert_eq!(reason, unknown(&["rm_rf", "launch"]));
}

#[test]
fn unknown_names_are_listed_once_in_input_order() {
    let raw = [call("b_tool", "{}"), call("a_tool", "{}"), call("b_tool", "{}")].join("\n");
    let reason = failure(check(&raw, &Config::default()), &raw);
    assert_eq!(reason, unknown(&["b_tool", "a_tool"]));
}

#[test]
fn exit_tool_not_declared_to_the_parser_is_rejected_and_fails() {
    // Without `declare_exit_tools` the parser never returns the exit call.
    let declared = ToolSet::new(vec![Tool::new("get_weather", None)]).unwrap();
    let raw = call("finish", "{}");
    let reason = failure(check(&raw, &Config::with_tools(declared)), &raw);
    assert_eq!(reason, unknown(&["finish"]));
}

#[test]
fn tool_syntax_without_a_call_fails() {
    for raw in [
        "<tool_call>{\"arguments\": {}}</tool_call>",
        "Let me look.\n<tool_call>[1, 2]</tool_call>",
        "<tool_call>{not json}</tool_call>",
    ] {
        let parsed = parse(raw, &config());
        assert!(parsed.saw_tool_syntax && parsed.calls.is_empty(), "{parsed:?}");
        let reason = failure(agent_outcome(&parsed, raw, &agent()), raw);
        assert_eq!(reason, ToolParseError::NoCallParsed);
    }
}

#[test]
fn tool_call_tag_around_prose_is_plain_text_today() {
    // FIXME: the parser does not flag a `<tool_call>` block whose body is not JSON at all
    // (`saw_tool_syntax` stays false, no `malformed_call` warning), so the outcome is `Text`
    // where an agent loop wants `Failed { reason: NoCallParsed, .. }`. The fix belongs in the
    // parser; once it sets `saw_tool_syntax`, expect `NoCallParsed` here.
    let raw = "<tool_call>\nnot json at all\n</tool_call>";
    let parsed = parse(raw, &config());
    assert!(!parsed.saw_tool_syntax, "{parsed:?}");
    assert_eq!(agent_outcome(&parsed, raw, &agent()), Outcome::Text);
}

#[test]
fn saw_tool_syntax_without_calls_fails_whatever_the_parser_flagged() {
    let mut parsed = Parsed::default();
    parsed.saw_tool_syntax = true;
    let raw = "<tool_call>\nnot json at all\n</tool_call>";
    let reason = failure(agent_outcome(&parsed, raw, &agent()), raw);
    assert_eq!(reason, ToolParseError::NoCallParsed);
}

#[test]
fn plain_text_is_an_answer() {
    for raw in ["", "It is sunny in Paris.", "Use {braces} and <b>tags</b> freely."] {
        assert_eq!(check(raw, &config()), Outcome::Text, "{raw:?}");
    }
}

#[test]
fn any_normal_accepts_every_name_but_the_exits() {
    let agent = AgentTools::any_normal(["finish"]);
    assert!(agent.is_normal("anything") && !agent.is_exit("anything"));
    assert!(agent.is_exit("finish") && !agent.is_normal("finish"));
    let raw = [call("search", "{}"), call("finish", "{}")].join("\n");
    let outcome = agent_outcome(&parse(&raw, &Config::default()), &raw, &agent);
    assert_eq!(calls_and_exits(&outcome), (vec!["search"], vec!["finish"]));
}

#[test]
fn a_name_both_normal_and_exit_is_an_exit() {
    let agent = AgentTools::new(["finish", "get_time"], ["finish", "finish"]);
    assert_eq!(agent.exit_tools(), ["finish"]);
    assert!(agent.is_exit("finish") && !agent.is_normal("finish"));
}

#[test]
fn declare_exit_tools_adds_only_missing_names() {
    let declared = ToolSet::new(vec![
        Tool::new("finish", Some(serde_json::json!({"type": "object"}))),
        Tool::new("get_time", None),
    ])
    .unwrap();
    let tools = agent().declare_exit_tools(&declared).unwrap();
    let names: Vec<&str> = tools.tools().iter().map(Tool::name).collect();
    assert_eq!(names, ["finish", "get_time", "give_up"]);
    assert!(tools.tools()[0].parameters().is_some());
    assert!(tools.tools()[2].parameters().is_none());
    assert!(AgentTools::any_normal([""]).declare_exit_tools(&declared).is_err());
}

#[test]
fn errors_are_lowercase_without_a_period_and_suggest_a_fix() {
    let messages =
        [unknown(&["rm_rf", "launch"]).to_string(), ToolParseError::NoCallParsed.to_string()];
    assert_eq!(
        messages[0],
        concat!(
            "the output calls unknown tools: `rm_rf`, `launch`; ",
            "call only the offered tools, or offer these too",
        )
    );
    for message in messages {
        assert!(message.starts_with(char::is_lowercase), "{message}");
        assert!(!message.ends_with('.'), "{message}");
    }
    assert_eq!(unknown(&[]).code(), "unknown_tools");
    assert_eq!(ToolParseError::NoCallParsed.code(), "no_call_parsed");
    let _: &dyn std::error::Error = &ToolParseError::NoCallParsed;
}
