//! The shaper: the parser's events turned into chat events under the request's tool
//! policy (`tool_choice`, `parallel_tool_calls`, declared tools only), with what the pipeline
//! needs to decide on a retry.

use std::sync::Arc;

use toolshim_parse::{
    Config as ParseConfig, Dialects, Event, RejectedText, StreamParser, Tool, ToolSet, WarningCode,
};

use crate::chat::arguments;
use crate::chat::continuation::{self, Made, Stop};
use crate::chat::grounding::{Grounding, HOLD_STRINGS, Hold};
use crate::chat::types::{ChatEvent, ChatRequest, OutputFormat, RetryReason, ToolChoice, ToolSpec};
use crate::config::{FormatFile, ReasoningCalls};
use crate::error::ApiError;
use crate::inspect::Finding;

mod refusal;
use refusal::{answer_begun, looks_like_refusal};
pub(crate) use refusal::{bare_refusal, past_refusal};

/// Text that could still turn out to be a refusal is held until it is this long.
pub(crate) const REFUSAL_WINDOW: usize = 200;

/// The tools a request declared: the parser's tool set and, apart from it, the names a
/// call must have to reach the client. With no tools, the parser reads reasoning only.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeclaredTools {
    set: Option<Arc<ToolSet>>,
    /// Each declared tool by name: its schema checks the arguments.
    specs: Arc<std::collections::HashMap<String, ToolSpec>>,
}

impl DeclaredTools {
    pub(crate) fn new(specs: &[ToolSpec]) -> Result<DeclaredTools, ApiError> {
        if specs.is_empty() {
            return Ok(DeclaredTools::default());
        }
        let tools = specs
            .iter()
            .map(|spec| Tool::new(spec.name.clone(), spec.parameters.clone()))
            .collect();
        let set = ToolSet::new(tools).map_err(|err| {
            ApiError::invalid(format!("The tool list cannot be used: {err}."), Some("tools"))
        })?;
        Ok(DeclaredTools {
            set: Some(Arc::new(set)),
            specs: Arc::new(specs.iter().map(|spec| (spec.name.clone(), spec.clone())).collect()),
        })
    }

    /// Whether a call to `name` may reach the client.
    pub(crate) fn declares(&self, name: &str) -> bool {
        self.specs.contains_key(name)
    }

    /// The parser's view of the tools, when there are any.
    pub(crate) fn tool_set(&self) -> Option<&Arc<ToolSet>> {
        self.set.as_ref()
    }
}

/// A call the parser has begun. Its arguments are kept to be checked when it ends. A call to
/// a strict tool (with the check on) is held until then, so that one that breaks its schema
/// never goes out; any other goes out as it is written.
#[derive(Debug, Clone)]
struct Pending {
    name: String,
    arguments: String,
    /// Where it went: the forwarded index (`None`: dropped by policy, or held).
    index: Option<usize>,
    /// Held until it ends: its tool is strict, or a judge decides.
    held: bool,
    /// Held only for its short strings: once its arguments are longer than
    /// [`HOLD_STRINGS`] or hold a string of several lines, it goes out as written, unjudged.
    while_short: bool,
    /// Its tool is strict (and the check is on): one that does not fit never goes out.
    strict: bool,
}

/// Who decides, when a call ends, whether it goes out at all (the call is held until then).
#[derive(Debug, Clone)]
pub(crate) enum Judge {
    /// A call whose required arguments hold values given nowhere is a guess: it is dropped
    /// (`Grounding::guessed`), and the caller may ask for a plain answer instead.
    Grounding(Arc<Grounding>),
    /// A continued call (`continuation`): kept only if it adds what the user asked for
    /// after the reply's calls so far. Only the first call is judged (`judged`); any later
    /// one is not sent.
    Continuation { grounding: Arc<Grounding>, earlier: Vec<Made>, judged: bool },
}

