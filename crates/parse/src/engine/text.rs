//! The text scan: what plain text at the cursor starts.

use crate::engine::out::Out;
use crate::format::envelope::{Envelope, Origin};
use crate::format::line::{LineOpen, line_open};
use crate::format::markup::{self, Markup, Opener};
use crate::format::python::Mode as PyMode;
use crate::{Config, ReasoningCalls, WarningCode};

pub(super) const THINK_CLOSE: &str = "</think>";

/// Reasoning markers of each model family: `<think>` (DeepSeek R1, Qwen3, …),
/// `[THINK]` (Magistral), `<|START_THINKING|>` (Cohere), `<seed:think>` (Seed-OSS),
/// `<mm:think>` (MiniMax-M3), `<|inner_prefix|>` (Apertus), the analysis channel (gpt-oss).
pub(super) const REASONING: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("[THINK]", "[/THINK]"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    ("<seed:think>", "</seed:think>"),
    ("<mm:think>", "</mm:think>"),
    ("<|inner_prefix|>", "<|inner_suffix|>"),
    ("<|channel|>analysis<|message|>", "<|end|>"),
    ("<|channel>thought", "<channel|>"),
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>"),
    ("<ifm|think>", "</ifm|think>"),
    ("<ifm|think_fast>", "</ifm|think_fast>"),
    ("<ifm|think_faster>", "</ifm|think_faster>"),
    ("<|start|>assistant to=self<|message|>", "<|eom|>"),
];

/// Muse's reasoning when the prompt ended in `<|start|>assistant`: the output starts
/// with the recipient.
const MUSE_THINK: u8 = 12;

/// Channel markers around visible text: like reasoning markers, they are removed from
/// it. Kimi K3's response channel, Harmony's final channel, Muse's message headers.
const CHANNEL_MARKERS: &[&str] = &[
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|close|>message<|sep|>",
    "<|start|>assistant<|channel|>final<|message|>",
    "<|channel|>final<|message|>",
    "<|return|>",
    "<|end|>",
    "<|start|>assistant to=user<|message|>",
    "<|start|>assistant<|message|>",
    "<|eot|>",
    "<|eom|>",
    ">>>all\n",
];

/// Headers that may start the output when the prompt ended in the role header
/// (`<|start|>assistant`): Muse's recipients. `Some` opens that reasoning.
const START_MARKERS: &[(&str, Option<u8>)] = &[
    (" to=self<|message|>", Some(MUSE_THINK)),
    ("to=self<|message|>", Some(MUSE_THINK)),
    (" to=user<|message|>", None),
    ("to=user<|message|>", None),
];

/// Functionary v3.2 starts its output with the recipient, the prompt having ended in
/// `>>>`: `NAME\n{json}` where NAME is a declared tool. `Ok`: the name's length.
fn functionary_start(rest: &str, eof: bool, config: &Config) -> Option<Result<usize, ()>> {
    let tools = config.tools.as_deref()?;
    if !config.dialects.entries().iter().any(|e| e.id() == "functionary_v3_2") {
        return None;
    }
    let b = rest.as_bytes();
    let n = b
        .iter()
        .take(65)
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.')
        .count();
    if n > 64 || (n == 0 && !b.is_empty()) {
        return None;
    }
    match (b.get(n), b.get(n + 1)) {
        (Some(b'\n'), Some(b'{')) => {
            let name = rest.get(..n).unwrap_or_default();
            tools.tools().iter().any(|t| t.name() == name).then_some(Ok(n))
        }
        (None, _) | (Some(b'\n'), None) if !eof => Some(Err(())),
        _ => None,
    }
}

/// A marker of `markers` at the start of `rest`: its length, or `Err` while `rest` may
/// still become one.
fn marker_at<'m>(
    rest: &str,
    eof: bool,
    markers: impl Iterator<Item = &'m str>,
) -> Option<Result<(usize, &'m str), ()>> {
    let mut hold = false;
    for marker in markers {
        if rest.starts_with(marker) {
            return Some(Ok((marker.len(), marker)));
        }
        hold |= !eof && rest.len() < marker.len() && marker.starts_with(rest);
    }
    hold.then_some(Err(()))
}

/// Reasoning opened by the prompt: any family's end marker closes it.
pub(super) const ANY_THINK: u8 = u8::MAX;

/// What reasoning markers make of `rest`: an end marker that closes `think`, or (outside
/// reasoning) a start marker, or a possible one still incomplete.
enum ThinkMark {
    Open(u8, usize),
    Close(usize),
    Hold,
    None,
}

