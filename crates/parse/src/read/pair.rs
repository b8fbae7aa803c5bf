//! Marker pairs inside a region: their end markers, what the innermost pair makes of
//! the text (its start again, a separator, a token that carries nothing, an inner pair,
//! a name head), and name heads (`NAME[ARGS]`, `functions.NAME:0<|…|>`, `call:NAME{`).

use std::sync::Arc;

use crate::dialect::TagPair;
use crate::engine::step::{Look, Need};
use crate::rows::native::{Body, Head, Marker, NameForm, Row, Text};

/// An open pair: a native row, or a custom [`TagPair`] (JSON body, no head).
#[derive(Debug, Clone)]
pub(crate) enum PairRef {
    Native(Row),
    Custom(Arc<TagPair>),
}

static CALLS_HEAD: Head = Head::Calls;
static CALLS_BODY: Body = Body::Calls;

impl PairRef {
    pub(crate) fn start(&self) -> &str {
        match self {
            PairRef::Native(pair) => &pair.start,
            PairRef::Custom(pair) => pair.start(),
        }
    }

    fn ends(&self) -> &[Text] {
        match self {
            PairRef::Native(pair) => &pair.ends,
            PairRef::Custom(_) => &[],
        }
    }

    /// The custom pair's end marker, if it has one.
    fn custom_end(&self) -> Option<&str> {
        match self {
            PairRef::Native(_) => None,
            PairRef::Custom(pair) => Some(pair.end()).filter(|end| !end.is_empty()),
        }
    }

    pub(crate) fn head(&self) -> &Head {
        match self {
            PairRef::Native(pair) => &pair.head,
            PairRef::Custom(_) => &CALLS_HEAD,
        }
    }

    pub(crate) fn body(&self) -> &Body {
        match self {
            PairRef::Native(pair) => &pair.body,
            PairRef::Custom(_) => &CALLS_BODY,
        }
    }

    /// Whether the pair is a section: it holds inner call pairs and has an end marker,
    /// so whatever it holds is call syntax.
    pub(crate) fn is_section(&self) -> bool {
        !self.ends().is_empty() && !self.inner().is_empty()
    }

    fn inner(&self) -> &[Row] {
        match self {
            PairRef::Native(pair) => &pair.inner,
            PairRef::Custom(_) => &[],
        }
    }

    /// Tokens that carry nothing: the row's, and a namespace token.
    fn skips(&self) -> impl Iterator<Item = &str> {
        let (skip, namespace): (&[Text], _) = match self {
            PairRef::Native(pair) => match &pair.body {
                Body::NamespacedMarkup(token) => (&pair.skip, Some(&**token)),
                _ => (&pair.skip, None),
            },
            PairRef::Custom(_) => (&[], None),
        };
        skip.iter().map(|text| &**text).chain(namespace)
    }
}

/// Whether `rest` starts with an end marker of `pair`: its length.
pub(crate) fn end_of(pair: &PairRef, rest: &str, eof: bool) -> Look<usize> {
    let custom = pair.custom_end();
    for end in pair.ends().iter().map(|end| &**end).chain(custom) {
        if rest.starts_with(end) {
            return Ok(Some(end.len()));
        }
        if !eof && rest.len() < end.len() && end.starts_with(rest) {
            return Err(Need);
        }
    }
    Ok(None)
}

/// What the innermost pair makes of the text at the cursor (its end markers apart).
pub(crate) enum PairStep {
    /// The pair's own start marker again, or a separator between calls: skip it.
    Skip(usize),
    /// A token that carries nothing (inside a call, too): skip it.
    Ignore(usize),
    /// An inner pair opens.
    Inner(Row),
    /// A name head may begin here.
    Name,
}

/// The prefix and end markers of the pair's name heads, if it has any.
fn head_markers(head: &Head) -> Option<(&str, &[Marker])> {
    match head {
        Head::Calls => None,
        Head::Name { prefix, ends, .. } => Some((prefix, ends)),
        Head::Recipient { ends } => Some(("", ends)),
    }
}

/// What the innermost pair makes of `rest`.
pub(crate) fn pair_step(pair: &PairRef, rest: &str, eof: bool) -> Look<PairStep> {
    let start = pair.start();
    if !start.is_empty() {
        if rest.starts_with(start) {
            return Ok(Some(PairStep::Skip(start.len())));
        }
        if !eof && rest.len() < start.len() && start.starts_with(rest) {
            return Err(Need);
        }
    }
    for inner in pair.inner() {
        let marker: &str = &inner.start;
        if rest.starts_with(marker) {
            return Ok(Some(PairStep::Inner(Row::clone(inner))));
        }
        if !eof && rest.len() < marker.len() && marker.starts_with(rest) {
            return Err(Need);
        }
    }
    let head = head_markers(pair.head());
    let prefix = head.map_or("", |(prefix, _)| prefix);
    if !prefix.is_empty() && rest.starts_with(prefix) {
        // Step3 puts markup after the prefix: `function<｜tool_sep｜><steptml:invoke …>`.
        match rest.as_bytes().get(prefix.len()) {
            Some(b'<') => return Ok(Some(PairStep::Skip(prefix.len()))),
            None if !eof => return Err(Need),
            _ => {}
        }
    }
    if !eof && !prefix.is_empty() && rest.len() < prefix.len() && prefix.starts_with(rest) {
        return Err(Need);
    }
    for token in pair.skips() {
        if rest.starts_with(token) {
            return Ok(Some(PairStep::Ignore(token.len())));
        }
        if !eof && rest.len() < token.len() && token.starts_with(rest) {
            return Err(Need);
        }
    }
    let has_ends = head.is_some_and(|(_, ends)| !ends.is_empty());
    match rest.as_bytes().first() {
        Some(b';') => Ok(Some(PairStep::Skip(1))),
        Some(&b) if has_ends && (b.is_ascii_alphabetic() || b == b'_') => Ok(Some(PairStep::Name)),
        Some(_) if !prefix.is_empty() && rest.starts_with(prefix) => Ok(Some(PairStep::Name)),
        Some(_) if !eof && !prefix.is_empty() && prefix.starts_with(rest) => Err(Need),
        _ => Ok(None),
    }
}

