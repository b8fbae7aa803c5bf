//! The grammars are checked by matching texts against them with a small GBNF reader (the
//! subset the builder writes); that llama.cpp takes them is checked against the real
//! `llama-server` in `tests/e2e/test_local_model.py`.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::*;

#[derive(Debug, Clone)]
enum Atom {
    Lit(Vec<char>),
    Class { negated: bool, ranges: Vec<(char, char)> },
    Any,
    Ref(String),
    Group(Vec<Vec<(Atom, usize, Option<usize>)>>),
}

type Alt = Vec<Vec<(Atom, usize, Option<usize>)>>;

struct Reader<'a> {
    chars: Vec<char>,
    at: usize,
    _text: &'a str,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }
    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }
    fn escaped(&mut self) -> char {
        let c = self.chars[self.at];
        self.at += 1;
        if c != '\\' {
            return c;
        }
        let e = self.chars[self.at];
        self.at += 1;
        let hex = |r: &mut Self, n: usize| {
            let s: String = r.chars[r.at..r.at + n].iter().collect();
            r.at += n;
            char::from_u32(u32::from_str_radix(&s, 16).unwrap()).unwrap()
        };
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            'U' => hex(self, 8),
            other => other,
        }
    }
    fn alt(&mut self) -> Alt {
        let mut alts = vec![self.seq()];
        loop {
            self.skip_space();
            if self.peek() == Some('|') {
                self.at += 1;
                alts.push(self.seq());
            } else {
                return alts;
            }
        }
    }
    fn seq(&mut self) -> Vec<(Atom, usize, Option<usize>)> {
        let mut seq = Vec::new();
        loop {
            self.skip_space();
            let atom = match self.peek() {
                Some('"') => {
                    self.at += 1;
                    let mut lit = Vec::new();
                    while self.peek() != Some('"') {
                        lit.push(self.escaped());
                    }
                    self.at += 1;
                    Atom::Lit(lit)
                }
                Some('[') => {
                    self.at += 1;
                    let negated = self.peek() == Some('^');
                    if negated {
                        self.at += 1;
                    }
                    let mut ranges = Vec::new();
                    while self.peek() != Some(']') {
                        let lo = self.escaped();
                        let hi = if self.peek() == Some('-') && self.chars[self.at + 1] != ']' {
                            self.at += 1;
                            self.escaped()
                        } else {
                            lo
                        };
                        ranges.push((lo, hi));
                    }
                    self.at += 1;
                    Atom::Class { negated, ranges }
                }
                Some('.') => {
                    self.at += 1;
                    Atom::Any
                }
                Some('(') => {
                    self.at += 1;
                    let inner = self.alt();
                    self.skip_space();
                    assert_eq!(self.peek(), Some(')'));
                    self.at += 1;
                    Atom::Group(inner)
                }
                Some(c) if c.is_ascii_alphanumeric() || c == '-' => {
                    let start = self.at;
                    while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
                        self.at += 1;
                    }
                    Atom::Ref(self.chars[start..self.at].iter().collect())
                }
                _ => return seq,
            };
            let (min, max) = match self.peek() {
                Some('?') => (0, Some(1)),
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('{') => {
                    let end = (self.at..).find(|&i| self.chars[i] == '}').unwrap();
                    let body: String = self.chars[self.at + 1..end].iter().collect();
                    let (lo, hi) = body.split_once(',').unwrap_or((&body, &body));
                    self.at = end;
                    (lo.parse().unwrap(), Some(hi.parse().unwrap()))
                }
                _ => {
                    seq.push((atom, 1, Some(1)));
                    continue;
                }
            };
            self.at += 1;
            seq.push((atom, min, max));
        }
    }
}

struct Grammar {
    rules: HashMap<String, Alt>,
}