fn think_mark(rest: &str, think: Option<u8>, eof: bool) -> ThinkMark {
    let mut hold = false;
    for (idx, (open, close)) in REASONING.iter().enumerate() {
        let idx = u8::try_from(idx).unwrap_or(0);
        let marker = match think {
            Some(k) if k == idx || k == ANY_THINK => close,
            Some(_) => continue,
            None => open,
        };
        if rest.starts_with(marker) {
            return match think {
                Some(_) => ThinkMark::Close(marker.len()),
                None => ThinkMark::Open(idx, marker.len()),
            };
        }
        hold |= !eof && rest.len() < marker.len() && marker.starts_with(rest);
    }
    if hold { ThinkMark::Hold } else { ThinkMark::None }
}

/// The engine's cursor over plain text.
pub(super) struct TextStep<'a> {
    pub(super) buf: &'a str,
    pub(super) base: usize,
    pub(super) pos: &'a mut usize,
    pub(super) settled: &'a mut usize,
    pub(super) triggers: &'a [bool; 256],
    pub(super) heads: &'a [[u8; 2]],
    pub(super) eof: bool,
}

/// What plain text at the cursor starts.
enum Found {
    Region {
        at: usize,
        opener: Opener,
        line: bool,
    },
    /// Plain text up to here; look again from there.
    Text(usize),
    /// Hold from here.
    Hold(usize),
    Think {
        at: usize,
        len: usize,
        idx: u8,
    },
    ThinkEnd {
        at: usize,
        len: usize,
    },
    /// A channel marker: removed from the text.
    Channel {
        at: usize,
        len: usize,
    },
}

