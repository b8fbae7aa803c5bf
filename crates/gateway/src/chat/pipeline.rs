//! The pipeline: renders the request for the upstream, streams the reply through the
//! shaper, holds output until it may commit, and retries a bad reply while nothing has reached
//! the client. Generic over `Upstream`, so its policy is tested against a scripted upstream in
//! memory.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use tracing::Instrument;

use crate::chat::attempt::Attempt;
use crate::chat::continuation::{Follow, may_continue};
use crate::chat::grounding::Grounding;
use crate::chat::native::Followups;
use crate::chat::prompt;
use crate::chat::shaper::{DeclaredTools, Shaper};
use crate::chat::types::{
    ChatEvent, ChatRequest, Finish, Message, Outcome, Retry, RetryReason, Settings, ToolChoice,
    Usage,
};
use crate::error::{ApiError, Refuser};
use crate::metrics::Metrics;
use crate::neutral::family;
use crate::neutral::{FinishReason, Refused, Upstream, UpstreamRequest, UpstreamStream};

/// Runs a request in emulation mode against `upstream`: a short loop over the attempts
/// (`Run` holds what lasts between them, `Attempt` reads one reply, `verdict` judges it),
/// yielding what may go out.
pub(crate) fn run<U: Upstream>(
    upstream: U,
    settings: Settings,
    metrics: Arc<Metrics>,
    req: ChatRequest,
    stream: bool,
) -> impl Stream<Item = Result<ChatEvent, ApiError>> + Send {
    // The inspector's record of the request, taken while the handler runs (the stream is
    // read later, outside it).
    let capture = crate::inspect::current();
    async_stream::stream! {
        let mut run = match Run::new(upstream, settings, metrics, req, capture).await {
            Ok(run) => run,
            Err(err) => {
                yield Err(err);
                return;
            }
        };
        // The attempt whose reasoning went out last (see `separate`).
        let mut reasoning_shown: Option<u32> = None;
        loop {
            // One span an attempt, with why it was made (traces on: docs/operations.md).
            let attempt = tracing::debug_span!("attempt", toolshim.attempt = run.attempt + 1);
            if let Some(reason) = run.reasons.last().filter(|_| run.attempt > 0) {
                crate::traces::set(&attempt, "toolshim.retry_reason", *reason);
            }
            let (mut reply, sent_tokens) = match run.send().instrument(attempt.clone()).await {
                Ok(Some(sent)) => sent,
                Ok(None) => continue,
                Err(err) => {
                    if let Some(capture) = &run.capture {
                        capture.failed(&err, None);
                    }
                    yield Err(err);
                    return;
                }
            };
            let mut read = Attempt::new(run.shaper(), run.attempt, stream, run.req.show_reasoning);
            let mut failed: Option<ApiError> = None;
            while let Some(item) = reply.next().await {
                let mut out = Vec::new();
                let step = item.and_then(|event| read.feed(event, &mut reasoning_shown, &mut out));
                for event in out {
                    yield Ok(event);
                }
                if let Err(err) = step {
                    failed = Some(err);
                    break;
                }
            }
            if let Some(err) = failed {
                if let Some(capture) = &run.capture {
                    capture.read(&read.raw, read.finish_reason, read.shaper.take_findings(), read.usage);
                    capture.failed(&err, None);
                }
                let mut out = Vec::new();
                read.broke(&mut reasoning_shown, &mut out);
                for event in out {
                    yield Ok(event);
                }
                yield Err(err);
                return;
            }
            let produced = read.finish();
            run.warnings += read.shaper.warnings();
            let truncated = read.finish_reason == Some(FinishReason::Length);
            let retried = run.account(&read, sent_tokens);
            if let Some(capture) = &run.capture {
                capture.read(&read.raw, read.finish_reason, read.shaper.take_findings(), read.usage);
                if read.committed {
                    capture.verdict("answer (it went out as it was written)", None);
                }
            }
            let mut out = Vec::new();
            if !read.committed {
                match run.judge(&read, truncated) {
                    Judged::Again => continue,
                    Judged::Fail(err) => {
                        yield Err(err);
                        return;
                    }
                    Judged::Answer => read.release(&mut reasoning_shown, &mut out),
                }
            }
            read.show(produced, &mut reasoning_shown, &mut out);
            for event in out {
                yield Ok(event);
            }
            // An incomplete call (cut off inside its arguments, or withdrawn because they
            // were not JSON) that could not be asked for again (it had gone out, or the
            // retries ran out) is never passed off as a whole call. When the token limit
            // cut it, the reply ends with `length`, as OpenAI's does for a cut-off call;
            // otherwise no finish reason is true, and the reply fails (in-band once it
            // went out).
            if read.shaper.incomplete_call() && !truncated {
                yield Err(incomplete(run.attempt, &read.raw));
                return;
            }
            // Calls read from the reply's text: continuations may add the ones a small model
            // leaves out (`chat::continuation`).
            let mut n_calls = read.shaper.n_calls();
            if let Some(mut follow) = run.follow(&read, truncated).await {
                while let Some(prefix) = follow.next_prefix() {
                    let request = run.continued(prefix, follow.max_tokens());
                    for event in run.round(request, &mut follow).await {
                        n_calls += usize::from(matches!(event, ChatEvent::CallEnd { .. }));
                        yield Ok(event);
                    }
                }
                run.spent.add(follow.usage());
            }
            let request = tracing::Span::current();
            crate::traces::set(&request, "toolshim.retries", u64::from(run.attempt));
            let reasons = run.reasons.iter().map(|r| (*r).to_owned()).collect();
            crate::traces::set(&request, "toolshim.retry_reasons", crate::traces::Value::Strs(reasons));
            crate::traces::set(&request, "toolshim.parse_warnings", run.warnings);
            drop(attempt);
            yield Ok(ChatEvent::Done(run.outcome(&read, truncated, n_calls, retried)));
            return;
        }
    }
}

