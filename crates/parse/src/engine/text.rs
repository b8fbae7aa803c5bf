//! The text scan: what plain text at the cursor starts. Plain text goes out as soon as
//! it can no longer be the start of something; reasoning and channel markers are taken
//! out of it; a trigger byte may open a region.

use crate::dialect::Entry;
use crate::engine::out::Out;
use crate::engine::region::{MuteWhy, Region};
use crate::engine::step::{Look, Need};
use crate::engine::{MAX_ADJACENT_WS, State, call_lead, emit_text, is_ws, ws_before};
use crate::read::line::{LineOpen, line_open};
use crate::read::open::Openers;
use crate::read::python::Mode as PyMode;
use crate::read::{self, Opener};
use crate::rows::native::Leading;
use crate::rows::reasoning::{
    CHANNELS, MARKER_HEADS, MARKER_PAIRS, PREAMBLES, Preamble, REASONING, Reasoning, THINK,
    answer_openers, channel_markers, head3, marker_row,
};
use crate::{Config, ReasoningCalls, WarningCode};

/// The reasoning the text is in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Think {
    /// A block opened by this family's marker: its end marker closes it.
    Block(&'static Reasoning),
    /// Opened by the prompt ([`Config::reasoning_open`]): any family's end marker closes it.
    Prompt,
}

impl Think {
    /// The end marker a region inside this reasoning stops at.
    pub(crate) fn close(self) -> &'static str {
        match self {
            Think::Block(reasoning) => reasoning.close,
            Think::Prompt => THINK.close,
        }
    }
}

/// What whitespace at the text cursor belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lead {
    /// The text: whitespace is text like any other byte.
    Text,
    /// A reasoning or channel marker that ended at this absolute offset: the whitespace
    /// after it (up to [`MAX_ADJACENT_WS`] bytes) goes with it, out of the text.
    Marker(usize),
}

/// A call that opens the output without its format's start marker, the prompt having
/// ended in it (`Leading`, Functionary v3.2's `NAME\n{json}`): the name's length and the
/// length of the head (name and end marker).
fn leading_call(rest: &str, eof: bool, config: &Config) -> Look<(usize, usize)> {
    let Some(tools) = config.tools.as_deref() else { return Ok(None) };
    let leading = config.dialects.entries().iter().find_map(|entry| match entry {
        Entry::Native(pair) => pair.leading.as_ref(),
        _ => None,
    });
    let Some(Leading { end }) = leading else { return Ok(None) };
    let end: &str = end;
    let b = rest.as_bytes();
    let n = b
        .iter()
        .take(MAX_LEADING_NAME + 1)
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.')
        .count();
    if n > MAX_LEADING_NAME || (n == 0 && !b.is_empty()) {
        return Ok(None);
    }
    let after = rest.get(n..).unwrap_or_default();
    if !after.starts_with(end) {
        return if !eof && end.starts_with(after) { Err(Need) } else { Ok(None) };
    }
    match after.as_bytes().get(end.len()) {
        Some(b'{') => {
            let name = rest.get(..n).unwrap_or_default();
            Ok(tools.tools().iter().any(|t| t.name() == name).then_some((n, n + end.len())))
        }
        None if !eof => Err(Need),
        _ => Ok(None),
    }
}

/// The longest name of a leading call.
const MAX_LEADING_NAME: usize = 64;

/// The first of `markers` at the start of `rest`: its index and length.
fn marker_at<'m>(
    rest: &str,
    eof: bool,
    markers: impl Iterator<Item = &'m str>,
) -> Look<(usize, usize)> {
    let mut hold = false;
    let second = rest.as_bytes().get(1);
    for (idx, marker) in markers.enumerate() {
        // Most markers differ from the text in their second byte: compare it first.
        if second.is_some_and(|b| marker.as_bytes().get(1) != Some(b)) {
            continue;
        }
        if rest.starts_with(marker) {
            return Ok(Some((idx, marker.len())));
        }
        hold |= !eof && rest.len() < marker.len() && marker.starts_with(rest);
    }
    if hold { Err(Need) } else { Ok(None) }
}

