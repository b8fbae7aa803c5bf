//! Properties of formats loaded at run time: random format files and random
//! `response_template`s keep the parser's guarantees.

use super::*;

/// Markers random rows are made of, and the text they are read from.
const ROW_MARKERS: &[&str] = &[
    "<a>",
    "</a>",
    "<|x|>",
    "<|y|>",
    "[[",
    "]]",
    "@@",
    "call:",
    "=>",
    "\n",
    " ",
    "<",
    "{",
    ":",
    // Markers outside ASCII, as real formats have them (DeepSeek's ｜ and ▁, RWKV's ◁).
    "<｜a｜>",
    "▁end",
    "◁x▷",
    "é",
];

fn row_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(ROW_MARKERS).prop_map(|m| m.replace("\\n", "\n")),
        1 => "[a-z<>|\\[\\]@:{}]{1,4}",
    ]
    .boxed()
}

fn json_str(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

fn json_list(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// A random row of toolshim's format, as JSON (some are invalid: loading says so).
fn random_row(depth: u32) -> BoxedStrategy<String> {
    let marker = (any::<bool>(), row_text())
        .prop_map(|(consume, text)| {
            format!("{{\"{}\": {}}}", if consume { "consume" } else { "before" }, json_str(&text))
        })
        .boxed();
    let head = prop_oneof![
        Just("\"calls\"".to_owned()),
        (prop::option::of(row_text()), prop::collection::vec(marker.clone(), 0..3), 0..3u8)
            .prop_map(|(prefix, ends, form)| {
                let form = ["plain", "indexed", "word"][usize::from(form)];
                let prefix =
                    prefix.map_or(String::new(), |p| format!("\"prefix\": {}, ", json_str(&p)));
                format!(
                    "{{\"name\": {{{prefix}\"ends\": {}, \"form\": \"{form}\"}}}}",
                    json_list(&ends)
                )
            }),
        prop::collection::vec(marker, 0..2)
            .prop_map(|ends| format!("{{\"recipient\": {{\"ends\": {}}}}}", json_list(&ends))),
    ];
    let body = prop_oneof![
        Just("\"calls\"".to_owned()),
        Just("\"named_objects\"".to_owned()),
        row_text().prop_map(|t| format!("{{\"token_strings\": {}}}", json_str(&t))),
        row_text().prop_map(|t| format!("{{\"namespaced_markup\": {}}}", json_str(&t))),
        (row_text(), row_text(), row_text()).prop_map(|(k, v, e)| format!(
            "{{\"arg_tokens\": {{\"key\": {}, \"value\": {}, \"end\": {}}}}}",
            json_str(&k),
            json_str(&v),
            json_str(&e)
        )),
        Just("{\"freeform\": {\"key\": \"command\"}}".to_owned()),
    ];
    let texts = prop::collection::vec(row_text().prop_map(|t| json_str(&t)), 0..3).boxed();
    let inner = if depth == 0 {
        Just(Vec::new()).boxed()
    } else {
        prop::collection::vec(random_row(depth - 1), 0..2).boxed()
    };
    (row_text(), texts.clone(), head, body, texts, inner, any::<bool>())
        .prop_map(|(start, ends, head, body, skip, inner, at_start)| {
            let opens = if at_start { "at_start" } else { "anywhere" };
            format!(
                "{{\"id\": \"r\", \"start\": {}, \"ends\": {}, \"head\": {head}, \"body\": {body}, \"skip\": {}, \"inner\": {}, \"opens\": \"{opens}\"}}",
                json_str(&start), json_list(&ends), json_list(&skip), json_list(&inner)
            )
        })
        .boxed()
}

/// A random format file: rows and built-in dialects.
fn random_format_file() -> impl Strategy<Value = String> {
    let entry = prop_oneof![
        3 => random_row(1).prop_map(|row| format!("{{\"pair\": {row}}}")),
        1 => prop::sample::select(&["\"json\"", "\"markup\"", "\"python\"", "\"fenced\""][..]).prop_map(str::to_owned),
    ];
    prop::collection::vec(entry, 1..4).prop_map(|entries| {
        format!("{{\"toolshim_format\": 1, \"dialects\": {}}}", json_list(&entries))
    })
}

/// A random `response_template` (some fields the parser cannot read: loading says so).
fn random_template() -> impl Strategy<Value = String> {
    let open = prop_oneof![
        row_text().prop_map(|t| format!("\"open\": {}", json_str(&t))),
        (row_text(), row_text()).prop_map(|(a, b)| format!(
            "\"open_pattern\": {}",
            json_str(&format!("{}(?P<name>\\w+){}", regex_escape(&a), regex_escape(&b)))
        )),
        row_text().prop_map(|a| format!(
            "\"open_pattern\": {}",
            json_str(&format!("{}(?P<name>\\w+).*?@@", regex_escape(&a)))
        )),
    ];
    let content = prop_oneof![
        Just("\"content\": \"json\"".to_owned()),
        row_text().prop_map(|t| format!(
            "\"content\": \"json\", \"content_args\": {{\"unquoted_keys\": true, \"string_delims\": [[{0}, {0}]]}}",
            json_str(&t)
        )),
        Just("\"content\": \"xml-inline\", \"content_args\": {\"tag_pattern\": \"<parameter=(?P<key>\\\\w+)>(?P<value>.*?)</parameter>\"}".to_owned()),
    ];
    let transform = prop_oneof![
        Just(", \"transform\": {\"type\": \"function\", \"function\": {\"name\": \"{name}\", \"arguments\": \"{content}\"}}".to_owned()),
        Just(", \"transform\": {\"type\": \"function\", \"function\": \"{content}\"}".to_owned()),
        Just(String::new()),
    ];
    (open, prop::option::of(row_text()), content, transform, any::<bool>()).prop_map(
        |(open, close, content, transform, think)| {
            let close = close.map_or(String::new(), |c| format!(", \"close\": {}", json_str(&c)));
            let thinking = if think { "\"thinking\": {\"open\": \"<think>\", \"close\": \"</think>\"}, " } else { "" };
            format!("{{\"fields\": {{{thinking}\"tool_calls\": {{{open}{close}, {content}{transform}}}}}}}")
        },
    )
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| if "\\|.()[]{}*+?^$".contains(c) { format!("\\{c}") } else { c.to_string() })
        .collect()
}

/// Text made of the random rows' markers, call syntax and prose.
fn row_input() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => prop::sample::select(ROW_MARKERS).prop_map(|m| m.replace("\\n", "\n")),
        3 => prop::sample::select(SYNTAX).prop_map(str::to_owned),
        1 => "[a-z_ ]{1,8}",
        1 => "[{}:,\"0-9a-z]{1,6}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|parts| parts.concat())
}