/// A call that went to the client: what a continuation starts from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sent {
    pub(crate) name: String,
    pub(crate) arguments: String,
    /// The bytes of the reply the call was read from.
    pub(crate) span: std::ops::Range<usize>,
}

/// Whether and how calls' arguments are checked against their tools' schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgumentCheck {
    Off,
    /// A call that does not fit is held back and asked for again (the reply can still be).
    Retry,
    /// The reply cannot be asked for again: a call that does not fit goes out as it is,
    /// unless its tool is strict (then it is dropped).
    Final,
}

/// Turns the parser's events into chat events under the request's tool policy.
pub(crate) struct Shaper {
    /// Tools are declared: replies are parsed for calls.
    engaged: bool,
    /// Reads calls (when tools are engaged) and reasoning (always: a `<think>` block is never
    /// the answer); `None` after `finish`.
    parser: Option<StreamParser>,
    /// The declared tools: a call to any other name is dropped here, whatever the parser
    /// accepted.
    declared: DeclaredTools,
    choice: ToolChoice,
    parallel: bool,
    /// Parser call index → the call while it is being written (`None`: dropped, or ended).
    pending: Vec<Option<Pending>>,
    n_calls: usize,
    check: ArgumentCheck,
    /// What was wrong with the arguments of calls held back for a retry.
    argument_faults: Vec<String>,
    /// The calls held back for a retry, kept to go out as written if none comes
    /// (`release_held`).
    held_back: Vec<(Pending, std::ops::Range<usize>)>,
    /// Visible text so far (bounded), for refusal detection.
    text: String,
    /// The model wrote reasoning (so an answer without text was not an empty reply).
    reasoned: bool,
    /// The client asked for reasoning: it goes out as `ChatEvent::Reasoning`; otherwise it
    /// is only told apart from the answer.
    show_reasoning: bool,
    /// Whitespace-only text not yet sent: dropped if a call follows (it is layout around
    /// the call, not content), sent with the next visible text otherwise.
    blank: String,
    rejected: usize,
    /// The parser's warnings.
    warnings: u64,
    malformed: bool,
    cut_off_call: bool,
    /// A call ended incomplete: cut off (`cut_off_call`), or withdrawn because its
    /// arguments were not JSON (its text follows it as content).
    incomplete_call: bool,
    /// The format the answer must have; its text is held until the reply ends and checked.
    output: Option<OutputFormat>,
    /// The answer's text while it is held.
    answer: String,
    /// What is wrong with the finished answer.
    output_problem: Option<String>,
    /// Decides whether ended calls go out (they are held until they end); none: all do.
    judge: Option<Judge>,
    /// Calls dropped as guesses, each as `tool: key = value, …`.
    guesses: Vec<String>,
    /// Why the judge dropped a continued call.
    stopped: Option<Stop>,
    /// The calls that went out whole, in order.
    sent: Vec<Sent>,
    /// Calls the parser ended or rejected, whatever became of them.
    calls_ended: usize,
    /// What the parser found, with its spans, for the inspector (`None`: not kept).
    findings: Option<Vec<Finding>>,
}

/// The most findings kept of one reply.
const MAX_FINDINGS: usize = 200;

