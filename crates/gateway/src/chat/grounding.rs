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
    /// The numbers in `asked` (sorted).
    asked_numbers: Vec<f64>,
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
        let mut given = String::new();
        let mut give = |text: &str, numbers: &mut Vec<f64>| {
            numbers_in(text, numbers);
            given.push_str(&text.to_lowercase());
            given.push('\n');
        };
        for message in &req.messages {
            match message {
                Message::System(text) | Message::User(text) => {
                    give(text, &mut numbers);
                    asked.push_str(&text.to_lowercase());
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
        Grounding { numbers, asked, given, asked_numbers }
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

    /// Whether a value holds a number or a short string given nowhere, at any depth.
    fn made_up(&self, value: &Value) -> bool {
        let mut made_up = false;
        each_scalar(value, &mut |scalar| {
            made_up |= match scalar {
                Value::Number(n) => n.as_f64().is_some_and(|n| !contains(&self.numbers, n)),
                Value::String(text) => self.made_up_string(text),
                _ => false,
            }
        });
        made_up
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
            return !words.any(|word| self.given.contains(&stem(&word.to_lowercase())));
        }
        if text.chars().any(char::is_alphabetic) {
            return false;
        }
        let mut numbers = Vec::new();
        numbers_in(text, &mut numbers);
        numbers.iter().any(|n| *n != 0.0 && !contains(&self.numbers, *n))
    }

    /// How a call to `spec` waits to be judged: whole when a required parameter can hold a
    /// number (any type but a string or a boolean); while it is short when the only values
    /// to judge are strings, required or optional (a longer call, or one with a string of
    /// several lines, goes out as it is written, unjudged); not at all when no parameter can
    /// be a guess.
    pub(crate) fn hold(spec: &ToolSpec) -> Hold {
        let Some(parameters) = &spec.parameters else { return Hold::No };
        let required = parameters.get("required").and_then(Value::as_array);
        let required = required.map(Vec::as_slice).unwrap_or_default();
        let properties = parameters.get("properties").and_then(Value::as_object);
        // An optional string may be a made-up name (`without_guessed_options`).
        let string = |schema: &Value| schema.get("type").and_then(Value::as_str) == Some("string");
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
            string(schema) && !required.iter().any(|r| r.as_str() == Some(key))
        });
        if optional { Hold::WhileShort } else { hold }
    }

    /// Whether the user named `value` (a scalar): a number among the numbers they wrote, a
    /// string among their words (whole words, any case).
    pub(crate) fn mentions(&self, value: &Value) -> Mention {
        match value {
            Value::Null | Value::Bool(_) => Mention::Neutral,
            Value::String(text) if text.trim().is_empty() => Mention::Neutral,
            Value::String(text) => {
                if has_words(&self.asked, &text.trim().to_lowercase()) {
                    Mention::Named
                } else {
                    Mention::Absent
                }
            }
            Value::Number(n) => match n.as_f64() {
                Some(n) if contains(&self.asked_numbers, n) => Mention::Named,
                _ => Mention::Absent,
            },
            // Containers are judged by their scalars.
            Value::Array(_) | Value::Object(_) => Mention::Neutral,
        }
    }
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

/// Calls `f` with every number and string in `value`, at any depth.
fn each_scalar(value: &Value, f: &mut impl FnMut(&Value)) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| each_scalar(item, f)),
        Value::Object(map) => map.values().for_each(|item| each_scalar(item, f)),
        Value::Number(_) | Value::String(_) => f(value),
        Value::Null | Value::Bool(_) => {}
    }
}

fn sort(numbers: &mut Vec<f64>) {
    numbers.sort_by(f64::total_cmp);
    numbers.dedup();
}