/// One emulated request across its attempts: what it was asked, and what was learned.
struct Run<U> {
    upstream: U,
    settings: Settings,
    metrics: Arc<Metrics>,
    req: ChatRequest,
    tools: DeclaredTools,
    /// The request has tools.
    engaged: bool,
    followups: Followups,
    grounding: Option<Arc<Grounding>>,
    /// The correction the next attempt carries.
    feedback: Option<Retry>,
    /// Whether the upstream is asked to enforce the answer's format itself; off once it
    /// refused that.
    native_format: bool,
    /// The format was refused, and the upstream has not yet taken the request without it.
    format_refused: Option<Box<Refuser>>,
    /// The same for the grammar of the contract (constrained decoding).
    with_grammar: bool,
    grammar_refused: Option<Box<Refuser>>,
    attempt: u32,
    /// Usage of all attempts: retries cost tokens too.
    spent: Usage,
    /// The request as sent for a last plain answer (see `verdict`), once that is needed.
    plain: Option<ChatRequest>,
    /// Why each attempt after the first was made, in order (for traces).
    reasons: Vec<&'static str>,
    /// The parser's warnings over every attempt (for traces).
    warnings: u64,
    /// The inspector's record of the request, when it is kept.
    capture: Option<crate::inspect::Capture>,
}

/// What a judged attempt that did not go out leads to.
enum Judged {
    /// Another attempt (a retry, or a plain answer).
    Again,
    Fail(ApiError),
    /// It is the answer: it goes out.
    Answer,
}

impl<U: Upstream> Run<U> {
    async fn new(
        upstream: U,
        mut settings: Settings,
        metrics: Arc<Metrics>,
        req: ChatRequest,
        capture: Option<crate::inspect::Capture>,
    ) -> Result<Run<U>, ApiError> {
        let engaged = !req.tools.is_empty();
        // A tool list the parser cannot hold is refused, never read as "any name goes".
        let tools = DeclaredTools::new(&req.tools)?;
        // `call_format = "auto"`: the syntax of the model's family, from the template the
        // upstream shows (asked once per upstream) when the prompt writes calls at all.
        let writes_calls = engaged
            || req
                .messages
                .iter()
                .any(|m| matches!(m, Message::Assistant { calls, .. } if !calls.is_empty()));
        settings.call_format = if writes_calls {
            let template = upstream.template_format();
            family::resolve(settings.call_format, &settings.upstream_model, template).await
        } else {
            family::resolve_by_name(settings.call_format, &settings.upstream_model)
        };
        let followups = Followups {
            check_grounding: settings.check_grounding,
            continue_calls: settings.continue_calls,
        };
        let grounding = followups.grounding(&req);
        Ok(Run {
            upstream,
            settings,
            metrics,
            req,
            tools,
            engaged,
            followups,
            grounding,
            feedback: None,
            native_format: true,
            format_refused: None,
            with_grammar: true,
            grammar_refused: None,
            attempt: 0,
            spent: Usage::default(),
            plain: None,
            reasons: Vec::new(),
            warnings: 0,
            capture,
        })
    }

