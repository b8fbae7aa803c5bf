//! Readers: how call syntax is recognized and read.
//!
//! A reader sees the unread input as a `&str` and its absolute offset, and answers
//! with how much it consumed ([`crate::engine::step`]). What it finds (a call begins,
//! a name, arguments, a call ends, the bytes are data) it reports to the engine
//! through [`Ctx`]; it never touches the engine's buffer, settle mark or output.
//!
//! - `open`: what plain text at a trigger byte starts; `line`: what a line starts.
//! - `tag`: the tag lexer; `markup`: the element stack; `field`: a parameter's, name's
//!   or key's text; `value`: how raw text becomes a typed JSON value.
//! - `pair`: marker pairs and name heads (`rows::native`).
//! - `envelope`: JSON call objects (and lists and wrappers of them) over the JSON reader.
//! - `python`: Python calls; `label`: labelled calls; `custom`: [`crate::Dialect`]s.
//! - `free_text`: the last-resort guess from prose.

pub(crate) mod custom;
pub(crate) mod envelope;
pub(crate) mod field;
pub(crate) mod free_text;
pub(crate) mod label;
pub(crate) mod line;
pub(crate) mod markup;
pub(crate) mod open;
pub(crate) mod pair;
pub(crate) mod python;
pub(crate) mod tag;
pub(crate) mod value;

use std::sync::Arc;

use crate::Builtin;
use crate::WarningCode;
use crate::dialect::Entry;
use crate::engine::call::{CallState, Cut};
use crate::engine::settle::{Ctx, Decision};
use crate::engine::step::{Need, Step, Took};
use crate::json::reader::{Reader, Status};
use crate::read::custom::Custom;
use crate::read::envelope::{Envelope, Origin};
use crate::read::field::Field;
use crate::read::label::Label;
use crate::read::markup::{Elem, Markup, bare_name};
use crate::read::open::MAX_FENCE_LINE;
use crate::read::pair::{PairRef, PairStep, end_of, pair_step, read_name};
use crate::read::python::{Mode as PyMode, PyGroup, call_ahead, list_ahead};
use crate::read::tag::{read_tag, same_name};
use crate::rows::native::{Body as PairBody, Head, Row, Text};

pub(crate) use self::open::{Opener, open};

/// Where a region ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// When its markup closes (or at the first thing that is not a call).
    Markup,
    /// After one value: a labelled call's arguments.
    Value,
}

/// What a region's readers are reading at the cursor.
#[derive(Debug, Default)]
pub(crate) enum Reading {
    /// Between items: whitespace, a tag, a JSON value, a fence, a marker, the end.
    #[default]
    Between,
    /// A JSON value.
    Json(Reader),
    /// A group of Python calls, decided when it ends.
    Python(Box<PyGroup>),
    /// A markup field's text.
    Field(Field),
    /// A labelled call's arguments.
    Label(Label),
    /// A custom dialect's body.
    Custom(Custom),
}

/// The readers of one region: the JSON envelope, the open markup, and what is being
/// read at the cursor.
#[derive(Debug)]
pub(crate) struct Body {
    pub(crate) env: Envelope,
    pub(crate) markup: Markup,
    pub(crate) reading: Reading,
    /// The last JSON reader, kept for its allocations.
    spare: Option<Reader>,
    until: Until,
    /// The end marker of the reasoning the region is in: the region ends before it.
    stop: Option<&'static str>,
}

/// The most text between two calls of a section that is dropped as noise.
const MAX_SECTION_NOISE: usize = 4096;

impl Body {
    pub(crate) fn new(max_depth: usize) -> Body {
        Body {
            env: Envelope::new(max_depth),
            markup: Markup::default(),
            reading: Reading::Between,
            spare: None,
            until: Until::Markup,
            stop: None,
        }
    }

