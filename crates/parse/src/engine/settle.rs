//! Settlement: which bytes of a region are text and which belong to a call's span.
//!
//! Readers never show text. They tell the engine, through [`Ctx`], what they found:
//! a call begins at an offset, a call is finished, the bytes are calls or data. The
//! engine keeps the settle mark and decides what goes out as text.

use std::ops::Range;

use crate::Config;
use crate::WarningCode;
use crate::config::RejectedText;
use crate::engine::call::CallState;
use crate::engine::out::Out;

/// What the region's bytes are, as far as its readers have told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not known yet: hold the text.
    Pending,
    /// It is tool-call syntax.
    Calls,
    /// It is data, not a call: show the text.
    Data,
}

/// How strong the region's evidence of tool syntax is, for the warning when it ends
/// without a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// A bracket, a fence or a Python line: if no call comes of it, it was just text.
    Weak,
    /// Tool-call markup, a marker or a label: if no call comes of it, say so.
    Markup,
}

/// The settlement of one region. Invariant: `seg` only grows, and bytes before it
/// have gone out as text or lie in the span of a call that went out.
#[derive(Debug)]
pub(crate) struct Segments {
    /// Bytes before this absolute offset are settled.
    seg: usize,
    /// A finished call waiting for the end of its span (the next call, or the region end).
    pending: Option<Box<CallState>>,
    decision: Decision,
    syntax: Syntax,
    /// Calls finished in the region.
    n_calls: usize,
}

impl Segments {
    pub(in crate::engine) fn new(start: usize, decision: Decision) -> Segments {
        Segments { seg: start, pending: None, decision, syntax: Syntax::Weak, n_calls: 0 }
    }

    pub(in crate::engine) fn seg(&self) -> usize {
        self.seg
    }

    pub(in crate::engine) fn decision(&self) -> Decision {
        self.decision
    }

    pub(in crate::engine) fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// Gives up on a pending decision: the text is data. Returns whether it changed.
    pub(in crate::engine) fn force_data(&mut self) -> bool {
        let pending = self.decision == Decision::Pending;
        if pending {
            self.decision = Decision::Data;
        }
        pending
    }

    /// Whether the region's bytes are calls and its last call, still waiting for the
    /// end of its span, does not show its text (it was accepted, or rejected and hidden).
    pub(in crate::engine) fn last_call_hides_its_text(&self, config: &Config) -> bool {
        let hide = config.rejected_text == RejectedText::Hide;
        self.decision == Decision::Calls
            && self.pending.as_ref().is_some_and(|call| {
                (call.is_accepted() && !call.is_withdrawn()) || (call.is_rejected() && hide)
            })
    }

    pub(in crate::engine) fn has_calls(&self) -> bool {
        self.n_calls > 0 || self.pending.is_some()
    }

    /// Whether the bytes since `seg` should be shown as text now; `open` is the
    /// innermost call a JSON body is reading.
    pub(in crate::engine) fn shows_text(&self, config: &Config, open: Option<&CallState>) -> bool {
        if self.decision == Decision::Data {
            return true;
        }
        let keep = config.rejected_text == RejectedText::Keep;
        match open {
            Some(call) if !call.is_accepted() && !call.is_rejected() && self.pending.is_some() => {
                self.pending.as_ref().is_some_and(|p| p.is_rejected() && keep)
            }
            Some(call) => call.is_rejected() && keep,
            None => self.pending.as_ref().is_some_and(|p| p.is_rejected() && keep),
        }
    }
}

/// What a reader reports to while it reads a region: the engine's output and the
/// region's settlement, behind methods that say what was found. A reader sees the
/// input only as the `&str` it is stepped with.
pub(crate) struct Ctx<'c, 'o> {
    out: &'c mut Out<'o>,
    seg: &'c mut Segments,
    /// The engine's buffer and the absolute offset of its first byte.
    buf: &'c str,
    base: usize,
}

impl<'c, 'o> Ctx<'c, 'o> {
    pub(in crate::engine) fn new(
        out: &'c mut Out<'o>,
        seg: &'c mut Segments,
        buf: &'c str,
        base: usize,
    ) -> Ctx<'c, 'o> {
        Ctx { out, seg, buf, base }
    }

