use toolshim_parse::{Rejected, Warning, WarningCode};

use super::*;

fn call(id: Option<&str>, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.map(str::to_owned),
        name: name.to_owned(),
        arguments: arguments.to_owned(),
        span: 0..0,
    }
}

fn warning(code: WarningCode, message: &str, call_idx: Option<usize>) -> Warning {
    Warning { code, message: message.to_owned(), call_idx, span: 0..0 }
}

fn sample() -> Parsed {
    Parsed {
        calls: vec![
            call(
                Some("call_1"),
                "get_weather",
                r#"{"city":"Paris","n":123456789012345678901234567890}"#,
            ),
            call(None, "get_time", "{}"),
        ],
        content: "Let me \"check\".\n\u{1}🦀".to_owned(),
        reasoning: "think".to_owned(),
        rejected: vec![Rejected {
            name: "rm".to_owned(),
            reason: "not a tool".to_owned(),
            span: 0..0,
        }],
        warnings: vec![warning(WarningCode::RepairedJson, "added `}`", Some(0))],
        saw_tool_syntax: true,
    }
}

#[test]
fn parsed_renders_keys_in_contract_order() {
    let expected = concat!(
        r#"{"calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Paris","n":123456789012345678901234567890}},"#,
        r#"{"id":null,"name":"get_time","arguments":{}}],"#,
        r#""content":"Let me \"check\".\n\u0001🦀","reasoning":"think","#,
        r#""rejected":[{"name":"rm","reason":"not a tool"}],"#,
        r#""warnings":[{"code":"repaired_json","message":"added `}`"}],"saw_tool_syntax":true}"#,
    );
    assert_eq!(render_parsed(&sample(), None, Layout::Compact).unwrap(), expected);
}

#[test]
fn empty_parsed_renders_empty_fields() {
    let expected = r#"{"calls":[],"content":"","reasoning":"","rejected":[],"warnings":[],"saw_tool_syntax":false}"#;
    assert_eq!(render_parsed(&Parsed::default(), None, Layout::Compact).unwrap(), expected);
}

#[test]
fn pretty_parsed_is_the_same_json_indented_by_two() {
    let parsed = sample();
    let compact = render_parsed(&parsed, None, Layout::Compact).unwrap();
    let pretty = render_parsed(&parsed, None, Layout::Pretty).unwrap();
    assert!(
        pretty.starts_with("{\n  \"calls\": [\n    {\n      \"id\": \"call_1\",\n"),
        "{pretty}"
    );
    assert!(pretty.contains(
        "\"arguments\": {\n        \"city\": \"Paris\",\n        \"n\": 123456789012345678901234567890\n      }"
    ));
    assert!(pretty.ends_with("\n  \"saw_tool_syntax\": true\n}"), "{pretty}");
    let compact: serde_json::Value = serde_json::from_str(&compact).unwrap();
    let pretty: serde_json::Value = serde_json::from_str(&pretty).unwrap();
    assert_eq!(compact, pretty);
}