impl Grammar {
    fn parse(text: &str) -> Grammar {
        let mut rules = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (name, body) = line.split_once(" ::= ").unwrap();
            let mut reader = Reader { chars: body.chars().collect(), at: 0, _text: body };
            let alt = reader.alt();
            assert_eq!(reader.at, reader.chars.len(), "unread rest in {line}");
            assert!(rules.insert(name.to_owned(), alt).is_none(), "{name} twice");
        }
        Grammar { rules }
    }

    fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let ends = self.alt(&self.rules["root"], &chars, 0);
        ends.contains(&chars.len())
    }

    fn alt(&self, alt: &Alt, s: &[char], at: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        for seq in alt {
            let mut here = BTreeSet::from([at]);
            for (atom, min, max) in seq {
                let mut next = BTreeSet::new();
                let mut frontier = here.clone();
                if *min == 0 {
                    next.extend(frontier.iter().copied());
                }
                let mut count = 0;
                while !frontier.is_empty() && max.is_none_or(|m| count < m) {
                    count += 1;
                    let mut reached = BTreeSet::new();
                    for &p in &frontier {
                        reached.extend(self.atom(atom, s, p));
                    }
                    if count >= *min {
                        let fresh: BTreeSet<usize> = reached.difference(&next).copied().collect();
                        next.extend(reached.iter().copied());
                        frontier = if max.is_none() { fresh } else { reached };
                    } else {
                        frontier = reached;
                    }
                }
                here = next;
            }
            out.extend(here);
        }
        out
    }

    fn atom(&self, atom: &Atom, s: &[char], at: usize) -> BTreeSet<usize> {
        match atom {
            Atom::Lit(lit) => {
                if s.get(at..at + lit.len()) == Some(lit.as_slice()) {
                    BTreeSet::from([at + lit.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Atom::Class { negated, ranges } => match s.get(at) {
                Some(&c) if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated => {
                    BTreeSet::from([at + 1])
                }
                _ => BTreeSet::new(),
            },
            Atom::Any => {
                if at < s.len() {
                    BTreeSet::from([at + 1])
                } else {
                    BTreeSet::new()
                }
            }
            Atom::Ref(name) => {
                let rule = self.rules.get(name).unwrap_or_else(|| panic!("no rule {name}"));
                self.alt(rule, s, at)
            }
            Atom::Group(inner) => self.alt(inner, s, at),
        }
    }
}

fn tool(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: None, parameters: Some(parameters), strict: false }
}

fn weather() -> ToolSpec {
    tool(
        "get_weather",
        json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}
        }, "required": ["city"]}),
    )
}

fn grammar(tools: &[ToolSpec], choice: ToolChoice, parallel: bool) -> Grammar {
    let text = for_calls(tools, &choice, parallel, CallFormat::ToolCall).unwrap();
    Grammar::parse(&text)
}

#[test]
fn a_forced_choice_takes_only_calls_that_fit_the_schema() {
    let g = grammar(&[weather()], ToolChoice::Required, true);
    assert!(g.matches(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
    ));
    assert!(g.matches(
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"celsius\",\"days\":3}}</tool_call>\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}</tool_call>"
    ));
    // No prose, no other tool, no schema copied as a value, no unknown key, no missing
    // required key, no value outside the enum, no wrong type.
    for wrong in [
        "It is sunny.",
        "",
        "<tool_call>{\"name\":\"get_time\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":{\"type\":\"string\"}}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"city2\":\"Rome\"}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"unit\":\"celsius\"}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"kelvin\"}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":2.5}}</tool_call>",
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":[\"Paris\",\"Rome\"]}}</tool_call>",
        "```json\n{\"name\":\"get_weather\",\"arguments\":{\"town\":\"Paris\"}}\n```",
        "```python\nget_weather(city='Paris')\n```",
    ] {
        assert!(!g.matches(wrong), "{wrong}");
    }
}

#[test]
fn a_call_may_be_bare_fenced_or_a_list() {
    let g = grammar(&[weather()], ToolChoice::Required, true);
    let call = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
    for right in [
        call.to_owned(),
        format!("```json\n{call}\n```"),
        format!("```\n{call}\n```"),
        format!("[{call}, {call}]"),
        format!("```json\n[\n  {call},\n  {call}\n]\n```"),
        format!("{call}\n{call}"),
    ] {
        assert!(g.matches(&right), "{right}");
    }
    let single = grammar(&[weather()], ToolChoice::Required, false);
    assert!(single.matches(&format!("[{call}]")));
    assert!(!single.matches(&format!("[{call}, {call}]")));
    assert!(!single.matches(&format!("{call}\n{call}")));
}