impl Shaper {
    pub(crate) fn new(
        req: &ChatRequest,
        declared: &DeclaredTools,
        engaged: bool,
        reasoning_calls: ReasoningCalls,
        format_file: Option<&FormatFile>,
    ) -> Shaper {
        let mut config = ParseConfig::default();
        if let Some(file) = format_file {
            config.dialects = file.parse.dialects.clone();
            config.reasoning_open = file.parse.reasoning_open;
        }
        config.reasoning_calls = match reasoning_calls {
            ReasoningCalls::Ignore => toolshim_parse::ReasoningCalls::Ignore,
            ReasoningCalls::Allow => toolshim_parse::ReasoningCalls::Allow,
        };
        match declared.set.as_ref().filter(|_| engaged) {
            Some(tools) => {
                config.tools = Some(Arc::clone(tools));
                config.rejected_text = RejectedText::Hide;
            }
            // No tools: no call syntax is read (the text is the answer, whatever it looks
            // like), but reasoning is still told apart from it.
            None => config.dialects = Dialects::none(),
        }
        let parser = Some(StreamParser::new(&config));
        Shaper {
            engaged,
            parser,
            declared: declared.clone(),
            choice: req.tool_choice.clone(),
            parallel: req.parallel_tool_calls,
            pending: Vec::new(),
            n_calls: 0,
            check: ArgumentCheck::Off,
            argument_faults: Vec::new(),
            held_back: Vec::new(),
            text: String::new(),
            reasoned: false,
            show_reasoning: req.show_reasoning,
            blank: String::new(),
            rejected: 0,
            warnings: 0,
            malformed: false,
            cut_off_call: false,
            incomplete_call: false,
            output: req.output.clone(),
            answer: String::new(),
            output_problem: None,
            judge: None,
            guesses: Vec::new(),
            stopped: None,
            sent: Vec::new(),
            calls_ended: 0,
            findings: None,
        }
    }

    /// Holds every call until it ends, for `judge` to decide whether it goes out.
    pub(crate) fn judge_calls(&mut self, judge: Judge) {
        self.judge = Some(judge);
    }

    /// Keeps what the parser finds (for the inspector): `take_findings` hands it over.
    pub(crate) fn keep_findings(&mut self) {
        self.findings = Some(Vec::new());
    }

    pub(crate) fn take_findings(&mut self) -> Vec<Finding> {
        self.findings.take().unwrap_or_default()
    }

    fn found(
        &mut self,
        kind: &'static str,
        name: &str,
        detail: &str,
        span: &std::ops::Range<usize>,
    ) {
        if let Some(findings) = self.findings.as_mut().filter(|f| f.len() < MAX_FINDINGS) {
            let (name, detail) = (name.to_owned(), detail.to_owned());
            findings.push(Finding { kind, name, detail, span: [span.start, span.end] });
        }
    }

    /// The calls dropped as guesses (`Judge::Grounding`).
    pub(crate) fn guesses(&self) -> &[String] {
        &self.guesses
    }

    /// Why a continued call was not kept (`Judge::Continuation`).
    pub(crate) fn stopped(&self) -> Option<&Stop> {
        self.stopped.as_ref()
    }

    /// The calls that went out whole, with where they were in the reply.
    pub(crate) fn sent(&self) -> &[Sent] {
        &self.sent
    }

    /// How many calls were dropped for good: calls to a tool the request does not declare
    /// (their text not shown), and calls that break a strict tool's schema when no retry is
    /// left.
    pub(crate) fn rejected(&self) -> usize {
        self.rejected
    }

    /// How many calls the parser ended or rejected so far.
    pub(crate) fn calls_ended(&self) -> usize {
        self.calls_ended
    }

    /// Checks every call's arguments against its tool's schema before it goes out. While
    /// `may_retry`, a call that does not fit is held back and `problem` asks for the reply
    /// again; otherwise it goes out as written, except to a strict tool.
    pub(crate) fn check_arguments(&mut self, may_retry: bool) {
        self.check = if may_retry { ArgumentCheck::Retry } else { ArgumentCheck::Final };
    }

    /// Whether a call held back for a retry (`check_arguments(true)`) is one the judge would
    /// let go: not a guess (a guess is dropped as one when the calls are released).
    pub(crate) fn holds_back_a_call(&self) -> bool {
        self.held_back.iter().any(|(call, _)| {
            match (&self.judge, self.declared.specs.get(&call.name)) {
                (Some(Judge::Grounding(grounding)), Some(spec)) => {
                    grounding.guessed(spec, &call.arguments).is_empty()
                }
                _ => true,
            }
        })
    }

