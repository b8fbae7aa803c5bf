//! The one engine: [`StreamParser`].
//!
//! The parser keeps the unsettled input in `buf` and walks it with a cursor. Text
//! goes out as soon as it can no longer start a marker; a possible marker (`<tool_c`
//! at the end of a chunk, say) is held until the next bytes decide. Call syntax is
//! read by resumable machines (the JSON reader, the tag reader), so every byte is
//! looked at a bounded number of times and the total work is linear in the input.

pub(crate) mod call;
pub(crate) mod out;
pub(crate) mod region;
pub(crate) mod settle;
pub(crate) mod step;
pub(crate) mod text;

use crate::engine::call::CallState;
use crate::engine::out::{Dest, Out, Tail};
use crate::read::free_text;
use crate::read::open::Openers;
use crate::{Builtin, Config, Event, Parsed};

/// Incremental parser for one model output: [`feed`](StreamParser::feed) chunks,
/// then [`finish`](StreamParser::finish).
///
/// For every chunking of an input, the events fold (with [`crate::Parsed::push`])
/// to exactly what [`crate::parse`] returns.
#[derive(Debug)]
pub struct StreamParser {
    engine: Engine,
    /// Unsettled input. `buf[0]` is at absolute offset `engine.base`. Empty when nothing
    /// is held: the next chunk is then read where it is, without a copy.
    buf: String,
}

/// Everything of the parser but its buffer, so it can read a chunk in place.
#[derive(Debug)]
struct Engine {
    config: Config,
    /// Absolute offset of the first byte of the buffer being read.
    /// Invariant: `settled <= pos <= buf.len()`; `buf[..settled]` has been emitted
    /// or consumed; `buf[settled..pos]` is held back.
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
    /// What the openers need at hand.
    openers: Openers,
    /// A call (accepted or rejected) has gone out: free-text calls are off.
    structured: bool,
    /// The last call that went out, kept for its allocations.
    spare_call: Option<Box<CallState>>,
}

#[derive(Debug)]
pub(crate) enum State {
    /// Plain text; inside reasoning when `think` says so. `lead` says what whitespace
    /// at the cursor belongs to.
    Text { think: Option<Think>, lead: Lead },
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
        let free_text = config.dialects.has(Builtin::FreeText) && config.tools.is_some();
        let engine = Engine {
            config: config.clone(),
            base: 0,
            pos: 0,
            settled: 0,
            // A prompt that opened reasoning ended in its marker.
            state: match config.reasoning_open {
                true => State::Text { think: Some(Think::Prompt), lead: Lead::Marker(0) },
                false => State::Text { think: None, lead: Lead::Text },
            },
            n_calls: 0,
            spare: None,
            tail: if free_text { Tail::with_prose() } else { Tail::default() },
            triggers: trigger_table(config),
            openers: Openers::new(config),
            structured: false,
            spare_call: None,
        };
        StreamParser { engine, buf: String::new() }
    }

    /// Feeds the next chunk and pushes the events it settles.
    pub fn feed(&mut self, chunk: &str, out: &mut Vec<Event>) {
        let first = out.len();
        if self.engine.pos == self.buf.len() && self.engine.extend_args_string(chunk, out) {
            // What reading the chunk would have done: it is consumed, and held with the
            // call's other bytes.
            self.buf.push_str(chunk);
            self.engine.pos += chunk.len();
            self.compact();
            return;
        }
        if self.buf.is_empty() {
            // Nothing is held: read the chunk where it is, and keep what stays unsettled.
            self.engine.run(chunk, Dest::Events { events: out, first }, false);
            let engine = &mut self.engine;
            self.buf.push_str(chunk.get(engine.settled..).unwrap_or_default());
            engine.base += engine.settled;
            engine.pos -= engine.settled;
            engine.settled = 0;
            return;
        }
        self.buf.push_str(chunk);
        self.engine.run(&self.buf, Dest::Events { events: out, first }, false);
        self.compact();
    }

    /// Ends the input and pushes the remaining events: held text, and calls cut
    /// off by the end of the output (closed, with a warning).
    pub fn finish(mut self, out: &mut Vec<Event>) {
        let first = out.len();
        self.engine.run(&self.buf, Dest::Events { events: out, first }, true);
    }

    /// Complete parsing: `feed(input)` then `finish()`, reading `input` where it is and
    /// folding the result directly (no events are built).
    pub(crate) fn parse(mut self, input: &str) -> Parsed {
        let mut parsed = Parsed::default();
        self.engine.run(input, Dest::Parsed(&mut parsed), false);
        self.engine.run(input, Dest::Parsed(&mut parsed), true);
        parsed
    }

    /// Drops settled input so the buffer holds only what is still undecided.
    fn compact(&mut self) {
        let engine = &mut self.engine;
        if engine.settled == 0 {
            return;
        }
        // Keep the buffer when it is small relative to what is held; draining is
        // linear in what remains, so do it only when it pays.
        if engine.settled < self.buf.len() / 2 && engine.settled < 4096 {
            return;
        }
        self.buf.drain(..engine.settled);
        engine.base += engine.settled;
        engine.pos -= engine.settled;
        engine.settled = 0;
    }
}

