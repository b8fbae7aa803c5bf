//! Openers: what plain text at a trigger byte starts. The registry's entries are tried
//! in order; one that cannot decide yet holds the text.

use std::ops::Range;

use crate::dialect::Entry;
use crate::engine::step::{Look, Need};
use crate::read::python::{self, Mode as PyMode};
use crate::read::tag::{
    MAX_NAME, Tag, is_name_byte, local_name, read_token_tag, tag_after_name, tag_prefix,
    tool_name_of,
};
use crate::rows::markup::{FENCE_SECOND_WORD, FENCES, FenceBody, Role, TAGS, TOKEN_TAGS, tag};
use crate::{Builtin, Config};

/// What a region starts with.
#[derive(Debug)]
pub(crate) enum Opener<'s> {
    /// A bare `{` or `[`.
    Json,
    /// A fence opener line, this many bytes long.
    Fence(usize),
    /// A Python fence opener line, this many bytes long, and the call its calls may be
    /// wrapped in.
    PyFence { len: usize, wrapper: Option<&'static str> },
    /// A markup tag.
    Tag(Tag<'s>),
    /// Python calls: a list, or a call alone on its line.
    Python(PyMode),
    /// A labelled call (`Action:` … `Action Input:`); the name is at `name` within
    /// the opener, which is `len` bytes long.
    Labelled { name: Range<usize>, len: usize },
    /// The start marker of the registry entry with this index.
    Marker(usize),
}

impl Opener<'_> {
    /// Whether the example guard may take the region for an example: a bracket, a
    /// fence or a Python line may be one; markup, markers and labels are calls.
    pub(crate) fn is_guarded(&self) -> bool {
        match self {
            Opener::Json | Opener::Fence(_) | Opener::PyFence { .. } | Opener::Python(_) => true,
            Opener::Tag(_) | Opener::Labelled { .. } | Opener::Marker(_) => false,
        }
    }
}

/// The longest fence opener line ("```" + label + spaces).
pub(crate) const MAX_FENCE_LINE: usize = 40;
/// The most whitespace between a fence opener and what it holds.
pub(crate) const MAX_FENCE_GAP: usize = 64;

/// What the openers of one registry need at hand: for each first byte of a marker, the
/// bytes its markers go on with (so most trigger bytes skip the marker dialects at once),
/// and the built-in dialects in order.
#[derive(Debug)]
pub(crate) struct Openers {
    heads: Vec<Heads>,
    builtins: Vec<Builtin>,
}

/// The markers that start with `first`.
#[derive(Debug)]
struct Heads {
    first: u8,
    /// Bit `b` set: a marker goes on with byte `b`.
    seconds: [u64; 4],
    /// A marker is this one byte.
    single: bool,
}

impl Heads {
    fn goes_on_with(&self, second: u8) -> bool {
        let word = self.seconds.get(usize::from(second / 64)).copied().unwrap_or(0);
        word & (1 << (second % 64)) != 0
    }
}

impl Openers {
    pub(crate) fn new(config: &Config) -> Openers {
        let entries = config.dialects.entries();
        let mut heads: Vec<Heads> = Vec::new();
        for marker in entries.iter().filter_map(Entry::start_marker) {
            let bytes = marker.as_bytes();
            let Some(&first) = bytes.first() else { continue };
            let at = match heads.iter().position(|h| h.first == first) {
                Some(at) => at,
                None => {
                    heads.push(Heads { first, seconds: [0; 4], single: false });
                    heads.len() - 1
                }
            };
            let Some(head) = heads.get_mut(at) else { continue };
            match bytes.get(1) {
                Some(&second) => {
                    if let Some(word) = head.seconds.get_mut(usize::from(second / 64)) {
                        *word |= 1 << (second % 64);
                    }
                }
                None => head.single = true,
            }
        }
        let builtins = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Builtin(builtin) => Some(*builtin),
                _ => None,
            })
            .collect();
        Openers { heads, builtins }
    }
}