    /// No retry comes after all: the calls held back for one are judged as final (one to a
    /// strict tool that breaks its schema is dropped; any other goes out as written).
    pub(crate) fn release_held(&mut self, out: &mut Vec<ChatEvent>) {
        self.committed();
        for (call, span) in std::mem::take(&mut self.held_back) {
            self.end_call(call, true, span, out);
        }
    }

    /// Output has gone to the client: this reply will not be asked for again.
    pub(crate) fn committed(&mut self) {
        if self.check == ArgumentCheck::Retry {
            self.check = ArgumentCheck::Final;
        }
    }

    pub(crate) fn feed(&mut self, text: &str, out: &mut Vec<ChatEvent>) {
        if let Some(parser) = &mut self.parser {
            let mut events = Vec::new();
            parser.feed(text, &mut events);
            self.shape(events, out);
        }
    }

    pub(crate) fn finish(&mut self, out: &mut Vec<ChatEvent>) {
        if let Some(parser) = self.parser.take() {
            let mut events = Vec::new();
            parser.finish(&mut events);
            self.shape(events, out);
        }
        if self.n_calls == 0 && !self.blank.is_empty() {
            let blank = std::mem::take(&mut self.blank);
            self.send_text(blank, out);
        }
        if let Some(output) = self.output.as_ref().filter(|_| self.n_calls == 0) {
            match output.check(&self.answer) {
                Ok(json) => out.push(ChatEvent::Text(json)),
                Err(problem) => self.output_problem = Some(problem),
            }
        }
    }

    /// What is wrong with the answer's format, and the answer as the model wrote it.
    pub(crate) fn output_problem(&self) -> Option<(&str, &str)> {
        self.output_problem.as_deref().map(|problem| (problem, self.answer.as_str()))
    }

    fn text_event(&mut self, text: String, out: &mut Vec<ChatEvent>) {
        if text.is_empty() {
            return;
        }
        if self.engaged && text.trim().is_empty() {
            self.blank.push_str(&text);
            return;
        }
        let text =
            if self.blank.is_empty() { text } else { std::mem::take(&mut self.blank) + &text };
        self.send_text(text, out);
    }

    fn send_text(&mut self, text: String, out: &mut Vec<ChatEvent>) {
        if self.text.len() < 4096 {
            self.text.push_str(&text);
        }
        if self.output.is_some() && self.n_calls == 0 {
            // Held until the reply ends: only a whole answer can be checked.
            self.answer.push_str(&text);
            return;
        }
        out.push(ChatEvent::Text(text));
    }

