//! JSON call envelopes: `{"name":…,"arguments":{…}}` and its relatives.
//!
//! Recognized shapes: one call object; a list of them; a `{"tool_calls":[…]}`
//! wrapper; the OpenAI shape `{"type":"function","function":{"name":…,"arguments":"…"}}`.
//! Name keys are `name`, `function`, `tool`, `tool_name`; argument keys `arguments`,
//! `parameters`, `input`, `params`, `args`; arguments given as a JSON string are
//! decoded once. The envelope is a [`Sink`] over the JSON reader's tokens: it never
//! touches the input buffer, only offsets the reader reports.

use crate::WarningCode;
use crate::engine::call::{CallState, Cut};
use crate::engine::settle::{Ctx, Decision};
use crate::json::canon::Canon;
use crate::json::reader::{Frame, Reader, Sink, Status};
use crate::rows;
use crate::rows::envelope::Key;

/// How strong the evidence is that the JSON is a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Found in prose: a call only once it has a name and arguments.
    Bare,
    /// Inside tool-call markup or a fence: a call as soon as it has a name.
    Marked,
    /// The value is the arguments of a call whose name the markup gave.
    ArgsOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// A call object; its state is the innermost entry of `calls`.
    Call,
    /// The `function` object of the OpenAI shape; keys apply to the innermost call.
    Function,
    /// A list of call objects.
    List,
    /// Inside the arguments value.
    Args,
    /// A value that is ignored.
    Skip,
    /// Inside a value that is ignored but reported: its text goes to `kept`.
    Kept,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Name,
    Function,
    Args,
    Id,
    Calls,
    Ignore,
    /// A key toolshim does not use.
    Other(String),
    /// A value that is not used; the warning (this message, then the value) carries it.
    Dropped(String),
}

fn classify(key: &str) -> Role {
    match rows::envelope::key(key) {
        Some(Key::Function) => Role::Function,
        Some(Key::Name) => Role::Name,
        Some(Key::Arguments) => Role::Args,
        Some(Key::Id) => Role::Id,
        Some(Key::Calls) => Role::Calls,
        Some(Key::Ignore) => Role::Ignore,
        None => Role::Other(key.to_owned()),
    }
}

/// The capture of a string value the envelope needs (name, id, arguments text).
#[derive(Debug)]
enum Capture {
    None,
    Name(Capped),
    Id(Capped),
    /// Arguments given as a JSON string: decoded text goes through a second reader.
    ArgsText {
        reader: Reader,
        failed: bool,
        raw: Capped,
    },
    /// A string value that is not used, kept for its warning.
    Dropped {
        message: String,
        canon: Canon,
    },
}

const MAX_CAPTURE: usize = 512;

/// The first `MAX_CAPTURE` bytes of a string that arrives in pieces. A character is kept
/// when it ends within the limit, whatever the pieces were, so the result does not
/// depend on the chunking.
#[derive(Debug, Default)]
struct Capped {
    text: String,
    /// Bytes offered so far, kept or not.
    seen: usize,
}

impl Capped {
    fn push(&mut self, piece: &str) {
        let room = MAX_CAPTURE.saturating_sub(self.seen);
        let mut end = room.min(piece.len());
        while !piece.is_char_boundary(end) {
            end -= 1;
        }
        let kept = piece.get(..end).unwrap_or_default();
        if self.text.capacity() == 0 {
            // Most captures are one piece: allocate it at its size.
            self.text = String::with_capacity(kept.len());
        }
        self.text.push_str(kept);
        self.seen = self.seen.saturating_add(piece.len());
    }
}

/// Interprets one JSON value as zero or more calls.
#[derive(Debug)]
pub(crate) struct Envelope {
    origin: Origin,
    levels: Vec<Level>,
    role: Option<Role>,
    #[expect(
        clippy::vec_box,
        reason = "calls move between this stack, `pending` and markup frames; a box moves as a pointer"
    )]
    calls: Vec<Box<CallState>>,
    capture: Capture,
    max_depth: usize,
    /// The reader is closing what is open because the input broke off.
    pub(crate) repairing: Cut,
    /// A container value that is not used, kept for its warning.
    kept: Option<(String, Canon)>,
    /// Call objects may be `{"NAME": {args}}` (set per value by the region).
    pub(crate) single_key: bool,
}