    /// The request this attempt answers: the client's, or the plain one.
    fn current(&self) -> &ChatRequest {
        self.plain.as_ref().unwrap_or(&self.req)
    }

    /// Sends this attempt: its reply and the prompt's estimated tokens; `None` when the
    /// upstream refused the format or the grammar and is to be asked again without it.
    async fn send(&mut self) -> Result<Option<(UpstreamStream, u64)>, ApiError> {
        let current = self.current();
        let request = prompt::render(
            current,
            &self.settings,
            self.feedback.as_ref(),
            self.native_format,
            self.with_grammar,
        );
        if let Some(capture) = &self.capture {
            let kind = if self.plain.is_some() { "plain" } else { "emulated" };
            capture.prompt(kind, &request, self.feedback.is_some());
        }
        let sent_format = request.response_format.is_some();
        let sent_grammar = request.grammar.is_some();
        let sent_tokens = prompt::estimate_tokens(&request.system, &request.turns);
        match self.upstream.chat(request).await {
            Ok(reply) => {
                // Without the format (or grammar) it was taken: that was what it refused.
                if let Some(by) = self.format_refused.take() {
                    self.upstream.refused(Refused::ResponseFormat, &by);
                }
                if let Some(by) = self.grammar_refused.take() {
                    self.upstream.refused(Refused::Grammar, &by);
                }
                Ok(Some((reply, sent_tokens)))
            }
            // A grammar goes only to upstreams that decode under one; one that refuses it
            // anyway (an old server, a grammar it cannot compile) is asked without, and so
            // is one that refuses `response_format` (the format is then asked for in the
            // prompt). The grammar goes first: a refusal of both drops one at a time.
            Err(ApiError::UpstreamRejected { status: 400 | 422, message, by })
                if sent_grammar || sent_format =>
            {
                if sent_grammar {
                    self.refused("the grammar", &message);
                    self.with_grammar = false;
                    self.grammar_refused = by;
                } else {
                    self.refused("response_format", &message);
                    self.native_format = false;
                    self.format_refused = by;
                }
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// The upstream refused `what` (its `message`): the attempt is made again without it.
    fn refused(&self, what: &str, message: &str) {
        tracing::info!(message = %message, "the upstream refused {what}; asking without it");
        if let Some(capture) = &self.capture {
            let err =
                ApiError::UpstreamRejected { status: 400, message: message.to_owned(), by: None };
            capture.failed(&err, None);
            capture.verdict(&format!("asked again without {what}"), None);
        }
    }

    /// The shaper of this attempt's reply.
    fn shaper(&self) -> Shaper {
        let current = self.current();
        let format_file = self.settings.format_file.as_ref();
        let reasoning_calls = self.settings.reasoning_calls;
        let mut shaper =
            Shaper::new(current, &self.tools, self.engaged, reasoning_calls, format_file);
        if self.settings.check_arguments {
            shaper.check_arguments(self.attempt < self.settings.max_retries);
        }
        if let Some(judge) = self.followups.judge(current, self.grounding.as_ref()) {
            shaper.judge_calls(judge);
        }
        if self.capture.is_some() {
            shaper.keep_findings();
        }
        shaper
    }

    /// Adds the attempt's cost to what was spent (estimated, about four characters a
    /// token, when the upstream reported none); what was spent before it.
    fn account(&mut self, read: &Attempt, sent_tokens: u64) -> Usage {
        let retried = self.spent;
        let mut usage = read.usage;
        if usage == Usage::default() {
            usage = Usage {
                prompt_tokens: sent_tokens,
                completion_tokens: (read.raw.chars().count() as u64).div_ceil(4),
                cached_tokens: 0,
            };
        }
        self.spent.add(usage);
        retried
    }

    /// The verdict on an attempt that did not go out, counted and carried out.
    fn judge(&mut self, read: &Attempt, truncated: bool) -> Judged {
        let (attempt, max_retries) = (self.attempt, self.settings.max_retries);
        let problem = read.shaper.problem();
        if let Some(reason) = problem {
            self.metrics.retry(reason.as_str(), attempt < max_retries);
            self.metrics.guessed_calls(read.shaper.guesses().len());
        }
        let tries = Tries { attempt, max_retries, asked_plain: self.plain.is_some() };
        let verdict = verdict(read, problem, tries, &self.req, truncated);
        if let Some(capture) = &self.capture {
            let (said, why) = match &verdict {
                Verdict::Plain(why) => (crate::inspect::PLAIN_ANSWER, Some(why.to_string())),
                Verdict::Retry(retry) => (crate::inspect::RETRY, retry.detail.clone()),
                Verdict::Fail(err) => ("failed", Some(err.message())),
                Verdict::Answer => ("answer", None),
            };
            let problem = match (problem, why) {
                (Some(problem), Some(why)) => Some(format!("{}: {why}", problem.as_str())),
                (Some(problem), None) => Some(problem.as_str().to_owned()),
                (None, why) => why,
            };
            capture.verdict(said, problem.as_deref());
        }
        match verdict {
            Verdict::Plain(why) => {
                tracing::info!(attempt, "{why}; asking for a plain answer");
                self.reasons.push(problem.map_or("plain", RetryReason::as_str));
                self.attempt += 1;
                self.feedback = None;
                self.plain =
                    Some(ChatRequest { tool_choice: ToolChoice::None, ..self.req.clone() });
                Judged::Again
            }
            Verdict::Retry(retry) => {
                tracing::info!(
                    reason = retry.reason.as_str(),
                    attempt,
                    "emulated reply rejected; asking the upstream again"
                );
                self.attempt += 1;
                self.reasons.push(retry.reason.as_str());
                self.feedback = Some(retry);
                Judged::Again
            }
            Verdict::Fail(err) => Judged::Fail(err),
            Verdict::Answer => Judged::Answer,
        }
    }

    /// The continuations that may add calls to a reply whose calls were read from its text,
    /// where the upstream continues a reply and the settings allow.
    async fn follow(&self, read: &Attempt, truncated: bool) -> Option<Follow> {
        let sent = read.shaper.sent();
        let wanted = !truncated
            && self.plain.is_none()
            && self.settings.continue_calls > 0
            && may_continue(self.current(), sent, read.shaper.n_calls());
        if !wanted || !self.upstream.continues().await {
            return None;
        }
        let grounding = Arc::clone(self.grounding.as_ref()?);
        Follow::new(&read.raw, sent, grounding, self.settings.continue_calls)
    }

    /// The request continued from `prefix`, at most `max_tokens` long.
    fn continued(&self, prefix: &str, max_tokens: u64) -> UpstreamRequest {
        let mut request =
            prompt::render(self.current(), &self.settings, None, self.native_format, false);
        request.prefill = Some(prefix.to_owned());
        request.sampling.max_tokens = Some(max_tokens.into());
        request
    }

    /// One continuation: the kept call's events, if any.
    async fn round(&self, request: UpstreamRequest, follow: &mut Follow) -> Vec<ChatEvent> {
        let mut reply = match self.upstream.chat(request).await {
            Ok(reply) => reply,
            Err(err) => {
                follow.failed(&err, &self.metrics);
                return Vec::new();
            }
        };
        let format_file = self.settings.format_file.as_ref();
        let reasoning_calls = self.settings.reasoning_calls;
        let mut round = follow.round(self.current(), &self.tools, reasoning_calls, format_file);
        round.read(&mut reply).await;
        follow.end_round(round, &self.metrics)
    }

    /// How the reply ended, and what it cost.
    fn outcome(&self, read: &Attempt, truncated: bool, n_calls: usize, retried: Usage) -> Outcome {
        let finish = if truncated && (read.shaper.incomplete_call() || n_calls == 0) {
            Finish::Length
        } else if n_calls > 0 {
            Finish::ToolCalls { forced: matches!(self.req.tool_choice, ToolChoice::Named(_)) }
        } else {
            Finish::Stop
        };
        self.metrics.calls(n_calls);
        let (engaged, attempt) = (self.engaged, self.attempt);
        tracing::debug!(engaged, calls = n_calls, attempt, "reply finished");
        Outcome { finish, usage: self.spent, retried }
    }
}

/// Where an attempt stands among the tries.
#[derive(Debug, Clone, Copy)]
struct Tries {
    /// This attempt's number (0: the first).
    attempt: u32,
    max_retries: u32,
    /// A plain answer (without tools) was asked for already.
    asked_plain: bool,
}

/// What an attempt that did not go out comes to.
#[derive(Debug)]
enum Verdict {
    /// Ask again for a plain answer, without tools, for this reason.
    Plain(&'static str),
    /// Ask again with this correction.
    Retry(Retry),
    /// The reply fails with this error.
    Fail(ApiError),
    /// It is the answer.
    Answer,
}

/// The verdict on an attempt whose reply ended before anything of it went out, from the
/// problem the shaper found in it (if any): a pure function of the attempt, the tries and
/// the request.
fn verdict(
    read: &Attempt,
    problem: Option<RetryReason>,
    tries: Tries,
    req: &ChatRequest,
    truncated: bool,
) -> Verdict {
    let Tries { attempt, max_retries, asked_plain } = tries;
    if let Some(reason) = problem {
        let shaper = &read.shaper;
        if let Some(why) = plain_answer(reason, attempt < max_retries, asked_plain, req, shaper) {
            return Verdict::Plain(why);
        }
        if attempt < max_retries {
            let detail = shaper.problem_detail();
            return Verdict::Retry(Retry { reply: read.raw.clone(), reason, detail });
        }
        if let Some((problem, answer)) = shaper.output_problem() {
            let shown: String = answer.chars().take(500).collect();
            return Verdict::Fail(ApiError::OutputInvalid {
                message: format!(
                    "The model's answer did not have the requested format after {attempt} retries: {problem}. The answer was: {shown}"
                ),
            });
        }
        // A required call that never came (whatever the last reply did instead).
        let required = matches!(req.tool_choice, ToolChoice::Required | ToolChoice::Named(_));
        if reason == RetryReason::MissingCall || (required && shaper.n_calls() == 0) {
            let message = match &req.tool_choice {
                ToolChoice::Named(name) => format!(
                    "The model did not call the required tool `{name}` (after {attempt} retries)."
                ),
                _ => format!(
                    "The model did not produce the required tool call (after {attempt} retries)."
                ),
            };
            return Verdict::Fail(ApiError::ToolCallMissing { message });
        }
    }
    if read.shaper.incomplete_call() && !truncated {
        return Verdict::Fail(incomplete(attempt, &read.raw));
    }
    Verdict::Answer
}

/// Why a rejected reply is better asked for again as a plain answer, without tools: its
/// only calls were guesses (no correction mends a call the request gives no values for), or,
/// with the retries spent, the model kept calling tools that do not exist and wrote nothing
/// else, which under `auto` would leave the client an empty reply.
fn plain_answer(
    reason: RetryReason,
    retries_left: bool,
    asked_plain: bool,
    req: &ChatRequest,
    shaper: &Shaper,
) -> Option<&'static str> {
    if reason == RetryReason::GuessedArguments && !asked_plain {
        return Some("the reply's only calls were guesses");
    }
    let unknown_only = reason == RetryReason::UnknownTool
        && req.tool_choice == ToolChoice::Auto
        && shaper.only_separators_shown();
    (!retries_left && unknown_only).then_some("only unknown tools were called")
}

/// The error for a call that ended incomplete with no token limit to blame; like
/// `OutputInvalid`, it shows the start of the last reply.
fn incomplete(attempt: u32, reply: &str) -> ApiError {
    let shown: String = reply.chars().take(500).collect();
    ApiError::CallIncomplete {
        message: format!(
            "The model's tool call was incomplete (cut off, or arguments that are not JSON) with no token limit reached, after {attempt} retries. The reply was: {shown}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::chat::types::ToolSpec;
    use crate::config::{CallFormat, ReasoningCalls};
    use crate::neutral::{Role, UpstreamEvent, UpstreamRequest, UpstreamStream};

    /// An upstream that answers from a script, in memory, and keeps what it was sent.
    #[derive(Clone, Default)]
    struct Scripted {
        replies: Arc<Mutex<VecDeque<String>>>,
        sent: Arc<Mutex<Vec<UpstreamRequest>>>,
    }

    impl Scripted {
        fn new(replies: &[&str]) -> Scripted {
            let scripted = Scripted::default();
            scripted.replies.lock().unwrap().extend(replies.iter().map(|r| (*r).to_owned()));
            scripted
        }
    }

    impl Upstream for Scripted {
        async fn chat(&self, request: UpstreamRequest) -> Result<UpstreamStream, ApiError> {
            self.sent.lock().unwrap().push(request);
            let text = self.replies.lock().unwrap().pop_front().unwrap_or_default();
            let events = text
                .chars()
                .collect::<Vec<_>>()
                .chunks(3)
                .map(|piece| Ok(UpstreamEvent::Text(piece.iter().collect())))
                .chain([Ok(UpstreamEvent::Finish(FinishReason::Stop))])
                .collect::<Vec<_>>();
            Ok(Box::pin(futures::stream::iter(events)))
        }
    }

    fn request(choice: ToolChoice) -> ChatRequest {
        let tools = vec![ToolSpec::named("get_weather", None)];
        ChatRequest { tool_choice: choice, ..ChatRequest::asking("Weather in Paris?", tools) }
    }

    fn settings() -> Settings {
        Settings {
            upstream_model: "up".into(),
            call_format: CallFormat::ToolCall,
            max_retries: 1,
            reasoning_calls: ReasoningCalls::Ignore,
            format_file: None,
            check_arguments: true,
            check_grounding: true,
            continue_calls: 8,
        }
    }

    async fn collect(upstream: &Scripted, req: ChatRequest) -> Vec<Result<ChatEvent, ApiError>> {
        let metrics = Arc::new(Metrics::new());
        run(upstream.clone(), settings(), metrics, req, true).collect().await
    }

    /// The same, for a client that does not stream (nothing commits before the reply ends).
    async fn collect_whole(
        upstream: &Scripted,
        req: ChatRequest,
    ) -> Vec<Result<ChatEvent, ApiError>> {
        let metrics = Arc::new(Metrics::new());
        run(upstream.clone(), settings(), metrics, req, false).collect().await
    }

    const CALL: &str =
        "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";

    #[tokio::test]
    async fn a_refusal_is_asked_again_with_a_correction_and_never_reaches_the_client() {
        let upstream = Scripted::new(&["I don't have access to real-time weather data.", CALL]);
        let events = collect(&upstream, request(ToolChoice::Auto)).await;
        let events: Vec<ChatEvent> = events.into_iter().map(Result::unwrap).collect();
        assert!(
            matches!(&events[0], ChatEvent::CallStart { name, .. } if name == "get_weather"),
            "{events:?}"
        );
        assert!(!events.iter().any(|e| matches!(e, ChatEvent::Text(t) if t.contains("access"))));
        let sent = upstream.sent.lock().unwrap();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].model, "up");
        let last = sent[1].turns.last().unwrap();
        assert_eq!(last.role, Role::User);
        assert!(last.text.contains("you can"), "{}", last.text);
    }

    /// Reasoning goes out as it is written (the client asked for it), so the reasoning of a
    /// reply that is then asked for again has gone out: the retry reads as more reasoning,
    /// after a blank line, and the rejected answer never reaches the client.
    #[tokio::test]
    async fn issue_18_reasoning_goes_out_before_the_answer_commits_and_a_retry_thinks_again() {
        let upstream = Scripted::new(&[
            "<think>First thought.</think>I don't have access to real-time weather data.",
            &format!("<think>Second thought.</think>{CALL}"),
        ]);
        let mut req = request(ToolChoice::Auto);
        req.show_reasoning = true;
        let events: Vec<ChatEvent> =
            collect(&upstream, req).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(ChatEvent::joined(&events).1, "First thought.\n\nSecond thought.");
        assert!(!events.iter().any(|e| matches!(e, ChatEvent::Text(_))), "{events:?}");
        assert!(events.iter().any(|e| matches!(e, ChatEvent::CallStart { .. })), "{events:?}");

        // Without a request for it, no reasoning at all.
        let upstream = Scripted::new(&[&format!("<think>Hidden.</think>{CALL}")]);
        let events = collect(&upstream, request(ToolChoice::Auto)).await;
        assert!(!events.iter().any(|e| matches!(e, Ok(ChatEvent::Reasoning(_)))), "{events:?}");
    }

    #[tokio::test]
    async fn a_required_call_that_never_comes_is_an_error_after_the_retries() {
        let upstream = Scripted::new(&["Sunny, probably.", "Still sunny."]);
        let events = collect(&upstream, request(ToolChoice::Required)).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(&events[0], Err(ApiError::ToolCallMissing { .. })), "{events:?}");
        assert_eq!(upstream.sent.lock().unwrap().len(), 2, "one try and one retry");
    }

    fn with_schema(choice: ToolChoice, strict: bool) -> ChatRequest {
        let mut req = request(choice);
        req.tools[0].parameters = Some(serde_json::json!({"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city"]}));
        req.tools[0].strict = strict;
        req
    }

    /// The text of a reply's events, joined.
    fn text(events: &[Result<ChatEvent, ApiError>]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Ok(ChatEvent::Text(text)) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn calls(events: &[Result<ChatEvent, ApiError>]) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        for event in events {
            match event {
                Ok(ChatEvent::CallStart { .. }) => args.push(String::new()),
                Ok(ChatEvent::CallArgs { json, .. }) => args.last_mut().unwrap().push_str(json),
                _ => {}
            }
        }
        args
    }

    const SCHEMA_COPIED: &str = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": {\"type\": \"string\"}}}</tool_call>";

    /// A streamed call goes out as it is written (the reply commits when it begins), so the
    /// check asks again before anything went out: a whole reply, or a strict tool's call.
    #[tokio::test]
    async fn issue_24_arguments_that_break_the_schema_are_asked_again_with_the_fault() {
        let upstream = Scripted::new(&[SCHEMA_COPIED, CALL]);
        let events = collect_whole(&upstream, with_schema(ToolChoice::Auto, false)).await;
        assert_eq!(calls(&events), vec![r#"{"city":"Paris"}"#.to_owned()], "{events:?}");
        let upstream = Scripted::new(&[SCHEMA_COPIED, CALL]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, true)).await;
        assert_eq!(calls(&events), vec![r#"{"city":"Paris"}"#.to_owned()], "{events:?}");
        let sent = upstream.sent.lock().unwrap();
        assert_eq!(sent.len(), 2);
        let correction = &sent[1].turns.last().unwrap().text;
        assert!(
            correction.contains("`get_weather`: city holds a piece of the schema"),
            "{correction}"
        );
    }

    #[tokio::test]
    async fn issue_24_after_the_retries_a_bad_call_goes_out_unless_its_tool_is_strict() {
        let unknown_key = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"town\": \"Paris\"}}</tool_call>";
        let upstream = Scripted::new(&[unknown_key, unknown_key]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, false)).await;
        let written = r#"{"city":"Paris","town":"Paris"}"#.to_owned();
        assert_eq!(calls(&events), vec![written], "{events:?}");

        // A call that only recites the schema is no call: a plain answer is asked for.
        let upstream = Scripted::new(&[SCHEMA_COPIED, SCHEMA_COPIED, "It depends on the city."]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, false)).await;
        assert!(calls(&events).is_empty(), "{events:?}");
        assert_eq!(text(&events), "It depends on the city.");
        let plain = {
            let sent = upstream.sent.lock().unwrap();
            assert_eq!(sent.len(), 3);
            sent[2].system.clone()
        };
        assert!(!plain.contains("get_weather"), "asked for without tools: {plain}");
        // The same when the recital is cut off by the end of the reply (a model that writes
        // the schema again and again until its token limit): no call, cut off or not.
        let cut = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"str";
        let upstream = Scripted::new(&[SCHEMA_COPIED, cut, "It depends on the city."]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, false)).await;
        assert!(calls(&events).is_empty(), "{events:?}");
        assert_eq!(text(&events), "It depends on the city.");
        assert_eq!(upstream.sent.lock().unwrap().len(), 3);
        // Recitals with only separators between them (`,` and a stray `{"`) are nothing
        // shown either; an answer between them is.
        let separated = format!("{SCHEMA_COPIED},\n{SCHEMA_COPIED}, {{\"");
        let upstream = Scripted::new(&[SCHEMA_COPIED, &separated, "It depends on the city."]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, false)).await;
        assert_eq!(text(&events), "It depends on the city.", "{events:?}");
        assert_eq!(upstream.sent.lock().unwrap().len(), 3);
        let answered = format!("{SCHEMA_COPIED} Paris is sunny.");
        let upstream = Scripted::new(&[SCHEMA_COPIED, &answered]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, false)).await;
        assert!(calls(&events).is_empty(), "{events:?}");
        assert!(text(&events).contains("Paris is sunny."), "{events:?}");
        assert_eq!(upstream.sent.lock().unwrap().len(), 2);

