//! Format files: a registry written as data and read back at run time. The rows a file
//! holds are the same typed rows as the tables' (`rows::native::Pair`), owned by the
//! registry that loads them; there is no second engine.
//!
//! ```text
//! { "toolshim_format": 1,
//!   "dialects": [ "markup",                                   (a built-in dialect)
//!                 { "tag_pair": { "start": "<c>", "end": "</c>" } },
//!                 { "pair": ROW } ] }
//! ROW  = { "id", "start", "ends": [TEXT], "head": HEAD, "body": BODY, "skip": [TEXT],
//!          "inner": [ROW], "leading": { "end" }, "opens": "anywhere" | "at_start" }
//! HEAD = "calls" | { "name": { "prefix", "ends": [MARKER], "id", "form" } }
//!      | { "recipient": { "ends": [MARKER] } }
//! MARKER = { "consume": TEXT } | { "before": TEXT };  form = "plain" | "indexed" | "word"
//! BODY = "calls" | "named_objects" | { "token_strings": TEXT } | { "namespaced_markup": TEXT }
//!      | { "arg_tokens": { "key", "value", "end" } } | { "freeform": { "key" } }
//! ```
//!
//! Only `id` and `start` of a row are required. Every text is non-empty (a head's prefix
//! may be), at most [`MAX_TEXT`] bytes; a name head's markers at most [`MAX_HEAD_MARKER`].
//! A start marker is at least two characters and, where it opens anywhere, begins with a
//! visible one: whitespace before a call belongs to the text, and a one-character marker
//! would open inside every JSON value (the random-file properties found both).

use serde_json::{Map, Value, json};

use crate::dialect::{Builtin, Dialects, Entry, TagPair};
use crate::error::{Error, ErrorKind};
use crate::rows::native::{
    ArgTokens, Body, Head, Leading, Marker, NameForm, Opens, Pair, Row, Text,
};
use crate::rows::template::{self, Loaded};

/// The version of the format a file is written in.
pub(crate) const VERSION: u64 = 1;
/// The longest text a row holds.
pub(crate) const MAX_TEXT: usize = 256;
/// The longest marker that ends a name head (a head is searched within a bounded window).
pub(crate) const MAX_HEAD_MARKER: usize = 64;
/// The most entries of one list in a row, and of rows in a file.
pub(crate) const MAX_LIST: usize = 64;
/// The deepest pairs nest inside one another.
const MAX_NESTING: usize = 4;

/// Reads a format file: toolshim's rows as JSON (or TOML, with the `toml` feature), or a
/// `response_template` (bare, or in the `tokenizer_config.json` that holds it).
pub(crate) fn load(text: &str) -> Result<Loaded, Error> {
    let value = parse_text(text)?;
    if value.get("toolshim_format").is_some() {
        return Ok(Loaded { dialects: read(&value)?, reasoning_open: false });
    }
    if value.get("fields").is_some() || value.get("response_template").is_some() {
        return template::read(&value);
    }
    Err(invalid(
        "toolshim_format",
        "neither toolshim's rows (`toolshim_format`) nor a response_template (`fields`)",
    ))
}

fn parse_text(text: &str) -> Result<Value, Error> {
    let json = serde_json::from_str::<Value>(text);
    let json_err = match json {
        Ok(value) => return Ok(value),
        Err(err) => err,
    };
    #[cfg(feature = "toml")]
    if !text.trim_start().starts_with('{') {
        return toml::from_str::<Value>(text).map_err(|err| {
            Error::new(
                ErrorKind::InvalidFormat,
                format!("the format file is not TOML: {}", err.message()),
            )
            .at(err.span().map_or(0, |span| span.start))
        });
    }
    let offset = crate::error::offset_of(text, json_err.line(), json_err.column());
    Err(Error::new(ErrorKind::InvalidFormat, format!("the format file is not JSON: {json_err}"))
        .at(offset))
}

/// A format-file error about `field`.
pub(crate) fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::InvalidFormat, format!("{field}: {message}")).with_field(field)
}

/// Reads toolshim's own format file (already parsed as JSON).
pub(crate) fn read(file: &Value) -> Result<Dialects, Error> {
    let file = object(file, "the format file")?;
    known_keys(file, "the format file", &["toolshim_format", "dialects", "id"])?;
    match file.get("toolshim_format").and_then(Value::as_u64) {
        Some(VERSION) => {}
        _ => return Err(invalid("toolshim_format", format!("expected the version {VERSION}"))),
    }
    let list = array(file.get("dialects"), "dialects")?;
    let mut dialects = Dialects::none();
    let mut rows = 0;
    for (idx, entry) in list.iter().enumerate() {
        let field = format!("dialects[{idx}]");
        let entry = read_entry(entry, &field, &mut rows)?;
        if dialects.ids().any(|id| id == entry.id() && !matches!(entry, Entry::Native(_))) {
            return Err(invalid(&field, format!("`{}` is listed twice", entry.id())));
        }
        dialects.push(entry);
    }
    Ok(dialects)
}

