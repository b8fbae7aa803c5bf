use toolshim_parse::{Config, Parsed, WarningCode};

use crate::corpus::{chunk_by_chars, parse_complete, stream_events};

/// Parses `input` complete and in 1-, 3- and 4-character chunks; all must agree.
fn parse_all_ways(input: &str) -> Parsed {
    let config = Config::default();
    let complete = parse_complete(input, &config);
    for size in [1, 3, 4] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
    complete
}

/// Asserts that `parsed` has a warning of `code` whose message mentions `needle`.
#[track_caller]
fn assert_warns(parsed: &Parsed, code: WarningCode, needle: &str) {
    assert!(
        parsed.warnings.iter().any(|w| w.code == code && w.message.contains(needle)),
        "no {code:?} warning mentioning {needle:?}: {:?}",
        parsed.warnings
    );
}

fn assert_all_text(input: &str) {
    let parsed = parse_all_ways(input);
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.content, input);
}

#[test]
fn issue_2_long_backtick_run_is_text() {
    assert_all_text(&"`".repeat(30_000));
    assert_all_text(&format!("```json\n{}", "`".repeat(30_000)));
}

#[test]
fn issue_2_many_open_brackets_are_text() {
    assert_all_text(&"{".repeat(20_000));
    assert_all_text(&"[".repeat(20_000));
    assert_all_text(&"<tool_c".repeat(5_000));
}

#[test]
fn issue_2_long_tag_name_is_text() {
    assert_all_text(&format!("<{}", "a".repeat(50_000)));
}

#[test]
fn issue_2_slash_that_is_not_a_comment_breaks_the_same_way_in_every_chunking() {
    parse_all_ways("<tool_call>\n{/<function=get_weather>0012345678901234567890123");
}

#[test]
fn issue_2_second_json_body_ends_the_call() {
    let parsed = parse_all_ways(
        r#"<invoke name="get_weather">{"city":"Paris"}{"tool_calls": [{"name":"get_time","arguments":{}}]}"#,
    );
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    assert_eq!(parsed.calls[0].arguments, r#"{"city":"Paris"}"#);
}

#[test]
fn issue_2_fenced_call_element_cut_off_still_ends() {
    let parsed = parse_all_ways("<function=get_weather>```json\n{\"name\": ");
    // Cut off inside its arguments: incomplete, not a call (issue 17).
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.incomplete.len(), 1);
    assert_eq!(parsed.incomplete[0].arguments, "{}");
}

#[test]
fn issue_2_calls_never_nest() {
    let parsed = parse_all_ways(
        "<function=get_weather><invoke name=\"get_time\"><parameter name=\"timezone\">UTC</parameter></invoke>",
    );
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
}