impl TextStep<'_> {
    /// One step in plain text. Returns whether it made progress.
    pub(super) fn step(
        &mut self,
        state: &mut State,
        spare: &mut Option<Box<Region>>,
        out: &mut Out<'_>,
    ) -> bool {
        let think = match state {
            State::Text { think } => *think,
            State::Region(_) => None,
        };
        let found = self.find(think, out);
        match found {
            Found::Text(upto) => {
                *self.pos = upto;
                emit_text(self.buf, self.settled, upto, out);
                upto < self.buf.len()
            }
            Found::Hold(at) => {
                *self.pos = at;
                emit_text(self.buf, self.settled, at, out);
                false
            }
            Found::Think { at, len, idx } => {
                emit_text(self.buf, self.settled, at, out);
                *self.pos = at + len;
                *self.settled = *self.pos;
                *state = State::Text { think: Some(idx) };
                true
            }
            Found::Channel { at, len } => {
                emit_text(self.buf, self.settled, at, out);
                *self.pos = at + len;
                *self.settled = *self.pos;
                true
            }
            Found::ThinkEnd { at, len } => {
                emit_text(self.buf, self.settled, at, out);
                if think.is_none() {
                    out.warn(
                        WarningCode::StrayReasoningEnd,
                        "a `</think>` closed a reasoning block that was never opened; it was removed (set `reasoning_open` when the prompt opens the block)".into(),
                        None,
                        self.base + at..self.base + at + len,
                    );
                }
                *self.pos = at + len;
                *self.settled = *self.pos;
                *state = State::Text { think: None };
                true
            }
            Found::Region { at, opener, line } => {
                emit_text(self.buf, self.settled, at, out);
                let abs = self.base + at;
                let mute = mute_for(&opener, line, think.is_some(), out);
                let mut region = match spare.take() {
                    Some(mut region) => {
                        region.recycle(abs, out.config.max_depth);
                        region
                    }
                    None => Box::new(Region {
                        env: Envelope::new(Origin::Marked, abs, out.config.max_depth),
                        markup: Markup::default(),
                        json: None,
                        spare_reader: None,
                        python: None,
                        tagged: false,
                        labelled: false,
                        opener_end: abs,
                        think: None,
                        stop: None,
                        mute: None,
                        scratch: Vec::new(),
                    }),
                };
                region.think = think;
                region.stop = think.map(|k| {
                    REASONING.get(usize::from(k)).map_or(THINK_CLOSE, |(_, close)| *close)
                });
                region.labelled = matches!(opener, Opener::Labelled { .. });
                region.mute = mute.map(|why| Mute { why, seen: Vec::new(), start: abs });
                let rest = self.buf.get(at..).unwrap_or_default();
                let n = if region.mute.is_some() {
                    let (buf, base) = (self.buf, self.base);
                    region.muted(out, |region, muted| {
                        region.begin(opener, rest, abs, buf, base, muted)
                    })
                } else {
                    region.begin(opener, rest, abs, self.buf, self.base, out)
                };
                region.opener_end = abs + n;
                *self.pos = at + n;
                if region.mute.is_some() {
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
    fn find(&self, think: Option<u8>, out: &Out<'_>) -> Found {
        let buf = self.buf;
        let bytes = buf.as_bytes();
        let eof = self.eof;
        let config = out.config;
        let mut i = *self.pos;
        if self.base + i == 0 && think.is_none() {
            let rest = buf.get(i..).unwrap_or_default();
            match marker_at(rest, eof, START_MARKERS.iter().map(|(m, _)| *m)) {
                Some(Ok((len, marker))) => {
                    let think = START_MARKERS.iter().find(|(m, _)| *m == marker).and_then(|m| m.1);
                    return match think {
                        Some(idx) => Found::Think { at: i, len, idx },
                        None => Found::Channel { at: i, len },
                    };
                }
                Some(Err(())) => return Found::Hold(i),
                None => {}
            }
            match functionary_start(rest, eof, config) {
                Some(Ok(name)) => {
                    let opener = Opener::Labelled { name: 0..name, len: name + 1 };
                    return Found::Region { at: i, opener, line: true };
                }
                Some(Err(())) => return Found::Hold(i),
                None => {}
            }
        }
        // The start of the input is the start of a line.
        if self.base + i == 0 && self.is_trigger(b'\n') {
            if let Some(found) = self.line_start(0, think, config) {
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
                match self.line_start(i + 1, think, config) {
                    Some(Found::Hold(_)) => return Found::Hold(i),
                    Some(found) => return found,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            }
            if b == b'<' || b == b'[' || b == b'>' {
                match think_mark(rest, think, eof) {
                    ThinkMark::Open(idx, len) => return Found::Think { at: i, len, idx },
                    ThinkMark::Close(len) => return Found::ThinkEnd { at: i, len },
                    ThinkMark::Hold => return Found::Hold(i),
                    ThinkMark::None => {}
                }
                if think.is_none() && (b == b'<' || b == b'>') {
                    match marker_at(rest, eof, CHANNEL_MARKERS.iter().copied()) {
                        Some(Ok((len, _))) => return Found::Channel { at: i, len },
                        Some(Err(())) => return Found::Hold(i),
                        None => {}
                    }
                    // A `</think>` with no reasoning open (removed, with a warning).
                    if rest.starts_with(THINK_CLOSE) {
                        return Found::ThinkEnd { at: i, len: THINK_CLOSE.len() };
                    }
                    if !eof && rest.len() < THINK_CLOSE.len() && THINK_CLOSE.starts_with(rest) {
                        return Found::Hold(i);
                    }
                }
            }
            match markup::open(rest, eof, config, self.heads) {
                markup::Open::No => {
                    i += 1;
                    // Emit up to here now: the text before a held marker goes out early.
                    return Found::Text(i);
                }
                markup::Open::NeedMore => return Found::Hold(i),
                markup::Open::Region(opener) => {
                    return Found::Region { at: i, opener, line: false };
                }
            }
        }
    }

    /// Checks the line that starts at `at`. `None`: nothing there.
    fn line_start(&self, at: usize, think: Option<u8>, config: &Config) -> Option<Found> {
        let _ = think;
        let rest = self.buf.get(at..).unwrap_or_default();
        let (indent, open) = line_open(rest, self.eof, config);
        let at = at + indent;
        match open {
            LineOpen::No => None,
            LineOpen::NeedMore => Some(Found::Hold(at - indent)),
            LineOpen::Python => {
                Some(Found::Region { at, opener: Opener::Python(PyMode::Line), line: true })
            }
            LineOpen::Labelled { name, len } => {
                Some(Found::Region { at, opener: Opener::Labelled { name, len }, line: true })
            }
        }
    }
}

/// Whether a region that starts here is to be muted, and why.
fn mute_for(opener: &Opener, line: bool, think: bool, out: &Out<'_>) -> Option<MuteWhy> {
    let config = out.config;
    if think {
        return (config.reasoning_calls == ReasoningCalls::Ignore).then_some(MuteWhy::Reasoning);
    }
    let guard = &config.example_guard;
    if !guard.enabled {
        return None;
    }
    if out.tail.in_quoted_code() {
        return Some(MuteWhy::InlineCode);
    }
    let guarded = match opener {
        Opener::Json | Opener::Fence(_) | Opener::PyFence { .. } => true,
        Opener::Python(_) => true,
        Opener::Tag | Opener::Labelled { .. } | Opener::Marker(_) => false,
    };
    let _ = line;
    if !guarded {
        return None;
    }
    let intro = out.tail.intro();
    guard.introduces(intro).then(|| MuteWhy::Example(intro.to_owned()))
}

use super::region::{Mute, MuteWhy, Region};
use super::{State, emit_text};