/// A name head read: the call's name and id, and the head's length (prefix, name, id,
/// consumed markers).
pub(crate) struct NameHead {
    pub(crate) name: String,
    pub(crate) id: Option<String>,
    pub(crate) len: usize,
}

const MAX_HEAD: usize = 512;

/// Longer than any marker a head search looks for.
const MARKER_SLACK: usize = 64;

/// What ends the name in a head.
enum NameEnd<'r> {
    Marker(&'r Marker),
    /// The id marker: the id runs to the next name end.
    Id(&'r str),
}

/// Reads `[prefix] NAME [ID_MARKER ID] END` at the start of `rest`.
pub(crate) fn read_name(pair: &PairRef, rest: &str, eof: bool) -> Look<NameHead> {
    let head = pair.head();
    let Some((prefix, ends)) = head_markers(head) else { return Ok(None) };
    let (id_marker, form) = match head {
        Head::Name { id, form, .. } => (id.as_deref(), *form),
        Head::Calls | Head::Recipient { .. } => (None, NameForm::Plain),
    };
    let mut at = 0;
    if !prefix.is_empty() && rest.starts_with(prefix) {
        at = prefix.len();
    }
    let text = rest.get(at..).unwrap_or_default();
    // The first name end (or id marker) that occurs.
    let candidates = ends
        .iter()
        .map(|marker| (marker.text(), NameEnd::Marker(marker)))
        .chain(id_marker.map(|id| (id, NameEnd::Id(id))));
    let Some((found, end)) = earliest(text, candidates) else {
        return undecided(text, eof);
    };
    let raw = text.get(..found).unwrap_or_default().trim();
    let raw = match form {
        // The word the head starts with; the rest of the head carries nothing.
        NameForm::Word => {
            raw.get(..raw.bytes().take_while(|&b| is_word_byte(b)).count()).unwrap_or_default()
        }
        NameForm::Plain | NameForm::Indexed => raw,
    };
    if raw.is_empty()
        || raw.contains(['<', '>', '"', '{', '}'])
        || raw.contains(char::is_whitespace)
    {
        return Ok(None);
    }
    let mut len = at + found;
    let mut id = None;
    match end {
        NameEnd::Id(marker) => {
            // `NAME[CALL_ID]ID[ARGS]`: the id runs to the next name end.
            let after = text.get(found + marker.len()..).unwrap_or_default();
            let Some((k, name_end)) =
                earliest(after, ends.iter().map(|marker| (marker.text(), marker)))
            else {
                return undecided(after, eof);
            };
            id = Some(after.get(..k).unwrap_or_default().trim().to_owned());
            len += marker.len() + k + name_end.consumed();
        }
        NameEnd::Marker(marker) => len += marker.consumed(),
    }
    let (name, split_id) = match form {
        NameForm::Plain | NameForm::Word => (raw.to_owned(), None),
        NameForm::Indexed => split_name(raw),
    };
    Ok(Some(NameHead { name, id: id.or(split_id), len }))
}

/// No marker starts within the head limit of `text` yet: the head fails once no marker
/// can still start there (`MAX_HEAD + MARKER_SLACK` bytes are in, or the output ended),
/// so streaming decides at the same point whatever the chunking, and as `parse` does.
fn undecided<T>(text: &str, eof: bool) -> Look<T> {
    if eof || text.len() >= MAX_HEAD + MARKER_SLACK { Ok(None) } else { Err(Need) }
}

/// The first of `markers` that starts within the head limit of `text`: where, and which.
fn earliest<'m, T>(text: &str, markers: impl Iterator<Item = (&'m str, T)>) -> Option<(usize, T)> {
    let mut window = text.len().min(MAX_HEAD + MARKER_SLACK);
    while !text.is_char_boundary(window) {
        window -= 1;
    }
    let text = text.get(..window).unwrap_or_default();
    let mut best: Option<(usize, T)> = None;
    for (pattern, what) in markers.filter(|(pattern, _)| !pattern.is_empty()) {
        if let Some(found) = text.find(pattern) {
            if best.as_ref().is_none_or(|(b, _)| found < *b) {
                best = Some((found, what));
            }
        }
    }
    best.filter(|(found, _)| *found <= MAX_HEAD)
}

/// A byte of a name a [`NameForm::Word`] head reads.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// `functions.get_weather:0` → (`get_weather`, id `functions.get_weather:0`).
fn split_name(raw: &str) -> (String, Option<String>) {
    let (base, id) = match raw.rsplit_once(':') {
        Some((base, index)) if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) => {
            (base, Some(raw.to_owned()))
        }
        _ => (raw, None),
    };
    let name = base.strip_prefix("functions.").unwrap_or(base);
    (name.to_owned(), id)
}
