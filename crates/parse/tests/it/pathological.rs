//! Hostile inputs (issue 8): deep nesting, huge strings, many calls, endless marker
//! prefixes. Each input is parsed complete and streamed in chunks; the checks are that
//! nothing panics, streaming gives what complete parsing gives, every byte comes out
//! once (as text or inside a call's span), held bytes stay bounded, and a limit that is
//! hit says so. Sizes are cut down from the ones in `benches/pathological.rs` so that
//! each test stays well under a second in debug builds.

use toolshim_parse::{Config, Event, Parsed, StreamParser, WarningCode};

use crate::corpus::{parse_complete, stream_events};

/// Chunk sizes in bytes (rounded up to a character boundary): a few bytes per token, and
/// a network read.
const CHUNKS: [usize; 2] = [16, 4096];

/// `input` in chunks of about `size` bytes, never splitting a character.
fn chunks(input: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let mut cut = rest.len().min(size);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, tail) = rest.split_at(cut);
        out.push(chunk);
        rest = tail;
    }
    out
}

/// Text events and call spans, in event order, rebuild the input.
fn assert_conserved(input: &str, events: &[Event]) {
    let mut rebuilt = String::with_capacity(input.len());
    for event in events {
        match event {
            Event::Text(text) => rebuilt.push_str(text),
            Event::CallEnd { call, .. } => rebuilt.push_str(&input[call.span.clone()]),
            _ => {}
        }
    }
    assert!(rebuilt == input, "bytes lost or repeated: {} of {} bytes", rebuilt.len(), input.len());
}

/// The most bytes fed but not yet given back (as text or in the span of an ended call)
/// after any chunk, when `input` is streamed in chunks of `size` bytes.
fn max_held(input: &str, size: usize, config: &Config) -> usize {
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    let (mut fed, mut settled, mut held) = (0, 0, 0);
    for chunk in chunks(input, size) {
        parser.feed(chunk, &mut events);
        fed += chunk.len();
        for event in events.drain(..) {
            match event {
                Event::Text(text) => settled += text.len(),
                Event::CallEnd { call, .. } => settled += call.span.len(),
                _ => {}
            }
        }
        held = held.max(fed - settled.min(fed));
    }
    held
}

/// Parses `input` complete and streamed in [`CHUNKS`]; all must agree and conserve the
/// input. Returns the complete parse.
fn parse_checked(input: &str, config: &Config) -> Parsed {
    let complete = parse_complete(input, config);
    for size in CHUNKS {
        let events = stream_events(chunks(input, size), config);
        assert_conserved(input, &events);
        assert!(Parsed::from_events(events) == complete, "chunks of {size} bytes differ");
    }
    complete
}

fn codes(parsed: &Parsed) -> Vec<WarningCode> {
    parsed.warnings.iter().map(|w| w.code).collect()
}

fn assert_limit_warning(parsed: &Parsed, says: &str) {
    assert!(
        parsed
            .warnings
            .iter()
            .any(|w| w.code == WarningCode::LimitReached && w.message.contains(says)),
        "no limit_reached warning naming {says}: {:?}",
        parsed.warnings
    );
}

/// How deeply `json` nests.
fn depth(json: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0);
    for b in json.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[test]
fn issue_8_deep_nesting_in_arguments_stops_at_max_depth() {
    let config = Config::default();
    let head = r#"<tool_call>{"name":"f","arguments":{"a":"#;
    let n = 20_000;
    for tail in [String::new(), format!("{}}}}}</tool_call>", "]".repeat(n))] {
        let input = format!("{head}{}{tail}", "[".repeat(n));
        let parsed = parse_checked(&input, &config);
        // Cut off at the limit inside its arguments, the call is incomplete (issue 17).
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.incomplete.len(), 1);
        // The call object, the arguments object and 126 arrays: `max_depth` in all.
        assert_eq!(depth(&parsed.incomplete[0].arguments) + 1, config.max_depth);
        assert_limit_warning(&parsed, "max_depth (128)");
        // The brackets past the limit, and what follows them, are text.
        assert!(parsed.content.starts_with("[[[["), "{:?}", &parsed.content[..20]);
        assert!(parsed.content.ends_with(&tail));
        assert!(max_held(&input, 16, &config) < 1024);
    }
}

