//! Regions: stretches of input that hold (or may hold) calls.

use std::ops::Range;

use crate::engine::out::{Out, Tail};
use crate::format::envelope::{Decision, Envelope};
use crate::format::markup::{self, Markup};
use crate::format::python::PyGroup;
use crate::json::reader::Reader;
use crate::{Event, WarningCode};

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
    pub(super) mute: Option<Mute>,
    /// Where a muted region's events go (they are dropped).
    pub(super) scratch: Vec<Event>,
}

/// Why a region's calls are not used, and which calls it held.
#[derive(Debug)]
pub(super) struct Mute {
    pub(super) why: MuteWhy,
    pub(super) seen: Vec<String>,
    pub(super) start: usize,
}

#[derive(Debug)]
pub(super) enum MuteWhy {
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

/// The engine's cursor while a region reads.
pub(super) struct RegionRun<'a> {
    pub(super) buf: &'a str,
    pub(super) base: usize,
    pub(super) pos: &'a mut usize,
    pub(super) settled: &'a mut usize,
    pub(super) eof: bool,
}

impl RegionRun<'_> {
    /// One step of the region. `Some(progressed)` while it goes on; `None` once it ended.
    pub(super) fn run(&mut self, region: &mut Region, out: &mut Out<'_>) -> Option<bool> {
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
    pub(super) fn recycle(&mut self, start: usize, max_depth: usize) {
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
    pub(super) fn muted<R>(
        &mut self,
        out: &Out<'_>,
        f: impl FnOnce(&mut Region, &mut Out<'_>) -> R,
    ) -> R {
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

use super::{emit_text, show, upto_char};