    fn shape(&mut self, events: Vec<Event>, out: &mut Vec<ChatEvent>) {
        for event in events {
            match event {
                Event::Text(text) => self.text_event(text.into(), out),
                Event::Reasoning(text) => {
                    if !text.trim().is_empty() {
                        self.reasoned = true;
                    }
                    if !text.is_empty() && self.show_reasoning {
                        out.push(ChatEvent::Reasoning(text.into()));
                    }
                }
                Event::CallStart { call_idx, name, .. } => {
                    if self.pending.len() <= call_idx {
                        self.pending.resize_with(call_idx + 1, || None);
                    }
                    if !self.declared.declares(&name) {
                        // Cannot happen while the parser holds the declared tool set; if it
                        // ever does, the call is an unknown tool, not a call.
                        tracing::warn!(name = %name, "dropped a call to a tool the request did not declare");
                        self.rejected += 1;
                        continue;
                    }
                    let strict = self.declared.specs.get(&name).is_some_and(|spec| spec.strict);
                    let strict = strict && self.check != ArgumentCheck::Off;
                    let judged = match (&self.judge, self.declared.specs.get(&name)) {
                        (Some(Judge::Grounding(_)), Some(spec)) => Grounding::hold(spec),
                        (Some(Judge::Grounding(_)), None) | (None, _) => Hold::No,
                        (Some(Judge::Continuation { .. }), _) => Hold::Whole,
                    };
                    let held = strict || judged != Hold::No;
                    let while_short = !strict && judged == Hold::WhileShort;
                    let index = if held { None } else { self.start_call(&name, out) };
                    if let Some(slot) = self.pending.get_mut(call_idx) {
                        let arguments = String::new();
                        *slot = Some(Pending { name, arguments, index, held, while_short, strict });
                    }
                }
                Event::ArgsDelta { call_idx, json } => self.call_arguments(call_idx, &json, out),
                Event::CallEnd { call_idx, call, .. } => {
                    let kind = if call.complete { "call" } else { "incomplete_call" };
                    self.found(kind, &call.name, &call.arguments, &call.span);
                    self.calls_ended += 1;
                    let Some(pending) = self.pending.get_mut(call_idx).and_then(Option::take)
                    else {
                        self.incomplete_call |= !call.complete;
                        continue;
                    };
                    // Cut off by the token limit while reciting its schema (a small model
                    // writes it again and again until the limit): no call, cut off or not.
                    if !call.complete && !call.span.is_empty() && self.recited(&pending) {
                        continue;
                    }
                    self.incomplete_call |= !call.complete;
                    // Withdrawn by the parser (arguments that broke off into text that is not
                    // JSON, such as `2 * x`: an empty span, its text given as content) while
                    // held: nothing of it went out, and it goes out as the text it is.
                    if !call.complete && pending.held && call.span.is_empty() {
                        tracing::info!(tool = %call.name, "a call whose arguments are not JSON stays text");
                        continue;
                    }
                    self.end_call(pending, call.complete, call.span.clone(), out);
                }
                Event::Rejected(rejected) => {
                    self.found("rejected", &rejected.name, &rejected.reason, &rejected.span);
                    self.calls_ended += 1;
                    tracing::debug!(name = %rejected.name, "the model called an unknown tool");
                    self.rejected += 1;
                }
                Event::Warning(warning) => {
                    match warning.code {
                        WarningCode::MalformedCall | WarningCode::InvalidArguments => {
                            self.malformed = true
                        }
                        WarningCode::Truncated => self.cut_off_call = true,
                        _ => {}
                    }
                    self.warnings += 1;
                    self.found("warning", warning.code.as_str(), &warning.message, &warning.span);
                    tracing::debug!(code = warning.code.as_str(), message = %warning.message, "parse warning");
                }
                // Events a newer parser adds carry nothing the pipeline uses yet.
                _ => {}
            }
        }
    }

    /// More of a call's arguments: forwarded if the call went out; held otherwise, until a
    /// call held only for its short strings grows too long to be judged, or holds a string
    /// of several lines (it goes out then, with what it held, and is not judged).
    fn call_arguments(&mut self, call_idx: usize, json: &str, out: &mut Vec<ChatEvent>) {
        let Some(Some(call)) = self.pending.get_mut(call_idx) else { return };
        call.arguments.push_str(json);
        if let Some(index) = call.index {
            out.push(ChatEvent::CallArgs { index, json: json.into() });
            return;
        }
        // A string of more than a line is text the model writes, never judged (nor is a call
        // too long to hold only short strings): the call goes out now, with what it held.
        if !(call.held && call.while_short)
            || call.arguments.len() <= HOLD_STRINGS && !call.arguments.contains("\\n")
        {
            return;
        }
        call.held = false;
        call.while_short = false;
        let (name, arguments) = (call.name.clone(), call.arguments.clone());
        let index = self.start_call(&name, out);
        if let Some(index) = index {
            out.push(ChatEvent::CallArgs { index, json: arguments });
        }
        if let Some(Some(call)) = self.pending.get_mut(call_idx) {
            call.index = index;
        }
    }

