//! Hugging Face `response_template`s (transformers' `tokenizer.parse_response()`, vLLM's
//! `response_template` parser) read as rows: the `tool_calls` field becomes pair rows, the
//! `thinking` field must be a reasoning block the tables know, and `content` is what is
//! neither. A template is data: `open`/`close` literals (or lists of them) or patterns, a
//! content parser and a `transform` that says where a call's name and arguments are.
//! Whatever the engine cannot express is an error that names the field.
//!
//! Patterns are read as far as rows can follow them: literals (escaped or not), `\s*`,
//! one named group `(?P<name>…+)` for the call's name, and `.*?` between the name and the
//! literal that ends the head. Alternations, optional groups and anchors are not rows.

use serde_json::{Map, Value};

use crate::dialect::{Dialects, Entry};
use crate::error::Error;
use crate::rows::envelope::{Key, key as envelope_key};
use crate::rows::file::{MAX_HEAD_MARKER, MAX_LIST, MAX_TEXT, invalid};
use crate::rows::markup::{Role, tag as markup_tag};
use crate::rows::native::{Body, Head, Marker, NameForm, Opens, Pair, Row, Text};
use crate::rows::reasoning::{REASONING, THINK};

/// What a template makes of the settings.
pub(crate) struct Loaded {
    pub(crate) dialects: Dialects,
    /// The template's reasoning has no open marker: the prompt opens it.
    pub(crate) reasoning_open: bool,
}

/// The id of the rows a template makes.
const ID: &str = "response_template";

/// Reads a `response_template` (or a `tokenizer_config.json` holding one).
pub(crate) fn read(file: &Value) -> Result<Loaded, Error> {
    let (template, scope) = match file.get("response_template") {
        Some(template) => (template, "response_template."),
        None => (file, ""),
    };
    let at = |key: &str| format!("{scope}{key}");
    let template =
        template.as_object().ok_or_else(|| invalid(&at("fields"), "expected an object"))?;
    let top = ["version", "defaults", "fields", "start_anchor", "start_anchor_pattern"];
    if let Some(key) = template.keys().find(|key| !top.contains(&key.as_str())) {
        return Err(invalid(&at(key), "not a response_template key"));
    }
    if template.get("version").is_some_and(|version| version.as_u64() != Some(1)) {
        return Err(invalid(&at("version"), "only version 1 is read"));
    }
    let fields = template
        .get("fields")
        .and_then(Value::as_object)
        .filter(|fields| !fields.is_empty())
        .ok_or_else(|| invalid(&at("fields"), "expected a non-empty object"))?;
    let mut loaded = Loaded { dialects: Dialects::none(), reasoning_open: false };
    for (name, field) in fields {
        let scope = at(&format!("fields.{name}"));
        let field = field.as_object().ok_or_else(|| invalid(&scope, "expected an object"))?;
        check_keys(field, &scope)?;
        match name.as_str() {
            "tool_calls" => {
                for row in tool_calls(field, &scope)? {
                    loaded.dialects.push(Entry::Native(row));
                }
            }
            "thinking" => loaded.reasoning_open = thinking(field, &scope)?,
            "content" => content(field, &scope)?,
            _ => {
                return Err(invalid(
                    &scope,
                    "toolshim reads the fields thinking, content and tool_calls; this one has nowhere to go",
                ));
            }
        }
    }
    Ok(loaded)
}

fn check_keys(field: &Map<String, Value>, scope: &str) -> Result<(), Error> {
    let known = [
        "open",
        "open_pattern",
        "close",
        "close_pattern",
        "content",
        "content_args",
        "repeats",
        "join",
        "optional",
        "transform",
        "transform_each",
    ];
    match field.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(invalid(&format!("{scope}.{key}"), "not a response_template field key")),
        None => Ok(()),
    }
}

/// A field's literals under `key` (a string or a list of strings), if it has any.
fn literals(field: &Map<String, Value>, key: &str, scope: &str) -> Result<Vec<Text>, Error> {
    let scope = format!("{scope}.{key}");
    let list: Vec<&Value> = match field.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) if list.len() <= MAX_LIST => list.iter().collect(),
        Some(Value::Array(_)) => {
            return Err(invalid(&scope, format!("at most {MAX_LIST} literals")));
        }
        Some(one) => vec![one],
    };
    list.into_iter()
        .map(|value| match value.as_str() {
            Some("") => Err(invalid(&scope, "a literal must not be empty")),
            Some(text) if text.len() > MAX_TEXT => {
                Err(invalid(&scope, format!("a literal is at most {MAX_TEXT} bytes")))
            }
            Some(text) => Ok(Text::from(text)),
            None => Err(invalid(&scope, "expected a string or a list of strings")),
        })
        .collect()
}