fn read_entry(entry: &Value, field: &str, rows: &mut usize) -> Result<Entry, Error> {
    if let Some(id) = entry.as_str() {
        return Builtin::from_id(id).map(Entry::Builtin).ok_or_else(|| {
            let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.id()).collect();
            invalid(field, format!("unknown built-in dialect `{id}` (one of {})", known.join(", ")))
        });
    }
    let entry = object(entry, field)?;
    let (kind, value) = single_key(entry, field, &["pair", "tag_pair"])?;
    let field = format!("{field}.{kind}");
    match kind {
        "pair" => Ok(Entry::Native(read_row(value, &field, rows, 0)?)),
        _ => {
            let pair = object(value, &field)?;
            known_keys(pair, &field, &["start", "end"])?;
            let start = text(pair.get("start"), &format!("{field}.start"))?;
            let end = match pair.get("end") {
                None => String::new(),
                Some(end) => text(Some(end), &format!("{field}.end"))?.to_string(),
            };
            Ok(Entry::Pair(TagPair::new(start.to_string(), end).into()))
        }
    }
}

fn read_row(value: &Value, field: &str, rows: &mut usize, depth: usize) -> Result<Row, Error> {
    *rows += 1;
    if *rows > MAX_LIST * 4 {
        return Err(invalid(field, format!("a file holds at most {} rows", MAX_LIST * 4)));
    }
    if depth >= MAX_NESTING {
        return Err(invalid(field, format!("pairs nest at most {MAX_NESTING} deep")));
    }
    let row = object(value, field)?;
    known_keys(
        row,
        field,
        &["id", "start", "ends", "head", "body", "skip", "inner", "leading", "opens"],
    )?;
    let at = |key: &str| format!("{field}.{key}");
    let inner = match row.get("inner") {
        None => Box::default(),
        Some(inner) => array(Some(inner), &at("inner"))?
            .iter()
            .enumerate()
            .map(|(idx, row)| read_row(row, &format!("{field}.inner[{idx}]"), rows, depth + 1))
            .collect::<Result<_, _>>()?,
    };
    let leading = match row.get("leading") {
        None => None,
        Some(leading) => {
            let leading = object(leading, &at("leading"))?;
            known_keys(leading, &at("leading"), &["end"])?;
            Some(Leading { end: text(leading.get("end"), &at("leading.end"))? })
        }
    };
    let opens = match row.get("opens").map(|opens| opens.as_str()) {
        None | Some(Some("anywhere")) => Opens::Anywhere,
        Some(Some("at_start")) => Opens::AtStart,
        Some(_) => return Err(invalid(&at("opens"), "expected \"anywhere\" or \"at_start\"")),
    };
    let start = text(row.get("start"), &at("start"))?;
    if start.chars().count() < 2 {
        return Err(invalid(&at("start"), "a start marker is at least two characters"));
    }
    if start.starts_with(|c: char| c.is_whitespace()) && opens == Opens::Anywhere {
        return Err(invalid(
            &at("start"),
            "a start marker that opens anywhere begins with a visible character (whitespace before a call is the text's or the template's)",
        ));
    }
    Ok(Row::new(Pair {
        id: text(row.get("id"), &at("id"))?,
        start,
        ends: texts(row.get("ends"), &at("ends"))?,
        head: read_head(row.get("head"), &at("head"))?,
        body: read_body(row.get("body"), &at("body"))?,
        skip: texts(row.get("skip"), &at("skip"))?,
        inner,
        leading,
        opens,
    }))
}

