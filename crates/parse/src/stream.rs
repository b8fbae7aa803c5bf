//! The one engine: [`StreamParser`].
//!
//! The parser keeps the unsettled input in `buf` and walks it with a cursor. Text
//! goes out as soon as it can no longer start a marker; a possible marker (`<tool_c`
//! at the end of a chunk, say) is held until the next bytes decide. Call syntax is
//! read by resumable machines (the JSON reader, the tag reader), so every byte is
//! looked at a bounded number of times and the total work is linear in the input.

use std::ops::Range;

use crate::format::call::{Out, Tail};
use crate::format::envelope::{Decision, Envelope, Origin};
use crate::format::free_text;
use crate::format::line::{LineOpen, line_open};
use crate::format::markup::{self, Markup, Opener};
use crate::format::python::{Mode as PyMode, PyGroup};
use crate::json::reader::Reader;
use crate::{Builtin, Config, Event, ReasoningCalls, WarningCode};

/// Incremental parser for one model output: [`feed`](StreamParser::feed) chunks,
/// then [`finish`](StreamParser::finish).
///
/// For every chunking of an input, the events fold (with [`crate::Parsed::push`])
/// to exactly what [`crate::parse`] returns.
#[derive(Debug)]
pub struct StreamParser {
    config: Config,
    /// Unsettled input. `buf[0]` is at absolute offset `base`.
    /// Invariant: `settled <= pos <= buf.len()`; `buf[..settled]` has been emitted
    /// or consumed; `buf[settled..pos]` is held back.
    buf: String,
    base: usize,
    pos: usize,
    settled: usize,
    state: State,
    n_calls: usize,
    /// The last region, kept so the next one reuses its allocations.
    spare: Option<Box<Region>>,
    /// The end of the visible text, for the example guard.
    tail: Tail,
    /// Bytes that may start call syntax in plain text.
    triggers: Box<[bool; 256]>,
    /// The first two bytes of every marker dialect's start marker (0: the marker is one
    /// byte), so most trigger bytes skip the marker dialects at once.
    heads: Vec<[u8; 2]>,
    /// A call (accepted or rejected) has gone out: free-text calls are off.
    structured: bool,
}

#[derive(Debug)]
enum State {
    /// Plain text; inside reasoning when `think` (the index of its markers in
    /// [`REASONING`], or [`ANY_THINK`]).
    Text { think: Option<u8> },
    /// Tool-call syntax (or something that may turn out to be).
    Region(Box<Region>),
}

/// A stretch of input that holds (or may hold) calls.
#[derive(Debug)]
pub(crate) struct Region {
    pub(crate) env: Envelope,
    pub(crate) markup: Markup,
    /// A JSON value being read, if any.
    pub(crate) json: Option<Reader>,
    /// The last reader, kept for its allocations.
    pub(crate) spare_reader: Option<Reader>,
    /// A group of Python calls being read, if any.
    pub(crate) python: Option<Box<PyGroup>>,
    /// The region was opened by a tool-call tag (not a bare bracket or a fence).
    pub(crate) tagged: bool,
    /// A labelled call (`Action:`): the region ends with its arguments.
    pub(crate) labelled: bool,
    /// Absolute offset just past the opener.
    pub(crate) opener_end: usize,
    /// The region is inside reasoning (see `State::Text`).
    pub(crate) think: Option<u8>,
    /// The end marker of the reasoning the region is in: the region ends before it.
    pub(crate) stop: Option<&'static str>,
    /// Whatever the region holds is text: calls in it are not used.
    mute: Option<Mute>,
    /// Where a muted region's events go (they are dropped).
    scratch: Vec<Event>,
}

/// Why a region's calls are not used, and which calls it held.
#[derive(Debug)]
struct Mute {
    why: MuteWhy,
    seen: Vec<String>,
    start: usize,
}

#[derive(Debug)]
enum MuteWhy {
    Reasoning,
    /// Introduced by this sentence.
    Example(String),
    InlineCode,
}

/// What one step of a region did.
pub(crate) enum RegionStep {
    /// Consumed this many bytes; keep going.
    Consumed(usize),
    /// Needs more input to decide.
    NeedMore,
    /// The region ends after consuming this many bytes.
    End(usize),
}

const THINK_CLOSE: &str = "</think>";

