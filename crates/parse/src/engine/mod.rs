//! The one engine: [`StreamParser`].
//!
//! The parser keeps the unsettled input in `buf` and walks it with a cursor. Text
//! goes out as soon as it can no longer start a marker; a possible marker (`<tool_c`
//! at the end of a chunk, say) is held until the next bytes decide. Call syntax is
//! read by resumable machines (the JSON reader, the tag reader), so every byte is
//! looked at a bounded number of times and the total work is linear in the input.

use std::ops::Range;

pub(crate) mod call;
pub(crate) mod out;
pub(crate) mod region;
mod text;

use crate::engine::out::{Out, Tail};
use crate::format::free_text;
use crate::{Builtin, Config, Event};

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
pub(crate) enum State {
    /// Plain text; inside reasoning when `think` (the index of its markers in
    /// [`REASONING`], or [`ANY_THINK`]).
    Text { think: Option<u8> },
    /// Tool-call syntax (or something that may turn out to be).
    Region(Box<Region>),
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
pub(super) fn upto_char(buf: &str, mut end: usize) -> &str {
    if end >= buf.len() {
        return buf;
    }
    while !buf.is_char_boundary(end) {
        end += 1;
    }
    buf.get(..end).unwrap_or(buf)
}

/// Emits `buf[settled..upto]` as text (reasoning inside `<think>`).
pub(super) fn emit_text(buf: &str, settled: &mut usize, upto: usize, out: &mut Out<'_>) {
    if upto > *settled {
        if let Some(text) = buf.get(*settled..upto) {
            out.text(text);
        }
        *settled = upto;
    }
}

use self::region::{Region, RegionRun};
use self::text::{ANY_THINK, TextStep};