/// `thinking`: a reasoning block the tables know. Returns whether the prompt opens it.
fn thinking(field: &Map<String, Value>, scope: &str) -> Result<bool, Error> {
    if field.contains_key("open_pattern") || field.contains_key("close_pattern") {
        let key = if field.contains_key("open_pattern") { "open_pattern" } else { "close_pattern" };
        return Err(invalid(
            &format!("{scope}.{key}"),
            "reasoning markers are read as literals; write them as `open` and `close`",
        ));
    }
    let opens = literals(field, "open", scope)?;
    let closes = literals(field, "close", scope)?;
    if opens.is_empty() {
        // Opened by the prompt: the output starts inside it.
        if closes.iter().all(|close| close.trim() == THINK.close) && !closes.is_empty() {
            return Ok(true);
        }
        return Err(invalid(
            &format!("{scope}.close"),
            format!("reasoning the prompt opens is read up to `{}`", THINK.close),
        ));
    }
    for open in &opens {
        let known = REASONING.iter().any(|reasoning| {
            open.trim_end().starts_with(reasoning.open)
                && closes.iter().all(|close| close.trim() == reasoning.close)
        });
        if !known {
            return Err(invalid(
                &format!("{scope}.open"),
                format!(
                    "`{}` … `{}` is not a reasoning block toolshim knows (<think>, [THINK], <|START_THINKING|>, <seed:think>, Harmony's analysis channel, Gemma 4's thought channel, …)",
                    open.trim_end(),
                    closes.first().map_or("", |close| &**close)
                ),
            ));
        }
    }
    Ok(false)
}

/// `content`: what is neither a call nor reasoning. Its markers are removed only when they
/// are channel markers toolshim knows (a turn's end token stops the generation anyway).
fn content(field: &Map<String, Value>, scope: &str) -> Result<(), Error> {
    match field.get("content").map(Value::as_str) {
        None | Some(Some("text")) => Ok(()),
        _ => Err(invalid(&format!("{scope}.content"), "content is read as text")),
    }
}

/// One piece of a pattern, as far as rows follow patterns.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    Lit(String),
    /// `\s*`, `\s+`: whitespace, which readers skip between items.
    Ws,
    /// `(?P<NAME>ATOM+)`.
    Group(String),
    /// `.*?`: anything, up to what follows.
    Lazy,
}

