//! One call being assembled: its name, arguments and what the engine sends for it.

use std::ops::Range;

use crate::engine::out::{Out, too_deep_message};
use crate::json::args::{ArgsNote, ArgsWriter, Coercion};
use crate::json::reader::Closed;
use crate::{Config, Rejected, ToolCall, ToolSet, WarningCode};

/// How a call's syntax ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cut {
    /// Its syntax closed.
    No,
    /// Its closing brackets or tags were missing (they were added); every value in it
    /// was whole.
    Closers,
    /// It broke off inside a value, or the output ended inside it: the model never
    /// finished it, so it is incomplete.
    Value,
    /// Its arguments broke off into text that is not JSON (`{"name": "f", "arguments":
    /// {invalid json}`): the call is withdrawn (it ends incomplete, with an empty span)
    /// and its text is shown.
    NotJson,
}

impl From<Closed> for Cut {
    fn from(closed: Closed) -> Cut {
        match closed {
            Closed::Nothing => Cut::No,
            Closed::Brackets => Cut::Closers,
            Closed::Value => Cut::Value,
        }
    }
}

#[derive(Debug)]
pub(crate) enum Status {
    /// The name is not known yet.
    Unnamed,
    Accepted {
        call_idx: usize,
        /// The declared name, when a tool list gave one; else the call's own name
        /// (trimmed) is the name.
        canonical: Option<String>,
        sent: usize,
    },
    Rejected {
        name: String,
        reason: String,
    },
}

/// A call under construction. Its arguments are written by `args` as they arrive;
/// once accepted, `sent` bytes of them have gone out as `ArgsDelta`.
#[derive(Debug)]
pub(crate) struct CallState {
    pub(crate) name: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) args: ArgsWriter,
    pub(crate) status: Status,
    /// An arguments field has begun.
    pub(crate) args_seen: bool,
    /// The arguments object was closed by the model itself (not by a repair at a break).
    pub(crate) args_closed: bool,
    /// A wrapper: calls were read inside it (`{"tool_calls": […]}`), so it is not a
    /// call itself.
    pub(crate) holds_calls: bool,
    /// Absolute offset where the call's own syntax begins.
    pub(crate) start: usize,
    /// How its syntax ended (see [`CallState::cut_off`]).
    pub(crate) cut: Cut,
    pub(crate) extra_notes: Vec<(WarningCode, String)>,
}

/// The warning for a value whose JSON nests deeper than `max_depth`: kept as a string.
pub(crate) fn kept_as_string_message(key: &str, max_depth: usize) -> String {
    format!(
        "the value of `{key}` nests deeper than max_depth ({max_depth}); its text was kept as \
         a string (raise `Config::max_depth` to read it)"
    )
}

/// The warning for a value converted to its schema's type (and `more` like it).
fn coerced_message(path: &str, to: &str, how: Coercion, more: usize) -> String {
    let mut message = match how {
        Coercion::FromString => {
            format!("`{path}` was a string; converted to {to} as the schema declares")
        }
        Coercion::ToString => {
            format!("`{path}` was not a string; converted to a string as the schema declares")
        }
        Coercion::Fraction => format!(
            "`{path}` was a whole number; written with a fraction (`.0`) as the schema declares \
             a number"
        ),
        Coercion::Whole => {
            format!("`{path}` had a zero fraction; written as an integer as the schema declares")
        }
    };
    if more > 0 {
        let values = if more == 1 { "value" } else { "values" };
        message.push_str(&format!(" (and {more} more {values} with the same schema)"));
    }
    message
}

impl CallState {
    pub(crate) fn new(start: usize, max_depth: usize) -> CallState {
        CallState {
            name: None,
            id: None,
            args: ArgsWriter::new(max_depth),
            status: Status::Unnamed,
            args_seen: false,
            args_closed: false,
            holds_calls: false,
            start,
            cut: Cut::No,
            extra_notes: Vec::new(),
        }
    }