impl Envelope {
    /// The sink that feeds reader tokens into this envelope.
    pub(crate) fn sink<'e, 'c, 'o>(&'e mut self, ctx: &'e mut Ctx<'c, 'o>) -> EnvSink<'e, 'c, 'o> {
        EnvSink { env: self, ctx }
    }

    pub(crate) fn new(max_depth: usize) -> Envelope {
        Envelope {
            origin: Origin::Marked,
            levels: Vec::with_capacity(8),
            role: None,
            calls: Vec::with_capacity(2),
            capture: Capture::None,
            max_depth,
            repairing: Cut::No,
            kept: None,
            single_key: false,
        }
    }

    /// Makes this envelope a new one for a region, keeping its allocations.
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.origin = Origin::Marked;
        self.levels.clear();
        self.role = None;
        self.calls.clear();
        self.capture = Capture::None;
        self.max_depth = max_depth;
        self.repairing = Cut::No;
        self.kept = None;
        self.single_key = false;
    }

    /// The innermost call being read, if any.
    pub(crate) fn open_call(&self) -> Option<&CallState> {
        self.calls.last().map(|call| &**call)
    }

    /// Sends the arguments of the open call written so far.
    pub(crate) fn flush(&mut self, ctx: &mut Ctx<'_, '_>) {
        if let Some(call) = self.calls.last_mut() {
            ctx.flush(call);
        }
    }

    /// The region ends: calls still open were cut off by the end of their input.
    /// `cut` says what the reader had to close.
    pub(crate) fn end(&mut self, cut: Cut, ctx: &mut Ctx<'_, '_>) {
        if ctx.decision() == Decision::Data {
            return;
        }
        while let Some(mut call) = self.calls.pop() {
            if ctx.decision() == Decision::Pending {
                // A bare candidate cut off before it showed it was a call.
                let callable = call.name.is_some() && call.args_seen;
                if callable {
                    ctx.resolve(&mut call);
                    ctx.set_decision(Decision::Calls);
                } else {
                    ctx.set_decision(Decision::Data);
                    return;
                }
            }
            if call.name.is_none() && ctx.n_calls() > 0 {
                continue; // an unclosed wrapper
            }
            call.cut_off(cut);
            ctx.resolve(&mut call);
            ctx.finish_call(call);
        }
    }

    /// Whether the reader is inside the arguments value of a call.
    pub(crate) fn in_args(&self) -> bool {
        self.levels.last() == Some(&Level::Args)
    }

    /// Whether the reader's tokens go to the arguments of an accepted call.
    pub(crate) fn in_accepted_args(&self, ctx: &Ctx<'_, '_>) -> bool {
        self.levels.last() == Some(&Level::Args)
            && ctx.decision() == Decision::Calls
            && self.calls.last().is_some_and(|call| call.is_accepted())
    }

    /// Starts reading a new JSON value in this region.
    pub(crate) fn begin_value(&mut self, origin: Origin, ctx: &mut Ctx<'_, '_>) {
        self.origin = origin;
        self.levels.clear();
        self.role = None;
        if origin == Origin::Bare && ctx.n_calls() == 0 && !ctx.has_pending() {
            ctx.set_decision(Decision::Pending);
        }
    }

    /// Starts a value that is the arguments of `call` (whose name the markup gave).
    pub(crate) fn begin_args(&mut self, call: Box<CallState>, ctx: &mut Ctx<'_, '_>) {
        self.begin_value(Origin::ArgsOnly, ctx);
        self.calls.push(call);
        self.role = Some(Role::Args);
    }

    /// Takes back the call given to `begin_args`, when its value ended.
    pub(crate) fn take_args_call(&mut self) -> Option<Box<CallState>> {
        if self.origin == Origin::ArgsOnly { self.calls.pop() } else { None }
    }

    fn innermost(&mut self) -> Option<&mut CallState> {
        self.calls.last_mut().map(|call| &mut **call)
    }
}

