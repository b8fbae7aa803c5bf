//! Optional values the user stated and the model left out. A small model asked for "a
//! classical concert this weekend in Los Angeles with cheap tickets" calls `concert.search`
//! with the genre, the place and the date, and leaves out `price_range`, whose `enum` holds
//! `"cheap"`; asked to "calculate how many years ago was the Ice age", it leaves out
//! `calculate_years_ago`. [`Stated::fill`] adds such a value to the call: the one value of an
//! optional string `enum` the user wrote (its words, whole, in order, any case), or `true`
//! for an optional boolean every word of whose name the user wrote (`details`,
//! `calculate_years_ago`; words of three letters or more). A flag the call set to `false`
//! whose words the user wrote ("does it have a specific function" for `specific_function`)
//! is set to `true` on the same terms, required or not: BFCL's answers want `true` for such
//! a flag in almost every case.
//!
//! It is the counterpart of [`crate::chat::grounding::Grounding::without_guessed_options`]
//! (both run in [`crate::chat::grounding::Grounding::settle_options`]), and as careful:
//! - only the user's last message counts (an earlier one asked for an earlier call);
//! - nothing is added when the user wrote two values of the same `enum`;
//! - nothing is added when a negation comes just before the words ("don't return the full
//!   text", "if we do not include human activities", "shouldn't be unisex", "has few
//!   artistic interests");
//! - nothing is added when the words stand in a part of the message (a sentence, or a
//!   clause after a comma, `and`, `then` or `also`) that belongs to another call: one that
//!   holds none of this call's values but a value of its own (a number, or a capitalized
//!   word after the first: "a Chicken Noodle Soup recipe and a Vegan Salad recipe" gives the
//!   soup's call no `diet`).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::chat::types::ToolSpec;

/// Words that, within [`NEGATION_REACH`] words before a stated value, take it back. `don't`
/// is read as `don` and `t`.
const NEGATIONS: &[&str] = &[
    "not",
    "no",
    "nothing",
    "few",
    "don",
    "doesn",
    "isn",
    "shouldn",
    "t",
    "without",
    "never",
    "nor",
    "exclude",
    "excluding",
];
const NEGATION_REACH: usize = 4;

/// Words shorter than this in a boolean parameter's name are not looked for (`is`, `as`).
const NAME_WORD: usize = 3;

/// Where a word that opens a stated value is looked for: its first occurrences only, so
/// that the work per value stays bounded however often the word recurs.
const FIRST_OCCURRENCES: usize = 16;

/// The user's last message, in parts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stated {
    parts: Vec<Part>,
    /// Each word (lowercased) → where it stands: (part, word), in order.
    at: HashMap<String, Vec<(usize, usize)>>,
}

/// A sentence or clause of the user's message.
#[derive(Debug, Clone, Default)]
struct Part {
    /// Its words, lowercased: runs of letters and digits.
    words: Vec<String>,
    /// Its words that look like values (lowercased): numbers, and capitalized words that do
    /// not begin the part.
    values: Vec<String>,
}

impl Stated {
    /// The parts of `message` (the user's last message).
    pub(crate) fn of(message: &str) -> Stated {
        let mut parts = Vec::new();
        let mut at: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        for part in split_parts(message) {
            let tokens = words_of(part);
            let mut words = Vec::with_capacity(tokens.len());
            let mut values = Vec::new();
            for (at, token) in tokens.into_iter().enumerate() {
                let lower = token.to_lowercase();
                let first = token.chars().next();
                if first.is_some_and(|c| c.is_ascii_digit())
                    || (at > 0 && first.is_some_and(char::is_uppercase))
                {
                    values.push(lower.clone());
                }
                words.push(lower);
            }
            if !words.is_empty() {
                for (i, word) in words.iter().enumerate() {
                    at.entry(word.clone()).or_default().push((parts.len(), i));
                }
                parts.push(Part { words, values });
            }
        }
        Stated { parts, at }
    }

    /// A call to `spec` with the optional values the user stated and it left out added, and
    /// its flags set to `false` whose words the user stated set to `true`: the arguments
    /// rewritten and what was changed (`key = value`, `key = true (was false)`), or `None`
    /// when there is nothing to change (or the arguments are not a JSON object).
    pub(crate) fn fill(&self, spec: &ToolSpec, arguments: &str) -> Option<(String, Vec<String>)> {
        if self.parts.is_empty() {
            return None;
        }
        let parameters = spec.parameters.as_ref()?;
        let properties = parameters.get("properties").and_then(Value::as_object)?;
        let required = parameters.get("required").and_then(Value::as_array);
        let required = required.map(Vec::as_slice).unwrap_or_default();
        let Ok(Value::Object(mut arguments)) = serde_json::from_str::<Value>(arguments) else {
            return None;
        };
        let anchors = anchors(&arguments);
        // The call's values that the message holds.
        let anchored: HashSet<&str> =
            anchors.iter().map(String::as_str).filter(|a| self.at.contains_key(*a)).collect();
        let mut added = Vec::new();
        for (key, schema) in properties {
            // Left out (and optional), or a flag set to `false`, required or not.
            let open = match arguments.get(key) {
                None => !required.iter().any(|r| r.as_str() == Some(key)),
                Some(given) => *given == Value::Bool(false),
            };
            if !open {
                continue;
            }
            let Some((value, at)) = self.stated(key, schema) else { continue };
            if !self.belongs(at, &anchored, key, &value) {
                continue;
            }
            match arguments.insert(key.clone(), value.clone()) {
                Some(was) => added.push(format!("{key} = {value} (was {was})")),
                None => added.push(format!("{key} = {value}")),
            }
        }
        if added.is_empty() {
            return None;
        }
        Some((Value::Object(arguments).to_string(), added))
    }