fn read_head(value: Option<&Value>, field: &str) -> Result<Head, Error> {
    let Some(value) = value else { return Ok(Head::Calls) };
    if value.as_str() == Some("calls") {
        return Ok(Head::Calls);
    }
    let head = object(value, field)?;
    let (kind, value) = single_key(head, field, &["name", "recipient"])?;
    let field = format!("{field}.{kind}");
    let head = object(value, &field)?;
    let at = |key: &str| format!("{field}.{key}");
    if kind == "recipient" {
        known_keys(head, &field, &["ends"])?;
        return Ok(Head::Recipient { ends: markers(head.get("ends"), &at("ends"))? });
    }
    known_keys(head, &field, &["prefix", "ends", "id", "form"])?;
    let prefix = match head.get("prefix") {
        None => Text::from(""),
        Some(Value::String(prefix)) if prefix.is_empty() => Text::from(""),
        Some(prefix) => text(Some(prefix), &at("prefix"))?,
    };
    let id = head.get("id").map(|id| text(Some(id), &at("id"))).transpose()?;
    let form = match head.get("form").map(|form| form.as_str()) {
        None | Some(Some("plain")) => NameForm::Plain,
        Some(Some("indexed")) => NameForm::Indexed,
        Some(Some("word")) => NameForm::Word,
        Some(_) => return Err(invalid(&at("form"), "expected \"plain\", \"indexed\" or \"word\"")),
    };
    Ok(Head::Name { prefix, ends: markers(head.get("ends"), &at("ends"))?, id, form })
}

fn markers(value: Option<&Value>, field: &str) -> Result<Box<[Marker]>, Error> {
    let Some(value) = value else { return Ok(Box::default()) };
    let list = array(Some(value), field)?;
    list.iter()
        .enumerate()
        .map(|(idx, marker)| {
            let field = format!("{field}[{idx}]");
            let marker = object(marker, &field)?;
            let (kind, value) = single_key(marker, &field, &["consume", "before"])?;
            let text = text(Some(value), &format!("{field}.{kind}"))?;
            if text.len() > MAX_HEAD_MARKER {
                return Err(invalid(
                    &format!("{field}.{kind}"),
                    format!("a head's marker is at most {MAX_HEAD_MARKER} bytes"),
                ));
            }
            Ok(if kind == "consume" { Marker::Consume(text) } else { Marker::Before(text) })
        })
        .collect()
}

fn read_body(value: Option<&Value>, field: &str) -> Result<Body, Error> {
    let Some(value) = value else { return Ok(Body::Calls) };
    match value.as_str() {
        Some("calls") => return Ok(Body::Calls),
        Some("named_objects") => return Ok(Body::NamedObjects),
        _ => {}
    }
    let body = object(value, field)?;
    let kinds = ["token_strings", "namespaced_markup", "arg_tokens", "freeform"];
    let (kind, value) = single_key(body, field, &kinds)?;
    let field = format!("{field}.{kind}");
    Ok(match kind {
        "token_strings" => Body::TokenStrings(text(Some(value), &field)?),
        "namespaced_markup" => Body::NamespacedMarkup(text(Some(value), &field)?),
        "arg_tokens" => {
            let tokens = object(value, &field)?;
            known_keys(tokens, &field, &["key", "value", "end"])?;
            let at = |key: &str| format!("{field}.{key}");
            Body::ArgTokens(ArgTokens {
                key: text(tokens.get("key"), &at("key"))?,
                value: text(tokens.get("value"), &at("value"))?,
                end: text(tokens.get("end"), &at("end"))?,
            })
        }
        _ => {
            let freeform = object(value, &field)?;
            known_keys(freeform, &field, &["key"])?;
            Body::Freeform { key: text(freeform.get("key"), &format!("{field}.key"))? }
        }
    })
}

fn object<'v>(value: &'v Value, field: &str) -> Result<&'v Map<String, Value>, Error> {
    value.as_object().ok_or_else(|| invalid(field, "expected an object"))
}

fn array<'v>(value: Option<&'v Value>, field: &str) -> Result<&'v [Value], Error> {
    let list = value.and_then(Value::as_array).ok_or_else(|| invalid(field, "expected a list"))?;
    if list.len() > MAX_LIST {
        return Err(invalid(field, format!("at most {MAX_LIST} entries")));
    }
    Ok(list)
}

/// A non-empty text of at most [`MAX_TEXT`] bytes.
pub(crate) fn text(value: Option<&Value>, field: &str) -> Result<Text, Error> {
    match value {
        None => Err(invalid(field, "missing")),
        Some(Value::String(text)) if text.is_empty() => Err(invalid(field, "must not be empty")),
        Some(Value::String(text)) if text.len() > MAX_TEXT => {
            Err(invalid(field, format!("at most {MAX_TEXT} bytes")))
        }
        Some(Value::String(text)) => Ok(Text::from(text.as_str())),
        Some(_) => Err(invalid(field, "expected a string")),
    }
}

fn texts(value: Option<&Value>, field: &str) -> Result<Box<[Text]>, Error> {
    let Some(value) = value else { return Ok(Box::default()) };
    array(Some(value), field)?
        .iter()
        .enumerate()
        .map(|(idx, text_value)| text(Some(text_value), &format!("{field}[{idx}]")))
        .collect()
}