/// What reasoning markers make of `rest`.
enum ThinkMark {
    /// A family's start marker (outside reasoning), this long.
    Open(&'static Reasoning, usize),
    /// The end marker of the reasoning the text is in, this long.
    Close(usize),
}

fn think_mark(rest: &str, think: Option<Think>, eof: bool) -> Look<ThinkMark> {
    let mut hold = false;
    let second = rest.as_bytes().get(1);
    if think.is_some() {
        match marker_at(rest, eof, answer_openers()) {
            Ok(Some((_, len))) => return Ok(Some(ThinkMark::Close(len))),
            Err(Need) => hold = true,
            Ok(None) => {}
        }
    }
    for reasoning in REASONING {
        let marker = match think {
            Some(Think::Block(open)) if std::ptr::eq(open, reasoning) => reasoning.close,
            Some(Think::Prompt) => reasoning.close,
            Some(Think::Block(_)) => continue,
            None => reasoning.open,
        };
        // Most markers differ from the text in their second byte: compare it first.
        if second.is_some_and(|b| marker.as_bytes().get(1) != Some(b)) {
            continue;
        }
        if rest.starts_with(marker) {
            return Ok(Some(match think {
                Some(_) => ThinkMark::Close(marker.len()),
                None => ThinkMark::Open(reasoning, marker.len()),
            }));
        }
        hold |= !eof && rest.len() < marker.len() && marker.starts_with(rest);
    }
    if hold { Err(Need) } else { Ok(None) }
}

/// Whether `rest` (at `<`, `[` or `>`) may start a reasoning or channel marker, or the
/// stray `</think>`: its first two bytes say (text too short to say may).
fn may_be_marker(rest: &str) -> bool {
    let bytes = rest.as_bytes();
    let (Some(&first), Some(&second)) = (bytes.first(), bytes.get(1)) else { return true };
    let Some(row) = marker_row(first) else { return false };
    let pair = MARKER_PAIRS.get(row).and_then(|row| row.get(usize::from(second))).copied();
    if !pair.unwrap_or(true) {
        return false;
    }
    match head3(bytes) {
        Some(head) => MARKER_HEADS.binary_search(&head).is_ok(),
        None => true,
    }
}

/// The engine's cursor over plain text.
pub(super) struct TextStep<'a> {
    pub(super) buf: &'a str,
    pub(super) base: usize,
    pub(super) pos: &'a mut usize,
    pub(super) settled: &'a mut usize,
    pub(super) triggers: &'a [bool; 256],
    pub(super) openers: &'a Openers,
    pub(super) eof: bool,
}

/// What plain text at the cursor starts.
enum Found<'s> {
    Region {
        at: usize,
        opener: Opener<'s>,
    },
    /// Plain text up to here; look again from there.
    Text(usize),
    /// Hold from here.
    Hold(usize),
    Think {
        at: usize,
        len: usize,
        think: Think,
    },
    ThinkEnd {
        at: usize,
        len: usize,
    },
    /// A channel marker: removed from the text. `answer`: it opens a final answer.
    Channel {
        at: usize,
        len: usize,
        answer: bool,
    },
}

