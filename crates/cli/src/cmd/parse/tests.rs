use super::*;

/// A real parse with what the output shapes must carry: a call id, a number no float
/// holds, escapes, a control character, reasoning, a rejected call and a warning.
fn sample() -> Parsed {
    let tools =
        ToolSet::from_json_str(r#"[{"name": "get_weather"}, {"name": "get_time"}]"#).unwrap();
    let input = concat!(
        "<think>think</think>Let me \"check\".\n\u{1}🦀",
        r#"<tool_call>{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris", "n": 123456789012345678901234567890}}</tool_call>"#,
        r#"<tool_call>{"name": "get_time", "arguments": {}}</tool_call>"#,
        r#"<tool_call>{"name": "rm", "arguments": {}}</tool_call>"#,
        r#"<tool_call>{"name": "get_time", "arguments": {'a': 1}}</tool_call>"#,
    );
    let mut config = Config::with_tools(tools);
    config.rejected_text = RejectedText::Hide;
    toolshim_parse::parse(input, &config)
}

#[test]
fn parsed_renders_keys_in_contract_order() {
    let expected = concat!(
        r#"{"calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Paris","n":123456789012345678901234567890}},"#,
        r#"{"id":null,"name":"get_time","arguments":{}},{"id":null,"name":"get_time","arguments":{"a":1}}],"#,
        r#""incomplete":[],"#,
        r#""content":"Let me \"check\".\n\u0001🦀","reasoning":"think","#,
        r#""rejected":[{"name":"rm","reason":"`rm` is not a declared tool; declared: get_weather, get_time"}],"#,
        r#""warnings":[{"code":"repaired_json","message":"a key was quoted with other quotes than \""}],"saw_tool_syntax":true}"#,
    );
    assert_eq!(render_parsed(&sample(), None, Layout::Compact).unwrap(), expected);
}

#[test]
fn empty_parsed_renders_empty_fields() {
    let expected = r#"{"calls":[],"incomplete":[],"content":"","reasoning":"","rejected":[],"warnings":[],"saw_tool_syntax":false}"#;
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
    assert!(pretty.contains("\"arguments\": {}\n"), "{pretty}");
    assert!(pretty.ends_with("\n  \"saw_tool_syntax\": true\n}"), "{pretty}");
    let compact: serde_json::Value = serde_json::from_str(&compact).unwrap();
    let pretty: serde_json::Value = serde_json::from_str(&pretty).unwrap();
    assert_eq!(compact, pretty);
}

#[test]
fn events_render_as_typed_objects_with_the_type_first() {
    let mut parser = StreamParser::new(&Config::default());
    let mut events = Vec::new();
    parser.feed(r#"Hi <tool_call>{"name": "f", "arguments": {"big": 1e400}}"#, &mut events);
    parser.finish(&mut events);
    let lines: Vec<String> = events.iter().map(|event| render_event(event).unwrap()).collect();
    assert_eq!(
        lines,
        [
            r#"{"type":"text","text":"Hi "}"#,
            r#"{"type":"call_start","call_idx":0,"id":null,"name":"f"}"#,
            r#"{"type":"args_delta","call_idx":0,"json":"{\"big\":1e400}"}"#,
            r#"{"type":"call_end","call_idx":0,"call":{"id":null,"name":"f","arguments":{"big":1e400}},"complete":true}"#,
        ]
    );
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
fn outcome_is_the_last_key() {
    let parsed = sample();
    let agent = AgentTools::any_normal(["finish"]);
    let outcome = agent_outcome(&parsed, "raw", &agent);
    let rendered = render_parsed(&parsed, Some(&outcome), Layout::Compact).unwrap();
    assert!(
        rendered.contains(
            r#""saw_tool_syntax":true,"outcome":{"kind":"failed","reason":"unknown_tools","#
        ),
        "{rendered}"
    );
    assert!(rendered.ends_with(r#","unknown_tools":["rm"],"raw":"raw"}}"#), "{rendered}");
    let text = render_parsed(&Parsed::default(), Some(&Outcome::Text), Layout::Compact).unwrap();
    assert!(text.ends_with(r#""saw_tool_syntax":false,"outcome":{"kind":"text"}}"#), "{text}");
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