    pub(crate) fn config(&self) -> &'o Config {
        self.out.config()
    }

    pub(crate) fn decision(&self) -> Decision {
        self.seg.decision
    }

    pub(crate) fn set_decision(&mut self, decision: Decision) {
        self.seg.decision = decision;
    }

    /// The bytes are tool-call markup: a pending decision becomes calls, and a region
    /// that ends without a call is reported.
    pub(crate) fn markup(&mut self) {
        self.seg.syntax = Syntax::Markup;
    }

    /// Whether the engine shows the region's unsettled bytes after a step that leaves
    /// `open` as the innermost call of a JSON body. A reader may go on in the same step
    /// only when it does not: streaming then sends text at the same points.
    pub(crate) fn shows_text(&self, open: Option<&CallState>) -> bool {
        self.seg.shows_text(self.config(), open)
    }

    /// Whether any call (accepted or rejected) was finished in the region.
    pub(crate) fn has_calls(&self) -> bool {
        self.seg.has_calls()
    }

    /// Calls finished in the region.
    pub(crate) fn n_calls(&self) -> usize {
        self.seg.n_calls
    }

    /// Whether a finished call still waits for the end of its span.
    pub(crate) fn has_pending(&self) -> bool {
        self.seg.pending.is_some()
    }

    /// Whether the finished call that waits for the end of its span got a name (it is a
    /// call, accepted or rejected, not syntax whose text will be shown).
    pub(crate) fn pending_is_named(&self) -> bool {
        self.seg.pending.as_ref().is_some_and(|call| call.is_named())
    }

    /// The call's name is known: it is accepted (`CallStart` goes out with the
    /// arguments written so far) or rejected.
    pub(crate) fn resolve(&mut self, call: &mut CallState) {
        call.resolve(self.out);
    }

    /// Sends the arguments of `call` written since the last time.
    pub(crate) fn flush(&mut self, call: &mut CallState) {
        call.flush(self.out);
    }

    /// A warning about `span` that belongs to no call.
    pub(crate) fn warn(&mut self, code: WarningCode, message: String, span: Range<usize>) {
        self.out.warn(code, message, None, span);
    }

    /// A warning about the bytes from the settle mark to `end`.
    pub(crate) fn warn_unsettled(&mut self, code: WarningCode, message: String, end: usize) {
        let span = self.seg.seg..end;
        self.out.warn(code, message, None, span);
    }

    /// Whether the region's bytes from the settle mark to `end` write a call to a
    /// declared tool (`NAME(`).
    pub(crate) fn unsettled_calls_a_tool(&self, end: usize) -> bool {
        let text = self.slice(self.seg.seg..end);
        self.config().tools.as_ref().is_some_and(|tools| {
            tools.tools().iter().any(|tool| text.contains(&format!("{}(", tool.name())))
        })
    }

    /// A new call's syntax begins at `at`: the previous finished call's span ends there.
    pub(crate) fn open_call(&mut self, at: usize) -> Box<CallState> {
        if self.seg.pending.is_some() {
            self.settle(at);
        }
        self.out.new_call(at)
    }

    /// A call's syntax begins at `at`: the previous finished call's span ends there.
    pub(crate) fn settle_before(&mut self, at: usize) {
        if self.seg.pending.is_some() {
            self.settle(at);
        }
    }

    /// A finished call: its span ends where the next call begins or the region ends.
    pub(crate) fn finish_call(&mut self, call: Box<CallState>) {
        if self.seg.pending.is_some() {
            let at = call.start.max(self.seg.seg);
            self.settle(at);
        }
        self.seg.n_calls += 1;
        self.seg.pending = Some(call);
    }

    /// The bytes from the settle mark to `end` are not calls after all: they go out as
    /// text, with this warning, and are settled.
    pub(crate) fn not_calls(&mut self, end: usize, warning: Option<(WarningCode, String)>) {
        let start = self.seg.seg;
        self.settle_before(start);
        if start < end {
            self.show(start..end);
            if let Some((code, message)) = warning {
                self.out.warn(code, message, None, start..end);
            }
        }
        self.seg.seg = self.seg.seg.max(end);
    }

    /// Ends the region's settlement at `end`: a pending decision is data, data is shown,
    /// and the pending call's span ends there.
    pub(in crate::engine) fn end(&mut self, end: usize) {
        match self.seg.decision {
            Decision::Data => {
                debug_assert!(self.seg.pending.as_ref().is_none_or(|p| !p.is_accepted()));
                self.show(self.seg.seg..end);
                self.seg.seg = end;
            }
            Decision::Pending => {
                self.seg.decision = Decision::Data;
                self.show(self.seg.seg..end);
                self.seg.seg = end;
            }
            Decision::Calls => self.settle(end),
        }
    }

    /// Settles the unsettled bytes up to `end` without showing them: markup that held no
    /// call, reported with a warning that carries it (and covers it).
    pub(in crate::engine) fn remove_upto(&mut self, end: usize) {
        let from = self.seg.seg;
        let raw = self.slice(from..end);
        self.out.warn(
            WarningCode::EmptyCallMarkup,
            format!("tool-call markup with no call in it was removed from the text: {raw:?}"),
            None,
            from..end,
        );
        self.seg.seg = end;
    }

    /// Shows the unsettled bytes up to `end` and settles them.
    pub(in crate::engine) fn show_upto(&mut self, end: usize) {
        let from = self.seg.seg;
        self.show(from..end);
        self.seg.seg = end;
    }

    /// Ends the pending call's span at `at`.
    fn settle(&mut self, at: usize) {
        // Text already shown (of a rejected call) cannot be taken back into a span.
        let given = at;
        let at = at.max(self.seg.seg);
        if let Some(call) = self.seg.pending.take() {
            let mut span = self.seg.seg..at;
            let keep = self.config().rejected_text == RejectedText::Keep;
            if call.is_rejected() && keep {
                self.show(span.clone());
                // Its text may have been shown earlier in pieces; the span is the
                // call's own syntax, which does not depend on the chunking (how much
                // was shown, `seg`, does).
                span = call.start.min(given)..given;
            }
            let start = call.start.min(at);
            let withdrawn = call.is_withdrawn() && call.is_accepted();
            if withdrawn {
                // Arguments that are not JSON: the call ends incomplete and its text
                // is content.
                call.end(self.out, span.clone());
                self.show(span);
            } else if !call.end(self.out, span.clone()) {
                // A call that never got a name: its text is shown, with a warning about
                // its syntax (which does not depend on the chunking).
                self.show(span);
                self.out.warn(
                    WarningCode::MalformedCall,
                    "tool-call syntax without a tool name; its text was kept as content".into(),
                    None,
                    start..at,
                );
            }
            self.seg.seg = at;
        } else if at > self.seg.seg && self.seg.decision != Decision::Calls {
            self.show(self.seg.seg..at);
            self.seg.seg = at;
        }
    }

    fn slice(&self, range: Range<usize>) -> &'c str {
        let buf: &'c str = self.buf;
        buf.get(range.start.saturating_sub(self.base)..range.end.saturating_sub(self.base))
            .unwrap_or_default()
    }

    /// Pushes `range` (absolute offsets) of the input as text.
    fn show(&mut self, range: Range<usize>) {
        let text = self.slice(range);
        self.out.text(text);
    }
}
