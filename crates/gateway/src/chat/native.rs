//! A native reply, repaired: the upstream took the request's `tools` itself, and its reply
//! is folded into chat events. Its own calls pass as they are; its text goes through the
//! shaper, so call syntax the upstream's parser missed (a small model that writes its calls
//! as fenced or bare JSON instead of its template's tags) becomes calls too, under the same
//! policy as emulated ones. Nothing is asked for again here; what may follow the reply (the
//! reply again, for one whose only calls were read from its text and break their tools'
//! schemas; a plain answer for one that only guessed; continuations for one whose calls were
//! read from its text) is `finish`'s answer, for the caller to send.

use std::sync::Arc;

use crate::chat::continuation::{Follow, may_continue};
use crate::chat::grounding::Grounding;
use crate::chat::shaper::{DeclaredTools, Judge, Shaper, bare_refusal, new_call_id, past_refusal};
use crate::chat::types::{ChatEvent, ChatRequest, Finish, Outcome, ToolChoice, Usage};
use crate::config::ReasoningCalls;
use crate::neutral::{CallDelta, FinishReason, UpstreamEvent};

/// What may follow a reply (`check_grounding`, `continue_calls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Followups {
    /// Calls whose required arguments hold values given nowhere are dropped as guesses.
    pub(crate) check_grounding: bool,
    /// The most calls continuations may add (0: none).
    pub(crate) continue_calls: u32,
}

impl Followups {
    /// Nothing follows.
    pub(crate) const NONE: Followups = Followups { check_grounding: false, continue_calls: 0 };

    /// What the request's tools are judged against, when anything will use it.
    pub(crate) fn grounding(self, req: &ChatRequest) -> Option<Arc<Grounding>> {
        let engaged = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
        (engaged && (self.check_grounding || self.continue_calls > 0))
            .then(|| Arc::new(Grounding::of(req)))
    }

    /// The judge of a reply's calls: guesses are dropped under `tool_choice: auto`.
    pub(crate) fn judge(
        self,
        req: &ChatRequest,
        grounding: Option<&Arc<Grounding>>,
    ) -> Option<Judge> {
        grounding
            .filter(|_| self.check_grounding && req.tool_choice == ToolChoice::Auto)
            .map(|g| Judge::Grounding(Arc::clone(g)))
    }
}

/// What comes after a reply.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing: the reply is whole.
    Done,
    /// The reply's only calls were guesses and it showed nothing: a plain answer is asked
    /// for, without tools.
    Plain,
    /// The reply's calls were read from its text: continuations may add more.
    Continue(Follow),
    /// The reply's only calls were read from its text and break their tools' schemas, or
    /// name a tool that does not exist (held, nothing shown): the reply is asked for again,
    /// natively, with what is wrong.
    Again(Again),
    /// A plain answer asked for instead of a call (the model's odds of one were low) only
    /// refused: the request is sent with its tools after all. The refusal's events are held
    /// here, for the client should that reply show nothing either.
    WithTools(Vec<ChatEvent>),
}

/// A reply to ask for again: what the model wrote, and what it is told is wrong with its
/// calls.
#[derive(Debug)]
pub(crate) struct Again {
    pub(crate) reply: String,
    /// The user turn sent after the reply.
    pub(crate) correction: String,
    /// Why, as `toolshim_retries_total` names it: `invalid_arguments`, `unknown_tool`.
    pub(crate) reason: &'static str,
}

/// The most text of a reply kept for a continuation to start from; a longer reply is not
/// continued.
pub(crate) const MAX_CONTINUED_REPLY: usize = 1 << 20;

/// A native call as its pieces arrive.
#[derive(Debug, Default)]
struct NativeCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The fold of one native reply.
pub(crate) struct NativeReply {
    shaper: Shaper,
    declared: DeclaredTools,
    show_reasoning: bool,
    forced: bool,
    /// Native calls by the upstream's index, in the order they began.
    calls: Vec<(usize, NativeCall)>,
    finish: Option<FinishReason>,
    usage: Usage,
    /// The reply's text as the upstream wrote it (up to `MAX_CONTINUED_REPLY`), for a
    /// continuation to start from.
    raw: String,
    followups: Followups,
    grounding: Option<Arc<Grounding>>,
    req: ChatRequest,
    /// Whether a reply whose calls break their schemas may be asked for again.
    may_ask_again: bool,
    /// The events held while the reply may still be a bare refusal (`hold_bare_refusal`).
    held: Option<Vec<ChatEvent>>,
}

