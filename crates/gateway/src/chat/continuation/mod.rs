//! Parallel calls by continuation. A small model asked for the weather in Paris and in Rome
//! writes the Paris call and stops; asked to go on with its own reply from the opening of
//! another call, it writes the Rome call. So after a reply whose calls were read from its
//! text, the gateway sends the same request again with that reply as the start of the
//! assistant's message, ended by the opening of a call in the model's own syntax (up to the
//! tool name), for upstreams that continue a final assistant message (`upstream.prefill`).
//!
//! Forced to write a call, the model writes one whether or not the request asked for more:
//! it repeats the call, changes a value it made up, or names what the user asked for next.
//! [`judge`] keeps only the last kind: a call that is no repeat, whose every value the user
//! named or an earlier call carried, and that names something no earlier call did, or calls
//! a tool the user named that no earlier call did ("the median and the variance of these
//! numbers"). The first call it does not keep ends the reply.
//!
//! This module is the policy, without I/O: [`Plan`] (what to send), [`Echo`] (upstreams that
//! send the continued text back first) and [`judge`]. The paths that send and read replies
//! drive them.

use std::ops::Range;

use serde_json::Value;

use crate::chat::grounding::{Grounding, Mention};

mod follow;
pub(crate) use follow::{Follow, may_continue};

/// A call of the reply so far: its tool and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Made {
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

impl Made {
    pub(crate) fn new(name: &str, arguments: &str) -> Made {
        Made {
            name: name.to_owned(),
            arguments: serde_json::from_str(arguments).unwrap_or(Value::Null),
        }
    }
}

/// What a continuation sends: the reply so far and the opening of the next call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The text the assistant's message is continued from: the reply up to the end of its
    /// last call, a separator, and `opener`.
    pub(crate) prefix: String,
    /// The opening of a call in the model's syntax, up to where its tool name goes (`"```json\n{\n    \"name\": \""`); the continued text is read after it.
    pub(crate) opener: String,
}

impl Plan {
    /// The continuation of `raw` (the reply as the model wrote it), whose first call took
    /// `first` (its span, its tool name) and whose last call ended at `last_end`. `None`
    /// when the first call's opening cannot be told: the name is not in its text, or comes
    /// after its arguments.
    pub(crate) fn new(raw: &str, first: (Range<usize>, &str), last_end: usize) -> Option<Plan> {
        let (span, name) = first;
        let call = raw.get(span.clone())?;
        let at = call.find(name).or_else(|| {
            call.to_ascii_lowercase().find(&name.to_ascii_lowercase()).filter(|_| name.is_ascii())
        })?;
        let opener = call.get(..at)?;
        // An opening that holds an object's key besides the name's is not the opening of
        // a call envelope with the name first (`{"arguments": {…}, "name": "`).
        if opener.matches(':').count() > 1 || opener.len() > MAX_OPENER {
            return None;
        }
        let done = raw.get(..last_end)?.trim_end();
        let separator = if done.ends_with("```") { "\n\n" } else { "\n" };
        Some(Plan { prefix: format!("{done}{separator}{opener}"), opener: opener.to_owned() })
    }

    /// The plan after `call_text` (the continued text of a kept call, up to its end) was
    /// kept.
    pub(crate) fn after(&self, call_text: &str) -> Plan {
        let done = self.prefix.clone() + call_text.trim_end();
        let separator = if done.ends_with("```") { "\n\n" } else { "\n" };
        Plan { prefix: format!("{done}{separator}{}", self.opener), opener: self.opener.clone() }
    }
}

/// The longest call opening a continuation starts from.
const MAX_OPENER: usize = 200;

/// Why a continued call ends the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The same tool with the same arguments as an earlier call.
    Repeat,
    /// A value nobody gave: the model is making it up, not going on with the request.
    Unasked { key: String, value: String },
    /// Only values earlier calls used: the same request again, or its values swapped.
    NothingNew,
}

