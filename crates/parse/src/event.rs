//! What the parser produces: events while streaming, [`Parsed`] when folded.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, Range};

/// One step of parser output. Streamed events, folded with [`Parsed::push`],
/// give exactly what [`crate::parse`] returns for the same input.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Visible text, in input order.
    Text(Fragment),
    /// Reasoning text (the inside of a `<think>` block), in input order.
    Reasoning(Fragment),
    /// A tool call begins. Its name is final (already matched to the tool list).
    CallStart {
        /// Index of the call among the accepted calls of this output, from 0.
        call_idx: usize,
        /// The id the model wrote for the call, when it wrote one before its arguments.
        id: Option<String>,
        /// The canonical tool name.
        name: String,
    },
    /// A fragment of the call's arguments as canonical JSON text. The fragments
    /// of one call concatenate to exactly [`ToolCall::arguments`], and every
    /// prefix of that concatenation is a prefix of valid JSON.
    ArgsDelta {
        /// The call the fragment belongs to.
        call_idx: usize,
        /// The fragment.
        json: Fragment,
    },
    /// A tool call is complete.
    CallEnd {
        /// The call that ended.
        call_idx: usize,
        /// The finished call (boxed: it is large, and an event goes out per chunk).
        call: Box<ToolCall>,
    },
    /// Tool-call syntax named a tool that is not in the tool list.
    Rejected(Box<Rejected>),
    /// Something was repaired, coerced or could not be used; see [`WarningCode`].
    Warning(Box<Warning>),
}

/// A finished tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The id the model gave the call, if any.
    pub id: Option<String>,
    /// The canonical tool name (as declared in the tool list, when there is one).
    pub name: String,
    /// The arguments: a JSON object in canonical form (compact, keys in the
    /// order the model wrote them, strings re-escaped minimally, numbers exactly
    /// as written).
    pub arguments: String,
    /// Byte range of the input that this call consumed, markers included.
    pub span: Range<usize>,
    /// Whether the model finished the call. `false`: the output ended inside its
    /// arguments, with a [`WarningCode::Truncated`] warning (its open strings and brackets
    /// were closed so `arguments` stays valid JSON); or its arguments broke off into text
    /// that is not JSON, with a [`WarningCode::MalformedCall`] warning, an empty `span`,
    /// and its text given as content after it. Either way it was never a whole call, so
    /// [`Parsed`] keeps it in [`Parsed::incomplete`], never in [`Parsed::calls`].
    pub complete: bool,
}

/// A call to a tool that is not in the tool list. It is never returned as a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rejected {
    /// The name as the model wrote it.
    pub name: String,
    /// Why it was rejected.
    pub reason: String,
    /// Byte range of the input the rejected call covers.
    pub span: Range<usize>,
}

/// A note about the input: a repair, a coercion, or tool syntax that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// What happened.
    pub code: WarningCode,
    /// A human-readable explanation; carries the raw text where something was not used.
    pub message: String,
    /// The accepted call this warning belongs to, if any.
    pub call_idx: Option<usize>,
    /// Byte range of the input the warning is about.
    pub span: Range<usize>,
}

/// The kinds of [`Warning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningCode {
    /// JSON was repaired (quotes, commas, comments, literals, raw control characters).
    RepairedJson,
    /// The output ended inside a call; what was open has been closed.
    Truncated,
    /// A call's end marker was missing or misspelled.
    MissingEndMarker,
    /// A value was converted to the type its schema asks for, at any depth; the message
    /// names where (`days`, `conditions[0].value`) and how many more like it there were.
    Coerced,
    /// A required parameter is missing.
    MissingRequired,
    /// A parameter that the schema does not declare.
    UnknownParameter,
    /// The arguments were not a JSON object and could not be used as one.
    InvalidArguments,
    /// A key of the call envelope that toolshim does not use was ignored.
    IgnoredField,
    /// Tool-call syntax could not be turned into a call; its text stays visible.
    MalformedCall,
    /// A buffer limit forced a decision before the input could settle it.
    LimitReached,
    /// Call syntax was taken as an example, not a call (see [`crate::ExampleGuard`]);
    /// its text stays visible.
    Example,
    /// A call inside reasoning was not used (see [`crate::ReasoningCalls`]).
    CallInReasoning,
    /// A reasoning end marker (`</think>`, `[/THINK]`, `<|END_THINKING|>`…) closed a block
    /// that was never opened; it was removed.
    StrayReasoningEnd,
    /// Text inside a tool-calls section that was no call was dropped; the message
    /// carries it.
    IgnoredText,
    /// Tool-call markup that held no call (an opener the output ended after, an empty
    /// `<tool_call></tool_call>` or tool-calls section) was removed from the text; the
    /// message carries it.
    EmptyCallMarkup,
    /// A call was guessed from plain prose ([`crate::Builtin::FreeText`]).
    FreeText,
}

