//! Regions: stretches of input that hold (or may hold) calls. The engine steps a
//! region's readers over the unread input, enforces the hold limit, mutes examples
//! and reasoning, and settles every byte when the region ends.

use crate::WarningCode;
use crate::engine::out::Out;
use crate::engine::settle::{Ctx, Decision, Segments, Syntax};
use crate::engine::step::{Need, Step, Took};
use crate::engine::text::Think;
use crate::engine::{MAX_ADJACENT_WS, emit_text, is_ws, upto_char};
use crate::read::tag::{only_markers, stray_closer};
use crate::read::{Body, Opener};

/// A stretch of input that holds (or may hold) calls.
#[derive(Debug)]
pub(crate) struct Region {
    seg: Segments,
    body: Body,
    /// Absolute offset just past the opener.
    opener_end: usize,
    /// The reasoning the region is in, if any.
    pub(super) think: Option<Think>,
    /// Whatever the region holds is text: calls in it are not used.
    mute: Option<Mute>,
    /// Its readers ended at this absolute offset, after a call: the whitespace that
    /// follows (up to [`MAX_ADJACENT_WS`] bytes) is read into that call's span.
    closing: Option<usize>,
}

/// Why a region's calls are not used, and which calls it held.
#[derive(Debug)]
pub(super) struct Mute {
    why: MuteWhy,
    seen: Vec<String>,
    start: usize,
}

#[derive(Debug)]
pub(super) enum MuteWhy {
    Reasoning,
    /// Introduced by this sentence.
    Example(String),
    InlineCode,
    /// Inside Harmony's final channel: the answer, not a call.
    FinalAnswer,
}

/// The engine's cursor while a region reads.
pub(super) struct RegionRun<'a> {
    pub(super) buf: &'a str,
    pub(super) base: usize,
    pub(super) pos: &'a mut usize,
    pub(super) settled: &'a mut usize,
    pub(super) eof: bool,
}

/// Whether a step made the region consume input, end, or wait.
fn outcome(step: Step, eof: bool) -> (usize, bool) {
    match step {
        Ok(Took::Go(n)) => (n, false),
        Ok(Took::End(n)) => (n, true),
        Err(Need) => (0, eof),
    }
}