impl NativeReply {
    /// The fold of a native reply; with `may_ask_again`, calls read from its text that break
    /// their tools' schemas are held, for `Next::Again` when nothing else went out.
    pub(crate) fn new(
        req: &ChatRequest,
        declared: &DeclaredTools,
        reasoning_calls: ReasoningCalls,
        followups: Followups,
        repair: bool,
        may_ask_again: bool,
    ) -> NativeReply {
        let engaged = repair && !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
        // A model answering natively has its own parser upstream: the calls it leaves in the
        // text are read in every format (unless `repair` is off: then its text is text).
        let mut shaper = Shaper::new(req, declared, engaged, reasoning_calls, None);
        // A repaired call that breaks its schema is held for the reply to be asked for
        // again; without that (or when something else went out), it goes out as written,
        // except to a strict tool.
        let may_ask_again = may_ask_again && engaged;
        shaper.check_arguments(may_ask_again);
        let grounding = followups.grounding(req);
        if let Some(judge) = followups.judge(req, grounding.as_ref()) {
            shaper.judge_calls(judge);
        }
        NativeReply {
            shaper,
            declared: declared.clone(),
            show_reasoning: req.show_reasoning,
            forced: matches!(req.tool_choice, ToolChoice::Named(_)),
            calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
            raw: String::new(),
            followups,
            grounding,
            req: req.clone(),
            may_ask_again,
            held: None,
        }
    }

    /// Holds the reply's events while it may still be a refusal and nothing else (a plain
    /// answer asked for instead of a call: `finish` then says `Next::WithTools`). Text
    /// past the refusal window, or whose first sentence refuses nothing, goes out as it comes.
    pub(crate) fn hold_bare_refusal(&mut self) {
        self.held = Some(Vec::new());
    }

    pub(crate) fn feed(&mut self, event: UpstreamEvent, out: &mut Vec<ChatEvent>) {
        let Some(mut held) = self.held.take() else {
            self.read(event, out);
            return;
        };
        self.read(event, &mut held);
        if past_refusal(&self.raw) || !self.calls.is_empty() {
            out.append(&mut held);
        } else {
            self.held = Some(held);
        }
    }

    fn read(&mut self, event: UpstreamEvent, out: &mut Vec<ChatEvent>) {
        match event {
            UpstreamEvent::Text(text) => {
                if self.raw.len() <= MAX_CONTINUED_REPLY {
                    self.raw.push_str(&text);
                }
                self.shaper.feed(&text, out);
            }
            UpstreamEvent::Reasoning(text) => {
                if self.show_reasoning {
                    out.push(ChatEvent::Reasoning(text));
                }
            }
            UpstreamEvent::Call(delta) => self.call(delta),
            UpstreamEvent::Finish(reason) => self.finish = Some(reason),
            UpstreamEvent::Usage(usage) => self.usage = usage,
        }
    }

    fn call(&mut self, delta: CallDelta) {
        let at = match self.calls.iter().position(|(index, _)| *index == delta.index) {
            Some(at) => at,
            None => {
                self.calls.push((delta.index, NativeCall::default()));
                self.calls.len() - 1
            }
        };
        if let Some((_, call)) = self.calls.get_mut(at) {
            if delta.id.is_some() {
                call.id = delta.id;
            }
            if let Some(name) = delta.name {
                call.name.push_str(&name);
            }
            call.arguments.push_str(&delta.arguments);
        }
    }