/// Reads a pattern into pieces; anything else is an error about `scope`.
fn pieces(pattern: &str, scope: &str) -> Result<Vec<Piece>, Error> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out: Vec<Piece> = Vec::new();
    let mut i = 0;
    let unsupported = |what: &str| {
        invalid(
            scope,
            format!(
                "{what} in `{pattern}` is not expressible as rows (literals, \\s*, one (?P<name>…+) group, .*? are)"
            ),
        )
    };
    let push_lit = |out: &mut Vec<Piece>, c: char| match out.last_mut() {
        Some(Piece::Lit(lit)) => lit.push(c),
        _ => out.push(Piece::Lit(c.to_string())),
    };
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err(unsupported("a trailing `\\`"));
                };
                i += 2;
                match next {
                    's' => {
                        match chars.get(i) {
                            Some('*' | '+') => i += 1,
                            _ => return Err(unsupported("a single `\\s`")),
                        }
                        if chars.get(i) == Some(&'?') {
                            i += 1;
                        }
                        if out.last() != Some(&Piece::Ws) {
                            out.push(Piece::Ws);
                        }
                    }
                    'n' => push_lit(&mut out, '\n'),
                    't' => push_lit(&mut out, '\t'),
                    'r' => push_lit(&mut out, '\r'),
                    c if c.is_ascii_punctuation() || c == ' ' => push_lit(&mut out, c),
                    c => return Err(unsupported(&format!("`\\{c}` outside a name group"))),
                }
            }
            '(' => {
                let rest: String = chars.get(i..).unwrap_or_default().iter().collect();
                let Some(after) = rest.strip_prefix("(?P<") else {
                    return Err(unsupported("a group other than (?P<name>…)"));
                };
                let Some((name, body)) = after.split_once('>') else {
                    return Err(unsupported("an unfinished group"));
                };
                let Some(close) = group_end(body) else {
                    return Err(unsupported("an unfinished group"));
                };
                let atom = body.get(..close).unwrap_or_default();
                let repeated = ["+", "+?", "*?"].iter().any(|q| atom.ends_with(q));
                if !repeated || atom.contains('|') || atom.contains('(') {
                    return Err(unsupported(&format!("the group body `{atom}`")));
                }
                out.push(Piece::Group(name.to_owned()));
                i += 4
                    + name.chars().count()
                    + 1
                    + body.get(..=close).unwrap_or_default().chars().count();
            }
            '.' | '[' => {
                let rest: String = chars.get(i..).unwrap_or_default().iter().collect();
                let lazy = [".*?", ".+?", "[\\s\\S]*?", "[\\s\\S]+?"]
                    .iter()
                    .find(|lazy| rest.starts_with(**lazy));
                let Some(lazy) = lazy else {
                    return Err(unsupported(&format!("`{c}` other than `.*?`")));
                };
                i += lazy.chars().count();
                out.push(Piece::Lazy);
            }
            '|' | '^' | '$' | '?' | '*' | '+' | '{' | ')' | ']' => {
                return Err(unsupported(&format!("`{c}`")));
            }
            c => {
                push_lit(&mut out, c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Where a group's body ends (its `)`), skipping escapes and classes.
fn group_end(body: &str) -> Option<usize> {
    let mut class = false;
    let mut escaped = false;
    for (at, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => class = true,
            ']' => class = false,
            ')' if !class => return Some(at),
            _ => {}
        }
    }
    None
}

/// Where a call's name and arguments come from, by its `transform`.
#[derive(Debug)]
enum Calls {
    /// The content holds call objects (or lists of them), read by the JSON call reader.
    Objects,
    /// The open pattern's named group is the name; the content is the arguments.
    Named(String),
}

fn tool_calls(field: &Map<String, Value>, scope: &str) -> Result<Vec<Row>, Error> {
    let at = |key: &str| format!("{scope}.{key}");
    let calls = transform(field, scope)?;
    // The open marker(s), and a name head.
    let (starts, head) = match field.get("open_pattern") {
        Some(pattern) => {
            let pattern = pattern
                .as_str()
                .ok_or_else(|| invalid(&at("open_pattern"), "expected a string"))?;
            let (start, head) = open_pattern(pattern, &calls, field, &at("open_pattern"))?;
            (vec![start], head)
        }
        None => {
            if let Calls::Named(name) = &calls {
                return Err(invalid(
                    &at("transform"),
                    format!("`{{{name}}}` names a group, and the field has no open_pattern"),
                ));
            }
            let starts = literals(field, "open", scope)?;
            if starts.is_empty() {
                return Err(invalid(&at("open"), "tool calls need an open marker"));
            }
            (starts, Head::Calls)
        }
    };
    let ends = match field.get("close_pattern") {
        Some(pattern) => {
            let pattern = pattern
                .as_str()
                .ok_or_else(|| invalid(&at("close_pattern"), "expected a string"))?;
            let pieces = pieces(pattern, &at("close_pattern"))?;
            match pieces.as_slice() {
                [Piece::Lit(lit)] | [Piece::Ws, Piece::Lit(lit)] => vec![Text::from(lit.as_str())],
                _ => {
                    return Err(invalid(
                        &at("close_pattern"),
                        "a close marker is read as a literal (optionally after \\s*)",
                    ));
                }
            }
        }
        None => literals(field, "close", scope)?,
    };
    let body = body(field, &calls, scope)?;
    // Whitespace before a call is the text's: a start marker begins with what is visible,
    // and is at least two characters (one would be read inside every JSON value).
    let starts: Vec<Text> = starts
        .into_iter()
        .map(|start| match start.trim_start() {
            trimmed if trimmed.len() == start.len() => start,
            trimmed => Text::from(trimmed),
        })
        .collect();
    if starts.iter().any(|start| start.chars().count() < 2) {
        let key = if field.contains_key("open_pattern") { "open_pattern" } else { "open" };
        return Err(invalid(&at(key), "the start marker is at least two visible characters"));
    }
    Ok(starts
        .into_iter()
        .map(|start| {
            Row::new(Pair {
                id: Text::from(ID),
                start,
                ends: ends.clone().into(),
                head: head.clone(),
                body: body.clone(),
                skip: Box::default(),
                inner: Box::default(),
                leading: None,
                opens: Opens::Anywhere,
            })
        })
        .collect())
}

/// Reads `transform` (and `transform_each`): where the name and the arguments are.
fn transform(field: &Map<String, Value>, scope: &str) -> Result<Calls, Error> {
    let at = |key: &str| format!("{scope}.{key}");
    let each = field.get("transform_each").and_then(Value::as_bool).unwrap_or(false);
    let Some(transform) = field.get("transform") else { return Ok(Calls::Objects) };
    let mut function = transform;
    let mut path = at("transform");
    if let Some(object) = transform.as_object() {
        for (key, value) in object {
            match key.as_str() {
                "type" if value.as_str() == Some("function") => {}
                "function" => {
                    function = value;
                    path = format!("{path}.function");
                }
                "name" | "arguments" if !object.contains_key("function") => {}
                _ => return Err(invalid(&format!("{path}.{key}"), "has nowhere to go in a call")),
            }
        }
    }
    if placeholder(function).as_deref() == Some("content") && !each {
        return Ok(Calls::Objects);
    }
    let object = function.as_object().ok_or_else(|| {
        invalid(&path, "expected {\"name\": …, \"arguments\": …} or \"{content}\"")
    })?;
    if let Some(key) =
        object.keys().find(|key| !["name", "arguments", "id"].contains(&key.as_str()))
    {
        return Err(invalid(&format!("{path}.{key}"), "has nowhere to go in a call"));
    }
    let source = |key: &str| {
        let field = format!("{path}.{key}");
        object
            .get(key)
            .and_then(placeholder)
            .ok_or_else(|| {
                invalid(&field, "expected a whole-string placeholder like \"{content}\"")
            })
            .map(|source| (source, field))
    };
    let (name, name_field) = source("name")?;
    let (args, args_field) = source("arguments")?;
    // A key of each call object (`transform_each`), or of the content (`content.KEY`): the
    // JSON call reader must take it for the name and the arguments.
    let object_key = |source: &str| {
        if each {
            Some(source.to_owned())
        } else {
            source.strip_prefix("content.").map(str::to_owned)
        }
    };
    match (object_key(&name), object_key(&args)) {
        (Some(name_key), Some(args_key)) => {
            if envelope_key(&name_key) != Some(Key::Name) {
                return Err(invalid(
                    &name_field,
                    format!(
                        "the key `{name_key}` is not one toolshim's JSON call reader takes for a name (name, tool, tool_name, function_name, action, …)"
                    ),
                ));
            }
            if envelope_key(&args_key) != Some(Key::Arguments) {
                return Err(invalid(
                    &args_field,
                    format!(
                        "the key `{args_key}` is not one toolshim's JSON call reader takes for arguments (arguments, parameters, args, input, …)"
                    ),
                ));
            }
            Ok(Calls::Objects)
        }
        (None, _) if !each && !name.contains('.') && name != "content" => {
            if args != "content" {
                return Err(invalid(
                    &args_field,
                    "with the name from the open pattern, the arguments are the content (\"{content}\")",
                ));
            }
            Ok(Calls::Named(name))
        }
        _ => Err(invalid(
            &name_field,
            "the name comes from a group of the open pattern or a key of the content",
        )),
    }
}

/// The `NAME` of a whole-string `"{NAME}"`.
fn placeholder(value: &Value) -> Option<String> {
    let text = value.as_str()?;
    let name = text.strip_prefix('{')?.strip_suffix('}')?;
    let ok = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    ok.then(|| name.to_owned())
}

/// The open pattern: the start marker and the name head.
fn open_pattern(
    pattern: &str,
    calls: &Calls,
    field: &Map<String, Value>,
    scope: &str,
) -> Result<(Text, Head), Error> {
    let pieces = pieces(pattern, scope)?;
    let mut rest = pieces.iter();
    let Some(Piece::Lit(start)) = rest.next() else {
        return Err(invalid(scope, "the pattern must begin with a literal (the start marker)"));
    };
    let start = Text::from(start.as_str());
    let group = pieces.iter().position(|piece| matches!(piece, Piece::Group(_)));
    let Some(group) = group else {
        // No name: the start marker, then whitespace.
        if pieces.iter().skip(1).any(|piece| *piece != Piece::Ws) {
            return Err(invalid(
                scope,
                "without a name group the pattern is a literal, then \\s* at most",
            ));
        }
        if let Calls::Named(name) = calls {
            return Err(invalid(
                scope,
                format!("the transform's `{{{name}}}` names no group of it"),
            ));
        }
        return Ok((start, Head::Calls));
    };
    let Some(Piece::Group(name)) = pieces.get(group) else {
        return Err(invalid(scope, "no group"));
    };
    match calls {
        Calls::Named(wanted) if wanted == name => {}
        _ => {
            return Err(invalid(
                scope,
                format!(
                    "the group `{name}` must be the call's name in the transform (\"name\": \"{{{name}}}\")"
                ),
            ));
        }
    }
    // Between the start and the name: nothing, or whitespace and a prefix.
    let prefix = match pieces.get(1..group).unwrap_or_default() {
        [] => "",
        [Piece::Ws] => "",
        [Piece::Ws, Piece::Lit(prefix)] => prefix,
        _ => {
            return Err(invalid(
                scope,
                "between the start marker and the name: \\s* and a literal at most",
            ));
        }
    };
    let after = pieces.get(group + 1..).unwrap_or_default();
    if after.iter().any(|piece| matches!(piece, Piece::Group(_))) {
        return Err(invalid(scope, "one group only: the call's name"));
    }
    let ends: Box<[Marker]> = match after.last() {
        Some(Piece::Lit(end)) => Box::new([Marker::Consume(Text::from(end.as_str()))]),
        Some(_) => return Err(invalid(scope, "after the name the pattern ends in a literal")),
        // The name runs to what the content starts with.
        None => match field.get("content").and_then(Value::as_str) {
            Some("xml-inline") => Box::new([Marker::Before(Text::from("<"))]),
            _ => Box::new([Marker::Before(Text::from("{"))]),
        },
    };
    if ends.iter().any(|end| end.text().len() > MAX_HEAD_MARKER) {
        return Err(invalid(
            scope,
            format!("the literal after the name is at most {MAX_HEAD_MARKER} bytes"),
        ));
    }
    Ok((start, Head::Name { prefix: Text::from(prefix), ends, id: None, form: NameForm::Word }))
}

/// The body: what the content parser reads.
fn body(field: &Map<String, Value>, calls: &Calls, scope: &str) -> Result<Body, Error> {
    let at = |key: &str| format!("{scope}.{key}");
    let args = field.get("content_args").and_then(Value::as_object);
    if field.get("content_args").is_some_and(|args| !args.is_object()) {
        return Err(invalid(&at("content_args"), "expected an object"));
    }
    let empty = Map::new();
    let args = args.unwrap_or(&empty);
    match field.get("content").and_then(Value::as_str).unwrap_or("text") {
        "json" => {
            let known = ["unquoted_keys", "string_delims", "allow_non_json"];
            if let Some(key) = args.keys().find(|key| !known.contains(&key.as_str())) {
                return Err(invalid(
                    &at(&format!("content_args.{key}")),
                    "not a json content argument",
                ));
            }
            let delims = args.get("string_delims").and_then(Value::as_array);
            match delims.map(Vec::as_slice) {
                None | Some([]) => Ok(Body::Calls),
                Some([pair]) => {
                    let pair = pair.as_array().map(Vec::as_slice);
                    match pair {
                        Some([Value::String(open), Value::String(close)])
                            if open == close && !open.is_empty() && open.len() <= MAX_TEXT =>
                        {
                            Ok(Body::TokenStrings(Text::from(open.as_str())))
                        }
                        _ => Err(invalid(
                            &at("content_args.string_delims"),
                            "strings are read between one token written on both sides ([[T, T]])",
                        )),
                    }
                }
                Some(_) => {
                    Err(invalid(&at("content_args.string_delims"), "one string token at most"))
                }
            }
        }
        "xml-inline" => {
            if !matches!(calls, Calls::Named(_)) {
                return Err(invalid(
                    &at("content"),
                    "xml-inline parameters need the name from the open pattern",
                ));
            }
            let pattern = args
                .get("tag_pattern")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(&at("content_args.tag_pattern"), "missing"))?;
            parameter_tags(pattern, &at("content_args.tag_pattern"))?;
            Ok(Body::Calls)
        }
        other => Err(invalid(
            &at("content"),
            format!("tool calls are read from json or xml-inline content, not `{other}`"),
        )),
    }
}

/// A parameter tag pattern must be markup the markup reader knows: `<parameter=KEY>`,
/// `<param name="KEY">`, `<arg_key>KEY</arg_key>…` and the like.
fn parameter_tags(pattern: &str, scope: &str) -> Result<(), Error> {
    let pieces = pieces(pattern, scope)?;
    let Some(Piece::Lit(first)) = pieces.first() else {
        return Err(invalid(scope, "a parameter pattern begins with its tag"));
    };
    let tag = first.strip_prefix('<').unwrap_or_default();
    let name: String =
        tag.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    let local = name.rsplit(':').next().unwrap_or_default();
    match markup_tag(local).map(|(_, role)| role) {
        Some(Role::Param | Role::Key) => {}
        _ => {
            return Err(invalid(
                scope,
                format!(
                    "`<{name}` is not a parameter tag toolshim's markup reader knows (parameter, param, arg, argument, arg_key)"
                ),
            ));
        }
    }
    if !pieces.iter().any(|piece| *piece == Piece::Group("key".into())) {
        return Err(invalid(scope, "the pattern has no (?P<key>…) group"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
