//! Properties of the parser, checked with proptest on corpus inputs, on generated mixes of
//! prose and tool-call syntax, and on arbitrary strings:
//!
//! - (a) chunking invariance: every chunking folds to exactly `parse(input)`;
//! - (b) conservation: text events and call (and hidden rejected-call) spans rebuild the input;
//! - (c) argument deltas: they concatenate to `arguments`, every prefix at a delta boundary
//!   is a JSON prefix, and `arguments` is a JSON object;
//! - (d) no panic, and no more content plus reasoning than input.

use proptest::prelude::*;
use proptest::sample::Index;
use toolshim_parse::{
    Builtin, Config, Dialects, Event, ExampleGuard, Parsed, ReasoningCalls, RejectedText, TagPair,
    WarningCode,
};

use crate::corpus::{Case, load_cases, load_tools, parse_complete, stream_events};

/// Pieces of tool-call syntax that generated inputs are made of, `<think>` excepted.
const SYNTAX: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<tool_call",
    "</tool_call",
    "</toolcall>",
    "\n<tool_call>\n",
    "{\"name\": ",
    "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
    "\"get_weather\"",
    "\"get_time\"",
    "\"search_web\"",
    "\"arguments\": ",
    // Sums where a number goes (worked out by the reader), and what is no sum.
    "{\"days\": 8 / 100",
    " * ",
    " + 2",
    "Math.PI",
    "(3 ",
    ") ",
    " /* c */ ",
    "\"parameters\":",
    "\"city\": \"Paris\"",
    "\"days\": 3",
    "\"days\": \"3\"",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\\",
    "\\\"",
    "\\n",
    "\\ud83d\\ude00",
    ":",
    ",",
    " ",
    "\n",
    "```json\n",
    "```",
    "```xml\n",
    "[TOOL_CALLS]",
    "{\"tool_calls\": [",
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}}",
    "<function_calls>",
    "<invoke name=\"get_weather\">",
    "<parameter name=\"city\">",
    "</parameter>",
    "</invoke>",
    "</function_calls>",
    "<function=get_weather>",
    "<function name=\"get_time\">",
    "</function>",
    "<function_call>",
    "</function_call>",
    "True",
    "None",
    "“",
    "”",
    "// note\n",
    "/* c */",
    "12345678901234567890123",
    "東京",
    "😀",
    "I'll check the weather. ",
    "Sure! Here is the result:",
    "get_weather(city='Paris')",
    "get_weather(",
    "city=",
    "'北京'",
    "(",
    ")",
    "=",
    "[get_weather(city=\"Paris\"), get_time(timezone=\"UTC\")]",
    "```python\n",
    "```tool_code\n",
    "print(default_api.",
    "def get_weather(city):\n",
    "Action: get_weather\nAction Input: ",
    "Action Input:",
    "function.name: get_weather\nfunction.arguments: ",
    "```json action\n",
    "{\"action\": \"get_weather\", \"action_input\": {\"city\": \"Paris\"}}",
    "For example:\n",
    "`",
    "<my_call>",
    "</my_call>",
    "call get_weather with city Paris. ",
    "[TOOL_CALLS]",
    "get_weather[ARGS]",
    "[CALL_ID]",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "function<｜tool▁sep｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "functions.get_weather:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|python_tag|>",
    "<｜DSML｜invoke name=\"get_weather\">",
    "<｜DSML｜parameter name=\"city\" string=\"true\">",
    "</｜DSML｜parameter>",
    "<seed:tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<tool_call>get_weather\n",
    "<|start|>assistant",
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
    "<|call|>",
    "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Paris\"}}]<|tools_suffix|>",
];

/// `<think>` syntax, only in inputs that conservation does not look at.
const THINK: &[&str] = &[
    "<think>",
    "</think>",
    "<think>\nhmm\n</think>\n",
    "[THINK]",
    "[/THINK]",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    "<seed:think>",
    "</seed:think>",
];

fn fragment(extra: &'static [&'static str]) -> impl Strategy<Value = String> {
    let syntax: Vec<&'static str> = SYNTAX.iter().chain(extra).copied().collect();
    prop_oneof![
        6 => prop::sample::select(syntax).prop_map(str::to_owned),
        2 => "[a-zA-Z ,.!?\n]{0,12}",
        1 => "[0-9]{1,6}",
        1 => "\\PC{0,3}",
        1 => any::<char>().prop_map(String::from),
    ]
}