/// Reasoning markers of each model family: `<think>` (DeepSeek R1, Qwen3, …),
/// `[THINK]` (Magistral), `<|START_THINKING|>` (Cohere), `<seed:think>` (Seed-OSS),
/// `<mm:think>` (MiniMax-M3), `<|inner_prefix|>` (Apertus), the analysis channel (gpt-oss).
const REASONING: &[(&str, &str)] = &[
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
const ANY_THINK: u8 = u8::MAX;

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

fn trigger_table(config: &Config) -> Box<[bool; 256]> {
    let mut table = Box::new([false; 256]);
    for b in [b'<', b'{', b'[', b'`'] {
        if let Some(slot) = table.get_mut(usize::from(b)) {
            *slot = true;
        }
    }
    let dialects = &config.dialects;
    let lines = [Builtin::Python, Builtin::React, Builtin::KeyValue];
    if lines.iter().any(|b| dialects.has(*b)) {
        if let Some(slot) = table.get_mut(usize::from(b'\n')) {
            *slot = true;
        }
    }
    for entry in dialects.entries() {
        if let Some(&b) = entry.start_marker().and_then(|m| m.as_bytes().first()) {
            if let Some(slot) = table.get_mut(usize::from(b)) {
                *slot = true;
            }
        }
    }
    table
}

impl StreamParser {
    /// A parser for one model output.
    pub fn new(config: &Config) -> StreamParser {
        StreamParser {
            config: config.clone(),
            buf: String::new(),
            base: 0,
            pos: 0,
            settled: 0,
            state: State::Text { think: config.reasoning_open.then_some(ANY_THINK) },
            n_calls: 0,
            spare: None,
            tail: Tail {
                prose: (config.dialects.has(Builtin::FreeText) && config.tools.is_some())
                    .then(String::new),
                ..Tail::default()
            },
            triggers: trigger_table(config),
            heads: config
                .dialects
                .entries()
                .iter()
                .filter_map(|entry| entry.start_marker())
                .map(|m| {
                    let b = m.as_bytes();
                    [b.first().copied().unwrap_or(0), b.get(1).copied().unwrap_or(0)]
                })
                .collect(),
            structured: false,
        }
    }

    /// Feeds the next chunk and pushes the events it settles.
    pub fn feed(&mut self, chunk: &str, out: &mut Vec<Event>) {
        self.buf.push_str(chunk);
        self.run(out, false);
        self.compact();
    }

    /// Ends the input and pushes the remaining events: held text, and calls cut
    /// off by the end of the output (closed, with a warning).
    pub fn finish(mut self, out: &mut Vec<Event>) {
        self.run(out, true);
    }

    fn run(&mut self, events: &mut Vec<Event>, eof: bool) {
        let StreamParser {
            config,
            buf,
            base,
            pos,
            settled,
            state,
            n_calls,
            spare,
            tail,
            triggers,
            heads,
            structured,
        } = self;
        let first = events.len();
        let mut out = Out { events, config, n_calls, first, think: false, tail };
        loop {
            let progressed = match state {
                State::Text { think } => {
                    out.think = think.is_some();
                    let mut text =
                        TextStep { buf, base: *base, pos, settled, triggers, heads, eof };
                    text.step(state, spare, &mut out)
                }
                State::Region(region) => {
                    out.think = region.think.is_some();
                    let mut step = RegionRun { buf, base: *base, pos, settled, eof };
                    match step.run(region, &mut out) {
                        Some(progressed) => progressed,
                        None => {
                            let think = region.think;
                            if let State::Region(region) =
                                std::mem::replace(state, State::Text { think })
                            {
                                *spare = Some(region);
                            }
                            true
                        }
                    }
                }
            };
            if !progressed {
                break;
            }
        }
        if let State::Region(region) = state {
            if region.mute.is_none() {
                region.env.flush(&mut out);
            }
        }
        if eof {
            // Anything still held is text.
            if let State::Text { think } = state {
                out.think = think.is_some();
            }
            if let Some(rest) = buf.get(*settled..) {
                out.text(rest);
            }
            *settled = buf.len();
        }
        if out.tail.prose.is_some() {
            *structured |= out
                .events
                .iter()
                .skip(first)
                .any(|event| matches!(event, Event::CallStart { .. } | Event::Rejected(_)));
            if eof && !*structured {
                if let (Some(prose), Some(tools)) = (out.tail.prose.take(), &out.config.tools) {
                    let tools = std::sync::Arc::clone(tools);
                    free_text::extract(&prose, &tools, *base + buf.len(), &mut out);
                }
            }
        }
    }

    /// Drops settled input so the buffer holds only what is still undecided.
    fn compact(&mut self) {
        if self.settled == 0 {
            return;
        }
        // Keep the buffer when it is small relative to what is held; draining is
        // linear in what remains, so do it only when it pays.
        if self.settled < self.buf.len() / 2 && self.settled < 4096 {
            return;
        }
        self.buf.drain(..self.settled);
        self.base += self.settled;
        self.pos -= self.settled;
        self.settled = 0;
    }
}

/// Pushes `range` (absolute offsets) of the input as text.
pub(crate) fn show(buf: &str, base: usize, out: &mut Out<'_>, range: Range<usize>) {
    if let Some(text) = buf.get(range.start.saturating_sub(base)..range.end.saturating_sub(base)) {
        out.text(text);
    }
}

/// `buf` up to byte `end`, or up to the next character boundary after it.
fn upto_char(buf: &str, mut end: usize) -> &str {
    if end >= buf.len() {
        return buf;
    }
    while !buf.is_char_boundary(end) {
        end += 1;
    }
    buf.get(..end).unwrap_or(buf)
}

/// Emits `buf[settled..upto]` as text (reasoning inside `<think>`).
fn emit_text(buf: &str, settled: &mut usize, upto: usize, out: &mut Out<'_>) {
    if upto > *settled {
        if let Some(text) = buf.get(*settled..upto) {
            out.text(text);
        }
        *settled = upto;
    }
}

/// The engine's cursor over plain text.
struct TextStep<'a> {
    buf: &'a str,
    base: usize,
    pos: &'a mut usize,
    settled: &'a mut usize,
    triggers: &'a [bool; 256],
    heads: &'a [[u8; 2]],
    eof: bool,
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
    fn step(
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

/// The engine's cursor while a region reads.
struct RegionRun<'a> {
    buf: &'a str,
    base: usize,
    pos: &'a mut usize,
    settled: &'a mut usize,
    eof: bool,
}

impl RegionRun<'_> {
    /// One step of the region. `Some(progressed)` while it goes on; `None` once it ended.
    fn run(&mut self, region: &mut Region, out: &mut Out<'_>) -> Option<bool> {
        if region.mute.is_some() {
            return self.run_muted(region, out);
        }
        let (buf, base, eof) = (self.buf, self.base, self.eof);
        // While the region is undecided it sees at most one character past the hold
        // limit, so the limit is reached at the same byte in every chunking.
        let limit = region.env.seg + out.config.max_held_bytes;
        let view = match region.env.decision {
            Decision::Pending => upto_char(buf, (limit + 1).saturating_sub(base)),
            Decision::Calls | Decision::Data => buf,
        };
        let capped = view.len() < buf.len();
        let step = region.step(view, base, *self.pos, out, eof && !capped);
        let (consumed, ended) = match &step {
            RegionStep::Consumed(n) => (*n, false),
            RegionStep::NeedMore if eof && !capped => (0, true),
            RegionStep::NeedMore => (0, false),
            RegionStep::End(n) => (*n, true),
        };
        *self.pos += consumed;
        let end = base + *self.pos;
        if ended {
            region.end(buf, base, end, out);
            *self.settled = region.env.seg.saturating_sub(base);
            return None;
        }
        // Past the hold limit, or unable to decide within it: what the region holds, up to
        // the limit, is text, and the region ends there (the cap is the same byte in every
        // chunking). Reading on as data could still open calls from markup.
        let undecidable = capped && matches!(step, RegionStep::NeedMore);
        if (end > limit || undecidable) && region.force_data() {
            let stop = if undecidable { base + view.len() } else { end };
            let held = stop.saturating_sub(region.env.seg);
            out.warn(
                WarningCode::LimitReached,
                format!(
                    "{held} bytes could not be told apart from a tool call within \
                     max_held_bytes ({}); shown as text",
                    out.config.max_held_bytes
                ),
                None,
                region.env.seg..stop,
            );
            *self.pos = stop - base;
            region.end(buf, base, stop, out);
            *self.settled = region.env.seg.saturating_sub(base);
            return None;
        }
        // Show what the region knows to be text. A Python group decides its bytes only
        // when it ends.
        if region.python.is_none() && region.env.shows_text(out.config) {
            let from = region.env.seg;
            show(buf, base, out, from..end);
            region.env.seg = end;
        }
        *self.settled = region.env.seg.saturating_sub(base);
        // `Consumed(0)` changed the region's state (it set up a reader), so it is
        // progress; only `NeedMore` stops the loop. With the input used up and more
        // to come, the next step could only say `NeedMore`.
        Some(!matches!(step, RegionStep::NeedMore) && (eof || *self.pos < buf.len()))
    }

    /// A muted region reads as usual, but its bytes go out as text as soon as it
    /// consumed them, and its events are dropped.
    fn run_muted(&mut self, region: &mut Region, out: &mut Out<'_>) -> Option<bool> {
        let (buf, base, eof) = (self.buf, self.base, self.eof);
        let pos = &mut *self.pos;
        let (step, ended) = region.muted(out, |region, muted| {
            let step = region.step(buf, base, *pos, muted, eof);
            let (consumed, ended) = match &step {
                RegionStep::Consumed(n) => (*n, false),
                RegionStep::NeedMore if eof => (0, true),
                RegionStep::NeedMore => (0, false),
                RegionStep::End(n) => (*n, true),
            };
            *pos += consumed;
            if ended {
                region.end(buf, base, base + *pos, muted);
            }
            (step, ended)
        });
        emit_text(buf, self.settled, *self.pos, out);
        if ended {
            if let Some(mute) = region.mute.take() {
                mute.warn(base + *self.pos, out);
            }
            return None;
        }
        Some(!matches!(step, RegionStep::NeedMore) && (eof || *self.pos < buf.len()))
    }
}

