//! Where a call's values come from. A small model that calls a tool where none fits fills
//! the arguments with numbers it makes up (the roots of `bx + c = 0` become `a = 1, b = -2,
//! c = 3`); a model asked for several things writes one call, and, asked to go on, writes
//! the next thing the user named. Both are told apart by whether a value appears in what
//! the model was given.
//!
//! - [`Grounding::guessed`]: the required arguments of a call that hold a value found
//!   nowhere in the conversation or the tool list: the call is a guess. A value is a number,
//!   or a short string: a name, a place, a code or a date (`"Manchester United"` for a
//!   question about the weather, `"2023-10-05"` for "yesterday"). A string is judged by its
//!   words (any one of them written anywhere will do: `"Germany"` is grounded by "German"),
//!   or, with no letters at all, by its numbers. Short all-capital words (`USD`, `AAPL`,
//!   `NBA`) are codes a model rightly looks up, and are never judged.
//! - [`Grounding::mentions`]: whether a value is named in the user's own words (the user and
//!   system messages), for [`crate::chat::continuation`].

use serde_json::Value;

use crate::chat::numbers::{contains, numbers_in, sort};
use crate::chat::stated::Stated;
use crate::chat::types::{ChatRequest, Message, ToolSpec};

/// The numbers and words a request gives the model.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grounding {
    /// Every number written anywhere in the conversation and the tool list (sorted): a
    /// required number that is none of these was made up.
    numbers: Vec<f64>,
    /// The user's and system's words, lowercased, for [`Grounding::mentions`].
    asked: String,
    /// Everything the model was given, lowercased: messages, calls, results and the tool
    /// list; a string whose words are none of these was made up.
    given: String,
    /// `given` without spaces and hyphens, made when a word is first not found in `given`:
    /// a word the model closed up ("easygoing" for "easy going") is given too.
    closed: std::sync::OnceLock<String>,
    /// The numbers in `asked` (sorted).
    asked_numbers: Vec<f64>,
    /// The user's words alone (not the system prompt's), lowercased, for
    /// [`Grounding::names_tool`].
    said: String,
    /// The user's last message, for [`Grounding::settle_options`].
    stated: Stated,
}

/// Whether a value is named in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mention {
    /// The user (or the system prompt) wrote it.
    Named,
    /// Nowhere in the user's words.
    Absent,
    /// A value that says nothing either way: `true`, `false`, `null`, an empty string.
    Neutral,
}

impl Grounding {
    /// What `req` gives the model: its messages (results and earlier calls included) and
    /// its tools' names, descriptions and schemas.
    pub(crate) fn of(req: &ChatRequest) -> Grounding {
        let mut numbers = Vec::new();
        let mut asked = String::new();
        let mut said = String::new();
        let mut given = String::new();
        let mut last_user = "";
        let mut give = |text: &str, numbers: &mut Vec<f64>| {
            numbers_in(text, numbers);
            given.push_str(&text.to_lowercase());
            given.push('\n');
        };
        for message in &req.messages {
            match message {
                Message::System(text) | Message::User(text) => {
                    give(text, &mut numbers);
                    let lower = text.to_lowercase();
                    if matches!(message, Message::User(_)) {
                        last_user = text;
                        said.push_str(&lower);
                        said.push('\n');
                    }
                    asked.push_str(&lower);
                    asked.push('\n');
                }
                Message::Assistant { text, calls } => {
                    give(text, &mut numbers);
                    for call in calls {
                        give(&call.name, &mut numbers);
                        give(&call.arguments, &mut numbers);
                    }
                }
                Message::ToolResult { content, .. } => give(content, &mut numbers),
            }
        }
        for tool in &req.tools {
            give(&tool.name, &mut numbers);
            if let Some(description) = &tool.description {
                give(description, &mut numbers);
            }
            if let Some(parameters) = &tool.parameters {
                give(&parameters.to_string(), &mut numbers);
            }
        }
        let mut asked_numbers = Vec::new();
        numbers_in(&asked, &mut asked_numbers);
        sort(&mut numbers);
        sort(&mut asked_numbers);
        let closed = std::sync::OnceLock::new();
        let stated = Stated::of(last_user);
        Grounding { numbers, asked, given, closed, asked_numbers, said, stated }
    }

