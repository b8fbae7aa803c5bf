//! The engine's output: where text, calls and warnings go, and what the visible text
//! looked like (for the example guard). Only the engine emits; readers report to it
//! through [`crate::engine::Ctx`].

use std::ops::Range;

use crate::engine::call::CallState;
use crate::{Config, Event, Fragment, Parsed, Rejected, ToolCall, Warning, WarningCode};

/// Where the output goes.
#[derive(Debug)]
pub(crate) enum Dest<'a> {
    /// Streaming: events for the caller. `events[..first]` were there before this call
    /// into the parser and are never changed.
    Events { events: &'a mut Vec<Event>, first: usize },
    /// Complete parsing: folded straight into the result, as [`Parsed::push`] would.
    Parsed(&'a mut Parsed),
    /// A muted region (an example, or reasoning): the names of its calls are noted, the
    /// rest is dropped (the engine shows the region's bytes as text itself).
    Muted(&'a mut Vec<String>),
}

/// The engine's output for one run.
pub(crate) struct Out<'a> {
    dest: Dest<'a>,
    config: &'a Config,
    n_calls: &'a mut usize,
    /// Inside reasoning: text goes out as reasoning.
    pub(in crate::engine) think: bool,
    tail: &'a mut Tail,
    /// Set once a call, accepted or rejected, went out (free-text calls are then off).
    structured: &'a mut bool,
    /// The last call that went out, kept for its allocations.
    spare_call: &'a mut Option<Box<CallState>>,
}

/// The most names a muted region notes for its warning.
const MAX_MUTED_NAMES: usize = 8;

/// The end of the visible text so far, for the example guard. It is computed from
/// the text as it goes out, which is the same for every chunking.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    /// The last few hundred bytes of text.
    recent: String,
    /// All the text (up to a limit), kept only when free-text calls are on.
    prose: Option<String>,
    /// The text is a final answer (Harmony's final channel): bare call syntax in it is
    /// the answer, not a call.
    final_answer: bool,
}

/// The most prose kept for free-text calls.
const MAX_PROSE: usize = 1 << 20;

const TAIL_KEEP: usize = 256;

impl Tail {
    /// A tail that keeps all the prose too (free-text calls are on).
    pub(in crate::engine) fn with_prose() -> Tail {
        Tail { recent: String::new(), prose: Some(String::new()), final_answer: false }
    }

    /// Notes whether the channel a marker opened is a final answer.
    pub(in crate::engine) fn set_final_answer(&mut self, final_answer: bool) {
        self.final_answer = final_answer;
    }

    pub(in crate::engine) fn in_final_answer(&self) -> bool {
        self.final_answer
    }

    pub(in crate::engine) fn keeps_prose(&self) -> bool {
        self.prose.is_some()
    }

    pub(in crate::engine) fn take_prose(&mut self) -> Option<String> {
        self.prose.take()
    }

    fn track(&mut self, text: &str) {
        if let Some(prose) = self.prose.as_mut().filter(|p| p.len() < MAX_PROSE) {
            prose.push_str(text);
        }
        if text.len() > 2 * TAIL_KEEP {
            // What pushing it all and cutting back to `TAIL_KEEP` would leave.
            let mut cut = text.len() - TAIL_KEEP;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            self.recent.clear();
            self.recent.push_str(text.get(cut..).unwrap_or_default());
            return;
        }
        self.recent.push_str(text);
        if self.recent.len() > 2 * TAIL_KEEP {
            let mut cut = self.recent.len() - TAIL_KEEP;
            while !self.recent.is_char_boundary(cut) {
                cut += 1;
            }
            self.recent.drain(..cut);
        }
    }

    /// The text ends with one backtick that follows other text on its line: what
    /// comes next is inline code quoted in a sentence.
    pub(in crate::engine) fn in_quoted_code(&self) -> bool {
        let Some(before) = self.recent.strip_suffix('`') else { return false };
        if before.ends_with('`') {
            return false;
        }
        match before.rfind('\n') {
            Some(nl) => before.get(nl..).is_some_and(|line| !line.trim().is_empty()),
            // The line is longer than what is kept, so it has text.
            None => !before.trim().is_empty() || self.recent.len() >= TAIL_KEEP,
        }
    }