#[test]
fn one_call_only_without_parallel_calls() {
    let g = grammar(&[weather()], ToolChoice::Required, false);
    let one =
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>";
    assert!(g.matches(one));
    assert!(!g.matches(&format!("{one}\n{one}")));
}

#[test]
fn a_named_tool_is_the_only_name() {
    let time =
        tool("get_time", json!({"type": "object", "properties": {"zone": {"type": "string"}}}));
    let g = grammar(&[weather(), time], ToolChoice::Named("get_time".into()), true);
    assert!(g.matches("<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call>"));
    assert!(g.matches(
        "<tool_call>{\"name\":\"get_time\",\"arguments\":{\"zone\":\"UTC\"}}</tool_call>"
    ));
    assert!(!g.matches(
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>"
    ));
    // A tool that is not declared: nothing to hold the reply to.
    assert!(
        for_calls(&[weather()], &ToolChoice::Named("nope".into()), true, CallFormat::ToolCall)
            .is_none()
    );
}

#[test]
fn words_may_follow_the_calls_and_a_reasoning_block_precede_them() {
    let g = grammar(&[weather()], ToolChoice::Required, true);
    let call =
        "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>";
    assert!(g.matches(&format!("{call}\nThis gets the weather in Paris.")));
    assert!(g.matches(&format!("<think>The user wants the weather.</think>\n{call}")));
    for wrong in [
        "This gets the weather in Paris.".to_owned(),
        "<think>No tool.</think>\nIt is sunny.".to_owned(),
        format!("{call}\n<tool_call>{{\"name\":\"x\"}}</tool_call>"),
        format!("{call}\n```json\n{{\"name\":\"x\"}}\n```"),
        "".to_owned(),
        "   ".to_owned(),
    ] {
        assert!(!g.matches(&wrong), "{wrong:?}");
    }
}

#[test]
fn no_grammar_when_no_call_is_forced() {
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        assert!(for_calls(&[weather()], &choice, true, CallFormat::ToolCall).is_none());
    }
}

#[test]
fn optional_properties_come_in_order_each_at_most_once() {
    let t = tool(
        "f",
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}}}),
    );
    let g = grammar(&[t], ToolChoice::Required, false);
    let call =
        |args: &str| format!("<tool_call>{{\"name\":\"f\",\"arguments\":{args}}}</tool_call>");
    for right in [
        "{}",
        "{\"a\":1}",
        "{\"b\":true}",
        "{\"c\":null}",
        "{\"a\":-3, \"c\":null}",
        "{ \"a\" : 0 , \"b\" : false , \"c\" : null }",
    ] {
        assert!(g.matches(&call(right)), "{right}");
    }
    for wrong in
        ["{\"a\":1,}", "{,\"a\":1}", "{\"a\":1,\"a\":2}", "{\"b\":true,\"a\":1}", "{\"a\":01}"]
    {
        assert!(!g.matches(&call(wrong)), "{wrong}");
    }
}

