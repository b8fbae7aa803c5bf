//! The one engine: [`StreamParser`].
//!
//! The parser keeps the unsettled input in `buf` and walks it with a cursor. Text
//! goes out as soon as it can no longer start a marker; a possible marker (`<tool_c`
//! at the end of a chunk, say) is held until the next bytes decide. Call syntax is
//! read by resumable machines (the JSON reader, the tag reader), so every byte is
//! looked at a bounded number of times and the total work is linear in the input.

use std::ops::Range;

use crate::format::call::Out;
use crate::format::envelope::{Envelope, Origin};
use crate::format::markup::{self, Markup};
use crate::json::reader::Reader;
use crate::{Config, Event, WarningCode};

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
}

#[derive(Debug)]
enum State {
    /// Plain text.
    Text,
    /// Inside `<think>`; the reasoning text is emitted up to `pos`.
    Think,
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
    /// The region was opened by a tool-call tag (not a bare bracket or a fence).
    pub(crate) tagged: bool,
    /// Absolute offset just past the opener.
    pub(crate) opener_end: usize,
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

/// Bytes that may start a marker in plain text.
fn is_trigger(b: u8) -> bool {
    matches!(b, b'<' | b'{' | b'[' | b'`')
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
            state: State::Text,
            n_calls: 0,
            spare: None,
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
        let StreamParser { config, buf, base, pos, settled, state, n_calls, spare } = self;
        let first = events.len();
        let mut out = Out { events, config, n_calls, first };
        loop {
            let progressed = match state {
                State::Text => step_text(buf, *base, pos, settled, state, spare, &mut out, eof),
                State::Think => step_think(buf, pos, settled, state, &mut out, eof),
                State::Region(region) => {
                    let step = region.step(buf, *base, *pos, &mut out, eof);
                    let (consumed, ended) = match &step {
                        RegionStep::Consumed(n) => (*n, false),
                        RegionStep::NeedMore if eof => (0, true),
                        RegionStep::NeedMore => (0, false),
                        RegionStep::End(n) => (*n, true),
                    };
                    *pos += consumed;
                    let end = *base + *pos;
                    if ended {
                        region.end(buf, *base, end, &mut out);
                        *settled = region.env.seg.saturating_sub(*base);
                        if let State::Region(region) = std::mem::replace(state, State::Text) {
                            *spare = Some(region);
                        }
                        true
                    } else {
                        // Show what the region knows to be text; enforce the hold limit.
                        let held = end.saturating_sub(region.env.seg);
                        if held > out.config.max_held_bytes && region.force_data() {
                            out.warn(
                                WarningCode::LimitReached,
                                format!(
                                    "{held} bytes could not be told apart from a tool call; shown as text"
                                ),
                                None,
                                region.env.seg..end,
                            );
                        }
                        if region.env.shows_text(out.config) {
                            let from = region.env.seg;
                            show(buf, *base, &mut out, from..end);
                            region.env.seg = end;
                        }
                        *settled = region.env.seg.saturating_sub(*base);
                        // `Consumed(0)` changed the region's state (it set up a reader), so
                        // it is progress; only `NeedMore` stops the loop. With the input
                        // used up and more to come, the next step could only say `NeedMore`.
                        !matches!(step, RegionStep::NeedMore) && (eof || *pos < buf.len())
                    }
                }
            };
            if !progressed {
                break;
            }
        }
        if let State::Region(region) = state {
            region.env.flush(&mut out);
        }
        if eof {
            // Anything still held is text.
            if let Some(rest) = buf.get(*settled..) {
                out.text(rest);
            }
            *settled = buf.len();
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

/// Emits `buf[settled..upto]` as text.
fn emit_text(buf: &str, settled: &mut usize, upto: usize, out: &mut Out<'_>) {
    if upto > *settled {
        if let Some(text) = buf.get(*settled..upto) {
            out.text(text);
        }
        *settled = upto;
    }
}

/// One step in plain text. Returns whether it made progress.
#[expect(clippy::too_many_arguments, reason = "the engine's fields, borrowed apart from `out`")]
fn step_text(
    buf: &str,
    base: usize,
    pos: &mut usize,
    settled: &mut usize,
    state: &mut State,
    spare: &mut Option<Box<Region>>,
    out: &mut Out<'_>,
    eof: bool,
) -> bool {
    let bytes = buf.as_bytes();
    let start = *pos;
    let mut i = start;
    while bytes.get(i).is_some_and(|&b| !is_trigger(b)) {
        i += 1;
    }
    if i >= bytes.len() {
        *pos = i;
        emit_text(buf, settled, i, out);
        return false;
    }
    let rest = buf.get(i..).unwrap_or_default();
    let abs = base + i;
    match markup::open(rest, eof) {
        markup::Open::No => {
            *pos = i + 1;
            emit_text(buf, settled, *pos, out);
            true
        }
        markup::Open::NeedMore => {
            // Hold from the possible marker on.
            *pos = i;
            emit_text(buf, settled, i, out);
            false
        }
        markup::Open::Think(n) => {
            emit_text(buf, settled, i, out);
            *pos = i + n;
            *settled = *pos;
            *state = State::Think;
            true
        }
        markup::Open::Region(opener) => {
            emit_text(buf, settled, i, out);
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
                    tagged: false,
                    opener_end: abs,
                }),
            };
            let n = region.begin(opener, rest, abs, buf, base, out);
            region.opener_end = abs + n;
            *pos = i + n;
            *state = State::Region(region);
            true
        }
    }
}

/// One step inside `<think>`. Returns whether it made progress.
fn step_think(
    buf: &str,
    pos: &mut usize,
    settled: &mut usize,
    state: &mut State,
    out: &mut Out<'_>,
    eof: bool,
) -> bool {
    let bytes = buf.as_bytes();
    let from = *pos;
    let Some(rest) = bytes.get(from..) else { return false };
    let Some(lt) = memchr::memchr(b'<', rest) else {
        emit_reasoning(buf, settled, bytes.len(), out);
        *pos = bytes.len();
        return false;
    };
    let at = from + lt;
    let tail = buf.get(at..).unwrap_or_default();
    if tail.starts_with(THINK_CLOSE) {
        emit_reasoning(buf, settled, at, out);
        *pos = at + THINK_CLOSE.len();
        *settled = *pos;
        *state = State::Text;
        return true;
    }
    if THINK_CLOSE.starts_with(tail) && !eof {
        emit_reasoning(buf, settled, at, out);
        *pos = at;
        return false;
    }
    *pos = at + 1;
    emit_reasoning(buf, settled, *pos, out);
    true
}

fn emit_reasoning(buf: &str, settled: &mut usize, upto: usize, out: &mut Out<'_>) {
    if upto > *settled {
        if let Some(text) = buf.get(*settled..upto) {
            out.reasoning(text);
        }
        *settled = upto;
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
        self.tagged = false;
        self.opener_end = start;
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
        markup::end(self, end, truncated, out, &mut show_fn);
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