    /// The last sentence of the last line of text that is not blank.
    pub(in crate::engine) fn intro(&self) -> &str {
        // Only the last bytes every chunking keeps (`recent` holds between `TAIL_KEEP`
        // and twice that, depending on where chunks ended).
        let mut from = self.recent.len().saturating_sub(TAIL_KEEP - 4);
        while !self.recent.is_char_boundary(from) {
            from += 1;
        }
        let text = self.recent.get(from..).unwrap_or_default().trim_end();
        let line = text.rsplit('\n').next().unwrap_or_default().trim();
        last_sentence(line)
    }
}

/// The text after the last sentence end (`. `, `! `, `? `, `。`…) of `line`; "e.g."
/// and "i.e." do not end a sentence.
fn last_sentence(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut cut = 0;
    for (i, c) in line.char_indices() {
        let ends = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => {
                let next_space = bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
                let before = line.get(..i).unwrap_or_default().to_ascii_lowercase();
                let abbreviation = before.ends_with("e.g") || before.ends_with("i.e");
                next_space && !abbreviation && bytes.get(i + 1).is_some()
            }
            _ => false,
        };
        if ends {
            cut = i + c.len_utf8();
        }
    }
    line.get(cut..).unwrap_or_default().trim()
}

/// The warning for JSON nested deeper than `max_depth`.
pub(crate) fn too_deep_message(max_depth: usize) -> String {
    format!(
        "JSON nested deeper than max_depth ({max_depth}); what was open was closed there \
         (raise `Config::max_depth` to read deeper)"
    )
}