#[test]
fn issue_8_max_depth_is_configurable() {
    let mut config = Config::default();
    config.max_depth = 4;
    let input = r#"{"name":"f","arguments":{"a":[[[[1]]]]}} after"#;
    let parsed = parse_checked(input, &config);
    assert_eq!(parsed.incomplete[0].arguments, r#"{"a":[[]]}"#);
    assert_eq!(codes(&parsed), [WarningCode::LimitReached, WarningCode::Truncated]);
    assert_limit_warning(&parsed, "max_depth (4)");
    assert_eq!(parsed.content, "[[1]]]]}} after");
    // Arguments given as a JSON string are read with the same limit.
    let input = r#"{"name":"f","arguments":"{\"a\":[[[[1]]]]}"}"#;
    let parsed = parse_checked(input, &config);
    assert_limit_warning(&parsed, "max_depth (4)");
}

#[test]
fn issue_8_deep_brackets_outside_calls_are_text() {
    let config = Config::default();
    // Each `{` opens a candidate object that the next `{` ends, so they cost more.
    for input in ["[".repeat(50_000), "{".repeat(2_000), "[{".repeat(1_000)] {
        let parsed = parse_checked(&input, &config);
        assert!(parsed.calls.is_empty());
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert_eq!(parsed.content, input);
        assert!(max_held(&input, 16, &config) <= 2);
    }
}

#[test]
fn issue_8_long_string_argument_streams_whole() {
    let config = Config::default();
    let content = "line é 東京 😀 \\n \\\" text ".repeat(40_000); // about 1 MB
    let input = format!(
        "<tool_call>{{\"name\":\"write_file\",\"arguments\":{{\"path\":\"a.txt\",\"content\":\"{content}\"}}}}</tool_call>"
    );
    let parsed = parse_checked(&input, &config);
    assert_eq!(parsed.calls.len(), 1);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    assert_eq!(parsed.calls[0].span, 0..input.len());
    let args: serde_json::Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap();
    assert_eq!(args["content"].as_str().unwrap().len(), content.len() - 2 * 40_000);
}

#[test]
fn issue_8_many_calls_in_one_output() {
    let config = Config::default();
    let n = 2_000;
    let call = r#"{"name":"f","arguments":{"a":1}}"#;
    let hermes = format!("<tool_call>{call}</tool_call>\n").repeat(n);
    let mistral = format!("[TOOL_CALLS][{}]", vec![call; n].join(","));
    let bare = format!("[{}]", vec![call; n].join(", "));
    for input in [hermes, mistral, bare] {
        let parsed = parse_checked(&input, &config);
        assert_eq!(parsed.calls.len(), n);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        assert!(max_held(&input, 16, &config) < 128);
    }
}

#[test]
fn issue_8_repeated_marker_prefixes_are_text_and_held_briefly() {
    let config = Config::default();
    for prefix in ["<tool_ca", "<|tool_call", "[TOOL_CALL", "<", "<think", "```"] {
        let input = prefix.repeat(2_000);
        let parsed = parse_checked(&input, &config);
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.content, input);
        // One prefix at most is held back at a time.
        for size in [1, 16] {
            assert!(max_held(&input, size, &config) <= prefix.len(), "{prefix:?}");
        }
    }
}

#[test]
fn issue_8_hold_limit_decides_at_the_same_byte_in_every_chunking() {
    // Complete parsing read the object in one step and never checked the limit, so it
    // found a call where streaming (past the limit after a chunk) showed text.
    let mut config = Config::default();
    config.max_held_bytes = 64;
    let input = format!(r#"{{"arguments":{{"content":"{}"}},"name":"f"}} after"#, "x".repeat(200));
    let parsed = parse_checked(&input, &config);
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.content, input);
    assert_limit_warning(&parsed, "max_held_bytes (64)");
    assert_eq!(parsed.warnings[0].span, 0..65);
    assert!(max_held(&input, 16, &config) <= 64 + 16);
}

#[test]
fn issue_8_hold_limit_bounds_python_calls() {
    // A Python group held all its bytes until it ended, whatever the limit.
    let mut config = Config::default();
    config.max_held_bytes = 64;
    for input in [
        format!("f(a=\"{}\")\nafter", "x".repeat(1000)),
        format!("[f(a={}", "[".repeat(1000)),
        format!("```python\nf(a=\"{}\")\n```", "x".repeat(1000)),
    ] {
        let parsed = parse_checked(&input, &config);
        assert!(parsed.calls.is_empty());
        assert_eq!(parsed.content, input);
        assert_limit_warning(&parsed, "max_held_bytes (64)");
        assert!(max_held(&input, 16, &config) <= 64 + 16);
    }
    // Under the limit, the same call is read.
    let parsed = parse_checked("f(a=\"xx\")\n", &config);
    assert_eq!(parsed.calls.len(), 1);
}

#[test]
fn issue_8_hold_limit_ends_the_region_before_markup_can_open_a_call() {
    // Found by the property tests with a 24-byte limit: a fence forced to text while its
    // first tag was incomplete went on reading as data, then opened the tag's call anyway
    // (a debug assertion in `Envelope::end`).
    let mut config = Config::default();
    config.max_held_bytes = 24;
    let input =
        "```json\n<invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke>";
    let parsed = parse_checked(input, &config);
    assert!(parsed.calls.is_empty());
    assert_eq!(parsed.content, input);
    assert_limit_warning(&parsed, "max_held_bytes (24)");
    assert_eq!(parsed.warnings[0].span, 0..25);
}