    /// The required arguments of a call to `spec` whose value holds a number or a short
    /// string given nowhere (in the conversation or the tool list), each as `key = value`.
    /// Empty for a call that is not a guess, and for arguments that are not a JSON object.
    pub(crate) fn guessed(&self, spec: &ToolSpec, arguments: &str) -> Vec<String> {
        let Ok(Value::Object(arguments)) = serde_json::from_str::<Value>(arguments) else {
            return Vec::new();
        };
        let required = spec
            .parameters
            .as_ref()
            .and_then(|p| p.get("required"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut guessed = Vec::new();
        for key in required.iter().filter_map(Value::as_str) {
            let Some(value) = arguments.get(key) else { continue };
            if self.made_up(value) {
                guessed.push(format!("{key} = {value}"));
            }
        }
        guessed
    }

    /// A call to `spec` without its optional arguments that hold a name or a date given
    /// nowhere (a model asked for "LeBron James's stats" adds `"team": "Boston Celtics"`):
    /// the arguments rewritten and what was taken out (`key = value`), or `None` when there
    /// is nothing to take out. The tool's default applies instead. Only a string judged as
    /// [`Grounding::guessed`] judges one, whose words all begin with a capital (a name, a
    /// place) or that has no letters (a date, a season): an optional number or a phrase in
    /// lower case is more often the model's own choice (a limit, a timeout, a description)
    /// than a fact it made up.
    pub(crate) fn without_guessed_options(
        &self,
        spec: &ToolSpec,
        arguments: &str,
    ) -> Option<(String, Vec<String>)> {
        let Ok(Value::Object(mut arguments)) = serde_json::from_str::<Value>(arguments) else {
            return None;
        };
        let required = spec.parameters.as_ref().and_then(|p| p.get("required"));
        let required = required.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut removed = Vec::new();
        arguments.retain(|key, value| {
            let name_or_date = value.as_str().is_some_and(|text| {
                let mut words = text.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty());
                words.all(|word| word.chars().next().is_some_and(char::is_uppercase))
            });
            if required.iter().any(|r| r.as_str() == Some(key))
                || !name_or_date
                || !self.made_up(value)
            {
                return true;
            }
            removed.push(format!("{key} = {value}"));
            false
        });
        if removed.is_empty() {
            return None;
        }
        Some((Value::Object(arguments).to_string(), removed))
    }

    /// A call to `spec` without its optional values given nowhere
    /// ([`Grounding::without_guessed_options`]) and with the values the user stated in their
    /// last message that it left out or set to `false` ([`Stated::fill`]): the arguments
    /// rewritten and what changed (`took out key = value`, `set key = value`), or `None` when
    /// nothing did.
    pub(crate) fn settle_options(
        &self,
        spec: &ToolSpec,
        arguments: &str,
    ) -> Option<(String, Vec<String>)> {
        let mut changed = Vec::new();
        let mut rewritten = None;
        if let Some((kept, removed)) = self.without_guessed_options(spec, arguments) {
            changed.extend(removed.into_iter().map(|r| format!("took out {r}")));
            rewritten = Some(kept);
        }
        let now = rewritten.as_deref().unwrap_or(arguments);
        if let Some((filled, set)) = self.stated.fill(spec, now) {
            changed.extend(set.into_iter().map(|s| format!("set {s}")));
            rewritten = Some(filled);
        }
        rewritten.map(|arguments| (arguments, changed))
    }

    /// Whether a value holds a number or a short string given nowhere, at any depth.
    fn made_up(&self, value: &Value) -> bool {
        let mut made_up = false;
        each_scalar(value, &mut |scalar| {
            made_up |= match scalar {
                Value::Number(n) => n.as_f64().is_some_and(|n| !signed(&self.numbers, n)),
                Value::String(text) => self.made_up_string(text),
                _ => false,
            }
        });
        made_up
    }

    /// `given` without spaces and hyphens, made on first use.
    fn closed(&self) -> &str {
        self.closed.get_or_init(|| {
            self.given.chars().filter(|c| !c.is_whitespace() && *c != '-').collect()
        })
    }

    /// Whether a short string is made up: a word of it (three letters or more, not a code
    /// in capitals) appears nowhere, nor any other; or, a string without letters (a date, a
    /// time, a season), a number in it other than 0 is given nowhere. A string of letters
    /// that has no such word (`NBA`, `x^3`), a path, a file name, an address or a time
    /// (with `/`, `.`, `_`, `@` or `:`) and a longer string (over four words or 64
    /// characters, or more than a line: text the model writes, not a value it looks up)
    /// are not judged.
    fn made_up_string(&self, text: &str) -> bool {
        // Paths, file names, addresses, identifiers and times are made, not looked up:
        // `src/main.rs` for "write a Rust program" is no guess.
        if text.chars().count() > JUDGED_STRING
            || text.split_whitespace().count() > JUDGED_WORDS
            || text.contains(['/', '\\', '.', '_', '@', ':', '\n'])
        {
            return false;
        }
        let mut words = text
            .split(|c: char| !c.is_alphabetic())
            .filter(|word| word.chars().count() >= 3)
            .filter(|word| !(word.chars().count() <= 5 && word.chars().all(char::is_uppercase)))
            .peekable();
        if words.peek().is_some() {
            return !words.any(|word| {
                let word = word.to_lowercase();
                self.given.contains(&stem(&word)) || self.closed().contains(&word)
            });
        }
        if text.chars().any(char::is_alphabetic) {
            return false;
        }
        let mut numbers = Vec::new();
        numbers_in(text, &mut numbers);
        numbers.iter().any(|n| *n != 0.0 && !signed(&self.numbers, *n))
    }

    /// How a call to `spec` waits to be judged: whole when a required parameter can hold a
    /// number (any type but a string or a boolean); while it is short when the only values
    /// to judge are strings, required or optional, or optional booleans (a longer call, or
    /// one with a string of several lines, goes out as it is written, unjudged); not at all
    /// when no parameter can be a guess or left out.
    pub(crate) fn hold(spec: &ToolSpec) -> Hold {
        let Some(parameters) = &spec.parameters else { return Hold::No };
        let required = parameters.get("required").and_then(Value::as_array);
        let required = required.map(Vec::as_slice).unwrap_or_default();
        let properties = parameters.get("properties").and_then(Value::as_object);
        // An optional string may be a made-up name (`without_guessed_options`); an optional
        // string or boolean may be one the user stated and the model left out
        // (`settle_options`).
        let settled = |schema: &Value| {
            matches!(schema.get("type").and_then(Value::as_str), Some("string" | "boolean"))
        };
        let mut hold = Hold::No;
        for key in required.iter().filter_map(Value::as_str) {
            let schema = properties.and_then(|p| p.get(key));
            match schema.and_then(|schema| schema.get("type")).and_then(Value::as_str) {
                Some("boolean") => {}
                Some("string") => hold = Hold::WhileShort,
                _ => return Hold::Whole,
            }
        }
        let optional = properties.into_iter().flatten().any(|(key, schema)| {
            settled(schema) && !required.iter().any(|r| r.as_str() == Some(key))
        });
        if optional { Hold::WhileShort } else { hold }
    }

    /// Whether the user named `value` (a scalar): a number among the numbers they wrote, a
    /// string among their words (whole words, any case): as written, or each of its words,
    /// in any order and whatever joins them (`"Tordesillas Treaty"` for "the Treaty of
    /// Tordesillas", `"total_championships"` for "the total championships").
    pub(crate) fn mentions(&self, value: &Value) -> Mention {
        match value {
            Value::Null | Value::Bool(_) => Mention::Neutral,
            Value::String(text) if text.trim().is_empty() => Mention::Neutral,
            Value::String(text) => {
                let text = text.trim().to_lowercase();
                let mut words =
                    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty());
                let each =
                    words.clone().next().is_some() && words.all(|w| has_words(&self.asked, w));
                if each || has_words(&self.asked, &text) { Mention::Named } else { Mention::Absent }
            }
            Value::Number(n) => match n.as_f64() {
                Some(n) if signed(&self.asked_numbers, n) => Mention::Named,
                _ => Mention::Absent,
            },
            // Containers are judged by their scalars.
            Value::Array(_) | Value::Object(_) => Mention::Neutral,
        }
    }
}