fn known_keys(object: &Map<String, Value>, field: &str, known: &[&str]) -> Result<(), Error> {
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => {
            Err(invalid(field, format!("unknown key `{key}` (known: {})", known.join(", "))))
        }
        None => Ok(()),
    }
}

/// The one key of an object that must hold exactly one of `kinds`.
fn single_key<'v>(
    object: &'v Map<String, Value>,
    field: &str,
    kinds: &[&'static str],
) -> Result<(&'static str, &'v Value), Error> {
    let mut found = None;
    for (key, value) in object {
        let Some(kind) = kinds.iter().find(|kind| **kind == key) else {
            return Err(invalid(
                field,
                format!("unknown key `{key}` (one of {})", kinds.join(", ")),
            ));
        };
        if found.is_some() {
            return Err(invalid(field, format!("holds one of {}, not several", kinds.join(", "))));
        }
        found = Some((*kind, value));
    }
    found.ok_or_else(|| invalid(field, format!("expected one of {}", kinds.join(", "))))
}

/// Writes a registry as toolshim's format file. A custom [`crate::Dialect`] is code, not
/// data: it cannot be written.
pub(crate) fn write(dialects: &Dialects) -> Result<Value, Error> {
    let mut list = Vec::new();
    for entry in dialects.entries() {
        list.push(match entry {
            Entry::Builtin(builtin) => Value::from(builtin.id()),
            Entry::Pair(pair) => {
                let mut tag = Map::new();
                tag.insert("start".into(), pair.start().into());
                if !pair.end().is_empty() {
                    tag.insert("end".into(), pair.end().into());
                }
                json!({ "tag_pair": tag })
            }
            Entry::Native(row) => json!({ "pair": write_row(row) }),
            Entry::Custom(custom) => {
                return Err(invalid(
                    "dialects",
                    format!(
                        "the custom dialect `{}` is code and cannot be written as data",
                        custom.id()
                    ),
                ));
            }
        });
    }
    Ok(json!({ "toolshim_format": VERSION, "dialects": list }))
}

fn write_row(pair: &Pair) -> Value {
    let mut row = Map::new();
    row.insert("id".into(), Value::from(&*pair.id));
    row.insert("start".into(), Value::from(&*pair.start));
    if !pair.ends.is_empty() {
        row.insert("ends".into(), write_texts(&pair.ends));
    }
    match &pair.head {
        Head::Calls => {}
        Head::Name { prefix, ends, id, form } => {
            let mut name = Map::new();
            if !prefix.is_empty() {
                name.insert("prefix".into(), Value::from(&**prefix));
            }
            name.insert("ends".into(), write_markers(ends));
            if let Some(id) = id {
                name.insert("id".into(), Value::from(&**id));
            }
            let form = match form {
                NameForm::Plain => None,
                NameForm::Indexed => Some("indexed"),
                NameForm::Word => Some("word"),
            };
            if let Some(form) = form {
                name.insert("form".into(), Value::from(form));
            }
            row.insert("head".into(), json!({ "name": name }));
        }
        Head::Recipient { ends } => {
            row.insert("head".into(), json!({ "recipient": { "ends": write_markers(ends) } }));
        }
    }
    let body = match &pair.body {
        Body::Calls => None,
        Body::NamedObjects => Some(Value::from("named_objects")),
        Body::TokenStrings(token) => Some(json!({ "token_strings": &**token })),
        Body::NamespacedMarkup(token) => Some(json!({ "namespaced_markup": &**token })),
        Body::ArgTokens(tokens) => Some(json!({ "arg_tokens": {
            "key": &*tokens.key, "value": &*tokens.value, "end": &*tokens.end
        } })),
        Body::Freeform { key } => Some(json!({ "freeform": { "key": &**key } })),
    };
    if let Some(body) = body {
        row.insert("body".into(), body);
    }
    if !pair.skip.is_empty() {
        row.insert("skip".into(), write_texts(&pair.skip));
    }
    if !pair.inner.is_empty() {
        row.insert("inner".into(), pair.inner.iter().map(|inner| write_row(inner)).collect());
    }
    if let Some(leading) = &pair.leading {
        row.insert("leading".into(), json!({ "end": &*leading.end }));
    }
    if pair.opens == Opens::AtStart {
        row.insert("opens".into(), Value::from("at_start"));
    }
    Value::Object(row)
}

fn write_texts(texts: &[Text]) -> Value {
    texts.iter().map(|text| Value::from(&**text)).collect()
}

fn write_markers(markers: &[Marker]) -> Value {
    markers
        .iter()
        .map(|marker| match marker {
            Marker::Consume(text) => json!({ "consume": &**text }),
            Marker::Before(text) => json!({ "before": &**text }),
        })
        .collect()
}