        let upstream = Scripted::new(&[SCHEMA_COPIED, SCHEMA_COPIED]);
        let events = collect(&upstream, with_schema(ToolChoice::Auto, true)).await;
        assert!(calls(&events).is_empty(), "{events:?}");
        assert!(
            matches!(
                events.last(),
                Some(Ok(ChatEvent::Done(Outcome { finish: Finish::Stop, .. })))
            ),
            "{events:?}"
        );
        // A required call that only ever broke its strict schema is the missing-call error.
        let upstream = Scripted::new(&[SCHEMA_COPIED, SCHEMA_COPIED]);
        let events = collect(&upstream, with_schema(ToolChoice::Required, true)).await;
        assert!(matches!(&events[..], [Err(ApiError::ToolCallMissing { .. })]), "{events:?}");
    }

    #[tokio::test]
    async fn issue_24_with_the_check_off_a_bad_call_goes_out_at_once() {
        let upstream = Scripted::new(&[SCHEMA_COPIED]);
        let metrics = Arc::new(Metrics::new());
        let mut off = settings();
        off.check_arguments = false;
        let events: Vec<_> =
            run(upstream.clone(), off, metrics, with_schema(ToolChoice::Auto, false), true)
                .collect()
                .await;
        assert_eq!(calls(&events), vec![r#"{"city":{"type":"string"}}"#.to_owned()], "{events:?}");
        assert_eq!(upstream.sent.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn only_unknown_tools_under_auto_get_a_last_attempt_without_tools() {
        let unknown = "<tool_call>{\"name\": \"search_web\", \"arguments\": {}}</tool_call>";
        let upstream = Scripted::new(&[unknown, unknown, "It is sunny in Paris."]);
        let events = collect(&upstream, request(ToolChoice::Auto)).await;
        assert_eq!(text(&events), "It is sunny in Paris.");
        let sent = upstream.sent.lock().unwrap();
        assert_eq!(sent.len(), 3);
        assert!(sent[0].system.contains("# Tools") && !sent[2].system.contains("# Tools"));
    }

    /// An attempt at `req` that read `reply`, whole.
    fn attempt_reading(req: &ChatRequest, reply: &str) -> (Attempt, Option<RetryReason>) {
        let tools = DeclaredTools::new(&req.tools).unwrap();
        let shaper = Shaper::new(req, &tools, true, ReasoningCalls::Ignore, None);
        let mut read = Attempt::new(shaper, 0, false, false);
        let (mut shown, mut out) = (None, Vec::new());
        read.feed(UpstreamEvent::Text(reply.into()), &mut shown, &mut out).unwrap();
        read.finish();
        let problem = read.shaper.problem();
        (read, problem)
    }

    /// The verdict on an attempt is a pure function: a required call that did not come is
    /// asked for again while retries are left, then fails; a good call is the answer.
    #[test]
    fn issue_25_the_verdict_on_an_attempt() {
        let req = request(ToolChoice::Required);
        let (read, problem) = attempt_reading(&req, "It is sunny.");
        assert_eq!(problem, Some(RetryReason::MissingCall));
        let tries = |attempt| Tries { attempt, max_retries: 2, asked_plain: false };
        match verdict(&read, problem, tries(0), &req, false) {
            Verdict::Retry(retry) => {
                assert_eq!(retry.reason, RetryReason::MissingCall);
                assert_eq!(retry.reply, "It is sunny.");
            }
            other => panic!("{other:?}"),
        }
        match verdict(&read, problem, tries(2), &req, false) {
            Verdict::Fail(ApiError::ToolCallMissing { message }) => {
                assert!(message.contains("after 2 retries"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let call = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
        let (read, problem) = attempt_reading(&req, call);
        assert_eq!(problem, None);
        assert!(matches!(verdict(&read, problem, tries(0), &req, false), Verdict::Answer));
    }
}