    /// A new call at `start` in `spare`'s place (its allocations kept), or a new box.
    pub(crate) fn reuse(
        spare: Option<Box<CallState>>,
        start: usize,
        max_depth: usize,
    ) -> Box<CallState> {
        let Some(mut call) = spare else { return Box::new(CallState::new(start, max_depth)) };
        // Every field named, so that a new one cannot be left out of the reset.
        let CallState {
            name,
            id,
            args,
            status,
            args_seen,
            args_closed,
            holds_calls,
            start: at,
            cut,
            extra_notes,
        } = &mut *call;
        *name = None;
        *id = None;
        args.recycle(max_depth);
        *status = Status::Unnamed;
        *args_seen = false;
        *args_closed = false;
        *holds_calls = false;
        *at = start;
        *cut = Cut::No;
        extra_notes.clear();
        call
    }

    /// Whether the call got a name (accepted or rejected).
    pub(crate) fn is_named(&self) -> bool {
        !matches!(self.status, Status::Unnamed)
    }

    /// Notes how the call's syntax was cut off; the worst cut stays.
    pub(crate) fn cut_off(&mut self, cut: Cut) {
        self.cut = self.cut.max(cut);
    }

    pub(crate) fn is_accepted(&self) -> bool {
        matches!(self.status, Status::Accepted { .. })
    }

    pub(crate) fn is_rejected(&self) -> bool {
        matches!(self.status, Status::Rejected { .. })
    }

    /// Whether the call is withdrawn: its arguments are not JSON, so its text is shown.
    pub(crate) fn is_withdrawn(&self) -> bool {
        self.cut == Cut::NotJson
    }

    /// Gives the arguments writer the named tool's schema before the call is
    /// announced, so values written now are coerced.
    pub(crate) fn bind_tool(&mut self, config: &Config) {
        if self.args.tool().is_some() {
            return;
        }
        let (Some(tools), Some(name)) = (&config.tools, self.name.as_deref()) else { return };
        if let Some(tool) = ToolSet::resolve_shared(tools, name.trim()) {
            self.args.set_tool(tool);
        }
    }

    /// Decides the call once its name is known: accepted (CallStart goes out with
    /// the arguments written so far) or rejected.
    pub(in crate::engine) fn resolve(&mut self, out: &mut Out<'_>) {
        if !matches!(self.status, Status::Unnamed) {
            return;
        }
        let Some(raw) = self.name.as_deref().map(str::trim) else { return };
        if raw.is_empty() {
            self.status = Status::Rejected {
                name: String::new(),
                reason: "the call has an empty name".into(),
            };
            return;
        }
        let (canonical, tool) = match &out.config().tools {
            None => (None, None),
            Some(tools) => match ToolSet::resolve_shared(tools, raw) {
                Some(tool) => {
                    (Some(tool.get().map(|t| t.name().to_owned()).unwrap_or_default()), Some(tool))
                }
                None => {
                    let declared: Vec<&str> = tools.tools().iter().map(|t| t.name()).collect();
                    let reason = if declared.is_empty() {
                        format!("`{raw}` is not a declared tool; no tools are declared")
                    } else {
                        format!("`{raw}` is not a declared tool; declared: {}", declared.join(", "))
                    };
                    self.status = Status::Rejected { name: raw.to_owned(), reason };
                    return;
                }
            },
        };
        if let Some(tool) = tool {
            self.args.set_tool(tool);
        }
        let call_idx = out.call_start(self.id.as_deref(), canonical.as_deref().unwrap_or(raw));
        self.status = Status::Accepted { call_idx, canonical, sent: 0 };
        self.flush(out);
    }

    /// Sends the arguments written since the last flush.
    pub(in crate::engine) fn flush(&mut self, out: &mut Out<'_>) {
        if let Status::Accepted { call_idx, sent, .. } = &mut self.status {
            let text = &self.args.canon.out;
            if let Some(delta) = text.get(*sent..).filter(|d| !d.is_empty()) {
                out.args_delta(*call_idx, delta);
                *sent = text.len();
            }
        }
    }