    /// What the shaper still holds and the native calls (whole, after the repaired ones);
    /// how the reply ended, and what comes after it. The caller sends `Done` with the
    /// outcome once what comes after has run.
    pub(crate) fn finish(&mut self, out: &mut Vec<ChatEvent>) -> (Outcome, Next) {
        if let Some(mut held) = self.held.take() {
            if self.calls.is_empty() && bare_refusal(&self.raw) {
                self.shaper.finish(&mut held);
                tracing::info!(answer = %self.raw, "the plain answer only refused; asking with the tools");
                let outcome =
                    Outcome { finish: Finish::Stop, usage: self.usage, retried: Usage::default() };
                return (outcome, Next::WithTools(held));
            }
            out.append(&mut held);
        }
        self.shaper.finish(out);
        if let Some(again) = self.again() {
            tracing::info!(reason = again.reason, correction = %again.correction, "asking for the reply again");
            let outcome =
                Outcome { finish: Finish::Stop, usage: self.usage, retried: Usage::default() };
            return (outcome, Next::Again(again));
        }
        self.shaper.release_held(out);
        let native_calls = !self.calls.is_empty();
        let mut n_calls = self.shaper.n_calls();
        for (_, call) in std::mem::take(&mut self.calls) {
            if !self.declared.declares(&call.name) {
                tracing::warn!(tool = %call.name, "dropped a native call to a tool the request did not declare");
                continue;
            }
            let Some(arguments) = object_arguments(&call.name, &call.arguments, &self.declared)
            else {
                // No object can be read from them: the call is no call, and what the
                // upstream wrote stays visible instead of reaching a tool as `{}`.
                tracing::warn!(tool = %call.name, arguments = %call.arguments,
                    "a native call's arguments are no JSON object; sent as text");
                out.push(ChatEvent::Text(unusable_call_text(&call.name, &call.arguments)));
                continue;
            };
            let index = n_calls;
            n_calls += 1;
            out.push(ChatEvent::CallStart {
                index,
                id: call.id.unwrap_or_else(new_call_id),
                name: call.name,
            });
            out.push(ChatEvent::CallArgs { index, json: arguments });
            out.push(ChatEvent::CallEnd { index, complete: true });
        }
        // `length` only for a limit hit: a call cut off, or the upstream's word (a call
        // withdrawn for arguments that are not JSON is the reply's text).
        let cut_off = self.shaper.cut_off_call();
        let finish = if n_calls > 0 && !cut_off {
            Finish::ToolCalls { forced: self.forced }
        } else if self.finish == Some(FinishReason::Length) || cut_off {
            Finish::Length
        } else {
            Finish::Stop
        };
        let guesses = self.shaper.guesses().len();
        if n_calls == 0 && guesses == 0 && self.shaper.nothing_shown() && self.shaper.rejected() > 0
        {
            // Its only call named a tool that does not exist, and it is not asked for again:
            // what the model wrote goes out as text rather than an empty reply.
            tracing::warn!("the reply's only call names no declared tool; sent as text");
            out.push(ChatEvent::Text(self.raw.clone()));
        }
        tracing::info!(
            calls = n_calls,
            repaired = self.shaper.n_calls(),
            guesses,
            "native reply finished"
        );
        let outcome = Outcome { finish, usage: self.usage, retried: Usage::default() };
        let next = if guesses > 0 && n_calls == 0 && self.shaper.only_separators_shown() {
            Next::Plain
        } else if let Some(follow) = self.follow(native_calls) {
            Next::Continue(follow)
        } else {
            Next::Done
        };
        (outcome, next)
    }

    /// The reply to ask for again, when nothing else went out (no call, native or read, no
    /// text): its only calls were held for breaking their schemas (one of them no guess: a
    /// reply of guesses gives way to a plain answer instead), or named tools that do not
    /// exist.
    fn again(&self) -> Option<Again> {
        let alone = self.shaper.n_calls() == 0
            && self.calls.is_empty()
            && self.shaper.nothing_shown()
            && !self.shaper.incomplete_call()
            && self.raw.len() <= MAX_CONTINUED_REPLY;
        if !(self.may_ask_again && alone) {
            return None;
        }
        if self.shaper.holds_back_a_call() {
            let faults = self.shaper.problem_detail()?;
            let correction = crate::chat::prompt::invalid_arguments(&faults);
            return Some(Again {
                reply: self.raw.clone(),
                correction,
                reason: "invalid_arguments",
            });
        }
        // Its only call named a tool that does not exist: left so, the reply would be empty.
        (self.shaper.rejected() > 0).then(|| Again {
            reply: self.raw.clone(),
            correction: crate::chat::prompt::unknown_tool(&self.req),
            reason: "unknown_tool",
        })
    }

    /// How many calls were dropped as guesses so far.
    pub(crate) fn guesses(&self) -> usize {
        self.shaper.guesses().len()
    }