impl RegionRun<'_> {
    /// One step of the region. `Some(progressed)` while it goes on; `None` once it ended.
    pub(super) fn run(&mut self, region: &mut Region, out: &mut Out<'_>) -> Option<bool> {
        if region.mute.is_some() {
            return self.run_muted(region, out);
        }
        let (buf, base, eof) = (self.buf, self.base, self.eof);
        if let Some(ended) = region.closing {
            // After a call: a closer the model added twice (`}`, a `</tool_call>` it
            // never opened) and the whitespace before it are the call's, and so is
            // whitespace that ends the output; anything else is text (or leads up to the
            // next call). `taken` moves past each closer taken.
            let bytes = buf.as_bytes();
            let mut taken = ended;
            loop {
                while bytes.get(*self.pos).copied().is_some_and(is_ws)
                    && base + *self.pos - ended < MAX_ADJACENT_WS
                {
                    *self.pos += 1;
                }
                let within = base + *self.pos - ended < MAX_ADJACENT_WS;
                // Undecided: the next run reads the stretch again from the call's end
                // (it is at most `MAX_ADJACENT_WS` bytes).
                if *self.pos == buf.len() && !eof && within {
                    *self.pos = ended - base;
                    return Some(false);
                }
                let rest = buf.get(*self.pos..).unwrap_or_default();
                match stray_closer(rest, eof) {
                    Ok(Some(n)) if within => {
                        *self.pos += n;
                        taken = base + *self.pos;
                    }
                    Err(Need) if within => {
                        *self.pos = ended - base;
                        return Some(false);
                    }
                    _ => {
                        if !(eof && *self.pos == buf.len() && within) {
                            *self.pos = taken - base;
                        }
                        break;
                    }
                }
            }
            region.end(buf, base, base + *self.pos, eof, out);
            *self.settled = region.seg.seg().saturating_sub(base);
            return None;
        }
        // While the region is undecided it sees at most one character past the hold
        // limit, so the limit is reached at the same byte in every chunking.
        let max_held = out.config().max_held_bytes;
        let limit = region.seg.seg() + max_held;
        let view = match region.seg.decision() {
            Decision::Pending => upto_char(buf, (limit + 1).saturating_sub(base)),
            Decision::Calls | Decision::Data => buf,
        };
        let capped = view.len() < buf.len();
        let rest = view.get(*self.pos..).unwrap_or_default();
        let step = {
            let mut ctx = Ctx::new(out, &mut region.seg, view, base);
            region.body.step(rest, base + *self.pos, &mut ctx, eof && !capped)
        };
        let (consumed, ended) = outcome(step, eof && !capped);
        *self.pos += consumed;
        let end = base + *self.pos;
        if ended && region.seg.last_call_hides_its_text(out.config()) {
            region.closing = Some(end);
            return Some(true);
        }
        if ended {
            region.end(buf, base, end, eof && !capped && *self.pos == buf.len(), out);
            *self.settled = region.seg.seg().saturating_sub(base);
            return None;
        }
        // Past the hold limit, or unable to decide within it: what the region holds, up to
        // the limit, is text, and the region ends there (the cap is the same byte in every
        // chunking). Reading on as data could still open calls from markup.
        let undecidable = capped && step.is_err();
        if (end > limit || undecidable) && region.seg.force_data() {
            let stop = if undecidable { base + view.len() } else { end };
            let from = region.seg.seg();
            let held = stop.saturating_sub(from);
            out.warn(
                WarningCode::LimitReached,
                format!(
                    "{held} bytes could not be told apart from a tool call within \
                     max_held_bytes ({max_held}); shown as text"
                ),
                None,
                from..stop,
            );
            *self.pos = stop - base;
            region.end(buf, base, stop, false, out);
            *self.settled = region.seg.seg().saturating_sub(base);
            return None;
        }
        // Show what the region knows to be text, unless its readers still hold it.
        if !region.body.holds_text()
            && region.seg.shows_text(out.config(), region.body.open_json_call())
        {
            Ctx::new(out, &mut region.seg, buf, base).show_upto(end);
        }
        *self.settled = region.seg.seg().saturating_sub(base);
        // `Go(0)` changed the region's state (it set up a reader), so it is progress;
        // only `Need` stops the loop. With the input used up and more to come, the next
        // step could only say `Need`.
        Some(step.is_ok() && (eof || *self.pos < buf.len()))
    }

    /// A muted region reads as usual, but its bytes go out as text as soon as it
    /// consumed them, and what it reports is dropped.
    fn run_muted(&mut self, region: &mut Region, out: &mut Out<'_>) -> Option<bool> {
        let (buf, base, eof) = (self.buf, self.base, self.eof);
        let Some(mut mute) = region.mute.take() else { return Some(false) };
        let pos = &mut *self.pos;
        let (step, ended) = out.muted(&mut mute.seen, |muted| {
            let rest = buf.get(*pos..).unwrap_or_default();
            let step = {
                let mut ctx = Ctx::new(muted, &mut region.seg, buf, base);
                region.body.step(rest, base + *pos, &mut ctx, eof)
            };
            let (consumed, ended) = outcome(step, eof);
            *pos += consumed;
            if ended {
                region.end(buf, base, base + *pos, eof, muted);
            }
            (step, ended)
        });
        emit_text(buf, self.settled, *self.pos, out);
        if ended {
            mute.warn(base + *self.pos, out);
            return None;
        }
        region.mute = Some(mute);
        Some(step.is_ok() && (eof || *self.pos < buf.len()))
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
            MuteWhy::FinalAnswer => (
                WarningCode::Example,
                format!("call syntax in the final answer channel was not used ({calls})"),
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
    /// A region at absolute offset `start`, reusing `spare`'s allocations.
    pub(super) fn new(
        spare: Option<Box<Region>>,
        start: usize,
        max_depth: usize,
        think: Option<Think>,
        mute: Option<MuteWhy>,
    ) -> Box<Region> {
        let mut region = match spare {
            Some(mut region) => {
                region.body.recycle(max_depth);
                region
            }
            None => Box::new(Region {
                seg: Segments::new(start, Decision::Calls),
                body: Body::new(max_depth),
                opener_end: start,
                think: None,
                mute: None,
                closing: None,
            }),
        };
        region.seg = Segments::new(start, Decision::Calls);
        region.opener_end = start;
        region.closing = None;
        region.think = think;
        region.body.set_stop(think.map(Think::close));
        region.mute = mute.map(|why| Mute { why, seen: Vec::new(), start });
        region
    }

    pub(super) fn is_muted(&self) -> bool {
        self.mute.is_some()
    }

    /// Sets the region up for its opener at `rest` (absolute `at`); returns how many
    /// bytes the opener took.
    pub(super) fn begin(
        &mut self,
        opener: Opener<'_>,
        rest: &str,
        at: usize,
        buf: &str,
        base: usize,
        out: &mut Out<'_>,
    ) -> usize {
        let n = match self.mute.as_mut() {
            Some(mute) => out.muted(&mut mute.seen, |muted| {
                let mut ctx = Ctx::new(muted, &mut self.seg, buf, base);
                self.body.begin(opener, rest, at, &mut ctx)
            }),
            None => {
                let mut ctx = Ctx::new(out, &mut self.seg, buf, base);
                self.body.begin(opener, rest, at, &mut ctx)
            }
        };
        self.opener_end = at + n;
        n
    }

    /// The fast lane of streaming (see [`crate::read::Body::extend_args_string`]).
    pub(super) fn extend_args_string(&mut self, text: &str, at: usize, out: &mut Out<'_>) -> bool {
        self.mute.is_none()
            && self.body.extend_args_string(text, at, &mut Ctx::new(out, &mut self.seg, "", 0))
    }

    /// Sends the arguments of the call being read, written so far.
    pub(super) fn flush(&mut self, buf: &str, base: usize, out: &mut Out<'_>) {
        if self.mute.is_none() {
            self.body.flush(&mut Ctx::new(out, &mut self.seg, buf, base));
        }
    }

    /// Ends the region at absolute offset `end`, settling every byte before it.
    /// `eof`: the output ends at `end`.
    fn end(&mut self, buf: &str, base: usize, end: usize, eof: bool, out: &mut Out<'_>) {
        let mut ctx = Ctx::new(out, &mut self.seg, buf, base);
        self.body.end(end, eof, &mut ctx);
        ctx.end(end);
        if !self.seg.has_calls() && self.seg.seg() < end {
            // Tool-call markup with nothing usable inside.
            let body = buf
                .get(self.opener_end.saturating_sub(base)..end.saturating_sub(base))
                .unwrap_or_default();
            let empty = eof || !body.trim().is_empty();
            if self.seg.syntax() == Syntax::Markup && empty && only_markers(body) {
                // Nothing but markup (an opener the output ended after, an empty pair):
                // it never reaches the text. An opener followed by prose is a mention.
                Ctx::new(out, &mut self.seg, buf, base).remove_upto(end);
                return;
            }
            // A tag followed only by prose (a mention, not an attempt) gets no warning.
            if self.seg.syntax() == Syntax::Markup && !body.trim().is_empty() {
                out.warn(
                    WarningCode::MalformedCall,
                    "tool-call markup held no usable call; its text was kept as content".into(),
                    None,
                    self.seg.seg()..end,
                );
            }
            Ctx::new(out, &mut self.seg, buf, base).show_upto(end);
        }
    }
}