impl Mute {
    fn warn(self, end: usize, out: &mut Out<'_>) {
        if self.seen.is_empty() {
            return;
        }
        let calls = self.seen.join(", ");
        let (code, message) = match self.why {
            MuteWhy::Reasoning => (
                WarningCode::CallInReasoning,
                format!(
                    "a call inside reasoning was not used ({calls}); set `reasoning_calls` to allow it"
                ),
            ),
            MuteWhy::Example(intro) => (
                WarningCode::Example,
                format!("a call introduced as an example ({intro:?}) was not used ({calls})"),
            ),
            MuteWhy::InlineCode => (
                WarningCode::Example,
                format!("a call quoted as inline code in a sentence was not used ({calls})"),
            ),
        };
        out.warn(code, message, None, self.start..end);
    }
}

impl Region {
    /// Makes this region a new one at `start`, keeping its allocations.
    fn recycle(&mut self, start: usize, max_depth: usize) {
        self.env.recycle(start, max_depth);
        self.markup.recycle();
        if let Some(reader) = self.json.take() {
            self.spare_reader = Some(reader);
        }
        self.python = None;
        self.tagged = false;
        self.labelled = false;
        self.opener_end = start;
        self.think = None;
        self.stop = None;
        self.mute = None;
        self.scratch.clear();
    }