impl<'a> TextStep<'a> {
    /// One step in plain text. Returns whether it made progress.
    pub(super) fn step(
        &mut self,
        state: &mut State,
        spare: &mut Option<Box<Region>>,
        out: &mut Out<'_>,
    ) -> bool {
        let (think, lead) = match state {
            State::Text { think, lead } => (*think, *lead),
            State::Region(_) => (None, Lead::Text),
        };
        if let Lead::Marker(from) = lead {
            // Whitespace after a marker goes with it.
            let bytes = self.buf.as_bytes();
            let mut i = *self.pos;
            while bytes.get(i).copied().is_some_and(is_ws) && self.base + i - from < MAX_ADJACENT_WS
            {
                i += 1;
            }
            *self.pos = i;
            *self.settled = i;
            if i == self.buf.len() && !self.eof && self.base + i - from < MAX_ADJACENT_WS {
                return false;
            }
            *state = State::Text { think, lead: Lead::Text };
            return true;
        }
        let found = self.find(think, out);
        let marker_end = |at: usize, len: usize| Lead::Marker(self.base + at + len);
        match found {
            Found::Text(upto) => {
                *self.pos = upto;
                // Whitespace at the end may still turn out to lead up to a call or a
                // marker: it waits for the next byte.
                let emit = match upto == self.buf.len() && !self.eof {
                    true => ws_before(self.buf, *self.settled, upto),
                    false => upto,
                };
                emit_text(self.buf, self.settled, emit, out);
                upto < self.buf.len()
            }
            Found::Hold(at) => {
                *self.pos = at;
                emit_text(self.buf, self.settled, ws_before(self.buf, *self.settled, at), out);
                false
            }
            Found::Think { at, len, think } => {
                emit_text(self.buf, self.settled, ws_before(self.buf, *self.settled, at), out);
                *self.pos = at + len;
                *self.settled = *self.pos;
                *state = State::Text { think: Some(think), lead: marker_end(at, len) };
                true
            }
            Found::Channel { at, len, answer } => {
                out.tail_mut().set_final_answer(answer);
                emit_text(self.buf, self.settled, ws_before(self.buf, *self.settled, at), out);
                *self.pos = at + len;
                *self.settled = *self.pos;
                *state = State::Text { think, lead: marker_end(at, len) };
                true
            }
            Found::ThinkEnd { at, len } => {
                emit_text(self.buf, self.settled, ws_before(self.buf, *self.settled, at), out);
                if think.is_none() {
                    out.warn(
                        WarningCode::StrayReasoningEnd,
                        format!(
                            "`{}` closed a reasoning block that was never opened; it was removed \
                             (set `reasoning_open` when the prompt opens the block)",
                            self.buf.get(at..at + len).unwrap_or_default()
                        ),
                        None,
                        self.base + at..self.base + at + len,
                    );
                }
                *self.pos = at + len;
                *self.settled = *self.pos;
                *state = State::Text { think: None, lead: marker_end(at, len) };
                true
            }
            Found::Region { at, opener } => {
                // A line break that leads up to the region is the region's: the span
                // of a call there, or text again if it holds none.
                let start = call_lead(self.buf, *self.settled, at);
                emit_text(self.buf, self.settled, start, out);
                let abs = self.base + at;
                let mute = mute_for(&opener, think.is_some(), out);
                let max_depth = out.config().max_depth;
                let mut region =
                    Region::new(spare.take(), self.base + start, max_depth, think, mute);
                let rest = self.buf.get(at..).unwrap_or_default();
                let n = region.begin(opener, rest, abs, self.buf, self.base, out);
                *self.pos = at + n;
                if region.is_muted() {
                    emit_text(self.buf, self.settled, *self.pos, out);
                }
                *state = State::Region(region);
                true
            }
        }
    }

    fn is_trigger(&self, b: u8) -> bool {
        self.triggers.get(usize::from(b)).copied().unwrap_or(false)
    }