/// Random mixes of prose, unicode and tool-call syntax, `<think>` included.
fn mixed_input() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(THINK), 0..40).prop_map(|parts| parts.concat())
}

/// Like [`mixed_input`], without any `<think>` syntax.
fn mixed_input_without_think() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(&[]), 0..40).prop_map(|parts| parts.concat())
}

/// Cut points, turned into a chunking of a given input by [`split_at`].
fn cuts() -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..24)
}

/// `input` cut at the given char positions (sorted; a repeated cut feeds an empty chunk).
fn split_at<'a>(input: &'a str, cuts: &[Index]) -> Vec<&'a str> {
    let bounds: Vec<usize> =
        input.char_indices().map(|(idx, _)| idx).chain([input.len()]).collect();
    let mut at: Vec<usize> = cuts.iter().map(|cut| bounds[cut.index(bounds.len())]).collect();
    at.sort_unstable();
    let mut chunks = Vec::with_capacity(at.len() + 1);
    let mut start = 0;
    for end in at {
        chunks.push(&input[start..end]);
        start = end;
    }
    chunks.push(&input[start..]);
    chunks
}

/// The settings generated inputs are parsed with: no tools; the weather tools keeping
/// rejected text; the weather tools hiding it; every option switched the other way; limits
/// small enough for generated inputs to reach them.
fn configs() -> Result<Vec<Config>, String> {
    let keep = Config::with_tools(load_tools("weather")?);
    let mut hide = keep.clone();
    hide.rejected_text = RejectedText::Hide;
    // Every optional dialect and policy switched the other way.
    let mut open = keep.clone();
    open.reasoning_calls = ReasoningCalls::Allow;
    open.example_guard = ExampleGuard::off();
    open.dialects.add(Builtin::FreeText);
    open.dialects.add_pair(TagPair::new("<my_call>", "</my_call>"));
    open.dialects.prefer(Builtin::Json.id());
    let mut tight = keep.clone();
    tight.max_held_bytes = 24;
    tight.max_depth = 3;
    Ok(vec![Config::default(), keep, hide, open, tight])
}

fn proptest_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok());
    ProptestConfig::with_cases(cases.unwrap_or(256))
}

/// Names the corpus case in a failure.
fn in_case(case: &Case, res: Result<(), TestCaseError>) -> Result<(), TestCaseError> {
    res.map_err(|err| match err {
        TestCaseError::Fail(reason) => {
            TestCaseError::fail(format!("{}: {}", case.name, reason.message()))
        }
        TestCaseError::Reject(reason) => TestCaseError::Reject(reason),
    })
}

/// (a) The folded stream equals the complete parse.
fn assert_chunking_invariant(
    input: &str,
    config: &Config,
    cuts: &[Index],
) -> Result<(), TestCaseError> {
    let complete = parse_complete(input, config);
    let chunks = split_at(input, cuts);
    let streamed = Parsed::from_events(stream_events(chunks.iter().copied(), config));
    prop_assert_eq!(
        streamed,
        complete,
        "left: folded stream, right: parse(); chunks: {:?}",
        chunks
    );
    Ok(())
}

/// (b) Text events, accepted call spans, (when hidden) rejected call spans and the spans
/// of removed empty call markup, in event order, rebuild the input. Only for inputs without `<think>`.
fn assert_conserved(input: &str, config: &Config, events: &[Event]) -> Result<(), TestCaseError> {
    let mut rebuilt = String::with_capacity(input.len());
    for event in events {
        let span = match event {
            Event::Text(text) => {
                rebuilt.push_str(text);
                continue;
            }
            Event::CallEnd { call, .. } => call.span.clone(),
            Event::Rejected(rejected) if config.rejected_text == RejectedText::Hide => {
                rejected.span.clone()
            }
            // Markup with no call in it leaves the text; its warning covers it.
            Event::Warning(warning) if warning.code == WarningCode::EmptyCallMarkup => {
                warning.span.clone()
            }
            _ => continue,
        };
        let Some(covered) = input.get(span.clone()) else {
            return Err(TestCaseError::fail(format!(
                "span {span:?} is not a char range of the {}-byte input",
                input.len()
            )));
        };
        rebuilt.push_str(covered);
    }
    prop_assert_eq!(rebuilt, input, "events: {:?}", events);
    Ok(())
}