impl WarningCode {
    /// The stable snake_case identifier used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::RepairedJson => "repaired_json",
            WarningCode::Truncated => "truncated",
            WarningCode::MissingEndMarker => "missing_end_marker",
            WarningCode::Coerced => "coerced",
            WarningCode::MissingRequired => "missing_required",
            WarningCode::UnknownParameter => "unknown_parameter",
            WarningCode::InvalidArguments => "invalid_arguments",
            WarningCode::IgnoredField => "ignored_field",
            WarningCode::MalformedCall => "malformed_call",
            WarningCode::LimitReached => "limit_reached",
            WarningCode::Example => "example",
            WarningCode::CallInReasoning => "call_in_reasoning",
            WarningCode::StrayReasoningEnd => "stray_reasoning_end",
            WarningCode::EmptyCallMarkup => "empty_call_markup",
            WarningCode::IgnoredText => "ignored_text",
            WarningCode::FreeText => "free_text",
        }
    }

    /// Whether this warning shows that the model attempted tool-call syntax.
    pub fn shows_tool_syntax(self) -> bool {
        matches!(self, WarningCode::MalformedCall | WarningCode::EmptyCallMarkup)
    }
}

/// The result of parsing a whole output: [`crate::parse`], or streamed events folded
/// with [`Parsed::push`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Parsed {
    /// Accepted calls, in order: the calls to run.
    pub calls: Vec<ToolCall>,
    /// Accepted calls that the output cut off inside their arguments, or whose arguments
    /// were not JSON (their text is in `content`) ([`ToolCall::complete`] is `false`), in
    /// order. Never run these.
    pub incomplete: Vec<ToolCall>,
    /// Visible text: everything that is not a call, reasoning or hidden rejected call.
    pub content: String,
    /// Reasoning text.
    pub reasoning: String,
    /// Calls to tools not in the tool list.
    pub rejected: Vec<Rejected>,
    /// Repairs, coercions and problems, in input order.
    pub warnings: Vec<Warning>,
    /// Whether the output contained tool-call syntax (an accepted, rejected or malformed call).
    pub saw_tool_syntax: bool,
}

impl Parsed {
    /// Folds one streamed event into the result.
    #[inline]
    pub fn push(&mut self, event: Event) {
        match event {
            Event::Text(text) => self.content.push_str(&text),
            Event::Reasoning(text) => self.reasoning.push_str(&text),
            Event::CallStart { .. } | Event::ArgsDelta { .. } => {}
            Event::CallEnd { call, .. } => self.push_call(*call),
            Event::Rejected(rejected) => self.push_rejected(*rejected),
            Event::Warning(warning) => self.push_warning(*warning),
        }
    }

    /// Folds a finished call (what a `CallEnd` event carries).
    pub(crate) fn push_call(&mut self, call: ToolCall) {
        self.saw_tool_syntax = true;
        match call.complete {
            true => self.calls.push(call),
            false => self.incomplete.push(call),
        }
    }

    /// Folds a rejected call.
    pub(crate) fn push_rejected(&mut self, rejected: Rejected) {
        self.saw_tool_syntax = true;
        self.rejected.push(rejected);
    }

    /// Folds a warning.
    pub(crate) fn push_warning(&mut self, warning: Warning) {
        self.saw_tool_syntax |= warning.code.shows_tool_syntax();
        self.warnings.push(warning);
    }

    /// Folds a sequence of events (the same as collecting them).
    pub fn from_events(events: impl IntoIterator<Item = Event>) -> Parsed {
        events.into_iter().collect()
    }
}

/// Folds events: `events.into_iter().collect::<Parsed>()` is [`Parsed::from_events`].
impl FromIterator<Event> for Parsed {
    fn from_iter<I: IntoIterator<Item = Event>>(events: I) -> Parsed {
        let mut parsed = Parsed::default();
        parsed.extend(events);
        parsed
    }
}

/// Folds more events into the result, as [`Parsed::push`] does one by one.
impl Extend<Event> for Parsed {
    fn extend<I: IntoIterator<Item = Event>>(&mut self, events: I) {
        for event in events {
            self.push(event);
        }
    }
}

/// A piece of streamed text: visible text, reasoning, or a fragment of a call's
/// arguments. It reads as a `&str` (it derefs to one). Short pieces, as long as most
/// model tokens, are kept inline, so streaming token by token allocates nothing per event.
///
/// ```
/// use toolshim_parse::Fragment;
///
/// let fragment = Fragment::from("Par");
/// assert_eq!(fragment, "Par");
/// assert_eq!(fragment.len(), 3);
/// let owned: String = fragment.into();
/// assert_eq!(owned, "Par");
/// ```
#[derive(Clone)]
pub struct Fragment(Repr);