/// A bare candidate becomes a call once it has a name and arguments.
fn maybe_commit(env: &mut Envelope, ctx: &mut Ctx<'_, '_>) {
    let origin = env.origin;
    let decision = ctx.decision();
    let Some(call) = env.calls.last_mut() else { return };
    if call.name.is_none() {
        return;
    }
    if origin != Origin::Bare || decision == Decision::Calls || call.args_seen {
        ctx.resolve(call);
        if ctx.decision() == Decision::Pending {
            ctx.set_decision(Decision::Calls);
        }
    }
}

/// The envelope together with what it writes to; implements the reader's sink.
pub(crate) struct EnvSink<'e, 'c, 'o> {
    env: &'e mut Envelope,
    ctx: &'e mut Ctx<'c, 'o>,
}

impl EnvSink<'_, '_, '_> {
    fn data(&self) -> bool {
        self.ctx.decision() == Decision::Data
    }

    fn note(&mut self, code: WarningCode, message: String) {
        if let Some(call) = self.env.innermost() {
            call.extra_notes.push((code, message));
        }
    }

    fn in_args(&self) -> bool {
        self.env.levels.last() == Some(&Level::Args)
    }

    fn in_kept(&self) -> bool {
        self.env.levels.last() == Some(&Level::Kept)
    }

    /// Ends a kept value: its warning carries it.
    fn kept_done(&mut self, message: String, canon: &mut Canon) {
        canon.close_all();
        let text = std::mem::take(&mut canon.out);
        self.note(WarningCode::IgnoredField, format!("{message}: {text}"));
    }

    /// A key at a call level that toolshim does not use. Returns false when it shows
    /// that a bare candidate is data.
    fn other_key(&mut self, key: &str) -> bool {
        let env = &mut *self.env;
        if self.ctx.decision() == Decision::Pending {
            let known = match (&env.calls.last(), &self.ctx.config().tools) {
                (Some(call), Some(tools)) => {
                    call.name.as_deref().is_some_and(|name| tools.resolve(name).is_some())
                }
                _ => false,
            };
            if !known {
                self.ctx.set_decision(Decision::Data);
                return false;
            }
        }
        let _ = key;
        true
    }

    fn call_closed(&mut self, end: usize) {
        let Some(mut call) = self.env.calls.pop() else { return };
        let bare_top = self.ctx.decision() == Decision::Pending;
        if bare_top {
            let named = call.name.is_some();
            let known_tool = match (&call.name, &self.ctx.config().tools) {
                (Some(name), Some(tools)) => tools.resolve(name).is_some(),
                _ => false,
            };
            if named && (call.args_seen || known_tool) {
                self.ctx.resolve(&mut call);
                self.ctx.set_decision(Decision::Calls);
            } else if call.name.is_none() && self.ctx.n_calls() > 0 {
                self.wrapper_closed(&mut call, end);
                return;
            } else {
                self.ctx.set_decision(Decision::Data);
                return;
            }
        }
        if call.name.is_none() && (self.ctx.n_calls() > 0 || self.ctx.has_pending()) {
            self.wrapper_closed(&mut call, end);
            return;
        }
        let cut = match self.env.repairing {
            // The output broke off after the model closed the arguments (a small model that
            // goes on to write a `"result"` key, cut by a stop sequence): the arguments are
            // whole, so the call is; what followed them is dropped, and said.
            Cut::Value if call.args_closed => {
                call.extra_notes.push((
                    WarningCode::IgnoredText,
                    "the call broke off after its whole arguments; what followed them in the \
                     call's JSON was dropped"
                        .into(),
                ));
                Cut::Closers
            }
            cut => cut,
        };
        call.cut_off(cut);
        self.ctx.resolve(&mut call);
        self.ctx.finish_call(call);
    }

    /// A wrapper around calls ended: its bytes belong to the calls' spans, and what it
    /// held besides calls (ignored fields) is reported with the text it carried.
    fn wrapper_closed(&mut self, call: &mut CallState, end: usize) {
        for (code, message) in std::mem::take(&mut call.extra_notes) {
            self.ctx.warn(code, message, call.start..end);
        }
    }

    fn call_opened(&mut self, at: usize) {
        let call = self.ctx.open_call(at);
        self.env.calls.push(call);
    }
}