impl Engine {
    /// The fast lane of streaming: the chunk continues a string in the arguments of the
    /// call being read, with nothing in it that ends or escapes the string.
    fn extend_args_string(&mut self, chunk: &str, events: &mut Vec<Event>) -> bool {
        let Engine { config, base, pos, state, n_calls, tail, structured, spare_call, .. } = self;
        let State::Region(region) = state else { return false };
        let first = events.len();
        let dest = Dest::Events { events, first };
        let mut out = Out::new(dest, config, n_calls, tail, structured, spare_call);
        region.extend_args_string(chunk, *base + *pos, &mut out)
    }

    /// Reads `buf` (all input not yet settled, at absolute offset `base`) as far as it
    /// decides, sending what it settles to `dest`.
    fn run(&mut self, buf: &str, dest: Dest<'_>, eof: bool) {
        let Engine {
            config,
            base,
            pos,
            settled,
            state,
            n_calls,
            spare,
            tail,
            triggers,
            openers,
            structured,
            spare_call,
        } = self;
        let mut out = Out::new(dest, config, n_calls, tail, structured, spare_call);
        loop {
            let progressed = match state {
                State::Text { think, .. } => {
                    out.think = think.is_some();
                    let mut text =
                        TextStep { buf, base: *base, pos, settled, triggers, openers, eof };
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
                                std::mem::replace(state, State::Text { think, lead: Lead::Text })
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
            region.flush(buf, *base, &mut out);
        }
        if eof {
            // Anything still held is text.
            if let State::Text { think, .. } = state {
                out.think = think.is_some();
            }
            if let Some(rest) = buf.get(*settled..) {
                out.text(rest);
            }
            *settled = buf.len();
            if out.tail().keeps_prose() && !out.made_calls() {
                let prose = out.tail_mut().take_prose().unwrap_or_default();
                if let Some(tools) = &out.config().tools {
                    if let Some(mut call) =
                        free_text::extract(&prose, tools, *base + buf.len(), out.config().max_depth)
                    {
                        let end = call.start;
                        call.resolve(&mut out);
                        call.end(&mut out, end..end);
                    }
                }
            }
        }
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

/// The most whitespace next to a call or a marker that belongs to it (a template's
/// `\n\n`, a space): whitespace beyond it, in a longer run, is text.
pub(super) const MAX_ADJACENT_WS: usize = 256;

/// Whether `b` is whitespace that may sit between a call or marker and the text.
pub(super) use crate::json::reader::is_ws;

/// Where the whitespace run that ends at `at` begins, no further back than `floor` and
/// than [`MAX_ADJACENT_WS`] bytes.
pub(super) fn ws_before(buf: &str, floor: usize, at: usize) -> usize {
    let bytes = buf.as_bytes();
    let floor = floor.max(at.saturating_sub(MAX_ADJACENT_WS));
    let mut start = at;
    while start > floor && bytes.get(start - 1).copied().is_some_and(is_ws) {
        start -= 1;
    }
    start
}

/// Where the whitespace that leads up to a call at `at` begins: the run before it (as
/// [`ws_before`] finds it) when it holds a line break, the line break a template writes
/// before a call; spaces alone between text and a call are text.
pub(super) fn call_lead(buf: &str, floor: usize, at: usize) -> usize {
    let start = ws_before(buf, floor, at);
    let run = buf.as_bytes().get(start..at).unwrap_or_default();
    if run.iter().any(|&b| b == b'\n' || b == b'\r') { start } else { at }
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
use self::text::{Lead, TextStep, Think};