#[test]
fn events_render_as_typed_objects() {
    let cases = [
        (Event::Text("a\"b".into()), r#"{"type":"text","text":"a\"b"}"#),
        (Event::Reasoning("hm".into()), r#"{"type":"reasoning","text":"hm"}"#),
        (
            Event::CallStart { call_idx: 0, id: None, name: "get_time".to_owned() },
            r#"{"type":"call_start","call_idx":0,"id":null,"name":"get_time"}"#,
        ),
        (
            Event::CallStart { call_idx: 2, id: Some("c".to_owned()), name: "f".to_owned() },
            r#"{"type":"call_start","call_idx":2,"id":"c","name":"f"}"#,
        ),
        (
            Event::ArgsDelta { call_idx: 0, json: r#"{"city":"Pa"#.into() },
            r#"{"type":"args_delta","call_idx":0,"json":"{\"city\":\"Pa"}"#,
        ),
        (
            Event::CallEnd { call_idx: 0, call: call(None, "f", r#"{"big":1e400}"#) },
            r#"{"type":"call_end","call_idx":0,"call":{"id":null,"name":"f","arguments":{"big":1e400}}}"#,
        ),
        (
            Event::Rejected(Rejected {
                name: "x".to_owned(),
                reason: "unknown".to_owned(),
                span: 0..1,
            }),
            r#"{"type":"rejected","name":"x","reason":"unknown"}"#,
        ),
        (
            Event::Warning(warning(WarningCode::Truncated, "cut", Some(1))),
            r#"{"type":"warning","code":"truncated","message":"cut","call_idx":1}"#,
        ),
        (
            Event::Warning(warning(WarningCode::MalformedCall, "bad", None)),
            r#"{"type":"warning","code":"malformed_call","message":"bad","call_idx":null}"#,
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(render_event(&event).unwrap(), expected);
    }
}

#[test]
fn invalid_arguments_are_an_internal_error_not_bad_json() {
    let parsed = Parsed { calls: vec![call(None, "f", r#"{"a":"#)], ..Parsed::default() };
    let err = render_parsed(&parsed, None, Layout::Compact).unwrap_err();
    assert!(format!("{err:#}").contains("internal error"), "{err:#}");
    let event = Event::CallEnd { call_idx: 0, call: call(None, "f", "") };
    assert!(render_event(&event).is_err());
}

#[test]
fn chunks_split_on_characters_not_bytes() {
    let size = |n| NonZeroUsize::new(n).unwrap();
    let chunks: Vec<&str> = char_chunks("héllo🦀!", size(2)).collect();
    assert_eq!(chunks, ["hé", "ll", "o🦀", "!"]);
    let chunks: Vec<&str> = char_chunks("ab", size(5)).collect();
    assert_eq!(chunks, ["ab"]);
    assert_eq!(char_chunks("", size(1)).count(), 0);
    assert_eq!(char_chunks("日本語", size(1)).collect::<String>(), "日本語");
}

#[test]
fn event_lines_fold_to_the_chunked_parse() {
    let input = "Hi <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> bye";
    let config = Config::default();
    let size = NonZeroUsize::new(3).unwrap();
    let mut out = Vec::new();
    write_events(input, &config, Some(size), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(event["type"].is_string(), "{line}");
    }
    let chunked = parse_in_chunks(input, &config, size);
    assert_eq!(chunked, toolshim_parse::parse(input, &config));
}

#[test]
fn outcome_is_the_last_key_and_renders_each_kind_in_contract_order() {
    let parsed = Parsed { calls: vec![call(None, "get_time", "{}")], ..Parsed::default() };
    let calls = Outcome::Calls {
        calls: vec![call(None, "get_time", "{}")],
        exits: vec![call(Some("c2"), "finish", r#"{"answer":1e400}"#)],
    };
    let rendered = render_parsed(&parsed, Some(&calls), Layout::Compact).unwrap();
    assert!(
        rendered.ends_with(concat!(
            r#""saw_tool_syntax":false,"outcome":{"kind":"calls","#,
            r#""calls":[{"id":null,"name":"get_time","arguments":{}}],"#,
            r#""exits":[{"id":"c2","name":"finish","arguments":{"answer":1e400}}]}}"#,
        )),
        "{rendered}"
    );

    let text = render_parsed(&Parsed::default(), Some(&Outcome::Text), Layout::Compact).unwrap();
    assert!(text.ends_with(r#""saw_tool_syntax":false,"outcome":{"kind":"text"}}"#), "{text}");

    let raw = "<tool_call>{\"name\":\"rm\"}</tool_call>\r\n\u{1}";
    let failed = Outcome::Failed {
        reason: ToolParseError::UnknownTools { names: vec!["rm".to_owned()] },
        raw: raw.to_owned(),
    };
    let rendered = render_outcome(&failed).unwrap().render(Layout::Compact);
    let expected = serde_json::json!({
        "kind": "failed",
        "reason": "unknown_tools",
        "message": ToolParseError::UnknownTools { names: vec!["rm".to_owned()] }.to_string(),
        "unknown_tools": ["rm"],
        "raw": raw,
    });
    assert_eq!(serde_json::from_str::<serde_json::Value>(&rendered).unwrap(), expected);
    assert!(rendered.starts_with(r#"{"kind":"failed","reason":"unknown_tools","message":"#));
    assert!(rendered.contains(r#","unknown_tools":["rm"],"raw":"#), "{rendered}");

    let no_call = Outcome::Failed { reason: ToolParseError::NoCallParsed, raw: String::new() };
    let rendered = render_outcome(&no_call).unwrap().render(Layout::Compact);
    assert!(rendered.starts_with(r#"{"kind":"failed","reason":"no_call_parsed","#), "{rendered}");
    assert!(rendered.ends_with(r#","unknown_tools":[],"raw":""}"#), "{rendered}");
}

#[test]
fn exit_tools_are_trimmed_and_an_empty_name_is_a_usage_error() {
    let names = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
    assert!(agent_tools(&[], None).unwrap().is_none());

    let agent = agent_tools(&names(&["finish", " give_up "]), None).unwrap().unwrap();
    assert_eq!(agent.exit_tools(), ["finish", "give_up"]);
    assert!(agent.is_normal("anything"));

    let tools = ToolSet::new(vec![Tool::new("get_time", None)]).unwrap();
    let agent = agent_tools(&names(&["finish"]), Some(&tools)).unwrap().unwrap();
    assert!(agent.is_normal("get_time") && !agent.is_normal("anything"));

    let err = agent_tools(&names(&["finish", ""]), None).unwrap_err();
    assert!(err.to_string().contains("a tool name is empty"), "{err}");
}