/// Decides what plain text at a trigger byte starts, trying the dialects in the
/// registry's order. An earlier dialect that cannot decide yet holds the text.
pub(crate) fn open<'s>(
    rest: &'s str,
    eof: bool,
    config: &Config,
    openers: &Openers,
) -> Look<Opener<'s>> {
    let Some(&b) = rest.as_bytes().first() else { return Ok(None) };
    let second = rest.as_bytes().get(1).copied();
    let markers = openers
        .heads
        .iter()
        .any(|h| h.first == b && (h.single || second.is_none_or(|second| h.goes_on_with(second))));
    if !markers {
        // No marker can start here: only the built-ins, in the registry's order.
        let mut need_more = false;
        for builtin in &openers.builtins {
            match open_builtin(*builtin, b, rest, eof, config) {
                Ok(None) => {}
                Err(Need) => need_more = true,
                Ok(Some(_)) if need_more => return Err(Need),
                found => return found,
            }
        }
        return if need_more { Err(Need) } else { Ok(None) };
    }
    let mut need_more = false;
    for (idx, entry) in config.dialects.entries().iter().enumerate() {
        let found = match entry {
            Entry::Pair(_) | Entry::Native(..) | Entry::Custom(_) => {
                let Some(marker) = entry.start_marker() else { continue };
                // Most markers share at most their first byte with the text: compare two
                // bytes before the whole marker.
                let second = rest.as_bytes().get(1);
                if marker.as_bytes().first() != Some(&b)
                    || second.is_some_and(|c| marker.as_bytes().get(1) != Some(c))
                {
                    continue;
                }
                if rest.starts_with(marker) {
                    Ok(Some(Opener::Marker(idx)))
                } else if !eof && rest.len() < marker.len() && marker.starts_with(rest) {
                    Err(Need)
                } else {
                    Ok(None)
                }
            }
            Entry::Builtin(builtin) => open_builtin(*builtin, b, rest, eof, config),
        };
        match found {
            Ok(None) => {}
            Err(Need) => need_more = true,
            Ok(Some(_)) if need_more => return Err(Need),
            found => return found,
        }
    }
    if need_more { Err(Need) } else { Ok(None) }
}

/// What a built-in dialect makes of a trigger byte `b` at the start of `rest`.
fn open_builtin<'s>(
    builtin: Builtin,
    b: u8,
    rest: &'s str,
    eof: bool,
    config: &Config,
) -> Look<Opener<'s>> {
    match builtin {
        Builtin::Markup if b == b'<' => open_markup(rest, eof),
        Builtin::Fenced if b == b'`' => open_fence(rest, eof, config),
        Builtin::Json if b == b'{' || b == b'[' => Ok(Some(Opener::Json)),
        Builtin::Python if b == b'[' => python::list_ahead(rest, eof, config)
            .map(|yes| yes.map(|()| Opener::Python(PyMode::List))),
        _ => Ok(None),
    }
}

/// Whether a tag with this role opens a region in plain text (the calls among them
/// only with a name).
fn opens_in_text(role: Role) -> bool {
    match role {
        Role::Container { in_text } | Role::Call { in_text, .. } => in_text,
        Role::CallName { .. } => true,
        _ => false,
    }
}

/// Whether `partial` may grow into the name of a tag that holds or makes calls.
fn may_become_opener(partial: &str) -> bool {
    TAGS.iter().any(|(name, role)| {
        let holds = matches!(
            role,
            Role::Container { .. } | Role::Call { in_text: true, .. } | Role::CallName { .. }
        );
        holds && name.starts_with(partial)
    })
}

/// Whether an opening tag opens a region in plain text.
fn opens(tag: &Tag<'_>, role: Option<Role>) -> bool {
    match role {
        Some(role @ Role::Call { .. }) => {
            opens_in_text(role) && tool_name_of(tag, Some(role)).is_some()
        }
        Some(role) => opens_in_text(role),
        None => false,
    }
}