/// Whether sorted `numbers` hold `n` (to a relative 1e-9: `0.1 * 3` is `0.3`, and `1e-9`
/// is not `2e-9`).
fn contains(numbers: &[f64], n: f64) -> bool {
    let tolerance = 1e-9 * n.abs();
    let at = numbers.partition_point(|x| *x < n - tolerance);
    numbers.get(at).is_some_and(|x| (x - n).abs() <= tolerance)
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

/// Number words people write instead of digits.
const NUMBER_WORDS: &[(&str, f64)] = &[
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("thirteen", 13.0),
    ("fourteen", 14.0),
    ("fifteen", 15.0),
    ("sixteen", 16.0),
    ("seventeen", 17.0),
    ("eighteen", 18.0),
    ("nineteen", 19.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("seventy", 70.0),
    ("eighty", 80.0),
    ("ninety", 90.0),
    ("hundred", 100.0),
    ("thousand", 1e3),
    ("million", 1e6),
    ("billion", 1e9),
    ("trillion", 1e12),
    ("dozen", 12.0),
    ("decade", 10.0),
    ("century", 100.0),
    ("half", 0.5),
    ("quarter", 0.25),
    ("twice", 2.0),
    ("double", 2.0),
    ("triple", 3.0),
    // Months, for dates written as numbers (`2022-07-10` for "July 10, 2022").
    ("january", 1.0),
    ("jan", 1.0),
    ("february", 2.0),
    ("feb", 2.0),
    ("march", 3.0),
    ("mar", 3.0),
    ("april", 4.0),
    ("apr", 4.0),
    ("may", 5.0),
    ("june", 6.0),
    ("jun", 6.0),
    ("july", 7.0),
    ("jul", 7.0),
    ("august", 8.0),
    ("aug", 8.0),
    ("september", 9.0),
    ("sep", 9.0),
    ("sept", 9.0),
    ("october", 10.0),
    ("oct", 10.0),
    ("november", 11.0),
    ("nov", 11.0),
    ("december", 12.0),
    ("dec", 12.0),
];

/// What a word right after a number multiplies it by (`5k`, `$1.2M`, `3 billion`, `20%`).
fn scale(word: &str) -> Option<f64> {
    Some(match word {
        "%" | "percent" => 0.01,
        "k" | "thousand" => 1e3,
        "m" | "mn" | "million" => 1e6,
        "b" | "bn" | "billion" => 1e9,
        "trillion" => 1e12,
        _ => return None,
    })
}

/// Adds every number `text` writes: digits (with thousands separators, a decimal part, a
/// sign, a currency sign), scaled by the word after them (`k`, `million`, `%`, …), and
/// number words. A scaled number adds both its values (`1.75m` is 1.75 and 1,750,000).
pub(crate) fn numbers_in(text: &str, out: &mut Vec<f64>) {
    let bytes = text.as_bytes();
    let mut at = 0;
    // A number of feet just read, and where it ends, for the inches that may follow.
    let mut feet: Option<(f64, usize)> = None;
    while let Some(&b) = bytes.get(at) {
        if b.is_ascii_digit() {
            let start = at;
            let mut digits = String::new();
            // The integer part, with `,` only before a group of exactly three digits.
            while let Some(&c) = bytes.get(at) {
                if c.is_ascii_digit() {
                    digits.push(char::from(c));
                    at += 1;
                } else if c == b','
                    && bytes.get(at + 1..at + 4).is_some_and(|g| g.iter().all(u8::is_ascii_digit))
                    && !bytes.get(at + 4).is_some_and(u8::is_ascii_digit)
                {
                    at += 1;
                } else {
                    break;
                }
            }
            if bytes.get(at) == Some(&b'.') && bytes.get(at + 1).is_some_and(u8::is_ascii_digit) {
                digits.push('.');
                at += 1;
                while let Some(&c) = bytes.get(at).filter(|c| c.is_ascii_digit()) {
                    digits.push(char::from(c));
                    at += 1;
                }
            }
            // An exponent written on the number: `1e-9`, `6.02E23`.
            if let Some((exponent, end)) = exponent(bytes, at) {
                digits.push_str(&format!("e{exponent}"));
                at = end;
            }
            let Ok(value) = digits.parse::<f64>() else { continue };
            let negative = is_negative(bytes, start);
            let signed = if negative { -value } else { value };
            out.push(value);
            if negative {
                out.push(signed);
            }
            if let Some(factor) = scale(&word_after(text, at)) {
                out.push(signed * factor);
            }
            // `3 x 10^8`, `1.6 × 10^-19`.
            if let Some(exponent) = times_ten(text.get(at..).unwrap_or_default()) {
                out.push(signed * 10f64.powi(exponent));
            }
            // The same measure in the units a tool may take: `50mH` is 0.05 H, `3 minutes`
            // 180 seconds, `5ft 10in` 70 inches.
            let unit = unit_after(text, at);
            out.extend(unit_factors(unit).iter().map(|factor| signed * factor));
            match (feet.take(), unit) {
                (Some((feet, end)), "in" | "inch" | "inches" | "\"")
                    if text.get(end..start).is_some_and(|between| between.trim().is_empty()) =>
                {
                    out.push(feet * 12.0 + signed);
                }
                (_, "ft" | "feet" | "foot" | "'") => {
                    feet = Some((
                        signed,
                        at + text.get(at..).map_or(0, |rest| {
                            let spaced = rest.len() - rest.trim_start_matches(' ').len();
                            spaced + unit.len()
                        }),
                    ));
                }
                _ => {}
            }
        } else if b.is_ascii_alphabetic() {
            let start = at;
            while bytes.get(at).is_some_and(u8::is_ascii_alphabetic) {
                at += 1;
            }
            let word = text.get(start..at).unwrap_or_default().to_ascii_lowercase();
            let word = word.strip_suffix('s').filter(|w| w.len() > 2).unwrap_or(&word);
            if let Some((_, n)) = NUMBER_WORDS.iter().find(|(w, _)| *w == word) {
                out.push(*n);
            }
            // "starts from rest", "at rest": a speed of 0.
            let before = text.get(..start).unwrap_or_default().split_whitespace().next_back();
            let before = before.unwrap_or_default().to_ascii_lowercase();
            if word == "rest" && (before == "from" || before == "at") {
                out.push(0.0);
            }
        } else {
            at += 1;
        }
    }
}

/// Whether the number starting at `start` has a minus sign before it (`-5`, `-$100`, `$-3`,
/// `x - 2`), one that is not a hyphen between words or numbers (`2023-10`, `x-1`).
fn is_negative(bytes: &[u8], start: usize) -> bool {
    let mut at = start;
    let mut currency = false;
    let mut spaced = false;
    loop {
        let Some(before) = at.checked_sub(1) else { return false };
        match bytes.get(before) {
            Some(b'$') if !currency => {
                currency = true;
                at = before;
            }
            Some(b' ') if !spaced => {
                spaced = true;
                at = before;
            }
            Some(b'-') => {
                return !before
                    .checked_sub(1)
                    .and_then(|b| bytes.get(b))
                    .is_some_and(u8::is_ascii_alphanumeric);
            }
            _ => return false,
        }
    }
}

/// The exponent of a number written `1e-9` (`e` or `E`, a sign, one to three digits, no
/// letter after them) at `at`, and where it ends.
fn exponent(bytes: &[u8], at: usize) -> Option<(i32, usize)> {
    if !matches!(bytes.get(at), Some(b'e' | b'E')) {
        return None;
    }
    let mut end = at + 1;
    let negative = match bytes.get(end) {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => false,
    };
    if matches!(bytes.get(end), Some(b'-' | b'+')) {
        end += 1;
    }
    let digits = end;
    while bytes.get(end).is_some_and(u8::is_ascii_digit) && end - digits < 3 {
        end += 1;
    }
    if end == digits || bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let exponent: i32 = std::str::from_utf8(bytes.get(digits..end)?).ok()?.parse().ok()?;
    Some((if negative { -exponent } else { exponent }, end))
}

/// The power of ten a number is multiplied by right after it (`x 10^8`, `× 10^-19`,
/// `*10^3`).
fn times_ten(rest: &str) -> Option<i32> {
    let rest = rest.trim_start();
    let rest = ["x", "X", "×", "*"].iter().find_map(|sign| rest.strip_prefix(sign))?;
    let rest = rest.trim_start().strip_prefix("10^")?;
    let (negative, rest) = match rest.strip_prefix(['-', '−']) {
        Some(rest) => (true, rest),
        None => (false, rest.strip_prefix('+').unwrap_or(rest)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).take(3).collect();
    let exponent: i32 = digits.parse().ok()?;
    Some(if negative { -exponent } else { exponent })
}

/// The unit written right after a number (spaces skipped), as written: letters (`µ` among
/// them), or a foot or inch mark (`'`, `"`).
fn unit_after(text: &str, at: usize) -> &str {
    let rest = text.get(at..).unwrap_or_default().trim_start_matches(' ');
    if rest.starts_with(['\'', '"']) {
        return rest.get(..1).unwrap_or_default();
    }
    let end = rest.find(|c: char| !c.is_alphabetic()).unwrap_or(rest.len());
    rest.get(..end).unwrap_or_default()
}

/// What a measure in `unit` is multiplied by in the other units a tool may take: an SI
/// prefix on a unit symbol (`mH`, `µF`, `kg`, `ns`), minutes and hours in seconds, days in
/// hours, weeks in days, years in months, weeks and days, feet in inches.
fn unit_factors(unit: &str) -> &'static [f64] {
    match unit.to_lowercase().as_str() {
        "min" | "mins" | "minute" | "minutes" => return &[60.0],
        "h" | "hr" | "hrs" | "hour" | "hours" => return &[60.0, 3600.0],
        "day" | "days" => return &[24.0],
        "week" | "weeks" => return &[7.0],
        "year" | "years" => return &[12.0, 52.0, 365.0],
        "ft" | "feet" | "foot" | "'" => return &[12.0],
        _ => {}
    }
    let mut chars = unit.chars();
    let Some(prefix) = chars.next() else { return &[] };
    let symbol = chars.as_str().to_lowercase();
    const SYMBOLS: &[&str] =
        &["h", "f", "s", "g", "l", "w", "a", "v", "m", "hz", "j", "n", "pa", "b"];
    if !SYMBOLS.contains(&symbol.as_str()) {
        return &[];
    }
    match prefix {
        'm' => &[1e-3],
        'µ' | 'μ' | 'u' => &[1e-6],
        'n' => &[1e-9],
        'p' => &[1e-12],
        'k' | 'K' => &[1e3],
        'M' => &[1e6],
        'G' => &[1e9],
        _ => &[],
    }
}

/// The word right after a number (spaces skipped): letters, or `%`.
fn word_after(text: &str, at: usize) -> String {
    let rest = text.get(at..).unwrap_or_default();
    let rest = rest.trim_start_matches(' ');
    if rest.starts_with('%') {
        return "%".to_owned();
    }
    let word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    word.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chat::types::ChatRequest;

    fn numbers(text: &str) -> Vec<f64> {
        let mut out = Vec::new();
        numbers_in(text, &mut out);
        sort(&mut out);
        out
    }

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
    fn numbers_are_read_as_people_write_them() {
        assert!(numbers("a loan of $700,000 with income $120,000").contains(&700_000.0));
        assert!(numbers("revenues of $1.2M in 2020").contains(&1_200_000.0));
        assert!(numbers("an interest rate of 5%").contains(&0.05));
        assert!(numbers("cash flows of -$100, $40").contains(&-100.0));
        assert!(numbers("over the past decade, two adults").contains(&10.0));
        assert!(numbers("two adults").contains(&2.0));
        assert!(numbers("weighs 70kg and is 1.75m tall").contains(&70.0));
        assert!(numbers("weighs 70kg and is 1.75m tall").contains(&1.75));
        // A list is not a thousands separator; a date's hyphens are no minus signs.
        assert_eq!(numbers("[5, 3, 4]"), vec![3.0, 4.0, 5.0]);
        assert!(!numbers("2023-10-05").contains(&-10.0));
        assert!(numbers("x = 3.5 or -2").contains(&-2.0));
        assert!(numbers("ones and twos").contains(&2.0));
        assert!(numbers("no numbers here").is_empty());
    }

    #[test]
    fn issue_24_numbers_in_scientific_notation_and_units_are_read() {
        assert_eq!(numbers("charges of 1e-9 and 2E-9"), vec![1e-9, 2e-9]);
        assert!(!contains(&numbers("a charge of 1e-9"), 2e-9));
        assert!(contains(&numbers("the speed of light, 3 x 10^8 m/s"), 3e8));
        assert!(contains(&numbers("a charge of 1.6 × 10^-19 C"), 1.6e-19));
        // An `e` that starts a word is no exponent.
        assert_eq!(numbers("3 eggs, 2e and 5e5x"), vec![2.0, 3.0, 5.0]);
        assert!(contains(&numbers("capacitance of 100µF and inductance of 50mH"), 1e-4));
        assert!(contains(&numbers("capacitance of 100µF and inductance of 50mH"), 0.05));
        assert!(numbers("a 2 km walk").contains(&2000.0));
        assert!(numbers("a duration of 3 minutes").contains(&180.0));
        assert!(numbers("every hour for 6 hours").contains(&21_600.0));
        assert!(numbers("height 5ft 10in").contains(&70.0));
        assert!(numbers("I am 5'11\" tall").contains(&71.0));
        assert!(numbers("6 feet").contains(&72.0));
        assert!(numbers("it started from rest").contains(&0.0));
        assert!(!numbers("the rest of the day").contains(&0.0));
        // Inches far from the feet are not added to them.
        assert!(!numbers("5 ft of rope and later 10 in a box").contains(&70.0));
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
    }
}