impl<'a> Out<'a> {
    pub(in crate::engine) fn new(
        dest: Dest<'a>,
        config: &'a Config,
        n_calls: &'a mut usize,
        tail: &'a mut Tail,
        structured: &'a mut bool,
        spare_call: &'a mut Option<Box<CallState>>,
    ) -> Out<'a> {
        Out { dest, config, n_calls, think: false, tail, structured, spare_call }
    }

    /// A new call at `start`, in the place of the last one that went out.
    pub(in crate::engine) fn new_call(&mut self, start: usize) -> Box<CallState> {
        CallState::reuse(self.spare_call.take(), start, self.config.max_depth)
    }

    /// Keeps a call that went out, for the next one.
    pub(in crate::engine) fn keep_call(&mut self, call: Box<CallState>) {
        *self.spare_call = Some(call);
    }

    pub(crate) fn config(&self) -> &'a Config {
        self.config
    }

    /// Whether a call, accepted or rejected, went out.
    pub(in crate::engine) fn made_calls(&self) -> bool {
        *self.structured
    }

    pub(in crate::engine) fn tail(&self) -> &Tail {
        self.tail
    }

    pub(in crate::engine) fn tail_mut(&mut self) -> &mut Tail {
        self.tail
    }

    /// Pushes text, merged into the previous text event when this same run pushed it.
    /// Inside reasoning it is reasoning text.
    pub(in crate::engine) fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.think {
            self.reasoning(text);
            return;
        }
        match &mut self.dest {
            Dest::Events { events, first } => {
                self.tail.track(text);
                push_merged(events, *first, text, Event::Text, |event| match event {
                    Event::Text(last) => Some(last),
                    _ => None,
                });
            }
            Dest::Parsed(parsed) => {
                self.tail.track(text);
                parsed.content.push_str(text);
            }
            Dest::Muted(_) => {}
        }
    }

    /// Pushes reasoning text, merged like [`Out::text`].
    pub(in crate::engine) fn reasoning(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match &mut self.dest {
            Dest::Events { events, first } => {
                push_merged(events, *first, text, Event::Reasoning, |event| match event {
                    Event::Reasoning(last) => Some(last),
                    _ => None,
                });
            }
            Dest::Parsed(parsed) => parsed.reasoning.push_str(text),
            Dest::Muted(_) => {}
        }
    }

    pub(in crate::engine) fn warn(
        &mut self,
        code: WarningCode,
        message: String,
        call_idx: Option<usize>,
        span: Range<usize>,
    ) {
        let warning = Warning { code, message, call_idx, span };
        match &mut self.dest {
            Dest::Events { events, .. } => events.push(Event::Warning(Box::new(warning))),
            Dest::Parsed(parsed) => parsed.push_warning(warning),
            Dest::Muted(_) => {}
        }
    }

    /// A call is accepted: it gets the next index, and `CallStart` goes out.
    pub(in crate::engine) fn call_start(&mut self, id: Option<&str>, name: &str) -> usize {
        let call_idx = *self.n_calls;
        *self.n_calls += 1;
        match &mut self.dest {
            Dest::Events { events, .. } => {
                *self.structured = true;
                events.push(Event::CallStart {
                    call_idx,
                    id: id.map(str::to_owned),
                    name: name.to_owned(),
                });
            }
            Dest::Parsed(_) => *self.structured = true,
            Dest::Muted(seen) => note(seen, name),
        }
        call_idx
    }

    /// A fragment of a call's arguments.
    pub(in crate::engine) fn args_delta(&mut self, call_idx: usize, json: &str) {
        if let Dest::Events { events, .. } = &mut self.dest {
            // Written in place: the event is built where it goes.
            events.push(Event::ArgsDelta { call_idx, json: Fragment::default() });
            if let Some(Event::ArgsDelta { json: last, .. }) = events.last_mut() {
                last.push_str(json);
            }
        }
    }

    pub(in crate::engine) fn call_end(&mut self, call_idx: usize, call: ToolCall) {
        match &mut self.dest {
            Dest::Events { events, .. } => {
                events.push(Event::CallEnd { call_idx, call: Box::new(call) });
            }
            Dest::Parsed(parsed) => parsed.push_call(call),
            Dest::Muted(_) => {}
        }
    }

    pub(in crate::engine) fn rejected(&mut self, rejected: Rejected) {
        match &mut self.dest {
            Dest::Events { events, .. } => {
                *self.structured = true;
                events.push(Event::Rejected(Box::new(rejected)));
            }
            Dest::Parsed(parsed) => {
                *self.structured = true;
                parsed.push_rejected(rejected);
            }
            Dest::Muted(seen) => note(seen, &rejected.name),
        }
    }

    /// Runs `f` with an output for a muted region: its calls are noted in `seen` and
    /// counted apart, and nothing it reports goes out.
    pub(in crate::engine) fn muted<R>(
        &mut self,
        seen: &mut Vec<String>,
        f: impl FnOnce(&mut Out<'_>) -> R,
    ) -> R {
        let mut n_calls = 0;
        let mut tail = Tail::default();
        let mut structured = false;
        let mut muted = Out {
            dest: Dest::Muted(seen),
            config: self.config,
            n_calls: &mut n_calls,
            think: self.think,
            tail: &mut tail,
            structured: &mut structured,
            spare_call: &mut *self.spare_call,
        };
        f(&mut muted)
    }
}

fn note(seen: &mut Vec<String>, name: &str) {
    if seen.len() < MAX_MUTED_NAMES && !seen.iter().any(|s| s == name) {
        seen.push(name.to_owned());
    }
}

/// Appends `text` to the last event when it is of the kind `fragment` picks and this run
/// pushed it (index `first` or later), or to a new event `wrap` builds, in place.
fn push_merged(
    events: &mut Vec<Event>,
    first: usize,
    text: &str,
    wrap: fn(Fragment) -> Event,
    fragment: fn(&mut Event) -> Option<&mut Fragment>,
) {
    if events.len() <= first || events.last_mut().and_then(fragment).is_none() {
        events.push(wrap(Fragment::default()));
    }
    if let Some(last) = events.last_mut().and_then(fragment) {
        last.push_str(text);
    }
}