impl Grounding {
    /// Whether the user's own words name the tool `name` apart from `others` (other tools'
    /// names, parameters' names): a word of its name (split at `_`, `.`, `-` and where the
    /// case changes; three letters or more, and not one that names no task, such as `get` or
    /// `calculate`) that no name in `others` has is a word the user wrote (a longer one by its first five letters:
    /// `primes` is named by "prime", `coverage` by "coverage ratio").
    pub(crate) fn names_tool(&self, name: &str, others: &[&str]) -> bool {
        let taken: Vec<String> = others.iter().flat_map(|other| name_words(other)).collect();
        let words: Vec<&str> =
            self.said.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        name_words(name)
            .into_iter()
            .filter(|w| w.chars().count() >= 3 && !TASKLESS.contains(&w.as_str()))
            .filter(|w| !taken.contains(w))
            .any(|w| {
                let short = w.chars().count() <= 5;
                words.iter().any(|said| {
                    if short {
                        *said == w || said.strip_suffix('s') == Some(&w)
                    } else {
                        said.starts_with(&stem(&w))
                    }
                })
            })
    }
}

/// Words of tool names that name no task of their own.
const TASKLESS: &[&str] = &[
    "get",
    "set",
    "find",
    "fetch",
    "search",
    "calculate",
    "calc",
    "compute",
    "analyze",
    "analyse",
    "analysis",
    "check",
    "create",
    "make",
    "info",
    "information",
    "details",
    "detail",
    "data",
    "list",
    "lookup",
    "query",
    "retrieve",
    "tool",
    "toolkit",
    "tools",
    "math",
    "function",
    "api",
    "service",
    "system",
    "helper",
    "util",
    "utils",
    "request",
    "result",
    "results",
    "value",
    "values",
    "total",
    "number",
    "the",
    "and",
    "for",
    "from",
    "with",
    "new",
    "all",
];