    /// Ends the call with the span it covers; pushes warnings and CallEnd or Rejected.
    /// Returns false, and sends nothing, for a call that never got a name, so the
    /// caller can show its text instead.
    pub(in crate::engine) fn end(
        mut self: Box<Self>,
        out: &mut Out<'_>,
        span: Range<usize>,
    ) -> bool {
        if matches!(self.status, Status::Unnamed) {
            return false;
        }
        self.args.finish();
        let arguments = std::mem::take(&mut self.args.canon.out);
        match std::mem::replace(&mut self.status, Status::Unnamed) {
            Status::Accepted { call_idx, canonical, sent } => {
                if let Some(delta) = arguments.get(sent..).filter(|d| !d.is_empty()) {
                    out.args_delta(call_idx, delta);
                }
                // The call's own name moves into the result when it is the name.
                let name = canonical.unwrap_or_else(|| {
                    let own = self.name.take().unwrap_or_default();
                    if own.trim().len() == own.len() { own } else { own.trim().to_owned() }
                });
                self.warnings(out, call_idx, &span, &arguments);
                let complete = self.cut < Cut::Value;
                // A withdrawn call's text is shown after it: its span is empty.
                let span = if self.cut == Cut::NotJson { span.start..span.start } else { span };
                let call = ToolCall { id: self.id.take(), name, arguments, span, complete };
                out.call_end(call_idx, call);
            }
            Status::Rejected { name, reason } => {
                out.rejected(Rejected { name, reason, span });
            }
            Status::Unnamed => {}
        }
        out.keep_call(self);
        true
    }

    fn warnings(
        &mut self,
        out: &mut Out<'_>,
        call_idx: usize,
        span: &Range<usize>,
        arguments: &str,
    ) {
        let idx = Some(call_idx);
        if self.cut == Cut::NotJson {
            // Only the reason: what was repaired or missing in a call that is no call
            // would mislead.
            out.warn(
                WarningCode::MalformedCall,
                format!(
                    "the arguments of `{}` broke off into text that is not JSON; the call was \
                     withdrawn (incomplete, never run) and its text kept as content",
                    self.name.as_deref().unwrap_or_default().trim()
                ),
                idx,
                span.clone(),
            );
            return;
        }
        let mut repairs: Vec<&'static str> = Vec::new();
        for note in &self.args.notes {
            match note {
                ArgsNote::Repaired(what) => {
                    if !repairs.contains(what) {
                        repairs.push(what);
                    }
                }
                ArgsNote::TooDeep(max_depth) => out.warn(
                    WarningCode::LimitReached,
                    too_deep_message(*max_depth),
                    idx,
                    span.clone(),
                ),
                ArgsNote::KeptAsString { path, max_depth } => out.warn(
                    WarningCode::LimitReached,
                    kept_as_string_message(path, *max_depth),
                    idx,
                    span.clone(),
                ),
                ArgsNote::Coerced { path, to, how, more, .. } => out.warn(
                    WarningCode::Coerced,
                    coerced_message(path, to.as_str(), *how, *more),
                    idx,
                    span.clone(),
                ),
            }
        }
        for (code, message) in std::mem::take(&mut self.extra_notes) {
            out.warn(code, message, idx, span.clone());
        }
        if !repairs.is_empty() {
            out.warn(WarningCode::RepairedJson, repairs.join("; "), idx, span.clone());
        }
        match self.cut {
            Cut::No => {}
            Cut::Closers => out.warn(
                WarningCode::RepairedJson,
                "the call's closing brackets or tags were missing; they were added".into(),
                idx,
                span.clone(),
            ),
            Cut::Value => out.warn(
                WarningCode::Truncated,
                "the call broke off inside its arguments; it is incomplete, not a call (what was \
                 open was closed so the arguments stay JSON)"
                    .into(),
                idx,
                span.clone(),
            ),
            Cut::NotJson => {}
        }
        if let Some(tool) = self.args.tool().filter(|tool| tool.has_schema()) {
            let keys = crate::json::canon::top_level_keys(arguments);
            let missing: Vec<&str> = tool
                .required()
                .iter()
                .filter(|key| !keys.contains(key))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                out.warn(
                    WarningCode::MissingRequired,
                    format!("required parameter(s) missing: {}", missing.join(", ")),
                    idx,
                    span.clone(),
                );
            }
            let unknown: Vec<&str> =
                keys.iter().filter(|key| !tool.declares(key)).map(String::as_str).collect();
            if !unknown.is_empty() {
                out.warn(
                    WarningCode::UnknownParameter,
                    format!(
                        "parameter(s) not in the schema of `{}`: {}",
                        tool.name(),
                        unknown.join(", ")
                    ),
                    idx,
                    span.clone(),
                );
            }
        }
    }
}