    /// A call goes out if the policy allows it (`tool_choice`, `parallel_tool_calls`): its
    /// index, after the text it follows.
    fn start_call(&mut self, name: &str, out: &mut Vec<ChatEvent>) -> Option<usize> {
        let allowed = match &self.choice {
            ToolChoice::None => false,
            ToolChoice::Named(wanted) => wanted == name && self.n_calls == 0,
            ToolChoice::Auto | ToolChoice::Required => self.parallel || self.n_calls == 0,
        };
        if !allowed {
            return None;
        }
        let index = self.n_calls;
        self.blank.clear();
        // Text held for a format check was prose before a call after all.
        if !self.answer.is_empty() {
            out.push(ChatEvent::Text(std::mem::take(&mut self.answer)));
        }
        self.n_calls += 1;
        out.push(ChatEvent::CallStart { index, id: new_call_id(), name: name.to_owned() });
        Some(index)
    }

    /// A call the parser ended: checked against its tool's schema. While the reply may be
    /// asked for again, what is wrong is kept for `problem` (what went out of the call is
    /// still held by the pipeline). A held call goes out only if it fits (to a strict tool)
    /// and the judge, if any, lets it.
    fn end_call(
        &mut self,
        call: Pending,
        complete: bool,
        span: std::ops::Range<usize>,
        out: &mut Vec<ChatEvent>,
    ) {
        if let Some(pieces) = self.fan_out(&call, complete) {
            tracing::info!(tool = %call.name, calls = pieces.len(), "split a call that packed several values into parameters that take one");
            for arguments in pieces {
                self.end_call(Pending { arguments, ..call.clone() }, complete, span.clone(), out);
            }
            return;
        }
        let faults = match (self.check, complete, self.declared.specs.get(&call.name)) {
            (ArgumentCheck::Off, ..) | (_, false, _) | (_, _, None) => Vec::new(),
            (_, true, Some(spec)) => arguments::faults(spec, &call.arguments),
        };
        if !faults.is_empty() {
            tracing::info!(tool = %call.name, faults = %faults.join("; "), retry = self.check == ArgumentCheck::Retry,
                "a call's arguments do not fit its tool's schema");
            if self.check == ArgumentCheck::Retry {
                self.argument_faults.extend(faults.iter().map(|f| format!("`{}`: {f}", call.name)));
            }
            // Held for a retry, or for good when its tool is strict; a call held only for
            // the judge goes on to it when no retry can come.
            if call.held && (call.strict || self.check == ArgumentCheck::Retry) {
                if self.check == ArgumentCheck::Final {
                    tracing::warn!(tool = %call.name, "dropped a call that breaks its strict tool's schema");
                    self.rejected += 1;
                } else {
                    self.held_back.push((call, span));
                }
                return;
            }
            if self.recited(&call) {
                return;
            }
        }
        let mut call = call;
        if call.held && complete && !self.judged(&mut call) {
            return;
        }
        let index = match (call.held, call.index) {
            (true, _) => match self.start_call(&call.name, out) {
                Some(index) => {
                    if !call.arguments.is_empty() {
                        out.push(ChatEvent::CallArgs { index, json: call.arguments.clone() });
                    }
                    index
                }
                None => return,
            },
            (false, Some(index)) => index,
            (false, None) => return,
        };
        out.push(ChatEvent::CallEnd { index, complete });
        if complete {
            self.sent.push(Sent { name: call.name, arguments: call.arguments, span });
        }
    }

    /// Whether a held call that no retry can mend only recites its tool's schema
    /// (`arguments::recite_schema`), under `tool_choice: "auto"` with a judge of values: it
    /// is no call, and is dropped as a guess (with nothing else, a plain answer is asked for).
    fn recited(&mut self, call: &Pending) -> bool {
        let judged = matches!(self.judge, Some(Judge::Grounding(_)));
        let recited = call.held
            && judged
            && self.check == ArgumentCheck::Final
            && self.choice == ToolChoice::Auto
            && self
                .declared
                .specs
                .get(&call.name)
                .is_some_and(|spec| arguments::recite_schema(spec, &call.arguments));
        if recited {
            tracing::info!(tool = %call.name, arguments = %call.arguments,
                "dropped a call that recites its tool's schema instead of values");
            self.guesses.push(format!("{}: its schema, not values", call.name));
        }
        recited
    }