/// The words of a tool name, lowercased: split at anything but a letter or a digit, and
/// where a lowercase letter is followed by a capital (`getWeatherData`).
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut lower_before = false;
    for c in name.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && lower_before)) && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        lower_before = c.is_lowercase();
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// How a call waits to be judged ([`Grounding::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// It cannot be a guess: it goes out as it is written.
    No,
    /// Until it ends.
    Whole,
    /// While its arguments are at most [`HOLD_STRINGS`] bytes and hold no string of more
    /// than a line.
    WhileShort,
}

/// The longest string judged, in characters and in words: names, places, codes and dates
/// are shorter; a longer one is text the model writes (a subject, a message, a poem).
const JUDGED_STRING: usize = 64;
const JUDGED_WORDS: usize = 4;

/// The longest arguments held for their strings alone, in bytes: longer ones cannot be
/// only short strings, and go out as they are written.
pub(crate) const HOLD_STRINGS: usize = 512;

/// What of `word` (lowercased) must appear in the request: its first five letters when it
/// is longer than five (`german` grounds `germany`, `restaurant` grounds `restaurants`).
fn stem(word: &str) -> String {
    if word.chars().count() > 5 { word.chars().take(5).collect() } else { word.to_owned() }
}

/// Whether sorted `numbers` hold `n` with either sign: the sign is the model's reading of
/// the words around a number ("a loss of $1000" is `-1000`, "7 below zero" `-7`), its digits
/// are what was given.
fn signed(numbers: &[f64], n: f64) -> bool {
    contains(numbers, n) || contains(numbers, -n)
}

/// Calls `f` with every number and string in `value`, at any depth.
fn each_scalar(value: &Value, f: &mut impl FnMut(&Value)) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| each_scalar(item, f)),
        Value::Object(map) => map.values().for_each(|item| each_scalar(item, f)),
        Value::Number(_) | Value::String(_) => f(value),
        Value::Null | Value::Bool(_) => {}
    }
}