/// Formats loaded at run time keep the guarantees: every chunking folds to the complete
/// parse, text is conserved, calls stream valid arguments, nothing panics.
#[test]
fn random_format_files_keep_the_guarantees() {
    let tools = Config::with_tools(load_tools("weather").unwrap());
    proptest!(proptest_config(), |(file in random_format_file(), input in row_input(), cuts in cuts(), with_tools in any::<bool>())| {
        let Ok(dialects) = Dialects::from_format_file(&file) else { return Ok(()) };
        let mut config = if with_tools { tools.clone() } else { Config::default() };
        config.dialects = dialects;
        assert_chunking_invariant(&input, &config, &cuts)?;
        let events = stream_events(split_at(&input, &cuts), &config);
        assert_conserved(&input, &config, &events)?;
        assert_calls_well_formed(&events)?;
        assert_bounded(&input, &parse_complete(&input, &config))?;
    });
}

#[test]
fn random_templates_keep_the_guarantees() {
    proptest!(proptest_config(), |(template in random_template(), input in row_input(), cuts in cuts())| {
        let Ok(config) = Config::format_from_template(&template) else { return Ok(()) };
        assert_chunking_invariant(&input, &config, &cuts)?;
        let events = stream_events(split_at(&input, &cuts), &config);
        assert_calls_well_formed(&events)?;
        assert_bounded(&input, &parse_complete(&input, &config))?;
    });
}

/// Most generated files and templates load (the properties above are not vacuous).
#[test]
fn most_random_format_files_and_templates_load() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut files, mut templates) = (0, 0);
    for _ in 0..200 {
        let file = random_format_file().new_tree(&mut runner).unwrap().current();
        files += usize::from(Dialects::from_format_file(&file).is_ok());
        let template = random_template().new_tree(&mut runner).unwrap().current();
        templates += usize::from(Config::format_from_template(&template).is_ok());
    }
    assert!(files > 60 && templates > 30, "{files} files and {templates} templates of 200 loaded");
}