    /// Runs `f` with an output that collects this muted region's events apart (they
    /// are dropped after the names of their calls are noted) and counts no calls.
    fn muted<R>(&mut self, out: &Out<'_>, f: impl FnOnce(&mut Region, &mut Out<'_>) -> R) -> R {
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut n_calls = 0;
        let mut tail = Tail::default();
        let mut muted = Out {
            events: &mut scratch,
            config: out.config,
            n_calls: &mut n_calls,
            first: 0,
            think: out.think,
            tail: &mut tail,
        };
        let res = f(self, &mut muted);
        self.note_seen(&mut scratch);
        self.scratch = scratch;
        res
    }

    /// Records the names of calls a muted region produced, and drops its events.
    fn note_seen(&mut self, scratch: &mut Vec<Event>) {
        if let Some(mute) = self.mute.as_mut() {
            for event in scratch.drain(..) {
                let name = match event {
                    Event::CallStart { name, .. } => name,
                    Event::Rejected(rejected) => rejected.name,
                    _ => continue,
                };
                if mute.seen.len() < 8 && !mute.seen.contains(&name) {
                    mute.seen.push(name);
                }
            }
        }
        scratch.clear();
    }

    /// Forces a pending decision to "data". Returns whether it changed anything.
    fn force_data(&mut self) -> bool {
        let before = self.env.decision;
        self.env.force_data();
        before != self.env.decision
    }

    /// Ends the region at absolute offset `end`, settling every byte before it.
    fn end(&mut self, buf: &str, base: usize, end: usize, out: &mut Out<'_>) {
        let mut show_fn = |out: &mut Out<'_>, range: Range<usize>| show(buf, base, out, range);
        let mut truncated = false;
        if let Some(mut reader) = self.json.take() {
            self.env.repairing = true;
            let mut sink = self.env.sink(out, &mut show_fn);
            truncated = reader.finish(end, &mut sink);
            self.env.repairing = false;
        }
        markup::end(self, buf, base, end, truncated, out, &mut show_fn);
        self.env.end(end, truncated, out, &mut show_fn);
        if !self.env.has_calls() && self.env.seg < end {
            // Tool-call markup with nothing usable inside.
            let body = buf
                .get(self.opener_end.saturating_sub(base)..end.saturating_sub(base))
                .unwrap_or_default();
            // A tag followed only by prose (a mention, not an attempt) gets no warning.
            if self.tagged && !body.trim().is_empty() {
                out.warn(
                    WarningCode::MalformedCall,
                    "tool-call markup held no usable call; its text was kept as content".into(),
                    None,
                    self.env.seg..end,
                );
            }
            show_fn(out, self.env.seg..end);
            self.env.seg = end;
        }
    }
}