/// Whether `needle` occurs in `haystack` (both lowercased) with no letter or digit right
/// before or after it.
fn has_words(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack.get(..at).and_then(|s| s.chars().next_back());
        let after = haystack.get(at + needle.len()..).and_then(|s| s.chars().next());
        // A needle that starts or ends with a non-word character needs no boundary there.
        let starts_word = needle.chars().next().is_some_and(char::is_alphanumeric);
        let ends_word = needle.chars().next_back().is_some_and(char::is_alphanumeric);
        (!starts_word || !alnum(before)) && (!ends_word || !alnum(after))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chat::types::ChatRequest;

    fn request(user: &str, tools: Vec<ToolSpec>) -> ChatRequest {
        ChatRequest::asking(user, tools)
    }

    /// A request asking `user`, after which call `c1` gave `result`.
    fn after_result(user: &str, tools: Vec<ToolSpec>, result: &str) -> ChatRequest {
        let mut req = request(user, tools);
        let content = result.into();
        req.messages.push(Message::ToolResult {
            call_id: "c1".into(),
            name: None,
            content,
            is_error: false,
        });
        req
    }

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec::named(name, Some(parameters))
    }

    fn roots() -> ToolSpec {
        tool(
            "find_roots",
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"},
                "c": {"type": "number"}}, "required": ["a", "b", "c"]}),
        )
    }

    #[test]
    fn a_required_number_found_nowhere_is_a_guess() {
        let tools = vec![roots()];
        let req = request("What is the roots of linear equation bx + c = 0?", tools.clone());
        let grounding = Grounding::of(&req);
        let guessed = grounding.guessed(&tools[0], r#"{"a":1,"b":-2,"c":3}"#);
        assert_eq!(guessed, vec!["a = 1", "b = -2", "c = 3"]);

        let req = request("Find the roots of 3x^2 - 2x + 1 = 0.", tools.clone());
        let grounding = Grounding::of(&req);
        assert!(grounding.guessed(&tools[0], r#"{"a":3,"b":-2,"c":1}"#).is_empty());
    }

    #[test]
    fn issue_24_a_number_given_with_the_other_sign_is_given() {
        let grounding = Grounding::of(&request("A gain of $500, then a loss of $1000.", vec![]));
        assert_eq!(grounding.mentions(&json!(-1000)), Mention::Named);
        assert_eq!(grounding.mentions(&json!(500)), Mention::Named);
        assert_eq!(grounding.mentions(&json!(-999)), Mention::Absent);
        assert!(!grounding.made_up(&json!({"gain_loss": -1000})));
        assert!(grounding.made_up(&json!({"gain_loss": -999})));
    }

    #[test]
    fn numbers_from_results_history_and_the_tool_list_are_given() {
        let spec = tool(
            "fall",
            json!({"type": "object", "properties": {"gravity": {"type": "number",
                "description": "Defaults to 9.81"}, "height": {"type": "number"}},
                "required": ["gravity", "height"]}),
        );
        let req = after_result(
            "How long does a fall take?",
            vec![spec.clone()],
            "The tower is 120 m high",
        );
        let grounding = Grounding::of(&req);
        assert!(grounding.guessed(&spec, r#"{"gravity":9.81,"height":120}"#).is_empty());
        assert_eq!(
            grounding.guessed(&spec, r#"{"gravity":9.81,"height":100}"#),
            vec!["height = 100"]
        );
    }

    #[test]
    fn optional_arguments_a_string_with_a_given_word_and_unreadable_arguments_are_no_guess() {
        let spec = tool(
            "search",
            json!({"type": "object", "properties": {"query": {"type": "string"},
                "limit": {"type": "integer"}}, "required": ["query"]}),
        );
        let grounding = Grounding::of(&request("Find pizza places", vec![spec.clone()]));
        assert!(grounding.guessed(&spec, r#"{"query":"pizza 42","limit":10}"#).is_empty());
        assert!(grounding.guessed(&spec, "not json").is_empty());
        // Numbers inside a required array or object count.
        let stats = tool(
            "stdev",
            json!({"type": "object", "properties": {"data": {"type": "array"}}, "required": ["data"]}),
        );
        let grounding = Grounding::of(&request("Flip a coin", vec![stats.clone()]));
        assert_eq!(grounding.guessed(&stats, r#"{"data":[1,0,1]}"#).len(), 1);
    }

    #[test]
    fn a_call_is_held_whole_for_numbers_and_while_short_for_strings() {
        assert_eq!(Grounding::hold(&roots()), Hold::Whole);
        let weather = tool(
            "weather",
            json!({"type": "object", "properties": {"city": {"type": "string"},
                "days": {"type": "integer"}}, "required": ["city"]}),
        );
        assert_eq!(Grounding::hold(&weather), Hold::WhileShort);
        let untyped = tool("f", json!({"type": "object", "properties": {}, "required": ["x"]}));
        assert_eq!(Grounding::hold(&untyped), Hold::Whole);
        // An optional value is judged too (taken out when it is a guess), while it is short.
        let optional =
            tool("g", json!({"type": "object", "properties": {"x": {"type": "string"}}}));
        assert_eq!(Grounding::hold(&optional), Hold::WhileShort);
        let none = tool("n", json!({"type": "object", "properties": {}}));
        assert_eq!(Grounding::hold(&none), Hold::No);
        let flag = tool(
            "h",
            json!({"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]}),
        );
        assert_eq!(Grounding::hold(&flag), Hold::No);
        // An optional flag may be one the user stated and the call left out.
        let option =
            tool("o", json!({"type": "object", "properties": {"on": {"type": "boolean"}}}));
        assert_eq!(Grounding::hold(&option), Hold::WhileShort);
    }

    #[test]
    fn issue_24_optional_arguments_holding_guesses_are_taken_out() {
        let stats = tool(
            "player_stats",
            json!({"type": "object", "properties": {"player": {"type": "string"},
                "team": {"type": "string"}, "season": {"type": "string"},
                "games": {"type": "integer"}, "playoffs": {"type": "boolean"}},
                "required": ["player"]}),
        );
        let req = request("LeBron James's stats over his last 5 games", vec![stats.clone()]);
        let grounding = Grounding::of(&req);
        let arguments = r#"{"player":"LeBron James","team":"Boston Celtics","season":"2023","games":5,"playoffs":true}"#;
        let (kept, removed) = grounding.without_guessed_options(&stats, arguments).unwrap();
        assert_eq!(kept, r#"{"player":"LeBron James","games":5,"playoffs":true}"#);
        assert_eq!(removed, vec![r#"team = "Boston Celtics""#, r#"season = "2023""#]);
        // A number or a phrase in lower case is the model's own choice: it stays.
        let chosen = r#"{"player":"LeBron James","team":"any team","games":10}"#;
        assert_eq!(grounding.without_guessed_options(&stats, chosen), None);
        // Nothing to take out: none; a required guess is not this check's (it drops the call).
        let grounded = r#"{"player":"LeBron James","games":5}"#;
        assert_eq!(grounding.without_guessed_options(&stats, grounded), None);
        let guess = r#"{"player":"Stephen Curry"}"#;
        assert_eq!(grounding.without_guessed_options(&stats, guess), None);
    }

    fn team_stats() -> ToolSpec {
        tool(
            "team_stats",
            json!({"type": "object", "properties": {"team_name": {"type": "string"},
                "date": {"type": "string"}}, "required": ["team_name", "date"]}),
        )
    }

    /// Values a model makes up for a question no tool answers (BFCL's irrelevance cases).
    #[test]
    fn a_required_name_or_date_found_nowhere_is_a_guess() {
        let spec = team_stats();
        let grounding = Grounding::of(&request("Who won the game yesterday?", vec![spec.clone()]));
        assert_eq!(
            grounding.guessed(&spec, r#"{"team_name":"Manchester United","date":"2023-10-05"}"#),
            vec![r#"team_name = "Manchester United""#, r#"date = "2023-10-05""#]
        );
        // One word of several is enough; a word's first five letters are (German → Germany).
        let grounding = Grounding::of(&request(
            "How did the German team play on July 10, 2022? Real Madrid too.",
            vec![spec.clone()],
        ));
        for args in [
            r#"{"team_name":"Germany","date":"2022-07-10"}"#,
            r#"{"team_name":"Real Madrid CF","date":"10/07/2022"}"#,
            r#"{"team_name":"germany","date":"07-10-2022"}"#,
        ] {
            assert!(grounding.guessed(&spec, args).is_empty(), "{args}");
        }
        assert_eq!(
            grounding.guessed(&spec, r#"{"team_name":"Germany","date":"2022-08-10"}"#).len(),
            1
        );
    }

    #[test]
    fn codes_formulas_and_long_strings_are_not_judged() {
        let spec = team_stats();
        let grounding =
            Grounding::of(&request("Convert 500 US dollars to yen", vec![spec.clone()]));
        // Capital codes a model looks up, strings of letters without a word, content.
        for team in [
            "USD",
            "JPY",
            "x^3",
            "ab",
            "src/main.rs",
            "a.txt",
            "10:00",
            "Waves crash on the stones",
            "Grey\nwaves",
        ] {
            let args = json!({"team_name": team, "date": ""}).to_string();
            assert!(grounding.guessed(&spec, &args).is_empty(), "{team}");
        }
        // Strings at any depth of a required value are judged.
        let nested = tool(
            "pois",
            json!({"type": "object", "properties": {"category": {"type": "array"}},
                "required": ["category"]}),
        );
        let grounding = Grounding::of(&request("Find me bakeries", vec![nested.clone()]));
        assert!(grounding.guessed(&nested, r#"{"category":["Bakery"]}"#).is_empty());
        assert_eq!(grounding.guessed(&nested, r#"{"category":["Restaurants"]}"#).len(), 1);
    }

    #[test]
    fn strings_from_results_history_and_the_tool_list_are_given() {
        let spec = team_stats();
        let req = after_result(
            "And the other one?",
            vec![spec.clone()],
            "Teams playing: Arsenal, Chelsea",
        );
        let grounding = Grounding::of(&req);
        assert!(grounding.guessed(&spec, r#"{"team_name":"Chelsea","date":""}"#).is_empty());
        let described = tool(
            "region_sales",
            json!({"type": "object", "properties": {"region": {"type": "string",
                "description": "A region, or worldwide"}}, "required": ["region"]}),
        );
        let grounding = Grounding::of(&request("Total sales?", vec![described.clone()]));
        assert!(grounding.guessed(&described, r#"{"region":"worldwide"}"#).is_empty());
    }

    #[test]
    fn issue_24_a_word_closed_up_is_given() {
        let five = tool(
            "get_bigfive_scores",
            json!({"type": "object", "properties": {"characteristics": {"type": "array",
                "items": {"type": "string"}}}, "required": ["characteristics"]}),
        );
        let grounding = Grounding::of(&request(
            "My Big Five scores? I am efficient, organized, easy going and compassionate.",
            vec![five.clone()],
        ));
        let closed = r#"{"characteristics":["efficient","easygoing","compassionate"]}"#;
        assert!(grounding.guessed(&five, closed).is_empty());
        let other = r#"{"characteristics":["efficient","outgoing"]}"#;
        assert_eq!(grounding.guessed(&five, other).len(), 1);
    }

    #[test]
    fn issue_24_a_tool_is_named_by_a_word_of_its_own() {
        let g = request(
            "Determine the median and variance for 3,4,5,2,8,5. Also the sum of primes.",
            vec![],
        );
        let g = Grounding::of(&g);
        assert!(g.names_tool("statistics_variance", &["statistics_median"]));
        assert!(g.names_tool("math_toolkit.productOfPrimes", &["statistics_median"]));
        // Only words the earlier tools do not have, and not the taskless ones.
        assert!(!g.names_tool("statistics_median", &["statistics_median"]));
        assert!(!g.names_tool("calculate_statistics", &["statistics_median"]));
        assert!(!g.names_tool("statistics_mode", &["statistics_median"]));
        // `sum` is a word of its own: "summer" does not name it.
        let summer = Grounding::of(&request("Plan my summer trip.", vec![]));
        assert!(!summer.names_tool("sum_numbers", &["plan_trip"]));
        assert_eq!(name_words("getWeather_data.v2"), ["get", "weather", "data", "v2"]);
    }

    #[test]
    fn mentions_are_whole_words_of_the_users_request() {
        let grounding = Grounding::of(&request(
            "Play Taylor Swift and Maroon 5 for 20 and 15 minutes, on Spotify.",
            vec![],
        ));
        assert_eq!(grounding.mentions(&json!("Maroon 5")), Mention::Named);
        assert_eq!(grounding.mentions(&json!("maroon 5")), Mention::Named);
        assert_eq!(grounding.mentions(&json!(15)), Mention::Named);
        assert_eq!(grounding.mentions(&json!(15.0)), Mention::Named);
        assert_eq!(grounding.mentions(&json!("Maroon")), Mention::Named);
        assert_eq!(grounding.mentions(&json!("Taylor Swiftly")), Mention::Absent);
        assert_eq!(grounding.mentions(&json!("Swi")), Mention::Absent);
        assert_eq!(grounding.mentions(&json!(30)), Mention::Absent);
        assert_eq!(grounding.mentions(&json!(true)), Mention::Neutral);
        assert_eq!(grounding.mentions(&json!("")), Mention::Neutral);
        // Each word named, in another order or joined otherwise.
        let grounding = Grounding::of(&request(
            "The Treaty of Tordesillas, and the total championships he won.",
            vec![],
        ));
        assert_eq!(grounding.mentions(&json!("Tordesillas Treaty")), Mention::Named);
        assert_eq!(grounding.mentions(&json!("total_championships")), Mention::Named);
        assert_eq!(grounding.mentions(&json!("Treaty of Paris")), Mention::Absent);
        assert_eq!(grounding.mentions(&json!("-")), Mention::Absent);
    }
}