#[test]
fn nested_objects_arrays_unions_refs_and_consts_follow_the_schema() {
    let t = tool(
        "query",
        json!({
            "type": "object",
            "$defs": {"cond": {"type": "object", "properties": {
                "field": {"type": "string"},
                "op": {"enum": ["=", ">", "<"]},
                "value": {"anyOf": [{"type": "number"}, {"type": "string"}]}
            }, "required": ["field", "op", "value"]}},
            "properties": {
                "table": {"const": "users"},
                "conditions": {"type": "array", "items": {"$ref": "#/$defs/cond"}, "minItems": 1},
                "limit": {"type": ["integer", "null"]},
                "extra": {"type": "object", "additionalProperties": {"type": "string"}},
                "anything": {}
            },
            "required": ["table", "conditions"]
        }),
    );
    let g = grammar(&[t], ToolChoice::Required, false);
    let call =
        |args: &str| format!("<tool_call>{{\"name\":\"query\",\"arguments\":{args}}}</tool_call>");
    assert!(g.matches(&call(
        "{\"table\":\"users\",\"conditions\":[{\"field\":\"age\",\"op\":\">\",\"value\":25},{\"field\":\"job\",\"op\":\"=\",\"value\":\"engineer\"}],\"limit\":null,\"extra\":{\"k\":\"v\"},\"anything\":[1,{\"x\":null}]}"
    )));
    for wrong in [
        "{\"table\":\"orders\",\"conditions\":[{\"field\":\"a\",\"op\":\"=\",\"value\":1}]}",
        "{\"table\":\"users\",\"conditions\":[]}",
        "{\"table\":\"users\",\"conditions\":[{\"field\":\"a\",\"op\":\"!=\",\"value\":1}]}",
        "{\"table\":\"users\",\"conditions\":[{\"field\":\"a\",\"op\":\"=\",\"value\":true}]}",
        "{\"table\":\"users\",\"conditions\":[{\"field\":\"a\",\"op\":\"=\",\"value\":1}],\"extra\":{\"k\":1}}",
        "{\"table\":\"users\",\"conditions\":[{\"field\":\"a\",\"op\":\"=\",\"value\":1}],\"limit\":1.5}",
    ] {
        assert!(!g.matches(&call(wrong)), "{wrong}");
    }
}

#[test]
fn names_and_keys_outside_ascii_and_with_quotes_are_escaped() {
    let t = tool(
        "météo\"x",
        json!({"type": "object", "properties": {"città": {"type": "string"}, "a\\b": {"type": "string"}}, "required": ["città"]}),
    );
    let text = for_calls(&[t], &ToolChoice::Required, false, CallFormat::ToolCall).unwrap();
    assert!(text.is_ascii(), "{text}");
    let g = Grammar::parse(&text);
    assert!(g.matches(
        "<tool_call>{\"name\":\"météo\\\"x\",\"arguments\":{\"città\":\"Roma 🌞\",\"a\\\\b\":\"\\u00e9\\n\"}}</tool_call>"
    ));
}

/// The grammar for a required call to `weather()`, several allowed, in `format`.
fn required(format: CallFormat) -> Grammar {
    Grammar::parse(&for_calls(&[weather()], &ToolChoice::Required, true, format).unwrap())
}

#[test]
fn the_json_format_takes_the_same_calls_and_xml_has_no_grammar() {
    let g = required(CallFormat::Json);
    assert!(g.matches("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}"));
    assert!(!g.matches("It is sunny."));
    assert!(for_calls(&[weather()], &ToolChoice::Required, true, CallFormat::Xml).is_none());
    assert!(for_calls(&[], &ToolChoice::Required, true, CallFormat::ToolCall).is_none());
}

#[test]
fn llama_calls_take_parameters_and_mistral_lists_may_follow_their_token() {
    let g = required(CallFormat::Llama);
    assert!(g.matches("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"));
    assert!(!g.matches("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
    let g = required(CallFormat::Mistral);
    assert!(g.matches("[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}},{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}]"));
    // A server that drops the special token leaves the list alone.
    assert!(g.matches("[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]"));
    assert!(!g.matches("[TOOL_CALLS] It is sunny."));
    assert!(for_calls(&[weather()], &ToolChoice::Required, true, CallFormat::Qwen3Coder).is_none());
}

#[test]
fn tools_without_parameters_take_any_object_and_huge_schemas_give_no_grammar() {
    let bare = ToolSpec { name: "ping".into(), description: None, parameters: None, strict: false };
    let g = grammar(&[bare], ToolChoice::Required, false);
    assert!(g.matches("<tool_call>{\"name\":\"ping\",\"arguments\":{\"any\":[1,2]}}</tool_call>"));
    let mut properties = serde_json::Map::new();
    for i in 0..5000 {
        properties.insert(format!("p{i}"), json!({"enum": [format!("v{i}")]}));
    }
    let huge = tool("huge", json!({"type": "object", "properties": properties}));
    assert!(for_calls(&[huge], &ToolChoice::Required, false, CallFormat::ToolCall).is_none());
}