    /// The value the user stated for an optional parameter, and the part it stands in.
    fn stated(&self, key: &str, schema: &Value) -> Option<(Value, usize)> {
        match schema.get("type").and_then(Value::as_str) {
            Some("boolean") => {
                let words: Vec<String> = name_words(key);
                if words.is_empty() {
                    return None;
                }
                let mut first = None;
                for word in &words {
                    let (at, _) = self.find(std::slice::from_ref(word))?;
                    first.get_or_insert(at);
                }
                Some((Value::Bool(true), first?))
            }
            Some("string") => {
                let options = schema.get("enum").and_then(Value::as_array)?;
                let mut found = options.iter().filter_map(|option| {
                    let text = option.as_str()?;
                    let words: Vec<String> =
                        words_of(text).into_iter().map(|w| w.to_lowercase()).collect();
                    let (at, _) = self.find(&words)?;
                    Some((option.clone(), at))
                });
                let one = found.next()?;
                found.next().is_none().then_some(one)
            }
            _ => None,
        }
    }

    /// Where `words` (lowercased, not empty) first stand together in the message (among the
    /// first [`FIRST_OCCURRENCES`] of the first word), with no negation just before them:
    /// the part and the word.
    fn find(&self, words: &[String]) -> Option<(usize, usize)> {
        let first = words.first()?;
        for &(at, start) in self.at.get(first)?.iter().take(FIRST_OCCURRENCES) {
            let part = &self.parts.get(at)?.words;
            if part.get(start..start + words.len()) != Some(words) {
                continue;
            }
            let before = part.get(start.saturating_sub(NEGATION_REACH)..start).unwrap_or_default();
            if before.iter().any(|w| NEGATIONS.contains(&w.as_str())) {
                return None;
            }
            return Some((at, start));
        }
        None
    }

    /// Whether part `at` belongs to this call: it holds one of the call's values, or the
    /// call's values are nowhere in the message, or it holds no value of another call.
    fn belongs(&self, at: usize, anchored: &HashSet<&str>, key: &str, value: &Value) -> bool {
        let Some(part) = self.parts.get(at) else { return false };
        if anchored.is_empty() || part.words.iter().any(|w| anchored.contains(w.as_str())) {
            return true;
        }
        let own: Vec<String> = match value {
            Value::String(text) => words_of(text).into_iter().map(|w| w.to_lowercase()).collect(),
            _ => Vec::new(),
        };
        let key_words = name_words(key);
        !part.values.iter().any(|v| !own.contains(v) && !key_words.contains(v))
    }
}

/// The words (lowercased) of a call's values, at any depth: what ties a part of the message
/// to the call.
fn anchors(arguments: &Map<String, Value>) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(text) => out.extend(words_of(text).into_iter().map(|w| w.to_lowercase())),
            Value::Number(n) => {
                let text = n.to_string();
                out.push(text.strip_suffix(".0").unwrap_or(&text).to_owned());
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, out)),
            Value::Null | Value::Bool(_) => {}
        }
    }
    let mut out = Vec::new();
    arguments.values().for_each(|value| walk(value, &mut out));
    out
}

/// A parameter's name as words, lowercased, of [`NAME_WORD`] letters or more: split at
/// `_`, `-`, `.` and where the case changes (`calculateYearsAgo`, `calculate_years_ago`).
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && prev_lower);
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.retain(|w| w.chars().count() >= NAME_WORD);
    words
}

/// Runs of letters and digits, as written.
fn words_of(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect()
}

/// Sentences and clauses: split after `.`, `!`, `?`, `;` or `:` followed by white space
/// (or at the end), at commas, and before `and`, `then`, `also` and `while`.
fn split_parts(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next_blank = bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace());
        if b == b',' || (matches!(b, b'.' | b'!' | b'?' | b';' | b':') && next_blank) {
            parts.push(&text[start..i]);
            start = i + 1;
        } else if b.is_ascii_whitespace() {
            let rest = &text[i + 1..];
            let joiner = ["and", "then", "also", "while"].iter().find(|j| {
                rest.len() >= j.len()
                    && rest.as_bytes()[..j.len()].eq_ignore_ascii_case(j.as_bytes())
                    && rest.as_bytes().get(j.len()).is_none_or(|n| n.is_ascii_whitespace())
            });
            if let Some(joiner) = joiner {
                parts.push(&text[start..i]);
                start = i + 1 + joiner.len();
                i = start;
                continue;
            }
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
#[path = "stated_tests.rs"]
mod tests;