    /// A held, whole call that packed several values into parameters that take one, as the
    /// arguments of one call each (`arguments::fan_out`), where the policy allows parallel
    /// calls, the arguments are checked, and the call is not a continuation's.
    fn fan_out(&self, call: &Pending, complete: bool) -> Option<Vec<String>> {
        let policy = matches!(self.choice, ToolChoice::Auto | ToolChoice::Required);
        let continued = matches!(self.judge, Some(Judge::Continuation { .. }));
        if !(call.held && complete && policy && self.parallel)
            || continued
            || self.check == ArgumentCheck::Off
        {
            return None;
        }
        arguments::fan_out(self.declared.specs.get(&call.name)?, &call.arguments)
    }

    /// Whether the judge lets an ended call go out (without its optional arguments that are
    /// guesses, with those the user stated and it left out); what it dropped is noted.
    fn judged(&mut self, call: &mut Pending) -> bool {
        match &mut self.judge {
            None => true,
            Some(Judge::Grounding(grounding)) => {
                let guessed = match self.declared.specs.get(&call.name) {
                    Some(spec) => grounding.guessed(spec, &call.arguments),
                    None => Vec::new(),
                };
                if guessed.is_empty() {
                    settle(grounding, self.declared.specs.get(&call.name), call);
                    return true;
                }
                tracing::info!(tool = %call.name, guessed = %guessed.join(", "),
                    "dropped a call whose required arguments hold values given nowhere");
                self.guesses.push(format!("{}: {}", call.name, guessed.join(", ")));
                false
            }
            Some(Judge::Continuation { judged: true, .. }) => false,
            Some(Judge::Continuation { grounding, earlier, judged }) => {
                *judged = true;
                let next = Made::new(&call.name, &call.arguments);
                match continuation::judge(&next, earlier, grounding) {
                    Ok(()) => {
                        settle(grounding, self.declared.specs.get(&call.name), call);
                        earlier.push(Made::new(&call.name, &call.arguments));
                        true
                    }
                    Err(stop) => {
                        tracing::debug!(tool = %call.name, stop = stop.as_str(), unasked = %stop.unasked(), "a continued call was not kept");
                        self.stopped.get_or_insert(stop);
                        false
                    }
                }
            }
        }
    }

    /// What exactly was wrong, for the correction a retry sends: the answer's format, or the
    /// calls' arguments.
    pub(crate) fn problem_detail(&self) -> Option<String> {
        if let Some((problem, _)) = self.output_problem() {
            return Some(problem.to_owned());
        }
        (!self.argument_faults.is_empty()).then(|| self.argument_faults.join("; "))
    }

    /// How many warnings the parser gave.
    pub(crate) fn warnings(&self) -> u64 {
        self.warnings
    }

    pub(crate) fn n_calls(&self) -> usize {
        self.n_calls
    }

    /// Whether no visible text was produced (white space aside).
    pub(crate) fn nothing_shown(&self) -> bool {
        self.text.trim().is_empty()
    }

    /// Whether the visible text is at most what stood between calls that were dropped: white
    /// space and ASCII punctuation (`,` or `{"` between recitals, say), nothing a reader would
    /// take for an answer. A reply whose only calls were dropped and that showed no more is
    /// asked for again as a plain answer; its bytes stay in the log and the inspector.
    pub(crate) fn only_separators_shown(&self) -> bool {
        self.text.bytes().all(|b| b.is_ascii_whitespace() || b.is_ascii_punctuation())
    }

    /// Whether a call ended incomplete: cut off by the end of the reply, or withdrawn
    /// because its arguments were not JSON.
    pub(crate) fn incomplete_call(&self) -> bool {
        self.incomplete_call
    }

    /// Whether a call was cut off by the end of the reply (inside its arguments).
    pub(crate) fn cut_off_call(&self) -> bool {
        self.incomplete_call && self.cut_off_call
    }