impl Sink for EnvSink<'_, '_, '_> {
    fn open(&mut self, frame: Frame, at: usize) {
        if self.data() {
            return;
        }
        if self.in_kept() {
            if let Some((_, canon)) = &mut self.env.kept {
                canon.open(frame, at);
            }
            self.env.levels.push(Level::Kept);
            return;
        }
        if self.in_args() {
            self.env.levels.push(Level::Args);
            if let Some(call) = self.env.innermost() {
                call.args.open(frame, at);
            }
            return;
        }
        let role = self.env.role.take();
        let parent = self.env.levels.last().copied();
        let level = match (parent, role, frame) {
            (None, _, Frame::Object) if self.env.origin == Origin::ArgsOnly => {
                if let Some(call) = self.env.innermost() {
                    call.args_seen = true;
                    call.args.open(frame, at);
                }
                Level::Args
            }
            (None, _, Frame::Object) => {
                self.call_opened(at);
                Level::Call
            }
            (None, _, Frame::Array) if self.env.origin != Origin::ArgsOnly => Level::List,
            (Some(Level::List), _, Frame::Object) => {
                self.call_opened(at);
                Level::Call
            }
            (Some(Level::Call | Level::Function), Some(Role::Function), Frame::Object) => {
                Level::Function
            }
            (Some(Level::Call | Level::Function), Some(Role::Calls), Frame::Array) => Level::List,
            (Some(Level::Call | Level::Function), Some(Role::Calls), Frame::Object) => {
                self.call_opened(at);
                Level::Call
            }
            (Some(Level::Call | Level::Function), Some(Role::Args), Frame::Object) => {
                if let Some(call) = self.env.innermost() {
                    call.args_seen = true;
                    call.args.open(frame, at);
                }
                maybe_commit(self.env, self.ctx);
                Level::Args
            }
            (Some(Level::Call | Level::Function), Some(Role::Args), Frame::Array) => {
                self.note(
                    WarningCode::InvalidArguments,
                    "the arguments were a JSON array, not an object; they were ignored".into(),
                );
                Level::Skip
            }
            (Some(Level::List), _, Frame::Array) | (None, _, Frame::Array) => {
                if self.ctx.decision() == Decision::Pending {
                    self.ctx.set_decision(Decision::Data);
                }
                Level::Skip
            }
            (_, Some(Role::Dropped(message)), frame) => {
                let mut canon = Canon::default();
                canon.open(frame, at);
                self.env.kept = Some((message, canon));
                Level::Kept
            }
            _ => Level::Skip,
        };
        if self.env.levels.len() >= self.env.max_depth && self.ctx.decision() == Decision::Pending {
            self.ctx.set_decision(Decision::Data);
        }
        self.env.levels.push(level);
    }

    fn close(&mut self, end: usize) {
        if self.data() {
            return;
        }
        let Some(level) = self.env.levels.pop() else { return };
        match level {
            Level::Args => {
                // The arguments themselves (not an object nested in them), closed by the
                // model rather than by a repair.
                let whole =
                    self.env.repairing == Cut::No && self.env.levels.last() != Some(&Level::Args);
                if let Some(call) = self.env.innermost() {
                    call.args.close(end);
                    call.args_closed |= whole;
                }
            }
            Level::Call => self.call_closed(end),
            Level::List => {
                if self.ctx.decision() == Decision::Pending {
                    self.ctx.set_decision(Decision::Data);
                }
            }
            Level::Kept => {
                if let Some((_, canon)) = &mut self.env.kept {
                    canon.close(end);
                }
                if !self.in_kept() {
                    if let Some((message, mut canon)) = self.env.kept.take() {
                        self.kept_done(message, &mut canon);
                    }
                }
            }
            Level::Function | Level::Skip => {}
        }
    }

    fn key(&mut self, key: &str) {
        if self.data() {
            return;
        }
        match self.env.levels.last() {
            Some(Level::Args) => {
                if let Some(call) = self.env.innermost() {
                    call.args.key(key);
                }
            }
            Some(Level::Kept) => {
                if let Some((_, canon)) = &mut self.env.kept {
                    canon.key(key);
                }
            }
            Some(Level::Call | Level::Function) => {
                let mut role = classify(key);
                if role == Role::Args && self.env.calls.last().is_some_and(|c| c.args_seen) {
                    role = Role::Dropped(format!(
                        "a second arguments field `{key}` was ignored; the first one is used"
                    ));
                }
                // Only a wrapper holds calls: a call object that already has a name or
                // arguments does not nest other calls, and a wrapper that held calls does
                // not become a call; such fields are ignored ones.
                let (named, wrapper) =
                    self.env.calls.last().map_or((false, false), |c| {
                        (c.name.is_some() || c.args_seen, c.holds_calls)
                    });
                let call_field =
                    matches!(role, Role::Name | Role::Function | Role::Args | Role::Id);
                if (role == Role::Calls && named) || (call_field && wrapper) {
                    role = Role::Other(key.to_owned());
                }
                if role == Role::Calls {
                    if let Some(call) = self.env.innermost() {
                        call.holds_calls = true;
                    }
                }
                if let Role::Other(other) = &role {
                    // `{"get_weather": {…}}`: the key is the name, its value the arguments
                    // (not in a wrapper that held calls: it does not become a call).
                    let unnamed = self.env.calls.last().is_some_and(|c| c.name.is_none());
                    if self.env.single_key && unnamed && !wrapper {
                        if let Some(call) = self.env.innermost() {
                            call.name = Some(other.clone());
                        }
                        self.env.role = Some(Role::Args);
                        return;
                    }
                    if !self.other_key(other) {
                        return;
                    }
                    role = Role::Dropped(format!("the field `{other}` of the call was ignored"));
                }
                self.env.role = Some(role);
            }
            _ => {}
        }
    }

    fn str_start(&mut self) {
        if self.data() {
            return;
        }
        if self.in_kept() {
            if let Some((_, canon)) = &mut self.env.kept {
                canon.str_start();
            }
            return;
        }
        if self.in_args() {
            if let Some(call) = self.env.innermost() {
                call.args.str_start();
            }
            return;
        }
        if !matches!(self.env.levels.last(), Some(Level::Call | Level::Function)) {
            if self.env.levels.last() == Some(&Level::List)
                && self.ctx.decision() == Decision::Pending
            {
                self.ctx.set_decision(Decision::Data);
            }
            return;
        }
        self.env.capture = match self.env.role.take() {
            Some(Role::Name | Role::Function) => Capture::Name(Capped::default()),
            Some(Role::Id) => Capture::Id(Capped::default()),
            Some(Role::Dropped(message)) => {
                let mut canon = Canon::default();
                canon.str_start();
                Capture::Dropped { message, canon }
            }
            Some(Role::Args) => {
                if let Some(call) = self.env.innermost() {
                    call.args_seen = true;
                }
                maybe_commit(self.env, self.ctx);
                Capture::ArgsText {
                    reader: Reader::new(self.env.max_depth),
                    failed: false,
                    raw: Capped::default(),
                }
            }
            _ => Capture::None,
        };
    }

    fn str_part(&mut self, text: &str, clean: bool) {
        if self.data() {
            return;
        }
        if self.in_kept() {
            if let Some((_, canon)) = &mut self.env.kept {
                canon.str_part(text, clean);
            }
            return;
        }
        if self.in_args() {
            if let Some(call) = self.env.innermost() {
                call.args.str_part(text, clean);
            }
            return;
        }
        let Envelope { capture, calls, .. } = &mut *self.env;
        match capture {
            Capture::None => {}
            Capture::Dropped { canon, .. } => canon.str_part(text, clean),
            Capture::Name(capped) | Capture::Id(capped) => capped.push(text),
            Capture::ArgsText { reader, failed, raw } => {
                raw.push(text);
                if *failed {
                    return;
                }
                let Some(call) = calls.last_mut() else { return };
                // Only an object can be the arguments: anything else is never written, so
                // no argument delta goes out for it.
                let first = text.trim_start().as_bytes().first();
                if !call.args.started() && first.is_some_and(|&b| b != b'{') {
                    *failed = true;
                    return;
                }
                match reader.feed(text, 0, &mut call.args) {
                    Status::NeedMore => {}
                    Status::Done(n) => {
                        if text.get(n..).is_some_and(|rest| !rest.trim().is_empty()) {
                            *failed = true;
                        }
                    }
                    Status::Invalid(_) => *failed = true,
                }
            }
        }
    }

    fn str_escaped(&mut self, json: &str) {
        if self.data() {
            return;
        }
        if self.in_args() {
            if let Some(call) = self.env.innermost() {
                call.args.str_escaped(json);
            }
            return;
        }
        self.str_part(&crate::json::scalar::decode_escaped(json), false);
    }

    fn str_end(&mut self) {
        if self.data() {
            return;
        }
        if self.in_kept() {
            if let Some((_, canon)) = &mut self.env.kept {
                canon.str_end();
            }
            return;
        }
        if self.in_args() {
            if let Some(call) = self.env.innermost() {
                call.args.str_end();
            }
            return;
        }
        match std::mem::replace(&mut self.env.capture, Capture::None) {
            Capture::None => {}
            Capture::Dropped { message, mut canon } => {
                canon.str_end();
                self.kept_done(message, &mut canon);
            }
            Capture::Name(name) => {
                if let Some(call) = self.env.innermost() {
                    if call.name.is_none() {
                        call.name = Some(name.text);
                    }
                }
                maybe_commit(self.env, self.ctx);
            }
            Capture::Id(id) => {
                if let Some(call) = self.env.innermost() {
                    call.id.get_or_insert(id.text);
                }
            }
            Capture::ArgsText { mut reader, failed, raw: Capped { text: raw, .. } } => {
                let Some(call) = self.env.calls.last_mut() else { return };
                let closed = reader.finish(0, &mut call.args);
                if failed || !call.args.started() || !call.args.canon.out.starts_with('{') {
                    let message = if raw.trim().is_empty() {
                        None
                    } else {
                        Some(format!("the arguments string is not a JSON object: {raw:?}"))
                    };
                    if let Some(message) = message {
                        call.extra_notes.push((WarningCode::InvalidArguments, message));
                    }
                } else if closed.any() {
                    call.extra_notes.push((
                        WarningCode::RepairedJson,
                        "the arguments string held cut-off JSON; it was closed".into(),
                    ));
                }
            }
        }
    }

    fn scalar(&mut self, json: &str) {
        if self.data() {
            return;
        }
        if self.in_kept() {
            if let Some((_, canon)) = &mut self.env.kept {
                canon.scalar(json);
            }
            return;
        }
        if self.in_args() {
            if let Some(call) = self.env.innermost() {
                call.args.scalar(json);
            }
            return;
        }
        match self.env.levels.last() {
            Some(Level::Call | Level::Function) => {
                match self.env.role.take() {
                    Some(Role::Args) => {
                        if let Some(call) = self.env.innermost() {
                            call.args_seen = true;
                            if json != "null" {
                                call.extra_notes.push((
                                WarningCode::InvalidArguments,
                                format!("the arguments were `{json}`, not an object; they were ignored"),
                            ));
                            }
                        }
                        maybe_commit(self.env, self.ctx);
                    }
                    Some(Role::Id) => {
                        if let Some(call) = self.env.innermost() {
                            call.id.get_or_insert_with(|| json.to_owned());
                        }
                    }
                    Some(Role::Dropped(message)) => {
                        self.note(WarningCode::IgnoredField, format!("{message}: {json}"));
                    }
                    _ => {}
                }
            }
            Some(Level::List) if self.ctx.decision() == Decision::Pending => {
                self.ctx.set_decision(Decision::Data);
            }
            _ => {}
        }
    }

    fn repaired(&mut self, what: &'static str) {
        if self.data() {
            return;
        }
        if let Some(call) = self.env.innermost() {
            call.args.repaired(what);
        }
    }

    fn too_deep(&mut self, _max_depth: usize) {
        // The region that owns this reader reports it (`Region::step`) and ends there.
    }
}