    /// The continuations of a whole reply whose calls were all read from its text.
    fn follow(&self, native_calls: bool) -> Option<Follow> {
        let whole = !self.shaper.incomplete_call()
            && self.finish != Some(FinishReason::Length)
            && self.raw.len() <= MAX_CONTINUED_REPLY;
        let sent = self.shaper.sent();
        if native_calls || !whole || !may_continue(&self.req, sent, self.shaper.n_calls()) {
            return None;
        }
        let grounding = self.grounding.as_ref()?;
        Follow::new(&self.raw, sent, Arc::clone(grounding), self.followups.continue_calls)
    }
}

/// A native call's arguments as a JSON object: as the upstream sent them when they are one,
/// `{}` when they are empty, else as the parser repairs them (a double-encoded object,
/// single quotes, a trailing comma…, coerced to the tool's schema); `None` when no whole
/// object can be read from them (arguments cut off, or a value that is no object).
fn object_arguments(name: &str, raw: &str, declared: &DeclaredTools) -> Option<String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Some("{}".to_owned());
    }
    if let Ok(serde_json::Value::Object(_)) = serde_json::from_str(trimmed) {
        return Some(raw.to_owned());
    }
    let name_json = serde_json::Value::String(name.to_owned()).to_string();
    let text =
        format!("<tool_call>{{\"name\": {name_json}, \"arguments\": {trimmed}}}</tool_call>");
    let mut config = toolshim_parse::Config::default();
    config.tools = declared.tool_set().cloned();
    let parsed = toolshim_parse::parse(&text, &config);
    match parsed.calls.as_slice() {
        // Arguments the parser ignores (a value that is no object) are none to run.
        [call]
            if call.complete
                && parsed.incomplete.is_empty()
                && !parsed
                    .warnings
                    .iter()
                    .any(|w| w.code == toolshim_parse::WarningCode::InvalidArguments) =>
        {
            tracing::warn!(tool = %name, arguments = %raw, repaired = %call.arguments,
                "repaired a native call's arguments that were no JSON object");
            Some(call.arguments.clone())
        }
        _ => None,
    }
}