/// (c) Every call starts, streams its arguments as JSON prefixes and ends, in order, and
/// its arguments are a JSON object.
fn assert_calls_well_formed(events: &[Event]) -> Result<(), TestCaseError> {
    // (call_idx, name, id at start, arguments so far, prefix checker)
    let mut open: Option<(usize, String, Option<String>, String, JsonPrefix)> = None;
    let mut n_calls = 0;
    for event in events {
        match event {
            Event::CallStart { call_idx, id, name } => {
                prop_assert!(open.is_none(), "CallStart {} inside another call", call_idx);
                prop_assert_eq!(*call_idx, n_calls, "call indexes count from 0 in order");
                open =
                    Some((*call_idx, name.clone(), id.clone(), String::new(), JsonPrefix::new()));
            }
            Event::ArgsDelta { call_idx, json } => {
                let Some((open_idx, _, _, args, checker)) = open.as_mut() else {
                    return Err(TestCaseError::fail(format!(
                        "ArgsDelta {call_idx} outside a call"
                    )));
                };
                prop_assert_eq!(*call_idx, *open_idx);
                args.push_str(json);
                if let Err(err) = checker.feed_str(json) {
                    return Err(TestCaseError::fail(format!(
                        "arguments so far are not a JSON prefix ({err}): {args:?}"
                    )));
                }
            }
            Event::CallEnd { call_idx, call } => {
                let Some((open_idx, name, id, args, _)) = open.take() else {
                    return Err(TestCaseError::fail(format!(
                        "CallEnd {call_idx} without CallStart"
                    )));
                };
                prop_assert_eq!(*call_idx, open_idx);
                prop_assert_eq!(&call.name, &name, "CallStart and CallEnd names differ");
                if id.is_some() {
                    prop_assert_eq!(&call.id, &id, "CallStart and CallEnd ids differ");
                }
                prop_assert_eq!(&args, &call.arguments, "deltas do not add up to the arguments");
                let value: serde_json::Value = match serde_json::from_str(&call.arguments) {
                    Ok(value) => value,
                    Err(err) => {
                        return Err(TestCaseError::fail(format!(
                            "arguments are not JSON ({err}): {:?}",
                            call.arguments
                        )));
                    }
                };
                prop_assert!(value.is_object(), "arguments are not an object: {}", call.arguments);
                n_calls += 1;
            }
            _ => {}
        }
    }
    prop_assert!(open.is_none(), "a call was started and never ended");
    Ok(())
}

/// (d) Content and reasoning together are no longer than the input.
fn assert_bounded(input: &str, parsed: &Parsed) -> Result<(), TestCaseError> {
    let n_out = parsed.content.len() + parsed.reasoning.len();
    prop_assert!(n_out <= input.len(), "{} bytes of text out of {} in", n_out, input.len());
    Ok(())
}

#[test]
fn corpus_inputs_fold_the_same_at_every_chunking() {
    let cases = load_cases().unwrap();
    proptest!(proptest_config(), |(case_idx in 0..cases.len(), cuts in cuts())| {
        let case = &cases[case_idx];
        in_case(case, assert_chunking_invariant(&case.input, &case.config, &cuts))?;
    });
}

#[test]
fn corpus_inputs_conserve_text_and_stream_valid_arguments() {
    let cases = load_cases().unwrap();
    let cases: Vec<&Case> = cases
        .iter()
        .filter(|case| {
            // Reasoning, its markers and channel markers (removed from the text like
            // them) are not part of the text conservation checks.
            let reasoning = !parse_complete(&case.input, &case.config).reasoning.is_empty();
            let markers = [
                "think>",
                "THINK",
                "inner_prefix",
                "analysis<|message|>",
                "<|open|>",
                "<|close|>message",
                "final<|message|>",
                "to=user<|message|>",
                "<|return|>",
                "<|end|>",
                "<|eot|>",
                "<|eom|>",
                "commentary<|message|>",
                "_RESPONSE|>",
                "_TEXT|>",
                "<|role_end|>",
            ];
            let markers = markers.iter().any(|marker| case.input.contains(marker));
            !reasoning && !markers && !case.config.reasoning_open
        })
        .collect();
    proptest!(proptest_config(), |(case_idx in 0..cases.len(), cuts in cuts())| {
        let case = cases[case_idx];
        let events = stream_events(split_at(&case.input, &cuts), &case.config);
        in_case(case, assert_conserved(&case.input, &case.config, &events))?;
        in_case(case, assert_calls_well_formed(&events))?;
    });
}