#[test]
fn issue_2_surrogate_pair_split_across_chunks() {
    let parsed = parse_all_ways(r#"{"name":"f","arguments":{"s":"\ud83d\ude00 東京"}}"#);
    assert_eq!(parsed.calls[0].arguments, r#"{"s":"😀 東京"}"#);
}

#[test]
fn issue_2_call_start_before_shown_text_does_not_panic() {
    // Found by the `parse` fuzz target: a container became a call after the text of a
    // rejected call before it had been shown.
    let parsed = parse_all_ways("<function=><toolcall><parameter>");
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.content, "<function=><toolcall><parameter>");
    parse_all_ways("<function=x><toolcall><parameter>");
}

#[test]
fn issue_2_limits_decide_the_same_in_every_chunking() {
    // Found by the `stream_vs_complete` fuzz target: a look-ahead limit was checked after
    // the byte, so "limit reached" and "buffer ended" disagreed.
    let name = "n".repeat(256);
    parse_all_ways(&format!("<function={name}>{{\"a\":1}}</function>"));
    parse_all_ways(&format!("```{}\n{{\"name\":\"f\",\"arguments\":{{}}}}\n```", "j".repeat(37)));
    parse_all_ways(&format!(
        "```json\n{}{{\"name\":\"f\",\"arguments\":{{}}}}\n```",
        " ".repeat(64)
    ));
}

#[test]
fn issue_2_long_names_are_capped_the_same_in_every_chunking() {
    // Found by the `stream_vs_complete` fuzz target: the 512-byte name cap took whole
    // pieces while under it, so the kept prefix depended on the chunking.
    let name = format!("{}{}", "a".repeat(510), "😀".repeat(40));
    let parsed = parse_all_ways(&format!(r#"{{"name": "{name}", "arguments": {{}}}}"#));
    assert_eq!(parsed.calls[0].name, "a".repeat(510));
}

/// Found by fuzzing: a rejected call whose text was already shown (rejected text is kept)
/// took its span end from how much had been shown, which depends on the chunking.
#[test]
fn issue_5_rejected_span_does_not_depend_on_shown_text() {
    let tools = crate::corpus::load_tools("weather").unwrap();
    let config = Config::with_tools(tools);
    let input = "<function=e><tools><arg>q</arg>";
    let complete = parse_complete(input, &config);
    assert_eq!(complete.rejected[0].span, 0..12);
    for size in [1, 2, 3] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Found by fuzzing (`stream_vs_complete`): the example guard read the sentence before a
/// call from a text tail whose length depended on where chunks ended, so a sentence of
/// more than 256 bytes gave a different `example` warning when streamed.
#[test]
fn issue_6_example_intro_does_not_depend_on_chunking() {
    let tools = crate::corpus::load_tools("weather").unwrap();
    let config = Config::with_tools(tools);
    let input =
        format!("{} for example [get_weather(city=\"Paris\")] and more", "word ".repeat(150));
    let complete = parse_complete(&input, &config);
    assert!(complete.calls.is_empty(), "{complete:?}");
    assert!(complete.warnings.iter().any(|w| w.message.contains("example")), "{complete:?}");
    for size in [1, 2, 3, 7, 100, 300] {
        let events = stream_events(chunk_by_chars(&input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Found by the `native` fuzz target (mistral_v11 pinned): a `[CALL_ID]` whose id runs
/// past the head limit before a `{` ends it. `parse` saw the `{` (the search window is
/// a little wider than the limit) and rejected a call named `g`; streaming gave up at
/// the limit and kept plain text. Both now decide by where the marker starts.
#[test]
fn issue_8_native_head_limit_does_not_depend_on_chunking() {
    let tools = crate::corpus::load_tools("weather").unwrap();
    let format = toolshim_parse::Format::find("mistral_v11").unwrap();
    let mut config = Config::with_tools(tools);
    config.dialects = format.dialects().unwrap();
    for pad in [500, 520, 540, 560, 600] {
        let input = format!("[TOOL_CALLS]g[CALL_ID]00<{}\"s\": {{", "x".repeat(pad));
        let complete = parse_complete(&input, &config);
        for size in [1, 2, 7, 64, 700] {
            let events = stream_events(chunk_by_chars(&input, size), &config);
            assert_eq!(Parsed::from_events(events), complete, "pad {pad}, chunk size {size}");
        }
    }
}

/// Found by the `native` fuzz target (step3 pinned): Step3's `function<｜tool_sep｜>`
/// inside an open `<invoke>` starts the next call. `parse` saw the whole prefix and
/// ended the invoke there; streaming saw `f`, `fu`, … and let them through as text. A
/// part of the prefix is now held until it is complete or ruled out.
#[test]
fn issue_8_name_prefix_split_inside_a_call_is_held() {
    let format = toolshim_parse::Format::find("step3").unwrap();
    let mut config = Config::default();
    config.dialects = format.dialects().unwrap();
    let input = "<｜tool_call_begin｜>f<｜tool_sep｜><invoke name=\"i\">function<｜tool_sep｜><";
    let complete = parse_complete(input, &config);
    assert_eq!(complete.calls.len(), 2, "{complete:?}");
    for size in [1, 2, 3, 5, 7] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Issue 15: a parameter value in markup was read with a fixed depth of 128, whatever
/// `Config::max_depth` said, and a value past it became a string without a word. It is
/// read with `max_depth` now, and a value past it stays a string with a `limit_reached`
/// warning, as JSON bodies warn.
#[test]
fn issue_15_markup_value_past_max_depth_warns_limit_reached() {
    let mut config = Config::default();
    config.max_depth = 4;
    let deep = format!("{}1{}", "[".repeat(5), "]".repeat(5));
    let input = format!("<function=f><parameter=x>{deep}</parameter></function>");
    let complete = parse_complete(&input, &config);
    assert_eq!(complete.calls[0].arguments, format!(r#"{{"x":"{deep}"}}"#));
    let codes: Vec<_> = complete.warnings.iter().map(|w| w.code).collect();
    assert_eq!(codes, [WarningCode::LimitReached], "{complete:?}");
    // Within the limit the value is JSON, as before.
    let shallow = format!("{}1{}", "[".repeat(4), "]".repeat(4));
    let input = format!("<function=f><parameter=x>{shallow}</parameter></function>");
    let complete = parse_complete(&input, &config);
    assert_eq!(complete.calls[0].arguments, format!(r#"{{"x":{shallow}}}"#));
    assert!(complete.warnings.is_empty(), "{complete:?}");
    for size in [1, 3, 7] {
        let events = stream_events(chunk_by_chars(&input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Issue 15: the same for a string converted to the array its schema declares.
#[test]
fn issue_15_coerced_value_past_max_depth_warns_limit_reached() {
    let tools = toolshim_parse::ToolSet::from_json_str(
        r#"[{"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}]"#,
    )
    .unwrap();
    let mut config = Config::with_tools(tools);
    config.max_depth = 4;
    let input = r#"{"name": "f", "arguments": {"x": "[[[[[1]]]]]"}}"#;
    let complete = parse_complete(input, &config);
    assert_eq!(complete.calls[0].arguments, r#"{"x":"[[[[[1]]]]]"}"#);
    let codes: Vec<_> = complete.warnings.iter().map(|w| w.code).collect();
    assert_eq!(codes, [WarningCode::LimitReached], "{complete:?}");
    let within = r#"{"name": "f", "arguments": {"x": "[[[1]]]"}}"#;
    assert_eq!(parse_complete(within, &config).calls[0].arguments, r#"{"x":[[[1]]]}"#);
}

/// Issue 15: a region that ended after an `<arg_type>` left its type to the next region,
/// whose `<arg_value>` (without an `<arg_key>`) then stayed a string.
#[test]
fn issue_15_key_type_does_not_leak_into_the_next_region() {
    let input = "<tool_call>f<arg_type>string</arg_type></tool_call>\n\
                 <tool_call>g<arg_value>5</arg_value></tool_call>";
    let parsed = parse_all_ways(input);
    let g = parsed.calls.iter().find(|call| call.name == "g").unwrap();
    assert_eq!(g.arguments, r#"{"":5}"#);
}

/// Found by the `stream_vs_complete` fuzz target (issue 15; the behaviour predates it):
/// arguments given as a JSON string that holds a list were written, and streamed as
/// argument deltas, before the call found out they were not an object and became `{}`.
/// Nothing is written for them now, so the deltas add up to the arguments.
#[test]
fn issue_15_arguments_string_holding_a_list_streams_no_delta() {
    let input = concat!(
        "```json\n",
        r#"{"type": "function", "function": {"name": "get_weather", "arguments": "[\"city\": \"Paris\"]"}}"#,
        "\n```\n",
    );
    let config = Config::default();
    let complete = parse_complete(input, &config);
    assert_eq!(complete.calls[0].arguments, "{}");
    assert_eq!(complete.warnings[0].code, WarningCode::InvalidArguments);
    for size in [1, 2, 3, 7] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        let deltas: String = events
            .iter()
            .filter_map(|event| match event {
                toolshim_parse::Event::ArgsDelta { json, .. } => Some(json.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, "{}", "chunk size {size}");
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Found while mending a repetition in free text (issue 15; the behaviour predates it):
/// a tool parameter named `""` made the free-text reader loop forever when the tool's
/// name ended a sentence. An empty name cannot be named in prose: it is never guessed.
#[test]
fn issue_15_free_text_with_an_empty_parameter_name_ends() {
    let tools = r#"[{"type":"function","function":{"name":"get_weather","parameters":
        {"type":"object","properties":{"":{"type":"string"},"city":{"type":"string"}},
        "required":["city"]}}}]"#;
    let mut config = Config::with_tools(toolshim_parse::ToolSet::from_json_str(tools).unwrap());
    config.dialects.add(toolshim_parse::Builtin::FreeText);
    let input = "I will call get_weather. Then get_weather with city Paris.";
    let complete = parse_complete(input, &config);
    assert_eq!(complete.calls.len(), 1);
    assert_eq!(complete.calls[0].arguments, r#"{"city":"Paris"}"#);
    for size in [1, 3, 4] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
}

/// Found by the `native` fuzz target (issue 15; the behaviour predates it): a bare call
/// name followed by exactly 64 blanks (the most allowed) and a tag was a call when parsed
/// whole and text when streamed, which decided at the 64th blank without the byte after
/// it. The same held for 64 blank lines between `Action Input:` and its JSON.
#[test]
fn issue_15_the_byte_after_the_most_blanks_decides_in_every_chunking() {
    for (blanks, calls) in [(63, 1), (64, 1), (65, 0)] {
        let input = format!(
            "<tool_call>get_weather{}<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
            "\t".repeat(blanks)
        );
        assert_eq!(parse_all_ways(&input).calls.len(), calls, "{blanks} blanks");
        let bare = format!("<toolcall>s{}<", "\t".repeat(blanks));
        parse_all_ways(&bare);
    }
    for (blanks, args) in [(63, r#"{"city":"Paris"}"#), (64, r#"{"city":"Paris"}"#), (65, "{}")] {
        let input = format!(
            "Action: get_weather\nAction Input:{}{{\"city\": \"Paris\"}}",
            "\n".repeat(blanks)
        );
        assert_eq!(parse_all_ways(&input).calls[0].arguments, args, "{blanks} blank lines");
    }
}

/// Found by the `native` fuzz target (issue 17; the behaviour predates it): a
/// `tool_calls` field inside a call that already had a name opened a second call nested
/// in the first. With the inner call rejected (its text kept), streaming showed the
/// outer call's bytes as text while the whole parse put them in its span. Only a
/// nameless wrapper holds calls now, and a wrapper that held calls does not take a name.
#[test]
fn issue_17_a_call_does_not_nest_calls() {
    let input = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": 1, \
                 \"tool_calls\":{\"name\": \"g\": \"Europe/Os\n";
    let parsed = parse_all_ways(input);
    assert_eq!(parsed.calls.len(), 1);
    assert_eq!(parsed.calls[0].name, "get_weather");
    assert!(parsed.rejected.is_empty());
    assert_warns(&parsed, WarningCode::IgnoredField, "tool_calls");
    // What follows the broken JSON inside the element is dropped, with a warning that
    // carries it (the arguments were whole, so the call stands).
    assert_eq!(parsed.content, "Checking.");
    assert_warns(&parsed, WarningCode::IgnoredText, "Europe/Os");

    let wrapper = "<tool_call>{\"tool_calls\":[{\"name\": \"get_weather\", \"arguments\": \
                   {\"city\": \"x\"}}], \"name\": \"get_time\", \"arguments\": {}}</tool_call>";
    let parsed = parse_all_ways(wrapper);
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather"]);
    assert_eq!(parsed.content, "");
    // The wrapper's own name and arguments are no call, and not lost either.
    let ignored: Vec<&str> = parsed
        .warnings
        .iter()
        .filter(|w| w.code == WarningCode::IgnoredField)
        .map(|w| w.message.as_str())
        .collect();
    assert!(ignored.iter().any(|m| m.contains("get_time")), "{ignored:?}");
    assert!(ignored.iter().any(|m| m.contains("arguments")), "{ignored:?}");
}

/// Found in review: a wrapper that held calls could still take a name in Apertus's
/// single-key form and become a call, and the call box it left for reuse kept its
/// `holds_calls` mark, so the next call's `name` and `arguments` were ignored and the call
/// was shown as text. The wrapper's single key is now an ignored field, as `name` is in a
/// wrapper, and a reused call starts afresh.
#[test]
fn issue_17_a_reused_call_does_not_keep_its_wrapper_mark() {
    let format = toolshim_parse::Format::find("apertus").unwrap();
    let mut config = Config::default();
    config.dialects = format.dialects().unwrap();
    let input = "<|tools_prefix|>[{\"tool_calls\": [{\"get_time\": {\"timezone\": \"UTC\"}}], \
                 \"get_weather\": {\"city\": \"Oslo\"}}, {\"name\": \"get_weather\", \
                 \"arguments\": {\"city\": \"Paris\"}}]<|tools_suffix|>";
    let complete = parse_complete(input, &config);
    for size in [1, 3, 4] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
    let calls: Vec<(&str, &str)> =
        complete.calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str())).collect();
    assert_eq!(
        calls,
        [("get_time", r#"{"timezone":"UTC"}"#), ("get_weather", r#"{"city":"Paris"}"#)],
        "{complete:?}"
    );
    assert_eq!(complete.content, "");
    assert_warns(&complete, WarningCode::IgnoredField, "get_weather");
}

/// Found in review: a word after a call's whole JSON inside its element
/// (`<tool_call>{…} stray</tool_call>`) was read as a bare call name for the element, so a
/// second call named `stray` covered the whole element, and its text was shown while the
/// first call stood too: the same bytes were both a call and content. A bare name counts
/// only before anything else in the element; after a call's JSON the stray text is
/// dropped with a warning that carries it, as it is after JSON that broke off.
#[test]
fn issue_17_a_word_after_a_calls_json_is_no_second_call() {
    let parsed = parse_all_ways(
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}} \
         stray</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
    );
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"], "{parsed:?}");
    assert!(parsed.rejected.is_empty(), "{parsed:?}");
    assert_eq!(parsed.content, "");
    assert_warns(&parsed, WarningCode::IgnoredText, "stray");

    // JSON that is no call: everything stays text, and nothing claims to be dropped.
    let data = "Data: <tool_call>{\"a\": 1} stray</tool_call> end";
    let parsed = parse_all_ways(data);
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.content, data);
    assert!(parsed.warnings.iter().all(|w| w.code != WarningCode::IgnoredText));

    // After a withdrawn call, the next element is read on its own.
    let withdrawn = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {bad json}</tool_call>";
    let parsed = parse_all_ways(&format!(
        "{withdrawn}\n<tool_call>{{\"name\": \"get_time\", \"arguments\": {{}}}} noise</tool_call>"
    ));
    let names: Vec<&str> = parsed.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["get_time"], "{parsed:?}");
    assert_eq!(parsed.incomplete.len(), 1);
    assert_eq!(parsed.content, withdrawn);
    assert_warns(&parsed, WarningCode::IgnoredText, "noise");
}

/// Issue 17's policy: arguments that are not JSON make no call; the call's text stays
/// content with a `malformed_call` warning (streaming ends the call, already announced,
/// with `complete: false`). A missing `}` before an end tag or marker is still a call.
#[test]
fn issue_17_arguments_that_are_not_json_stay_text() {
    for input in [
        "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {invalid json}\n</tool_call>",
        "Sure: {\"name\": \"get_weather\", \"arguments\": {city = Paris}} ok",
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\" days 3}}]",
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris France}}</tool_call>",
    ] {
        let parsed = parse_all_ways(input);
        assert!(parsed.calls.is_empty(), "{input}: {parsed:?}");
        assert_eq!(parsed.content, input, "{input}");
        assert_eq!(parsed.incomplete.len(), 1, "{input}");
        assert!(parsed.incomplete[0].span.is_empty());
        assert!(
            parsed.warnings.iter().any(|w| w.code == WarningCode::MalformedCall),
            "{input}: {:?}",
            parsed.warnings
        );
    }
    for input in [
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"\n</tool_call>",
    ] {
        let parsed = parse_all_ways(input);
        assert_eq!(parsed.calls.len(), 1, "{input}: {parsed:?}");
        assert_eq!(parsed.calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(parsed.content, "");
    }
}

/// Issue 29: since values whose end tag is missing recover at the next tag, a value's
/// own end tag followed by prose instead of a tag was read as text of the value, so the
/// value ran to the end of the output and the call came out incomplete. A value's own end
/// tag ends it; only another end tag of its own, before the next markup and within a
/// bounded stretch, shows that the first was text written inside the value.
#[test]
fn issue_29_a_values_own_end_tag_ends_it_before_prose() {
    let parsed = parse_all_ways(
        "<func_name>get_weather</func_name><param name=\"city\">北京</param>\
         <param name=\"unit\">celsius</param>\nI will report back once I have the result.",
    );
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert!(parsed.incomplete.is_empty(), "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"city":"北京","unit":"celsius"}"#);
    assert_eq!(parsed.content, "I will report back once I have the result.");

    // An end tag written inside the value, then the value's own: the first is text.
    let parsed = parse_all_ways(
        "<invoke name=\"note\"><parameter name=\"text\">a</parameter> b</parameter>",
    );
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"text":"a</parameter> b"}"#);

    // Past the bound of the look-ahead, the first end tag ends the value, in every chunking.
    let far = "x".repeat(5000);
    let parsed = parse_all_ways(&format!(
        "<invoke name=\"note\"><parameter name=\"text\">a</parameter> {far}</parameter>"
    ));
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"text":"a"}"#);
    assert!(parsed.content.starts_with("xxx"), "{parsed:?}");

    // Prose between the last value and the call's end tag (before another tag or the end
    // of the output) is the call's, dropped with a warning that carries it.
    let parsed = parse_all_ways(
        "<invoke name=\"note\"><parameter name=\"text\">a</parameter> done.</invoke>",
    );
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"text":"a"}"#);
    assert_eq!(parsed.content, "");
    assert_warns(&parsed, WarningCode::IgnoredText, "done.");

    // Prose between two parameters of a call element is the call's too; prose after the
    // last one, with no end tag of the element, is text.
    let parsed = parse_all_ways(
        "<invoke name=\"note\"><parameter name=\"a\">1</parameter> and \
         <parameter name=\"b\">2</parameter>\nDone.",
    );
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"a":1,"b":2}"#);
    assert_eq!(parsed.content, "Done.");
    assert_warns(&parsed, WarningCode::IgnoredText, "and");

    // A value whose own end tag never comes ends at the end tag around it, whatever follows.
    let parsed = parse_all_ways("<invoke name=\"note\"><parameter name=\"text\">a</invoke>\nBye.");
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(parsed.calls[0].arguments, r#"{"text":"a"}"#);
    assert_eq!(parsed.content, "\nBye.");
    assert_warns(&parsed, WarningCode::MissingEndMarker, "</parameter>");
}

/// Issue 24: values below the top level follow the schema too (BFCL's checker and typed
/// Python tools want `[12.0, 15.0, 18.0]` for an array of numbers, and `"25"` for a nested
/// field declared a string); the warning names where each coercion happened.
#[test]
fn issue_24_nested_values_follow_the_schema() {
    let config = Config::with_tools(crate::corpus::load_tools("bfcl").unwrap());
    let input = concat!(
        r#"<tool_call>{"name": "calculate_average", "arguments": {"numbers": [12, 15, 18, 2.5]}}</tool_call>"#,
        "\n",
        r#"<tool_call>{"name": "filter_records", "arguments": {"table": "t", "conditions": [{"field": "age", "operation": ">", "value": 25}]}}</tool_call>"#,
    );
    let complete = parse_complete(input, &config);
    for size in [1, 3, 4] {
        let events = stream_events(chunk_by_chars(input, size), &config);
        assert_eq!(Parsed::from_events(events), complete, "chunk size {size}");
    }
    let arguments: Vec<&str> = complete.calls.iter().map(|c| c.arguments.as_str()).collect();
    assert_eq!(
        arguments,
        [
            r#"{"numbers":[12.0,15.0,18.0,2.5]}"#,
            r#"{"table":"t","conditions":[{"field":"age","operation":">","value":"25"}]}"#,
        ]
    );
    assert_warns(&complete, WarningCode::Coerced, "`numbers[0]` was a whole number");
    assert_warns(&complete, WarningCode::Coerced, "(and 2 more values with the same schema)");
    assert_warns(&complete, WarningCode::Coerced, "`conditions[0].value` was not a string");
    assert_eq!(complete.warnings.len(), 2, "{:?}", complete.warnings);
}

/// A start marker beginning outside ASCII (`◁x▷`) and text sharing only its first byte
/// (`▁end`, both open with 0xE2): the text stays text.
#[test]
fn issue_29_a_start_marker_beginning_outside_ascii_keeps_the_text() {
    let file = r#"{"toolshim_format": 1, "dialects": [{"pair": {"id": "r", "start": "◁x▷", "ends": [],
        "head": "calls", "body": "calls", "skip": [], "inner": [], "opens": "anywhere"}}]}"#;
    let dialects =
        toolshim_parse::Dialects::from_format_file(file).unwrap_or_else(|err| panic!("{err}"));
    let mut config = Config::default();
    config.dialects = dialects;
    for input in ["▁end", "a ▁end b", "◁y", "◁x"] {
        let parsed = parse_complete(input, &config);
        assert_eq!(parsed.content, input, "{parsed:?}");
        assert!(parsed.calls.is_empty());
    }
}

/// Issue 29 (found by the `stream_vs_complete` fuzz target with long inputs): a rejected
/// Functionary `>>>NAME` line kept its text, and the engine showed it after every step,
/// so a `<use_mcp_tool>` container after it showed its `<tool_name>` field's bytes as
/// text when they came one at a time, and then gave them to the call as well. A
/// container that may still become a call now holds its bytes, and its tag is the
/// call's syntax, not the rejected call's text (also before a JSON call in it).
#[test]
fn issue_29_container_after_a_rejected_call_holds_its_bytes() {
    let tools = r#"[
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"timezone": {"type": "string"}}}}}
    ]"#;
    let Ok(tools) = toolshim_parse::ToolSet::from_json_str(tools) else {
        unreachable!("the tools are valid")
    };
    let config = Config::with_tools(tools);
    let inputs = [
        ">>>a\n<use_mcp_tool>\n<tool_name>get_time</tool_name>\n<arguments>{}</arguments>\n</use_mcp_tool>",
        ">>>a\n<use_mcp_tool>\n<server_name>s</server_name>\n<tool_name>get_time</tool_name>\n<arguments>{\"timezone\": \"UTC\"}</arguments>\n</use_mcp_tool> done",
        ">>>a\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
    ];
    for input in inputs {
        let complete = parse_complete(input, &config);
        assert_eq!(complete.calls.len(), 1, "{input}: {complete:?}");
        assert_eq!(complete.calls[0].name, "get_time", "{input}");
        assert_eq!(complete.rejected.len(), 1, "{input}: {complete:?}");
        assert!(complete.content.starts_with(">>>a\n"), "{input}: {complete:?}");
        assert!(!complete.content.contains('<'), "markup in the text: {input}: {complete:?}");
        for size in [1, 2, 3, 5, 7, 11] {
            let events = stream_events(chunk_by_chars(input, size), &config);
            assert_eq!(Parsed::from_events(events), complete, "{input}: chunk size {size}");
        }
    }
}

/// A sum where a value goes (`"rate": 8 / 100`, a small model's way with "8%") is worked out,
/// with a warning, in every chunking; what is no sum read here (a variable, `^`) still
/// breaks the call off into text, and comments after numbers are still comments.
#[test]
fn issue_24_arithmetic_where_a_number_goes_is_worked_out() {
    let parsed = parse_all_ways(
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"rate\": 8 / 100, \"seconds\": 3 * 60, \
         \"angle\": 2 * Math.PI, \"sum\": 10 + 15, \"both\": [20 * 60, 1e-9 * 3], \"n\": 2/4}}\n</tool_call>",
    );
    assert_eq!(parsed.calls.len(), 1, "{parsed:?}");
    assert_eq!(
        parsed.calls[0].arguments,
        r#"{"rate":0.08,"seconds":180,"angle":6.28318530717959,"sum":25,"both":[1200,0.000000003],"n":0.5}"#
    );
    assert_warns(&parsed, WarningCode::RepairedJson, "arithmetic expression");
    for broken in [
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1 + x}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"c\": 3 * 10^8}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1 / 0}}\n</tool_call>",
    ] {
        let parsed = parse_all_ways(broken);
        assert!(parsed.calls.is_empty(), "{broken}: {parsed:?}");
        assert_eq!(parsed.content, broken);
    }
    // Unchanged: numbers with comments or white space after them.
    let parsed = parse_all_ways(
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 2 /* two */, \"b\": 30 // s\n, \"c\": [1 , 2.50 ], \"d\": 4 }}\n</tool_call>",
    );
    assert_eq!(parsed.calls[0].arguments, r#"{"a":2,"b":30,"c":[1,2.50],"d":4}"#);
}