    /// Makes these readers new ones, keeping their allocations.
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.env.recycle(max_depth);
        self.markup.recycle();
        if let Reading::Json(reader) = std::mem::take(&mut self.reading) {
            self.spare = Some(reader);
        }
        self.until = Until::Markup;
        self.stop = None;
    }

    pub(crate) fn set_stop(&mut self, stop: Option<&'static str>) {
        self.stop = stop;
    }

    /// Whether the region's unsettled bytes stay held after this step, whatever the
    /// settlement says: a Python group decides its bytes only when it ends, and a
    /// container that may still become a call (`<use_mcp_tool>` before its
    /// `<tool_name>` has ended) holds its tags and fields until it does or closes, so a
    /// rejected call before it does not show them as its text in some chunkings only.
    pub(crate) fn holds_text(&self) -> bool {
        matches!(self.reading, Reading::Python(_))
            || matches!(self.markup.frames.last(), Some(Elem::Container { call: None, .. }))
    }

    /// Whether the engine shows the region's unsettled bytes after a step that leaves
    /// the readers as they are. A reader may go on in the same step only when it does
    /// not: streaming then sends text at the same points.
    fn shows_text(&self, ctx: &Ctx<'_, '_>) -> bool {
        !self.holds_text() && ctx.shows_text(self.env.open_call())
    }

    /// The innermost call a JSON body is reading.
    pub(crate) fn open_json_call(&self) -> Option<&CallState> {
        self.env.open_call()
    }

    /// Sends the arguments of the call being read, written so far.
    pub(crate) fn flush(&mut self, ctx: &mut Ctx<'_, '_>) {
        self.env.flush(ctx);
    }

    /// The fast lane of streaming: `text` (at absolute `at`) continues a string in the
    /// arguments of an accepted call and holds no `"`, so it cannot end the string: the
    /// reader takes it whole and what it wrote goes out, as a step would do. Returns
    /// false, doing nothing, in any other case.
    pub(crate) fn extend_args_string(
        &mut self,
        text: &str,
        at: usize,
        ctx: &mut Ctx<'_, '_>,
    ) -> bool {
        let Reading::Json(reader) = &mut self.reading else { return false };
        if text.is_empty()
            || !reader.in_value_string()
            || text.bytes().any(|b| b == b'"')
            || !self.env.in_accepted_args(ctx)
        {
            return false;
        }
        let status = reader.feed(text, at, &mut self.env.sink(ctx));
        debug_assert_eq!(status, Status::NeedMore, "text without a quote left the string");
        self.env.flush(ctx);
        true
    }

    /// Sets the region up for its opener at `rest` (absolute `at`); returns how many
    /// bytes the opener took.
    pub(crate) fn begin(
        &mut self,
        opener: Opener<'_>,
        rest: &str,
        at: usize,
        ctx: &mut Ctx<'_, '_>,
    ) -> usize {
        match opener {
            Opener::Json => {
                self.env.begin_value(Origin::Bare, ctx);
                ctx.set_decision(Decision::Pending);
                self.start_reader(ctx.config().max_depth);
                0
            }
            Opener::Fence(len) => {
                ctx.set_decision(Decision::Pending);
                self.markup.frames.push(Elem::Fence);
                len
            }
            Opener::PyFence { len, wrapper } => {
                ctx.set_decision(Decision::Pending);
                self.markup.frames.push(Elem::Fence);
                let mode = PyMode::Fence { wrapper };
                self.reading =
                    Reading::Python(Box::new(PyGroup::new(mode, ctx.config().max_depth)));
                len
            }
            Opener::Python(mode) => {
                ctx.set_decision(Decision::Pending);
                self.reading =
                    Reading::Python(Box::new(PyGroup::new(mode, ctx.config().max_depth)));
                0
            }
            Opener::Labelled { name, len } => {
                ctx.markup();
                self.until = Until::Value;
                let mut call = ctx.open_call(at);
                call.name = Some(line::clean_name(rest.get(name).unwrap_or_default()));
                self.reading = Reading::Label(Label::Args { call });
                len
            }
            Opener::Marker(idx) => {
                ctx.markup();
                match ctx.config().dialects.entries().get(idx) {
                    Some(Entry::Pair(pair)) => {
                        self.markup.frames.push(Elem::Pair(PairRef::Custom(Arc::clone(pair))));
                        pair.start().len()
                    }
                    Some(Entry::Native(pair)) => {
                        self.markup.frames.push(Elem::Pair(PairRef::Native(Row::clone(pair))));
                        pair.start.len()
                    }
                    Some(Entry::Custom(dialect)) => {
                        let len = dialect.start().len();
                        let dialect = Arc::clone(dialect);
                        self.reading = Reading::Custom(Custom { dialect, body: String::new(), at });
                        len
                    }
                    _ => 0,
                }
            }
            Opener::Tag(tag) => {
                ctx.markup();
                self.open_tag(&tag, at, ctx);
                tag.len
            }
        }
    }

    /// Starts reading a JSON value, reusing the last reader's allocations.
    fn start_reader(&mut self, max_depth: usize) {
        let mut reader = match self.spare.take() {
            Some(mut reader) => {
                reader.recycle(max_depth);
                reader
            }
            None => Reader::new(max_depth),
        };
        let token = self.markup.frames.iter().rev().find_map(|f| match f {
            Elem::Pair(pair) => match pair.body() {
                PairBody::TokenStrings(token) => Some(Text::clone(token)),
                _ => None,
            },
            _ => None,
        });
        reader.set_string_token(token);
        self.reading = Reading::Json(reader);
    }

    /// One step of the region over the unread input `rest` (at absolute offset `abs`).
    pub(crate) fn step(
        &mut self,
        rest: &str,
        abs: usize,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        match &mut self.reading {
            Reading::Python(_) => return self.step_python(rest, abs, ctx, eof),
            Reading::Json(_) => return self.step_json(rest, abs, ctx),
            Reading::Between => return self.between(rest, abs, ctx, eof),
            Reading::Field(_) | Reading::Label(_) | Reading::Custom(_) => {}
        }
        match std::mem::take(&mut self.reading) {
            Reading::Field(field) => self.step_field(field, rest, ctx, eof),
            Reading::Label(label) => self.step_label(label, rest, abs, ctx, eof),
            Reading::Custom(custom) => self.step_custom(custom, rest, abs, ctx, eof),
            Reading::Between | Reading::Json(_) | Reading::Python(_) => Err(Need),
        }
    }

    fn step_python(&mut self, rest: &str, abs: usize, ctx: &mut Ctx<'_, '_>, eof: bool) -> Step {
        let Reading::Python(group) = &mut self.reading else { return Err(Need) };
        match group.step(rest, abs, ctx.config(), eof)? {
            Took::Go(n) => Ok(Took::Go(n)),
            Took::End(n) => {
                if let Reading::Python(group) = std::mem::take(&mut self.reading) {
                    if let PyMode::Fence { .. } = group.mode() {
                        if matches!(self.markup.frames.last(), Some(Elem::Fence)) {
                            self.markup.frames.pop();
                        }
                    }
                    self.commit_python(group, abs + n, ctx);
                }
                if self.markup.frames.is_empty() || ctx.decision() == Decision::Data {
                    return Ok(Took::End(n));
                }
                Ok(Took::Go(n))
            }
        }
    }

    fn step_json(&mut self, rest: &str, abs: usize, ctx: &mut Ctx<'_, '_>) -> Step {
        let Reading::Json(reader) = &mut self.reading else { return Err(Need) };
        if rest.is_empty() {
            return Err(Need);
        }
        let status = reader.feed(rest, abs, &mut self.env.sink(ctx));
        let (consumed, broke) = match status {
            Status::NeedMore => return Ok(Took::Go(rest.len())),
            Status::Done(n) => (n, false),
            Status::Invalid(k) => (k, true),
        };
        // Past `max_depth` the call (or what looked like one) ends at the bracket, and
        // the rest of the input is read as if the region had ended there.
        let too_deep = broke && reader.too_deep();
        if too_deep && ctx.decision() != Decision::Data {
            let at = abs + consumed;
            let message = crate::engine::out::too_deep_message(ctx.config().max_depth);
            ctx.warn(WarningCode::LimitReached, message, at..at + 1);
        }
        let mut cut = Cut::No;
        if broke {
            // What breaks the value ends it: closing brackets that were missing are
            // added, a value it cut is not.
            // Past `max_depth` the value is cut off. Anywhere else, arguments that break
            // off inside a value, or between values on anything but the start of markup
            // (an end tag or marker after a missing `}`), are not JSON: the call is
            // withdrawn.
            let markup_next = matches!(rest.as_bytes().get(consumed), Some(b'<' | b'[' | b'`'));
            let in_args = self.env.in_args();
            let not_json = |cut: Cut| match cut {
                Cut::Value if !too_deep => Cut::NotJson,
                Cut::Closers if in_args && !markup_next && !too_deep => Cut::NotJson,
                cut => cut,
            };
            self.env.repairing = not_json(reader.open_cut().into());
            cut = not_json(reader.finish(abs + consumed, &mut self.env.sink(ctx)).into());
            self.env.repairing = Cut::No;
            if !too_deep {
                self.markup.broke_off = Some((self.markup.frames.len(), cut == Cut::NotJson));
            }
        }
        if let Reading::Json(reader) = std::mem::take(&mut self.reading) {
            self.spare = Some(reader);
        }
        if let Some(mut call) = self.env.take_args_call() {
            call.cut_off(cut);
            self.put_back(call);
        }
        if self.markup.frames.is_empty()
            || ctx.decision() == Decision::Data
            || self.until == Until::Value
            || too_deep
        {
            return Ok(Took::End(consumed));
        }
        Ok(Took::Go(consumed))
    }

    /// The innermost open pair and its index among the frames.
    fn innermost_pair(&self) -> Option<(usize, &PairRef)> {
        self.markup.frames.iter().enumerate().rev().find_map(|(idx, f)| match f {
            Elem::Pair(pair) => Some((idx, pair)),
            _ => None,
        })
    }

    /// Between items: whitespace, then a JSON value, a tag, a fence, or the region's end.
    fn between(&mut self, rest: &str, abs: usize, ctx: &mut Ctx<'_, '_>, eof: bool) -> Step {
        let ws = rest.bytes().take_while(u8::is_ascii_whitespace).count();
        if ws == 0 {
            return self.item(rest, abs, ctx, eof);
        }
        // Whitespace is skipped in the same step as the item after it, unless the engine
        // does something between the two steps: it checks the hold limit while the
        // decision is pending, and it may show text.
        let after = rest.get(ws..).unwrap_or_default();
        if ctx.decision() == Decision::Pending || after.is_empty() || self.shows_text(ctx) {
            return Ok(Took::Go(ws));
        }
        match self.item(after, abs + ws, ctx, eof) {
            Ok(Took::Go(n)) => Ok(Took::Go(ws + n)),
            Ok(Took::End(n)) => Ok(Took::End(ws + n)),
            Err(Need) => Ok(Took::Go(ws)),
        }
    }

    /// An item: a JSON value, a tag, a fence, a marker, or the region's end.
    fn item(&mut self, rest: &str, abs: usize, ctx: &mut Ctx<'_, '_>, eof: bool) -> Step {
        let Some(&b) = rest.as_bytes().first() else {
            return Err(Need);
        };
        let at = abs;
        // The end of the reasoning the region is in.
        if let Some(stop) = self.stop {
            if rest.starts_with(stop) {
                return Ok(Took::End(0));
            }
            if !eof && rest.len() < stop.len() && stop.starts_with(rest) {
                return Err(Need);
            }
        }
        // The end markers of open pairs, innermost first.
        let mut closing = None;
        for (idx, frame) in self.markup.frames.iter().enumerate().rev() {
            let Elem::Pair(pair) = frame else { continue };
            if let Some(len) = end_of(pair, rest, eof)? {
                closing = Some((idx, len));
                break;
            }
        }
        if let Some((idx, len)) = closing {
            self.close_frames(idx, ctx);
            if self.markup.frames.is_empty() {
                return Ok(Took::End(len));
            }
            return Ok(Took::Go(len));
        }
        // What the innermost pair makes of the text: its start again, an inner pair, a
        // name head.
        if let Some(step) = self.pair_item(rest, at, ctx, eof)? {
            return Ok(step);
        }
        // A key token in a call whose arguments are token pairs.
        if let Some(len) = self.arg_key(rest, eof)? {
            return Ok(Took::Go(len));
        }
        // Python calls inside markup.
        let holds_calls = matches!(
            self.markup.frames.last(),
            Some(Elem::Container { call: None, .. } | Elem::Pair(_))
        );
        if holds_calls && ctx.config().dialects.has(Builtin::Python) {
            let ahead = match b {
                b'[' => list_ahead(rest, eof, ctx.config())?,
                _ if b.is_ascii_alphabetic() || b == b'_' => {
                    call_ahead(rest, eof, ctx.config(), false)?
                }
                _ => None,
            };
            if ahead.is_some() {
                let group = PyGroup::new(PyMode::Inner, ctx.config().max_depth);
                self.reading = Reading::Python(Box::new(group));
                return Ok(Took::Go(0));
            }
        }
        // A bare name right after a container's start tag, then key/value tags.
        let bare_container = matches!(
            self.markup.frames.last(),
            Some(Elem::Container { call: None, held: false, .. })
        );
        if bare_container && (b.is_ascii_alphabetic() || b == b'_') {
            if let Some(len) = bare_name(rest, eof)? {
                let name = rest.get(..len).unwrap_or_default().to_owned();
                self.ensure_container_call(ctx);
                if let Some(call) = self.current_call() {
                    call.name = Some(name);
                    ctx.resolve(call);
                }
                return Ok(Took::Go(len));
            }
        }
        match b {
            b'{' | b'[' => {
                self.begin_json(at, ctx);
                // The value is read in the same step unless the engine does something
                // first: it caps what the reader sees while the decision is pending, and
                // it may show text.
                if ctx.decision() == Decision::Pending || self.shows_text(ctx) {
                    return Ok(Took::Go(0));
                }
                self.step_json(rest, at, ctx)
            }
            b'`' => self.fence_mark(rest, eof),
            b'<' => match read_tag(rest, eof)? {
                // The output ended inside a tag of an open call: the call was cut off
                // there, and the tag is part of it.
                None if eof && !rest.contains('>') && self.current_call().is_some() => {
                    if let Some(call) = self.current_call() {
                        call.cut_off(Cut::Value);
                    }
                    Ok(Took::End(rest.len()))
                }
                None => Ok(Took::End(0)),
                Some(tag) if tag.closing => self.close_tag(&tag, ctx),
                Some(tag) => {
                    // The same container opening again: the previous one missed its end tag.
                    let reopen = self.markup.frames.iter().any(|f| {
                        matches!(f, Elem::Container { close, call, .. } if same_name(close, tag.name) && (call.is_some() || ctx.has_calls()))
                    });
                    if reopen {
                        return Ok(Took::End(0));
                    }
                    if self.open_tag(&tag, at, ctx) {
                        Ok(Took::Go(tag.len))
                    } else {
                        Ok(Took::End(0))
                    }
                }
            },
            _ => self.section_noise(rest, at, ctx, eof),
        }
    }

    /// Text inside a tool-calls section that is no call (`<|tool_calls_section_begin|>
    /// noise <|tool_call_begin|>…`): it belongs to the markup, not to the answer, and is
    /// dropped with a warning that carries it. The rest of a call element whose arguments
    /// broke off into something that is not JSON (`<tool_call>{"name": …, "arguments":
    /// {invalid json}</tool_call>`) is read up to the end tag: the withdrawn call's text,
    /// shown with it; after whole arguments (JSON, or a last parameter value whose end tag
    /// text follows, `…</parameter> prose </invoke>`) it is dropped with a warning that
    /// carries it. Anywhere else it ends the region.
    fn section_noise(&mut self, rest: &str, at: usize, ctx: &mut Ctx<'_, '_>, eof: bool) -> Step {
        let in_section =
            matches!(self.markup.frames.last(), Some(Elem::Pair(pair)) if pair.is_section());
        let broken =
            self.markup.broke_off.filter(|&(frames, _)| frames == self.markup.frames.len());
        // After a call's JSON in its element, whole or broken off, up to the end tag (a
        // stray closer after a whole call is the region's: it belongs to the call).
        let after_json = broken.is_some()
            || (ctx.pending_is_named()
                && !matches!(rest.as_bytes().first(), Some(b'}' | b']'))
                && matches!(self.markup.frames.last(), Some(Elem::Container { held: true, .. })));
        let in_broken_call = after_json
            && (self.markup.frames.last().and_then(Elem::close_name).is_some()
                || self.markup.loose_close().is_some());
        let withdrawn = broken.is_some_and(|(_, withdrawn)| withdrawn);
        if !in_section && !in_broken_call {
            return Ok(Took::End(0));
        }
        // Up to the next marker; a run longer than that is no noise between calls.
        let window = rest.as_bytes().get(..rest.len().min(MAX_SECTION_NOISE)).unwrap_or_default();
        let n = match memchr::memchr(b'<', window) {
            Some(n) => n,
            None if eof && rest.len() < MAX_SECTION_NOISE => rest.len(),
            None if rest.len() < MAX_SECTION_NOISE => return Err(Need),
            None => return Ok(Took::End(0)),
        };
        // The rest of a withdrawn call is shown with it.
        let text = rest.get(..n).unwrap_or_default();
        if !in_broken_call {
            ctx.warn(
                WarningCode::IgnoredText,
                format!("text inside a tool-calls section that is no call was dropped: {text:?}"),
                at..at + n,
            );
        } else if !withdrawn {
            ctx.warn(
                WarningCode::IgnoredText,
                format!("text after the call's arguments inside its element was dropped: {text:?}"),
                at..at + n,
            );
        }
        Ok(Took::Go(n))
    }

    /// What the innermost pair makes of the text at the cursor.
    fn pair_item(
        &mut self,
        rest: &str,
        at: usize,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Result<Option<Took>, Need> {
        let Some((idx, pair)) = self.innermost_pair() else { return Ok(None) };
        let pair = pair.clone();
        let pair = &pair;
        let innermost = idx + 1 == self.markup.frames.len();
        let Some(step) = pair_step(pair, rest, eof)? else { return Ok(None) };
        match step {
            PairStep::Skip(len) => {
                // The pair's own start again (the next call), or a separator.
                self.close_open_calls(at, ctx);
                Ok(Some(Took::Go(len)))
            }
            PairStep::Ignore(len) => Ok(Some(Took::Go(len))),
            PairStep::Inner(inner) => {
                self.close_open_calls(at, ctx);
                let len = inner.start.len();
                self.markup.frames.push(Elem::Pair(PairRef::Native(inner)));
                Ok(Some(Took::Go(len)))
            }
            PairStep::Name if innermost => {
                let head = pair.head();
                let Some(named) = read_name(pair, rest, eof)? else { return Ok(None) };
                if let Head::Recipient { .. } = head {
                    return Ok(Some(Took::Go(named.len)));
                }
                let mut call = ctx.open_call(at);
                call.name = Some(named.name);
                call.id = named.id;
                ctx.resolve(&mut call);
                self.markup.frames.push(Elem::Call { close: None, call: Some(call) });
                if let (PairBody::Freeform { .. }, PairRef::Native(row)) = (pair.body(), pair) {
                    let pair = Row::clone(row);
                    self.reading = Reading::Field(Field::Freeform { text: String::new(), pair });
                }
                Ok(Some(Took::Go(named.len)))
            }
            PairStep::Name => Ok(None),
        }
    }

    /// A JSON value begins: the arguments of the innermost call, or calls of its own.
    fn begin_json(&mut self, at: usize, ctx: &mut Ctx<'_, '_>) {
        if let Some(Elem::Container { held, at: start, call: None, .. }) =
            self.markup.frames.last_mut()
        {
            if !*held {
                // The container's tag is the syntax of what it holds, not the text of a
                // (rejected) call before it.
                ctx.settle_before(*start);
            }
            *held = true;
        } else if let Some(Elem::Container { held, .. }) = self.markup.frames.last_mut() {
            *held = true;
        }
        match self.lend_call() {
            Some(call) if !call.args.started() => self.env.begin_args(call, ctx),
            lent => {
                // A second JSON value after the call's arguments: the call is over, and
                // the value is read on its own.
                if let Some(call) = lent {
                    self.put_back(call);
                    self.close_open_calls(at, ctx);
                }
                let fenced_only = self.markup.frames.iter().all(|f| matches!(f, Elem::Fence));
                self.env.begin_value(if fenced_only { Origin::Bare } else { Origin::Marked }, ctx);
                self.env.single_key = self.markup.frames.iter().any(
                    |f| matches!(f, Elem::Pair(pair) if *pair.body() == PairBody::NamedObjects),
                );
            }
        }
        self.start_reader(ctx.config().max_depth);
    }

    /// Backticks between items: the end of a fence, or a fence inside markup.
    fn fence_mark(&mut self, rest: &str, eof: bool) -> Step {
        let ticks = rest.bytes().take(3).take_while(|&c| c == b'`').count();
        if ticks < 3 {
            return if ticks == rest.len() && !eof { Err(Need) } else { Ok(Took::End(0)) };
        }
        if matches!(self.markup.frames.last(), Some(Elem::Fence)) {
            self.markup.frames.pop();
            if self.markup.frames.is_empty() {
                return Ok(Took::End(ticks));
            }
            return Ok(Took::Go(ticks));
        }
        // A fence inside markup: skip its opener line.
        let line = rest.as_bytes().iter().take(MAX_FENCE_LINE).position(|&c| c == b'\n');
        match line {
            Some(n) => {
                self.markup.frames.push(Elem::Fence);
                Ok(Took::Go(n + 1))
            }
            None if !eof && rest.len() < MAX_FENCE_LINE => Err(Need),
            _ => Ok(Took::End(0)),
        }
    }

    /// Sends the calls of a finished Python group, or decides the group is code.
    fn commit_python(&mut self, mut group: Box<PyGroup>, end: usize, ctx: &mut Ctx<'_, '_>) {
        let unusable = group.not_calls.is_some() || group.done.is_empty();
        if unusable && ctx.has_calls() {
            // Calls came before in this region: only the group's own bytes are text.
            let message = format!(
                "text in tool-call markup was not a call ({}); it was kept as content",
                group.not_calls.as_deref().unwrap_or("no call")
            );
            ctx.not_calls(end, Some((WarningCode::MalformedCall, message)));
            return;
        }
        if let Some(why) = group.not_calls.take() {
            let fence = matches!(group.mode(), PyMode::Fence { .. });
            if fence && (group.saw_call() || ctx.unsettled_calls_a_tool(end)) {
                ctx.warn_unsettled(
                    WarningCode::Example,
                    format!(
                        "a Python block that is a program, not calls, was kept as text ({why})"
                    ),
                    end,
                );
            }
            ctx.set_decision(Decision::Data);
            return;
        }
        if group.done.is_empty() {
            if group.mode() != PyMode::Inner {
                ctx.set_decision(Decision::Data);
            }
            return;
        }
        if ctx.decision() == Decision::Data {
            return;
        }
        ctx.set_decision(Decision::Calls);
        ctx.markup();
        for mut call in group.done.drain(..) {
            ctx.settle_before(call.start);
            if !call.is_rejected() {
                ctx.resolve(&mut call);
            }
            ctx.finish_call(call);
        }
    }

    /// The region ends at `end`: closes the JSON value, the Python group, the field and
    /// the markup still open, and hands the calls they held to the engine.
    /// A value still open there is cut off (the call is incomplete); closing brackets and
    /// tags still missing are added. `eof`: the output ended at `end`.
    pub(crate) fn end(&mut self, end: usize, eof: bool, ctx: &mut Ctx<'_, '_>) {
        let mut cut = Cut::No;
        let reading = std::mem::take(&mut self.reading);
        let reading = match reading {
            Reading::Json(mut reader) => {
                let open = reader.open_cut().into();
                self.env.repairing = open;
                if reader.finish(end, &mut self.env.sink(ctx)).any() {
                    cut = open;
                }
                self.env.repairing = Cut::No;
                self.spare = Some(reader);
                Reading::Between
            }
            other => other,
        };
        if let Some(mut call) = self.env.take_args_call() {
            call.cut_off(cut);
            self.put_back(call);
        }
        match reading {
            Reading::Python(mut group) => {
                group.finish(end);
                self.commit_python(group, end, ctx);
            }
            Reading::Label(label) => self.label_cut(label, end, ctx),
            Reading::Custom(custom) => self.custom_calls(&custom, end, true, ctx),
            Reading::Field(field) => self.field_cut(field, ctx),
            Reading::Between | Reading::Json(_) => {}
        }
        self.close_all(end, eof, ctx);
        self.env.end(cut, ctx);
    }
}