#[test]
fn generated_inputs_fold_the_same_at_every_chunking() {
    let configs = configs().unwrap();
    proptest!(proptest_config(), |(input in mixed_input(), config_idx in 0..configs.len(), cuts in cuts())| {
        assert_chunking_invariant(&input, &configs[config_idx], &cuts)?;
    });
}

#[test]
fn generated_inputs_conserve_text() {
    let configs = configs().unwrap();
    proptest!(proptest_config(), |(input in mixed_input_without_think(), config_idx in 0..configs.len(), cuts in cuts())| {
        let config = &configs[config_idx];
        let events = stream_events(split_at(&input, &cuts), config);
        assert_conserved(&input, config, &events)?;
        let events = stream_events([input.as_str()], config);
        assert_conserved(&input, config, &events)?;
    });
}

#[test]
fn generated_calls_stream_valid_arguments() {
    let configs = configs().unwrap();
    proptest!(proptest_config(), |(input in mixed_input(), config_idx in 0..configs.len(), cuts in cuts())| {
        let config = &configs[config_idx];
        assert_calls_well_formed(&stream_events(split_at(&input, &cuts), config))?;
        assert_calls_well_formed(&stream_events([input.as_str()], config))?;
    });
}

/// Keys of the `bfcl` tools' schemas (nested arrays of numbers, objects with typed fields,
/// `$ref`s, `anyOf` with null) and one they do not declare.
const NESTED_KEYS: &[&str] = &[
    "numbers",
    "table",
    "conditions",
    "field",
    "operation",
    "value",
    "attendees",
    "name",
    "age",
    "room",
    "floor",
    "capacity",
    "hours",
    "other",
];

/// A JSON value (sometimes with a Python literal or single quotes) of the kinds coercion
/// converts: whole and fractional numbers, numbers and booleans in strings, strings holding
/// JSON, nested arrays and objects.
fn nested_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        "-?[0-9]{1,3}",
        "-?[0-9]{1,2}\\.[0-9]{1,2}",
        "[0-9]e[0-9]",
        "\"-?[0-9]{1,3}(\\.0)?\"",
        Just("true".to_owned()),
        Just("\"false\"".to_owned()),
        Just("null".to_owned()),
        Just("None".to_owned()),
        Just("'x'".to_owned()),
        "\"[a-z ]{0,6}\"",
        Just(r#""[1, 2.5]""#.to_owned()),
        Just(r#""{\"floor\": \"3\"}""#.to_owned()),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec((prop::sample::select(NESTED_KEYS), inner), 0..4).prop_map(
                |members| {
                    let members: Vec<String> =
                        members.iter().map(|(key, value)| format!("\"{key}\": {value}")).collect();
                    format!("{{{}}}", members.join(", "))
                }
            ),
        ]
    })
}

/// Calls of the `bfcl` tools with generated arguments, in JSON envelopes or Python syntax,
/// sometimes cut off.
fn nested_calls() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec!["calculate_average", "filter_records", "book_meeting"]);
    let call = (
        name,
        prop::collection::vec((prop::sample::select(NESTED_KEYS), nested_value()), 0..4),
        any::<bool>(),
    )
        .prop_map(|(name, members, python)| {
            if python {
                let args: Vec<String> =
                    members.iter().map(|(key, value)| format!("{key}={value}")).collect();
                format!("[{name}({})]", args.join(", "))
            } else {
                let members: Vec<String> =
                    members.iter().map(|(key, value)| format!("\"{key}\": {value}")).collect();
                format!(
                    "<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {{{}}}}}\n</tool_call>",
                    members.join(", ")
                )
            }
        });
    (prop::collection::vec(call, 1..3), any::<Index>(), any::<bool>()).prop_map(
        |(calls, cut, whole)| {
            let text = calls.join("\n");
            if whole {
                return text;
            }
            let bounds: Vec<usize> = text.char_indices().map(|(idx, _)| idx).collect();
            let end = if bounds.is_empty() { 0 } else { bounds[cut.index(bounds.len())] };
            text[..end].to_owned()
        },
    )
}