    /// Scans from the cursor to the next thing that is not plain text.
    fn find(&self, think: Option<Think>, out: &Out<'_>) -> Found<'a> {
        let buf = self.buf;
        let bytes = buf.as_bytes();
        let eof = self.eof;
        let config = out.config();
        let mut i = *self.pos;
        if self.base + i == 0 && think.is_none() {
            let rest = buf.get(i..).unwrap_or_default();
            let preambles = PREAMBLES.iter().map(|(marker, _)| *marker);
            match marker_at(rest, eof, preambles) {
                Ok(Some((idx, len))) => {
                    return match PREAMBLES.get(idx).map(|(_, preamble)| preamble) {
                        Some(Preamble::Reasoning(reasoning)) => {
                            Found::Think { at: i, len, think: Think::Block(reasoning) }
                        }
                        Some(Preamble::Channel) | None => {
                            Found::Channel { at: i, len, answer: false }
                        }
                    };
                }
                Err(Need) => return Found::Hold(i),
                Ok(None) => {}
            }
            let at_start =
                config.dialects.entries().iter().enumerate().filter_map(|(idx, entry)| {
                    entry.start_only_marker().map(|marker| (idx, marker))
                });
            match marker_at(rest, eof, at_start.clone().map(|(_, marker)| marker)) {
                Ok(Some((k, _))) => {
                    if let Some((idx, _)) = at_start.clone().nth(k) {
                        return Found::Region { at: i, opener: Opener::Marker(idx) };
                    }
                }
                Err(Need) => return Found::Hold(i),
                Ok(None) => {}
            }
            match leading_call(rest, eof, config) {
                Ok(Some((name, len))) => {
                    let opener = Opener::Labelled { name: 0..name, len };
                    return Found::Region { at: i, opener };
                }
                Err(Need) => return Found::Hold(i),
                Ok(None) => {}
            }
        }
        // The start of the input is the start of a line.
        if self.base + i == 0 && self.is_trigger(b'\n') {
            if let Some(found) = self.line_start(0, config) {
                return found;
            }
        }
        loop {
            while bytes.get(i).is_some_and(|&b| !self.is_trigger(b)) {
                i += 1;
            }
            let Some(&b) = bytes.get(i) else { return Found::Text(i) };
            let rest = buf.get(i..).unwrap_or_default();
            if b == b'\n' {
                match self.line_start(i + 1, config) {
                    Some(Found::Hold(_)) => return Found::Hold(i),
                    Some(found) => return found,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            }
            if (b == b'<' || b == b'[' || b == b'>') && may_be_marker(rest) {
                match think_mark(rest, think, eof) {
                    Ok(Some(ThinkMark::Open(reasoning, len))) => {
                        return Found::Think { at: i, len, think: Think::Block(reasoning) };
                    }
                    Ok(Some(ThinkMark::Close(len))) => return Found::ThinkEnd { at: i, len },
                    Err(Need) => return Found::Hold(i),
                    Ok(None) => {}
                }
                if think.is_none() {
                    match marker_at(rest, eof, channel_markers()) {
                        Ok(Some((idx, len))) => {
                            let answer = CHANNELS.get(idx).is_some_and(|c| c.is_final);
                            return Found::Channel { at: i, len, answer };
                        }
                        Err(Need) => return Found::Hold(i),
                        Ok(None) => {}
                    }
                    // A reasoning end marker with no reasoning open (`</think>`, Cohere's
                    // `<|END_THINKING|>`): removed, with a warning.
                    match marker_at(rest, eof, REASONING.iter().map(|r| r.close)) {
                        Ok(Some((_, len))) => return Found::ThinkEnd { at: i, len },
                        Err(Need) => return Found::Hold(i),
                        Ok(None) => {}
                    }
                }
            }
            match read::open(rest, eof, config, self.openers) {
                Ok(None) => {
                    // Past the whole character: a marker may begin outside ASCII.
                    i += rest.chars().next().map_or(1, char::len_utf8);
                    // Emit up to here now: the text before a held marker goes out early.
                    return Found::Text(i);
                }
                Err(Need) => return Found::Hold(i),
                Ok(Some(opener)) => return Found::Region { at: i, opener },
            }
        }
    }

    /// Checks the line that starts at `at`. `None`: nothing there.
    fn line_start(&self, at: usize, config: &Config) -> Option<Found<'a>> {
        let rest = self.buf.get(at..).unwrap_or_default();
        let (indent, open) = line_open(rest, self.eof, config);
        let at = at + indent;
        match open {
            Ok(None) => None,
            Err(Need) => Some(Found::Hold(at - indent)),
            Ok(Some(LineOpen::Python)) => {
                Some(Found::Region { at, opener: Opener::Python(PyMode::Line) })
            }
            Ok(Some(LineOpen::Labelled { name, len })) => {
                Some(Found::Region { at, opener: Opener::Labelled { name, len } })
            }
        }
    }
}

/// Whether a region that starts here is to be muted, and why.
fn mute_for(opener: &Opener<'_>, think: bool, out: &Out<'_>) -> Option<MuteWhy> {
    let config = out.config();
    if think {
        return (config.reasoning_calls == ReasoningCalls::Ignore).then_some(MuteWhy::Reasoning);
    }
    if opener.is_guarded() && out.tail().in_final_answer() {
        return Some(MuteWhy::FinalAnswer);
    }
    let guard = &config.example_guard;
    if !guard.enabled {
        return None;
    }
    if out.tail().in_quoted_code() {
        return Some(MuteWhy::InlineCode);
    }
    if !opener.is_guarded() {
        return None;
    }
    let intro = out.tail().intro();
    guard.introduces(intro).then(|| MuteWhy::Example(intro.to_owned()))
}