impl Stop {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Stop::Repeat => "repeat",
            Stop::Unasked { .. } => "unasked_value",
            Stop::NothingNew => "nothing_new",
        }
    }

    /// The value nobody gave (`key = value`), for the log; empty for the other stops.
    pub(crate) fn unasked(&self) -> String {
        match self {
            Stop::Unasked { key, value } => format!("{key} = {value}"),
            _ => String::new(),
        }
    }
}

/// Whether a continued call `next` is kept after `earlier` (the reply's calls so far):
/// `Ok` when it adds something the user asked for.
pub(crate) fn judge(next: &Made, earlier: &[Made], grounding: &Grounding) -> Result<(), Stop> {
    if earlier.iter().any(|e| e.name == next.name && same(&e.arguments, &next.arguments)) {
        return Err(Stop::Repeat);
    }
    let mut before: Vec<(&str, &Value)> = Vec::new();
    for call in earlier {
        leaves(&call.arguments, "", &mut |key, value| before.push((key, value)));
    }
    let mut new = false;
    let mut fault = None;
    leaves(&next.arguments, "", &mut |key, value| {
        if fault.is_some() || before.iter().any(|(k, v)| *k == key && same(v, value)) {
            return;
        }
        match grounding.mentions(value) {
            Mention::Neutral => {}
            Mention::Absent => {
                fault = Some(Stop::Unasked { key: key.to_owned(), value: value.to_string() });
            }
            // Named, and not an earlier value under another key (a swap), nor a part or a
            // widening of an earlier value under this key ("m³" after "kg/m³").
            Mention::Named => {
                let reused =
                    before.iter().any(|(k, v)| same(v, value) || (*k == key && overlaps(v, value)));
                new |= !reused;
            }
        }
    });
    // A call to a tool no earlier call used, which the user named, is something new even
    // with the same values: "the median and the variance of these numbers". Named by a word
    // of its own: not one of the earlier tools' names, nor of the calls' parameters ("the
    // initial speed" does not name `calculate_final_speed(initial_speed, …)`).
    let another_tool = || {
        let others: Vec<&str> = earlier.iter().map(|call| call.name.as_str()).collect();
        if others.contains(&next.name.as_str()) {
            return false;
        }
        let keys = earlier.iter().chain([next]).filter_map(|call| call.arguments.as_object());
        let taken: Vec<&str> = others
            .iter()
            .copied()
            .chain(keys.flat_map(|keys| keys.keys().map(String::as_str)))
            .collect();
        grounding.names_tool(&next.name, &taken)
    };
    match fault {
        Some(stop) => Err(stop),
        None if new || another_tool() => Ok(()),
        None => Err(Stop::NothingNew),
    }
}

/// Whether two JSON values are the same, numbers by their value (`5` is `5.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Whether two strings share their text: one holds the other (any case).
fn overlaps(a: &Value, b: &Value) -> bool {
    match (a.as_str(), b.as_str()) {
        (Some(a), Some(b)) => {
            let (a, b) = (a.to_lowercase(), b.to_lowercase());
            a.contains(&b) || b.contains(&a)
        }
        _ => false,
    }
}

/// Calls `f` with every scalar in `value` and the nearest object key above it.
fn leaves<'a>(value: &'a Value, key: &'a str, f: &mut impl FnMut(&'a str, &'a Value)) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                leaves(value, key, f);
            }
        }
        Value::Array(items) => {
            for item in items {
                leaves(item, key, f);
            }
        }
        scalar => f(key, scalar),
    }
}

/// The continued text as the upstream sends it: some upstreams send the continued prefix
/// back before what they add (llama.cpp's server does, streamed or not), others only what
/// they add. Text is held while it may still be that copy.
#[derive(Debug)]
pub(crate) struct Echo {
    prefix: String,
    state: EchoState,
}

#[derive(Debug)]
enum EchoState {
    /// The text so far (`held`) is a prefix of `prefix`: it may be the copy.
    Matching { held: String },
    /// Past the copy, or there was none: text passes.
    Passing,
}

impl Echo {
    pub(crate) fn new(prefix: &str) -> Echo {
        Echo { prefix: prefix.to_owned(), state: EchoState::Matching { held: String::new() } }
    }