/// Coercion at every depth (issue 24) keeps (a) and (c): generated nested arguments for
/// tools with nested schemas fold the same at every chunking and stream valid JSON prefixes.
#[test]
fn generated_nested_arguments_coerce_the_same_at_every_chunking() {
    let mut tight = Config::with_tools(load_tools("bfcl").unwrap());
    let wide = tight.clone();
    tight.max_depth = 3;
    let configs = [wide, tight];
    proptest!(proptest_config(), |(input in nested_calls(), config_idx in 0..configs.len(), cuts in cuts())| {
        let config = &configs[config_idx];
        assert_chunking_invariant(&input, config, &cuts)?;
        assert_calls_well_formed(&stream_events(split_at(&input, &cuts), config))?;
        assert_calls_well_formed(&stream_events([input.as_str()], config))?;
    });
}

#[test]
fn arbitrary_strings_do_not_panic_and_stay_bounded() {
    let configs = configs().unwrap();
    let input = prop_oneof![".*", "\\PC*", any::<String>()];
    proptest!(proptest_config(), |(input in input, config_idx in 0..configs.len(), cuts in cuts())| {
        let config = &configs[config_idx];
        assert_bounded(&input, &parse_complete(&input, config))?;
        let streamed = Parsed::from_events(stream_events(split_at(&input, &cuts), config));
        assert_bounded(&input, &streamed)?;
    });
}

#[test]
fn generated_inputs_stay_bounded() {
    let configs = configs().unwrap();
    proptest!(proptest_config(), |(input in mixed_input(), config_idx in 0..configs.len())| {
        assert_bounded(&input, &parse_complete(&input, &configs[config_idx]))?;
    });
}

/// Format files and templates loaded at run time: their properties.
mod rows;