/// The most bytes a [`Fragment`] keeps inline.
const INLINE: usize = 22;

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]` is the text, whole UTF-8 characters.
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Heap(String),
}

impl Fragment {
    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => bytes
                .get(..usize::from(*len))
                .and_then(|text| std::str::from_utf8(text).ok())
                .unwrap_or_default(),
            Repr::Heap(text) => text,
        }
    }

    /// The text as a `String`.
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Heap(text) => text,
            Repr::Inline { .. } => self.as_str().to_owned(),
        }
    }

    /// Appends `text`.
    pub(crate) fn push_str(&mut self, text: &str) {
        match &mut self.0 {
            Repr::Heap(owned) => owned.push_str(text),
            Repr::Inline { len, bytes } => {
                let at = usize::from(*len);
                let end = at + text.len();
                match (bytes.get_mut(at..end), u8::try_from(end)) {
                    (Some(slot), Ok(new_len)) => {
                        slot.copy_from_slice(text.as_bytes());
                        *len = new_len;
                    }
                    _ => {
                        let mut owned = String::with_capacity(end.max(2 * INLINE));
                        owned.push_str(self.as_str());
                        owned.push_str(text);
                        self.0 = Repr::Heap(owned);
                    }
                }
            }
        }
    }
}

impl Default for Fragment {
    fn default() -> Fragment {
        Fragment(Repr::Inline { len: 0, bytes: [0; INLINE] })
    }
}

impl From<&str> for Fragment {
    #[inline]
    fn from(text: &str) -> Fragment {
        match (inline_bytes(text.as_bytes()), u8::try_from(text.len())) {
            (Some(bytes), Ok(len)) => Fragment(Repr::Inline { len, bytes }),
            _ => Fragment(Repr::Heap(text.to_owned())),
        }
    }
}

/// `text` in a zero-padded array, when it fits, copied in whole words (short copies byte
/// by byte cost more than the rest of building a fragment).
#[inline]
fn inline_bytes(text: &[u8]) -> Option<[u8; INLINE]> {
    fn word(bytes: &[u8], at: usize) -> u64 {
        let mut word = [0u8; 8];
        if let Some(src) = bytes.get(at..at + 8) {
            word.copy_from_slice(src);
        }
        u64::from_le_bytes(word)
    }
    fn half(bytes: &[u8], at: usize) -> u64 {
        let mut half = [0u8; 4];
        if let Some(src) = bytes.get(at..at + 4) {
            half.copy_from_slice(src);
        }
        u64::from(u32::from_le_bytes(half))
    }
    let len = text.len();
    let mut out = [0u8; INLINE];
    let (low, high): (u64, u64) = match len {
        0 => (0, 0),
        1..4 => {
            let mut low = 0;
            for (i, &b) in text.iter().enumerate() {
                low |= u64::from(b) << (8 * i);
            }
            (low, 0)
        }
        4..=8 => (half(text, 0) | (half(text, len - 4) << (8 * (len - 4))), 0),
        9..=16 => {
            // The last eight bytes end at `len`: shifted down, they are bytes 8..len.
            (word(text, 0), word(text, len - 8) >> (8 * (16 - len)))
        }
        17..=INLINE => {
            out.get_mut(16..len)?.copy_from_slice(text.get(16..)?);
            (word(text, 0), word(text, 8))
        }
        _ => return None,
    };
    out.get_mut(..8)?.copy_from_slice(&low.to_le_bytes());
    if len > 8 {
        out.get_mut(8..16)?.copy_from_slice(&high.to_le_bytes());
    }
    Some(out)
}

impl From<String> for Fragment {
    fn from(text: String) -> Fragment {
        if text.len() <= INLINE {
            return Fragment::from(text.as_str());
        }
        Fragment(Repr::Heap(text))
    }
}

impl From<Fragment> for String {
    fn from(fragment: Fragment) -> String {
        fragment.into_string()
    }
}

impl Deref for Fragment {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Fragment {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Fragment {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Fragment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Fragment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Fragment {
    fn eq(&self, other: &Fragment) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Fragment {}

impl Hash for Fragment {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Fragment {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Fragment {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Fragment {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event goes out per chunk: large payloads are boxed, so moving one stays cheap
    /// (it was 104 bytes with `CallEnd` carrying its `ToolCall` inline).
    #[test]
    fn an_event_is_at_most_64_bytes() {
        assert!(size_of::<Event>() <= 64, "{} bytes", size_of::<Event>());
    }

    #[test]
    fn fragments_keep_their_text_at_every_length() {
        let text = "0123456789abcdefghijklmnopqrstuvwxyz東京😀";
        for end in (0..=text.len()).filter(|&end| text.is_char_boundary(end)) {
            let piece = &text[..end];
            let fragment = Fragment::from(piece);
            assert_eq!(fragment.as_str(), piece);
            assert_eq!(Fragment::from(piece.to_owned()), piece);
            let mut grown = Fragment::from("ab");
            grown.push_str(piece);
            assert_eq!(grown, format!("ab{piece}"));
        }
    }
}