/// Tool-call markup at a `<`.
fn open_markup(rest: &str, eof: bool) -> Look<Opener<'_>> {
    let b = rest.as_bytes();
    let token_lead = TOKEN_TAGS.open.as_bytes().get(1);
    if b.get(1).is_some_and(|c| Some(c) == token_lead) || (b.len() == 1 && !eof) {
        if b.len() == 1 {
            return Err(Need);
        }
        return match read_token_tag(rest, eof, &TOKEN_TAGS)? {
            Some(tag)
                if !tag.closing && self::tag(tag.name).is_some_and(|(_, r)| opens_in_text(r)) =>
            {
                Ok(Some(Opener::Tag(tag)))
            }
            _ => Ok(None),
        };
    }
    let start = 1 + tag_prefix(rest.get(1..).unwrap_or_default(), eof)?;
    // Decide early for ordinary `<` so text is not held.
    let name_len = b.iter().skip(start).take(MAX_NAME).take_while(|&&c| is_name_byte(c)).count();
    let full = rest.get(start..start + name_len).unwrap_or_default();
    let partial = local_name(full);
    if start + name_len >= b.len() {
        // A name still growing may gain a namespace (`<seed:tool_call>`).
        let could_grow = partial.len() < MAX_NAME && !full.is_empty();
        return if !eof && (may_become_opener(partial) || could_grow) {
            Err(Need)
        } else {
            Ok(None)
        };
    }
    let role = tag(partial).map(|(_, role)| role);
    if !role.is_some_and(opens_in_text) {
        return Ok(None);
    }
    // The name is read: the tag goes on from there.
    match tag_after_name(rest, eof, false, partial, start + name_len)? {
        Some(tag) if opens(&tag, role) => Ok(Some(Opener::Tag(tag))),
        _ => Ok(None),
    }
}

/// A fence opener: "```label\n" followed by something that may be a call.
fn open_fence<'s>(rest: &'s str, eof: bool, config: &Config) -> Look<Opener<'s>> {
    let b = rest.as_bytes();
    // Bounded look-ahead: a long run of backticks must not be recounted per byte.
    let ticks = b.iter().take(4).take_while(|&&c| c == b'`').count();
    if ticks < 3 {
        return if ticks == b.len() && !eof { Err(Need) } else { Ok(None) };
    }
    if ticks > 3 {
        return Ok(None);
    }
    let mut i = 3;
    while i < MAX_FENCE_LINE
        && b.get(i).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        i += 1;
    }
    let label = rest.get(3..i).unwrap_or_default().to_ascii_lowercase();
    while i < MAX_FENCE_LINE && b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r') {
        i += 1;
    }
    // A second word: "```json action".
    let second = rest.get(i..).unwrap_or_default();
    let word = FENCE_SECOND_WORD;
    if i > 3 + label.len() && !eof && second.len() < word.len() && word.starts_with(second) {
        return Err(Need);
    }
    if second.starts_with(word) && i > 3 + label.len() {
        i += word.len();
        while i < MAX_FENCE_LINE && b.get(i).is_some_and(|&c| c == b' ' || c == b'\t' || c == b'\r')
        {
            i += 1;
        }
    }
    if i >= MAX_FENCE_LINE {
        return Ok(None);
    }
    match b.get(i) {
        None if !eof => return Err(Need),
        Some(b'\n') => i += 1,
        _ => return Ok(None),
    }
    let body = FENCES.iter().find(|(known, _)| *known == label).map(|(_, body)| *body);
    let wrapper = match body {
        Some(FenceBody::Calls) => None,
        Some(FenceBody::Python { wrapper }) if config.dialects.has(Builtin::Python) => {
            Some(wrapper)
        }
        Some(FenceBody::Python { .. }) | None => return Ok(None),
    };
    let line = i;
    while i - line < MAX_FENCE_GAP && b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    if i - line >= MAX_FENCE_GAP {
        return Ok(None);
    }
    match (b.get(i), wrapper) {
        (Some(b'{' | b'<'), _) => Ok(Some(Opener::Fence(line))),
        (Some(b'['), None) => Ok(Some(Opener::Fence(line))),
        (Some(&c), Some(wrapper))
            if c.is_ascii_alphabetic() || c == b'_' || c == b'#' || c == b'[' =>
        {
            Ok(Some(Opener::PyFence { len: line, wrapper }))
        }
        (None, _) if !eof => Err(Need),
        _ => Ok(None),
    }
}