/// The visible text of a native call whose arguments are no JSON object: the call as the
/// upstream gave it.
fn unusable_call_text(name: &str, raw: &str) -> String {
    let name_json = serde_json::Value::String(name.to_owned()).to_string();
    format!("{{\"name\": {name_json}, \"arguments\": {raw}}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::types::ToolSpec;

    fn request() -> ChatRequest {
        let schema =
            serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}});
        ChatRequest::asking("Weather in Paris?", vec![ToolSpec::named("get_weather", Some(schema))])
    }

    fn fold(events: Vec<UpstreamEvent>) -> Vec<ChatEvent> {
        let req = request();
        let declared = DeclaredTools::new(&req.tools).unwrap();
        let mut reply =
            NativeReply::new(&req, &declared, ReasoningCalls::Ignore, Followups::NONE, true, false);
        let mut out = Vec::new();
        for event in events {
            reply.feed(event, &mut out);
        }
        let (outcome, _) = reply.finish(&mut out);
        out.push(ChatEvent::Done(outcome));
        out
    }

    /// A reply written as text, through a fold that judges its calls (as by default) and
    /// may ask again: what went out, and what comes next.
    fn fold_judged(reply: &str, may_ask_again: bool) -> (Vec<ChatEvent>, Next) {
        let schema = serde_json::json!({"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let tools = vec![ToolSpec::named("get_weather", Some(schema))];
        let req = ChatRequest::asking("Weather in Paris?", tools);
        let declared = DeclaredTools::new(&req.tools).unwrap();
        let followups = Followups { check_grounding: true, continue_calls: 0 };
        let mut fold = NativeReply::new(
            &req,
            &declared,
            ReasoningCalls::Ignore,
            followups,
            true,
            may_ask_again,
        );
        let mut out = Vec::new();
        for piece in reply.as_bytes().chunks(7) {
            fold.feed(UpstreamEvent::Text(String::from_utf8_lossy(piece).into()), &mut out);
        }
        fold.feed(UpstreamEvent::Finish(FinishReason::Stop), &mut out);
        let (_, next) = fold.finish(&mut out);
        (out, next)
    }

    #[test]
    fn issue_24_a_call_read_from_the_text_that_copies_the_schema_is_asked_for_again() {
        let copied = r#"{"name": "get_weather", "arguments": {"city": {"type": "string"}}}"#;
        let (out, next) = fold_judged(copied, true);
        assert!(out.is_empty(), "nothing goes out of a reply asked for again: {out:?}");
        let Next::Again(again) = next else { panic!("{next:?}") };
        assert_eq!(again.reply, copied);
        assert!(
            again.correction.contains("`get_weather`: city holds a piece of the schema"),
            "{}",
            again.correction
        );

        // When it may not be asked for again, a call that only recites the schema is no
        // call: it gives way to a plain answer, as a guess does.
        let (out, next) = fold_judged(copied, false);
        assert!(matches!(next, Next::Plain), "{next:?}");
        assert!(out.is_empty(), "{out:?}");
        // Another fault, not a recital (a key the tool does not take), goes out as written.
        let unknown = r#"{"name": "get_weather", "arguments": {"city": "Paris", "town": "Paris"}}"#;
        let (out, next) = fold_judged(unknown, false);
        assert!(matches!(next, Next::Done), "{next:?}");
        assert!(
            matches!(&out[0], ChatEvent::CallStart { name, .. } if name == "get_weather"),
            "{out:?}"
        );

        // Nor when text went out with it: the text is the answer, the recital no call.
        let (out, next) = fold_judged(&format!("Checking the weather.\n{copied}"), true);
        assert!(matches!(next, Next::Done), "{next:?}");
        assert_eq!(text(&out).trim(), "Checking the weather.");
        assert!(!out.iter().any(|e| matches!(e, ChatEvent::CallStart { .. })), "{out:?}");

        // A call that is a guess as well (London appears nowhere) gives way to a plain
        // answer, as any guess does.
        let guess = r#"{"name": "get_weather", "arguments": {"city": "London", "days": 3}}"#;
        let (out, next) = fold_judged(guess, true);
        assert!(matches!(next, Next::Plain), "{next:?}: {out:?}");

        // A call that fits goes out whatever may follow.
        let (out, next) =
            fold_judged(r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#, true);
        assert!(matches!(next, Next::Done), "{next:?}");
        assert!(
            matches!(&out[0], ChatEvent::CallStart { name, .. } if name == "get_weather"),
            "{out:?}"
        );
    }

    /// A held call whose arguments break off into text that is not JSON (an expression the
    /// parser does not work out) is not sent with what was read before the break: the reply is its
    /// text, and it ended as the upstream said (no `length`: no limit was hit).
    #[test]
    fn issue_24_a_call_with_an_expression_for_a_value_stays_text() {
        let reply = "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2 * d}}\n```";
        let (out, next) = fold_judged(reply, true);
        assert!(matches!(next, Next::Done), "{next:?}");
        assert!(!out.iter().any(|e| matches!(e, ChatEvent::CallStart { .. })), "{out:?}");
        assert_eq!(text(&out), reply);
        let schema = serde_json::json!({"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let req = ChatRequest::asking(
            "Weather in Paris?",
            vec![ToolSpec::named("get_weather", Some(schema))],
        );
        let declared = DeclaredTools::new(&req.tools).unwrap();
        let followups = Followups { check_grounding: true, continue_calls: 0 };
        let mut fold =
            NativeReply::new(&req, &declared, ReasoningCalls::Ignore, followups, true, true);
        let mut out = Vec::new();
        fold.feed(UpstreamEvent::Text(reply.into()), &mut out);
        fold.feed(UpstreamEvent::Finish(FinishReason::Stop), &mut out);
        let (outcome, _) = fold.finish(&mut out);
        assert_eq!(outcome.finish, Finish::Stop);
    }

    fn text(events: &[ChatEvent]) -> String {
        events
            .iter()
            .filter_map(|e| if let ChatEvent::Text(t) = e { Some(t.as_str()) } else { None })
            .collect()
    }

    #[test]
    fn issue_24_a_call_the_upstream_left_in_its_text_becomes_a_call() {
        let reply =
            "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```";
        let mut events: Vec<UpstreamEvent> = reply
            .as_bytes()
            .chunks(5)
            .map(|c| UpstreamEvent::Text(String::from_utf8_lossy(c).into()))
            .collect();
        events.push(UpstreamEvent::Finish(FinishReason::Stop));
        let out = fold(events);
        assert!(
            matches!(&out[0], ChatEvent::CallStart { index: 0, name, .. } if name == "get_weather"),
            "{out:?}"
        );
        let args: String = out
            .iter()
            .filter_map(|e| {
                if let ChatEvent::CallArgs { json, .. } = e { Some(json.as_str()) } else { None }
            })
            .collect();
        assert_eq!(args, r#"{"city":"Paris"}"#);
        assert_eq!(text(&out), "");
        assert!(matches!(
            out.last(),
            Some(ChatEvent::Done(Outcome { finish: Finish::ToolCalls { .. }, .. }))
        ));
    }

    #[test]
    fn native_calls_pass_and_plain_text_stays_text() {
        let out = fold(vec![
            UpstreamEvent::Text("Let me check.".into()),
            UpstreamEvent::Call(CallDelta {
                index: 0,
                id: Some("call_x".into()),
                name: Some("get_weather".into()),
                arguments: "{\"ci".into(),
            }),
            UpstreamEvent::Call(CallDelta {
                index: 0,
                id: None,
                name: None,
                arguments: "ty\":\"Oslo\"}".into(),
            }),
            UpstreamEvent::Call(CallDelta {
                index: 1,
                id: None,
                name: Some("rm_rf".into()),
                arguments: "{}".into(),
            }),
            UpstreamEvent::Finish(FinishReason::Other),
        ]);
        assert_eq!(text(&out), "Let me check.");
        assert!(
            out.contains(&ChatEvent::CallStart {
                index: 0,
                id: "call_x".into(),
                name: "get_weather".into()
            }),
            "{out:?}"
        );
        assert!(
            out.contains(&ChatEvent::CallArgs { index: 0, json: r#"{"city":"Oslo"}"#.into() }),
            "{out:?}"
        );
        assert_eq!(
            out.iter().filter(|e| matches!(e, ChatEvent::CallStart { .. })).count(),
            1,
            "undeclared dropped"
        );

        let out = fold(vec![
            UpstreamEvent::Text("Paris is sunny.".into()),
            UpstreamEvent::Finish(FinishReason::Length),
        ]);
        assert_eq!(text(&out), "Paris is sunny.");
        assert!(matches!(
            out.last(),
            Some(ChatEvent::Done(Outcome { finish: Finish::Length, .. }))
        ));
    }

    fn native_call(arguments: &str) -> Vec<UpstreamEvent> {
        vec![
            UpstreamEvent::Call(CallDelta {
                index: 0,
                id: Some("call_1".into()),
                name: Some("get_weather".into()),
                arguments: arguments.into(),
            }),
            UpstreamEvent::Finish(FinishReason::Other),
        ]
    }

    fn arguments(events: &[ChatEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                ChatEvent::CallArgs { json, .. } => Some(json.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn native_arguments_that_are_no_object_are_repaired_or_kept_as_text() {
        // An object, and nothing: as they are, and `{}`.
        assert_eq!(arguments(&fold(native_call("{\"city\": \"Oslo\"}"))), ["{\"city\": \"Oslo\"}"]);
        assert_eq!(arguments(&fold(native_call(" "))), ["{}"]);
        // Repairable: an object encoded twice, single quotes and a trailing comma.
        let twice = fold(native_call("\"{\\\"city\\\": \\\"Oslo\\\"}\""));
        assert_eq!(arguments(&twice), ["{\"city\":\"Oslo\"}"], "{twice:?}");
        let loose = fold(native_call("{'city': 'Oslo',}"));
        assert_eq!(arguments(&loose), ["{\"city\":\"Oslo\"}"], "{loose:?}");
        // Not an object, or cut off: no call, and the upstream's words stay visible.
        for raw in ["42", "{\"city\": \"Os"] {
            let events = fold(native_call(raw));
            assert!(arguments(&events).is_empty(), "{raw}: {events:?}");
            assert!(text(&events).contains(raw), "{raw}: {events:?}");
            assert!(text(&events).contains("get_weather"), "{raw}: {events:?}");
            let Some(ChatEvent::Done(outcome)) = events.last() else { panic!("{events:?}") };
            assert!(!matches!(outcome.finish, Finish::ToolCalls { .. }), "{raw}: {events:?}");
        }
    }
}