/// A pushdown automaton that accepts exactly the prefixes of one JSON text (RFC 8259,
/// surrounding whitespace allowed). `feed` fails at the first character no valid JSON
/// text could continue with.
#[derive(Debug)]
struct JsonPrefix {
    /// Open arrays (`false`) and objects (`true`), innermost last.
    stack: Vec<bool>,
    state: JsonState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonState {
    /// A value must come (top level, after `:`, or after `,` in an array).
    Value,
    /// Just after `[`: a value or `]`.
    ValueOrClose,
    /// Just after `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// Inside a string.
    Str { key: bool, escape: Escape },
    /// Inside a number.
    Number(Num),
    /// Inside `true`, `false` or `null`; what is left to match.
    Literal(&'static str),
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// The top-level value is complete: only whitespace may follow.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Backslash,
    /// Hex digits still expected after `\u`.
    Hex(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    fn next(self, c: char) -> Option<Num> {
        let digit = c.is_ascii_digit();
        match (self, c) {
            (Num::Minus, '0') => Some(Num::Zero),
            (Num::Minus, _) if digit => Some(Num::Int),
            (Num::Int, _) if digit => Some(Num::Int),
            (Num::Zero | Num::Int, '.') => Some(Num::Dot),
            (Num::Dot | Num::Frac, _) if digit => Some(Num::Frac),
            (Num::Zero | Num::Int | Num::Frac, 'e' | 'E') => Some(Num::Exp),
            (Num::Exp, '+' | '-') => Some(Num::ExpSign),
            (Num::Exp | Num::ExpSign | Num::ExpDigits, _) if digit => Some(Num::ExpDigits),
            _ => None,
        }
    }

    fn is_complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
}

impl JsonPrefix {
    fn new() -> JsonPrefix {
        JsonPrefix { stack: Vec::new(), state: JsonState::Value }
    }

    fn feed_str(&mut self, text: &str) -> Result<(), String> {
        text.chars().try_for_each(|c| self.feed(c))
    }

    fn after_value(&self) -> JsonState {
        if self.stack.is_empty() { JsonState::Done } else { JsonState::After }
    }

    fn feed(&mut self, c: char) -> Result<(), String> {
        let whitespace = matches!(c, ' ' | '\t' | '\n' | '\r');
        let unexpected = |state: JsonState| Err(format!("unexpected {c:?} in state {state:?}"));
        self.state = match self.state {
            JsonState::Str { key, escape } => match (escape, c) {
                (Escape::None, '"') if key => JsonState::Colon,
                (Escape::None, '"') => self.after_value(),
                (Escape::None, '\\') => JsonState::Str { key, escape: Escape::Backslash },
                (Escape::None, c) if u32::from(c) < 0x20 => return unexpected(self.state),
                (Escape::None, _) => self.state,
                (Escape::Backslash, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => {
                    JsonState::Str { key, escape: Escape::None }
                }
                (Escape::Backslash, 'u') => JsonState::Str { key, escape: Escape::Hex(4) },
                (Escape::Hex(n), c) if c.is_ascii_hexdigit() => {
                    let escape = if n > 1 { Escape::Hex(n - 1) } else { Escape::None };
                    JsonState::Str { key, escape }
                }
                _ => return unexpected(self.state),
            },
            JsonState::Number(num) => match num.next(c) {
                Some(num) => JsonState::Number(num),
                None if num.is_complete() => {
                    self.state = self.after_value();
                    return self.feed(c);
                }
                None => return unexpected(self.state),
            },
            JsonState::Literal(rest) => match rest.strip_prefix(c) {
                Some("") => self.after_value(),
                Some(rest) => JsonState::Literal(rest),
                None => return unexpected(self.state),
            },
            _ if whitespace => self.state,
            JsonState::Value | JsonState::ValueOrClose => match c {
                ']' if self.state == JsonState::ValueOrClose => {
                    self.stack.pop();
                    self.after_value()
                }
                '{' => {
                    self.stack.push(true);
                    JsonState::KeyOrClose
                }
                '[' => {
                    self.stack.push(false);
                    JsonState::ValueOrClose
                }
                '"' => JsonState::Str { key: false, escape: Escape::None },
                '-' => JsonState::Number(Num::Minus),
                '0' => JsonState::Number(Num::Zero),
                '1'..='9' => JsonState::Number(Num::Int),
                't' => JsonState::Literal("rue"),
                'f' => JsonState::Literal("alse"),
                'n' => JsonState::Literal("ull"),
                _ => return unexpected(self.state),
            },
            JsonState::KeyOrClose | JsonState::Key => match c {
                '"' => JsonState::Str { key: true, escape: Escape::None },
                '}' if self.state == JsonState::KeyOrClose => {
                    self.stack.pop();
                    self.after_value()
                }
                _ => return unexpected(self.state),
            },
            JsonState::Colon if c == ':' => JsonState::Value,
            JsonState::After => match (self.stack.last(), c) {
                (Some(true), ',') => JsonState::Key,
                (Some(false), ',') => JsonState::Value,
                (Some(true), '}') | (Some(false), ']') => {
                    self.stack.pop();
                    self.after_value()
                }
                _ => return unexpected(self.state),
            },
            JsonState::Colon | JsonState::Done => return unexpected(self.state),
        };
        Ok(())
    }
}

#[test]
fn json_prefix_checker_accepts_prefixes_and_rejects_garbage() {
    let valid = [
        r#"{"city":"Paris","days":3,"unit":null}"#,
        r#"{"a":[1,-0.5e+3,true,false,{"b":"\u00e9\n\"q\""}],"c":{}}"#,
        r#" [ ] "#,
        r#"{"emoji":"😀","cjk":"東京","big":12345678901234567890123}"#,
        "0",
        "-12.5E-7",
    ];
    for text in valid {
        let mut checker = JsonPrefix::new();
        assert_eq!(checker.feed_str(text), Ok(()), "{text}");
        assert!(serde_json::from_str::<serde_json::Value>(text).is_ok(), "{text}");
    }
    let invalid = [
        r#"{"a":1,}"#,
        r#"{'a':1}"#,
        r#"{"a" 1}"#,
        r#"{"a":01}"#,
        r#"{"a":tru "#,
        r#"{"a":"x"}}"#,
        "[1,]",
        "{\"a\":\"raw\nnewline\"}",
        r#""\x""#,
        r#"{"a":-}"#,
        "{} {}",
        "[1}",
    ];
    for text in invalid {
        let mut checker = JsonPrefix::new();
        assert!(checker.feed_str(text).is_err(), "accepted {text:?}");
    }
}