    /// The part of `text` that the upstream added.
    pub(crate) fn feed(&mut self, text: &str) -> String {
        match &mut self.state {
            EchoState::Passing => text.to_owned(),
            EchoState::Matching { held } => {
                held.push_str(text);
                if held.len() >= self.prefix.len() {
                    let added = match held.strip_prefix(self.prefix.as_str()) {
                        Some(rest) => rest.to_owned(),
                        None => std::mem::take(held),
                    };
                    self.state = EchoState::Passing;
                    added
                } else if self.prefix.starts_with(held.as_str()) {
                    String::new()
                } else {
                    let added = std::mem::take(held);
                    self.state = EchoState::Passing;
                    added
                }
            }
        }
    }

    /// What is still held at the end of the reply: text that began like the copy but ended
    /// before it was whole was the upstream's own.
    pub(crate) fn finish(self) -> String {
        match self.state {
            EchoState::Matching { held } => held,
            EchoState::Passing => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chat::types::{ChatRequest, Message};

    fn grounding(user: &str) -> Grounding {
        Grounding::of(&ChatRequest {
            model: "m".into(),
            messages: vec![Message::User(user.into())],
            ..ChatRequest::default()
        })
    }

    fn made(name: &str, arguments: Value) -> Made {
        Made { name: name.into(), arguments }
    }

    #[test]
    fn the_next_thing_the_user_named_is_kept() {
        let g = grounding("Play songs from Taylor Swift and Maroon 5, for 20 and 15 minutes.");
        let first = made("play", json!({"artist": "Taylor Swift", "duration": 20}));
        let next = made("play", json!({"artist": "Maroon 5", "duration": 15}));
        assert_eq!(judge(&next, std::slice::from_ref(&first), &g), Ok(()));
        // A value carried over from an earlier call is fine beside a new one.
        let next = made("play", json!({"artist": "Maroon 5", "duration": 20}));
        assert_eq!(judge(&next, &[first], &g), Ok(()));
    }

    #[test]
    fn repeats_made_up_values_swaps_and_parts_end_the_reply() {
        let g = grounding("Find criminal records of Mr. X in New York between 2012 and 2015.");
        let first = made("records", json!({"name": "Mr. X", "from": 2012, "to": 2015}));
        assert_eq!(judge(&first, std::slice::from_ref(&first), &g), Err(Stop::Repeat));
        let shifted = made("records", json!({"name": "Mr. X", "from": 2013, "to": 2016}));
        assert_eq!(
            judge(&shifted, std::slice::from_ref(&first), &g),
            Err(Stop::Unasked { key: "from".into(), value: "2013".into() })
        );
        let swapped = made("records", json!({"name": "Mr. X", "from": 2015, "to": 2012}));
        assert_eq!(judge(&swapped, &[first], &g), Err(Stop::NothingNew));

        let g = grounding("The density of 45 kg in 15 m³, in kg/m³.");
        let first = made("density", json!({"mass": 45, "volume": 15, "unit": "kg/m³"}));
        let part = made("density", json!({"mass": 45, "volume": 15, "unit": "m³"}));
        assert_eq!(judge(&part, &[first], &g), Err(Stop::NothingNew));
    }

    #[test]
    fn numbers_are_the_same_whatever_their_form() {
        let g = grounding("The area of a triangle with sides 3, 4 and 5.");
        let first = made("triangle", json!({"a": 3, "b": 4, "c": 5}));
        let circle = made("circle", json!({"radius": 5.0}));
        assert_eq!(judge(&circle, std::slice::from_ref(&first), &g), Err(Stop::NothingNew));
        let again = made("triangle", json!({"a": 3.0, "b": 4, "c": 5.0}));
        assert_eq!(judge(&again, &[first], &g), Err(Stop::Repeat));
    }

    #[test]
    fn issue_24_another_tool_the_user_named_is_new_with_the_same_values() {
        let g = grounding("Determine the median and variance for the data points 3,4,5,2,8,5.");
        let first = made("statistics_median", json!({"data": [3, 4, 5, 2, 8, 5]}));
        let next = made("statistics_variance", json!({"data": [3, 4, 5, 2, 8, 5]}));
        assert_eq!(judge(&next, std::slice::from_ref(&first), &g), Ok(()));
        let unnamed = made("statistics_mode", json!({"data": [3, 4, 5, 2, 8, 5]}));
        assert_eq!(judge(&unnamed, std::slice::from_ref(&first), &g), Err(Stop::NothingNew));
        // A word of a parameter names no task: "initial speed" is an input of both tools.
        let g = grounding("The displacement of a car at an initial speed of 20 m/s for 5 s?");
        let shown = made("kinematics_displacement", json!({"initial_speed": 20, "time": 5}));
        let speed = made("kinematics_final_speed", json!({"initial_speed": 20, "time": 5}));
        assert_eq!(judge(&speed, std::slice::from_ref(&shown), &g), Err(Stop::NothingNew));
        // The same tool again, or a named one with a value nobody gave, still ends the reply.
        let mut swapped = first.clone();
        swapped.arguments = json!({"data": [5, 8, 2, 5, 4, 3]});
        assert_eq!(judge(&swapped, std::slice::from_ref(&first), &g), Err(Stop::NothingNew));
        let made_up = made("statistics_variance", json!({"data": [1, 2]}));
        assert!(matches!(judge(&made_up, &[first], &g), Err(Stop::Unasked { .. })));
    }

    #[test]
    fn a_flipped_flag_names_nothing_new() {
        let g = grounding("Records of 123 main street, with the owner.");
        let first = made("records", json!({"address": "123 main street", "owner": true}));
        let flipped = made("records", json!({"address": "123 main street", "owner": false}));
        assert_eq!(judge(&flipped, &[first], &g), Err(Stop::NothingNew));
    }

    #[test]
    fn the_plan_opens_the_next_call_as_the_model_opened_its_first() {
        let raw = "```json\n{\n    \"name\": \"get_weather\",\n    \"arguments\": {\"city\": \"Paris\"}\n}\n```\nDone.";
        let end = raw.find("\nDone").unwrap();
        let plan = Plan::new(raw, (0..end, "get_weather"), end).unwrap();
        assert_eq!(plan.opener, "```json\n{\n    \"name\": \"");
        assert_eq!(plan.prefix, format!("{}\n\n```json\n{{\n    \"name\": \"", &raw[..end]));
        let next = plan.after("get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```");
        assert!(next.prefix.ends_with("\"Rome\"}}\n```\n\n```json\n{\n    \"name\": \""));

        let raw = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        let plan = Plan::new(raw, (0..raw.len(), "f"), raw.len()).unwrap();
        assert_eq!(plan.prefix, format!("{raw}\n<tool_call>\n{{\"name\": \""));
        // The name after the arguments: no plan.
        let raw = "{\"arguments\": {\"a\": 1}, \"name\": \"f\"}";
        assert_eq!(Plan::new(raw, (0..raw.len(), "f"), raw.len()), None);
    }

    #[test]
    fn an_echoed_prefix_is_dropped_in_any_chunking() {
        let prefix = "```json\n{\"name\": \"";
        let text = format!("{prefix}get_weather\"}}");
        for size in 1..text.len() {
            let mut echo = Echo::new(prefix);
            let mut added = String::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size) {
                added.push_str(&echo.feed(&chunk.iter().collect::<String>()));
            }
            added.push_str(&echo.finish());
            assert_eq!(added, "get_weather\"}", "chunk size {size}");
        }
        // An upstream that sends only what it adds.
        let mut echo = Echo::new(prefix);
        assert_eq!(echo.feed("get_"), "get_");
        assert_eq!(echo.feed("weather"), "weather");
        // A short reply that starts like the prefix is the upstream's own.
        let mut echo = Echo::new(prefix);
        assert_eq!(echo.feed("```"), "");
        assert_eq!(echo.finish(), "```");
    }
}