    /// Whether held output may go to a streaming client now: a call has begun, or plain text
    /// that is not a refusal (its first sentence, or the whole refusal window), and the
    /// policy cannot fail any more.
    pub(crate) fn may_commit(&self) -> bool {
        if self.output.is_some() && self.n_calls == 0 {
            return false;
        }
        let needs_call = matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_));
        if !self.engaged {
            return true;
        }
        if self.n_calls > 0 {
            return true;
        }
        !needs_call
            && (self.text.len() >= REFUSAL_WINDOW || answer_begun(&self.text))
            && !looks_like_refusal(&self.text)
    }

    /// What is wrong with the finished reply, if anything worth a retry.
    pub(crate) fn problem(&self) -> Option<RetryReason> {
        if self.output_problem.is_some() && self.n_calls == 0 {
            return Some(RetryReason::InvalidOutput);
        }
        if !self.engaged || self.choice == ToolChoice::None {
            return None;
        }
        // A call the reply cut off inside its arguments, or whose arguments were not JSON
        // (the parser reports either incomplete), is asked for again, whatever finish
        // reason the upstream gave.
        if self.incomplete_call {
            return Some(if self.cut_off_call {
                RetryReason::Truncated
            } else {
                RetryReason::Malformed
            });
        }
        if !self.argument_faults.is_empty() {
            return Some(RetryReason::InvalidArguments);
        }
        if self.n_calls > 0 {
            return None;
        }
        if !self.guesses.is_empty() && self.only_separators_shown() {
            return Some(RetryReason::GuessedArguments);
        }
        if self.rejected > 0 {
            return Some(RetryReason::UnknownTool);
        }
        if self.malformed {
            return Some(RetryReason::Malformed);
        }
        if matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_)) {
            return Some(RetryReason::MissingCall);
        }
        if self.nothing_shown() && !self.reasoned {
            return Some(RetryReason::Empty);
        }
        looks_like_refusal(&self.text).then_some(RetryReason::Refusal)
    }
}

/// A call kept by the judge, without its optional values given nowhere and with the values
/// the user stated that it left out or set to `false` (`Grounding::settle_options`).
fn settle(grounding: &Grounding, spec: Option<&ToolSpec>, call: &mut Pending) {
    let settled = spec.and_then(|spec| grounding.settle_options(spec, &call.arguments));
    if let Some((arguments, changed)) = settled {
        tracing::info!(tool = %call.name, changed = %changed.join(", "),
            "took out optional values given nowhere, or set values the user stated");
        call.arguments = arguments;
    }
}

/// A fresh OpenAI-style call id: `call_` and 24 letters and digits.
pub(crate) fn new_call_id() -> String {
    let mut id = String::with_capacity(29);
    id.push_str("call_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without tools no call syntax is read, but reasoning is still told apart from the answer.
    #[test]
    fn issue_18_without_tools_reasoning_is_still_separated() {
        let req = ChatRequest {
            model: "m".into(),
            messages: Vec::new(),
            tools: Vec::new(),
            show_reasoning: true,
            ..ChatRequest::default()
        };
        let mut shaper =
            Shaper::new(&req, &DeclaredTools::default(), false, ReasoningCalls::Ignore, None);
        let reply =
            "<think>Plan.</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
        let mut out = Vec::new();
        for piece in reply.as_bytes().chunks(3) {
            shaper.feed(std::str::from_utf8(piece).unwrap(), &mut out);
        }
        shaper.finish(&mut out);
        let (mut reasoning, mut text) = (String::new(), String::new());
        for event in out {
            match event {
                ChatEvent::Reasoning(t) => reasoning.push_str(&t),
                ChatEvent::Text(t) => text.push_str(&t),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(reasoning, "Plan.");
        assert_eq!(text, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
    }

    #[test]
    fn call_ids_look_like_openai_ids() {
        let id = new_call_id();
        assert!(id.starts_with("call_") && id.len() == 29);
        assert_ne!(id, new_call_id());
    }
}

#[cfg(test)]
mod undeclared;
