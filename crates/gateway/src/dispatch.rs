//! How a request is served, decided in one place for every API family (`plan`), and the
//! native path every family shares: the request sent with its tools declared natively, the
//! reply folded by `chat::native::NativeReply` (calls the upstream's parser left in the
//! text read as calls), then what follows it (a plain answer instead of a reply that only
//! guessed, continuations for one whose calls were read from its text).

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::chat::continuation::Follow;
use crate::chat::native::{Again, Followups, NativeReply, Next};
use crate::chat::shaper::DeclaredTools;
use crate::chat::{ChatEvent, ChatRequest, Outcome, ToolChoice};
use crate::config::{Mode, ReasoningCalls};
use crate::error::ApiError;
use crate::neutral::Refused;
use crate::state::{AppState, Chain, Routed};
use crate::upstream::client::{PayloadStream, native_reply};
use crate::upstream::reply::Payload;
use crate::upstream::wire::Wire;
use crate::upstream::{UpstreamStream, odds, openai};

/// Chat events as a handler renders them.
pub(crate) type EventStream = Pin<Box<dyn Stream<Item = Result<ChatEvent, ApiError>> + Send>>;

/// How one request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Native tools; the upstream's refusal or failure is the client's error.
    Native,
    /// Native tools first; emulated when the upstream refuses them (a 400 or 422, then
    /// remembered for `native_refusal_secs`) or fails.
    TryNative,
    /// `auto` with no tools in play: Chat Completions relays the client's body; the other
    /// families go through the pipeline, which then adds no contract.
    Plain,
    /// The tool contract in the prompt, calls parsed from the text.
    Emulate,
}

/// What the decision needs to know about the route's first upstream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstUpstream {
    /// It refused native tools lately.
    pub(crate) refused_tools: bool,
    /// It decodes under the contract's grammar (and has not refused one lately).
    pub(crate) grammar: bool,
}

/// How `chat` is served on a route in `mode` whose first upstream is `upstream`.
pub(crate) fn decide(mode: Mode, chat: &ChatRequest, upstream: FirstUpstream) -> Plan {
    let tools = !chat.tools.is_empty();
    let forced = matches!(chat.tool_choice, ToolChoice::Required | ToolChoice::Named(_));
    match mode {
        Mode::Emulate => Plan::Emulate,
        Mode::Native => Plan::Native,
        // A format is checked, asked for again and, if the upstream refuses
        // `response_format`, asked for in the prompt: only the pipeline does that.
        Mode::Auto if chat.output.is_some() => Plan::Emulate,
        // Each refusal costs a round trip: not asked again until its time has passed.
        Mode::Auto if tools && upstream.refused_tools => Plan::Emulate,
        // A forced choice is emulated under the contract's grammar where the upstream decodes
        // under one: then a call to the right tool, fitting its schema, is certain, while
        // native tool calling may answer without one.
        Mode::Auto if forced && upstream.grammar => Plan::Emulate,
        Mode::Auto if tools => Plan::TryNative,
        Mode::Auto => Plan::Plain,
    }
}

/// How `chat` is served on `routed`, asking the first upstream what `decide` needs.
pub(crate) async fn plan(routed: &Routed, chat: &ChatRequest) -> Plan {
    let Some((_, client, _)) = routed.chain.first() else { return Plan::Emulate };
    let forced = matches!(chat.tool_choice, ToolChoice::Required | ToolChoice::Named(_));
    let upstream = FirstUpstream {
        refused_tools: routed.chain.refused(Refused::Tools),
        grammar: routed.mode == Mode::Auto
            && forced
            && !routed.chain.refused(Refused::Grammar)
            && client.takes_grammar().await,
    };
    decide(routed.mode, chat, upstream)
}

/// What a failed first native request means in `auto` mode: `None`, emulate (the upstream
/// refused the request or failed; only a 400 or 422, its refusal of the request's tools, is
/// remembered: a server error, a credential problem or a redirect says nothing about tools,
/// and some proxies refuse a feature with a 401 or 403); else the error for the client.
pub(crate) fn after_refusal(chain: &Chain, err: ApiError) -> Option<ApiError> {
    match err {
        ApiError::UpstreamRejected { status: 400 | 422, by, .. } => {
            if let Some(by) = by {
                chain.remember(Refused::Tools, &by);
            }
            tracing::info!("the upstream rejected native tools; emulating");
            None
        }
        ApiError::Upstream { .. } | ApiError::UpstreamRejected { .. } => {
            tracing::info!("the upstream failed a native request; emulating");
            None
        }
        err => Some(err),
    }
}

/// An upstream's refusal of a request that carries images says so: a model without vision
/// refuses them with a message of its own, which seldom names them.
pub(crate) fn naming_images(chat: &ChatRequest) -> impl Fn(ApiError) -> ApiError + Send + use<> {
    let first = chat.images.first().map(|(_, image)| {
        let shown: String = image.url.chars().take(40).collect();
        if shown.len() < image.url.len() { format!("{shown}…") } else { shown }
    });
    let count = chat.images.len();
    let files = chat.images.iter().filter(|(_, image)| image.file.is_some()).count();
    move |err| match (err, &first) {
        (ApiError::UpstreamRejected { status, message, by }, Some(first)) => {
            let images = match (count, files) {
                (1, 0) => "an image",
                (1, 1) => "a file",
                (_, 0) => "images",
                (n, f) if n == f => "files",
                _ => "images and files",
            };
            let advice = if files == 0 {
                "a model that reads no images refuses them: send the text alone, or route to a model with vision"
            } else {
                "an upstream that reads no files or images refuses them: send the text alone, or route to a model that reads them"
            };
            ApiError::UpstreamRejected {
                status,
                message: format!(
                    "{message} (The request carries {images}, the first `{first}`; {advice}.)"
                ),
                by,
            }
        }
        (err, _) => err,
    }
}

/// The chat events of a request of a family whose body is built from the neutral request
/// (Messages, Responses), served as `plan` decides.
pub(crate) async fn serve(
    state: &AppState,
    chat: ChatRequest,
    stream: bool,
) -> Result<EventStream, ApiError> {
    let name = naming_images(&chat);
    match serve_plan(state, chat, stream).await {
        Ok(events) => Ok(Box::pin(events.map(move |event| event.map_err(&name)))),
        Err(err) => Err(name(err)),
    }
}

async fn serve_plan(
    state: &AppState,
    mut chat: ChatRequest,
    stream: bool,
) -> Result<EventStream, ApiError> {
    let routed = state.route(&chat.model)?;
    let plan = plan(&routed, &chat).await;
    tracing::debug!(?plan, "served");
    let wire = routed.chain.first_wire();
    let native = matches!(plan, Plan::Native | Plan::TryNative) && wire.is_some();
    let mode = match plan {
        Plan::Plain => "plain",
        _ if native => "native",
        _ => "emulate",
    };
    crate::inspect::served(&routed.chain, mode);
    if let (Plan::Native | Plan::TryNative, Some(wire)) = (plan, wire) {
        let mut body = wire.native_body(&chat, &routed.settings.upstream_model);
        let reasoning_calls = routed.settings.reasoning_calls;
        let mut instead_of = None;
        if Box::pin(unsure_of_calls(state, &routed.chain, &chat, &body, wire)).await {
            crate::inspect::served(&routed.chain, "plain");
            let with_tools = Native::new(body.clone(), wire, chat.clone(), reasoning_calls);
            instead_of = Some(Box::new(with_tools));
            body = wire.without_calls(&body);
            chat.tools.clear();
            chat.tool_choice = ToolChoice::None;
        }
        crate::inspect::relayed("native", &body);
        match routed.chain.relay_native(&body, wire).await {
            Ok(payloads) => {
                let repair = state.config.native_repair;
                let native =
                    Native { instead_of, ..Native::new(body, wire, chat, reasoning_calls) };
                return repaired(state, &routed.chain, payloads, native, repair);
            }
            Err(err) if plan == Plan::Native => {
                crate::inspect::failed(&err, None);
                return Err(err);
            }
            Err(err) => {
                let then =
                    if matches!(err, ApiError::Upstream { .. } | ApiError::UpstreamRejected { .. })
                    {
                        Some("emulate")
                    } else {
                        None
                    };
                crate::inspect::failed(&err, then);
                if let Some(err) = after_refusal(&routed.chain, err) {
                    return Err(err);
                }
            }
        }
    }
    Ok(emulated(state, routed, chat, stream))
}

/// Whether the model is unsure a call is wanted at all (`min_call_confidence`), so that
/// the request is better sent without its tools, for a plain answer: a request with tools
/// under `tool_choice: auto` whose calls the guess check judges, to an engine known to
/// report token odds (llama.cpp's server, found by `GET /props`, or one named in
/// `upstream.prefill`: vLLM, SGLang), asked first for one token and its odds; unsure when
/// that token opens a call the model gave all openings of one less than the bar. A probe
/// that fails or reports no odds leaves the request as it is.
pub(crate) async fn unsure_of_calls(
    state: &AppState,
    chain: &Chain,
    chat: &ChatRequest,
    body: &Value,
    wire: Wire,
) -> bool {
    let config = &state.config;
    let judged = config.native_repair && config.check_grounding && config.min_call_confidence > 0.0;
    if !(judged
        && wire.takes_chat_completions()
        && chat.tool_choice == ToolChoice::Auto
        && !chat.tools.is_empty())
    {
        return false;
    }
    // The first upstream only, with no fallback: a probe that fails leaves the request as
    // it is, and the request itself then finds out what the chain can do.
    let Some((_, client, model)) = chain.first() else { return false };
    if client.wire() != wire || client.prefill_dialect().await.is_none() {
        return false;
    }
    // Whole millionths of a probability from 0 to 1 (validated).
    let bar = (config.min_call_confidence * 1e6).round() as u32;
    let probe = odds::probe(body);
    crate::inspect::relayed("odds", &probe);
    let odds = match probe_odds(client, &probe, model).await {
        Ok(Some(odds)) => odds,
        Ok(None) => {
            tracing::debug!("no odds: the probe's reply reported none");
            return false;
        }
        Err(err) => {
            crate::inspect::failed(&err, None);
            tracing::debug!(error = %err.message(), "no odds: the probe failed");
            return false;
        }
    };
    let why = odds.describe(bar);
    let unsure = odds.unsure(bar);
    if let Some(capture) = crate::inspect::current() {
        let verdict = if unsure { crate::inspect::PLAIN_ANSWER } else { "answer" };
        capture.verdict(verdict, Some(&why));
    }
    if unsure {
        tracing::info!(why = %why, "unsure of a call; asking for a plain answer");
        state.metrics.guessed_calls(1);
        state.metrics.retry("unsure_call", true);
    } else {
        tracing::debug!(why = %why, "sure enough of the reply's opening");
    }
    unsure
}

/// The odds of the first token the upstream `client` writes for `probe`, sent as `model`.
async fn probe_odds(
    client: &crate::upstream::client::UpstreamClient,
    probe: &Value,
    model: &str,
) -> Result<Option<odds::Odds>, ApiError> {
    let mut payloads = client.relay(probe, model).await?;
    let mut odds = None;
    while let Some(payload) = payloads.next().await {
        if let Payload::Body(completion) = payload? {
            odds = odds::first_token(&completion);
        }
    }
    Ok(odds)
}

/// The emulation pipeline's events for `chat` on its route.
pub(crate) fn emulated(
    state: &AppState,
    routed: Routed,
    chat: ChatRequest,
    stream: bool,
) -> EventStream {
    let metrics = Arc::clone(&state.metrics);
    Box::pin(crate::chat::run(routed.chain, routed.settings, metrics, chat, stream))
}

/// A request sent natively: the body as relayed, and the request as the gateway read it
/// (with only the tools the body declares).
#[derive(Clone)]
pub(crate) struct Native {
    pub(crate) body: Value,
    /// The API the body is written in.
    pub(crate) wire: Wire,
    pub(crate) chat: ChatRequest,
    pub(crate) reasoning_calls: ReasoningCalls,
    /// For a request sent without its tools for a plain answer (the model's odds of a call
    /// were low, `unsure_of_calls`): the request with them, sent after all when the plain
    /// answer only refuses.
    pub(crate) instead_of: Option<Box<Native>>,
}

impl Native {
    pub(crate) fn new(
        body: Value,
        wire: Wire,
        chat: ChatRequest,
        reasoning_calls: ReasoningCalls,
    ) -> Native {
        Native { body, wire, chat, reasoning_calls, instead_of: None }
    }

    /// A Chat Completions body relayed as the client sent it (passthrough).
    pub(crate) fn relayed(
        body: Value,
        chat: ChatRequest,
        reasoning_calls: ReasoningCalls,
    ) -> Native {
        Native::new(body, Wire::chat_completions(), chat, reasoning_calls)
    }
}

/// What a repaired reply needs after its first reply.
struct After {
    state: AppState,
    chain: Chain,
    native: Native,
    declared: DeclaredTools,
    shown: String,
}

/// A native reply read into chat events through `NativeReply`, and what follows it. With
/// `repair` off (`native_repair = false`), the reply's text is text and nothing follows.
pub(crate) fn repaired(
    state: &AppState,
    chain: &Chain,
    payloads: PayloadStream,
    native: Native,
    repair: bool,
) -> Result<EventStream, ApiError> {
    let chat = &native.chat;
    let repair = repair && !chat.tools.is_empty() && chat.tool_choice != ToolChoice::None;
    let declared = DeclaredTools::new(&chat.tools)?;
    let followups = if repair {
        Followups {
            check_grounding: state.config.check_grounding,
            continue_calls: state.config.continue_calls,
        }
    } else {
        Followups::NONE
    };
    let may_ask_again = state.config.max_retries > 0;
    let mut fold =
        NativeReply::new(chat, &declared, native.reasoning_calls, followups, repair, may_ask_again);
    if native.instead_of.is_some() {
        fold.hold_bare_refusal();
    }
    let shown = chain.first().map_or("upstream", |(_, client, _)| client.shown()).to_owned();
    let mut reply = native_reply(payloads, shown.clone(), native.wire);
    let after = After { state: state.clone(), chain: chain.clone(), native, declared, shown };
    let events = async_stream::stream! {
        while let Some(read) = step(&mut fold, &mut reply).await {
            match read {
                Ok(out) => for event in out { yield Ok(event); },
                Err(err) => { yield Err(err); return; }
            }
        }
        let mut out = Vec::new();
        let (mut outcome, next) = fold.finish(&mut out);
        after.state.metrics.guessed_calls(fold.guesses());
        for event in out { yield Ok(event); }
        match next {
            Next::Done => {}
            Next::WithTools(held) => {
                // The reply with tools, with all that may follow it; the refusal goes out
                // should it show nothing, and its tokens count.
                let mut shown = false;
                match after.with_tools().await {
                    Ok(mut events) => while let Some(event) = events.next().await {
                        match event {
                            Ok(ChatEvent::Done(answered)) => {
                                if !shown {
                                    for event in held { yield Ok(event); }
                                }
                                yield Ok(ChatEvent::Done(instead(outcome, answered)));
                                return;
                            }
                            Ok(event) => {
                                shown |= matches!(event, ChatEvent::Text(_) | ChatEvent::CallStart { .. });
                                yield Ok(event);
                            }
                            Err(err) => { yield Err(err); return; }
                        }
                    },
                    Err(err) => {
                        crate::inspect::failed(&err, None);
                        tracing::info!(error = %err.message(), "the request with tools failed; the refusal stands");
                        for event in held { yield Ok(event); }
                    }
                }
            }
            asked @ (Next::Again(_) | Next::Plain) => {
                let asked = match &asked {
                    Next::Again(again) => after.again(again).await,
                    _ => after.plain().await,
                };
                let (mut fold, mut reply) = match asked {
                    Ok(asked) => asked,
                    Err(err) => { yield Err(err); return; }
                };
                while let Some(read) = step(&mut fold, &mut reply).await {
                    match read {
                        Ok(out) => for event in out { yield Ok(event); },
                        Err(err) => { yield Err(err); return; }
                    }
                }
                let mut out = Vec::new();
                let (answered, _) = fold.finish(&mut out);
                for event in out { yield Ok(event); }
                outcome = instead(outcome, answered);
            }
            Next::Continue(mut follow) => {
                if let Some(dialect) = after.prefill().await {
                    while let Some(prefix) = follow.next_prefix() {
                        let body = openai::continued(&after.native.body, prefix, dialect, follow.max_tokens());
                        for event in after.round(&body, &mut follow).await { yield Ok(event); }
                    }
                    outcome.usage.add(follow.usage());
                }
            }
        }
        yield Ok(ChatEvent::Done(outcome));
    };
    Ok(Box::pin(events))
}

/// The next upstream event of a native reply through its fold: the chat events it lets out,
/// the error that ends the reply, or `None` at its end.
async fn step(
    fold: &mut NativeReply,
    reply: &mut UpstreamStream,
) -> Option<Result<Vec<ChatEvent>, ApiError>> {
    let event = match reply.next().await? {
        Ok(event) => event,
        Err(err) => return Some(Err(err)),
    };
    let mut out = Vec::new();
    fold.feed(event, &mut out);
    Some(Ok(out))
}

impl After {
    /// How the route's first upstream continues a final assistant message, if it does.
    async fn prefill(&self) -> Option<crate::upstream::constrain::Dialect> {
        // Continuation writes a Chat Completions body.
        if !self.native.wire.takes_chat_completions() {
            return None;
        }
        match self.chain.first() {
            Some((_, client, _)) => client.prefill_dialect().await,
            None => None,
        }
    }

    /// One continuation: the kept call's events, if any.
    async fn round(&self, body: &Value, follow: &mut Follow) -> Vec<ChatEvent> {
        let metrics = Arc::clone(&self.state.metrics);
        match self.chain.relay(body).await {
            Ok(payloads) => {
                let mut round = follow.round(
                    &self.native.chat,
                    &self.declared,
                    self.native.reasoning_calls,
                    None,
                );
                let mut reply: UpstreamStream =
                    native_reply(payloads, self.shown.clone(), self.native.wire);
                round.read(&mut reply).await;
                follow.end_round(round, &metrics)
            }
            Err(err) => {
                follow.failed(&err, &metrics);
                Vec::new()
            }
        }
    }

    /// The plain answer asked for instead of a call only refused: the request with its
    /// tools after all, as a native reply with all that may follow it.
    async fn with_tools(&self) -> Result<EventStream, ApiError> {
        let Some(native) = self.native.instead_of.as_deref() else {
            return Err(ApiError::Internal("no request with tools to send".into()));
        };
        self.state.metrics.retry("refused_plain", true);
        crate::inspect::relayed("native", &native.body);
        let payloads = self.chain.relay_native(&native.body, native.wire).await?;
        let repair = self.state.config.native_repair;
        repaired(&self.state, &self.chain, payloads, native.clone(), repair)
    }

    /// The reply's only calls were guesses: the same conversation without tools, for a
    /// plain answer; its fold and its reply.
    async fn plain(&self) -> Result<(NativeReply, UpstreamStream), ApiError> {
        self.state.metrics.retry("guessed_arguments", true);
        tracing::info!("the reply's calls were guesses; asking for a plain answer");
        let wire = self.native.wire;
        let body = wire.without_calls(&self.native.body);
        let payloads = self.chain.relay_native(&body, wire).await?;
        let mut plain = self.native.chat.clone();
        plain.tools.clear();
        plain.tool_choice = ToolChoice::None;
        let fold = NativeReply::new(
            &plain,
            &DeclaredTools::default(),
            self.native.reasoning_calls,
            Followups::NONE,
            false,
            false,
        );
        Ok((fold, native_reply(payloads, self.shown.clone(), wire)))
    }

    /// The reply's only calls broke their tools' schemas: the same conversation with the
    /// reply and what is wrong with it, natively again; its fold (calls read from its text
    /// go out as written this time) and its reply.
    async fn again(&self, again: &Again) -> Result<(NativeReply, UpstreamStream), ApiError> {
        self.state.metrics.retry(again.reason, true);
        let wire = self.native.wire;
        let body = wire.corrected(&self.native.body, &again.reply, &again.correction);
        let payloads = self.chain.relay_native(&body, wire).await?;
        let fold = NativeReply::new(
            &self.native.chat,
            &self.declared,
            self.native.reasoning_calls,
            Followups::NONE,
            true,
            false,
        );
        Ok((fold, native_reply(payloads, self.shown.clone(), wire)))
    }
}

/// The outcome of a plain answer asked for instead of a reply that only guessed: it ended as
/// the answer did, and cost both.
fn instead(guessed: Outcome, answered: Outcome) -> Outcome {
    let mut usage = guessed.usage;
    usage.add(answered.usage);
    Outcome { finish: answered.finish, usage, retried: guessed.usage }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{Message, ToolSpec};

    fn chat(tools: bool, choice: ToolChoice) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![Message::User("Weather in Paris?".into())],
            tools: if tools {
                vec![ToolSpec {
                    name: "get_weather".into(),
                    description: None,
                    parameters: None,
                    strict: false,
                }]
            } else {
                Vec::new()
            },
            tool_choice: choice,
            ..ChatRequest::default()
        }
    }

    const OPENAI: FirstUpstream = FirstUpstream { refused_tools: false, grammar: false };

    #[test]
    fn one_decision_for_every_family() {
        let auto = chat(true, ToolChoice::Auto);
        assert_eq!(decide(Mode::Auto, &auto, OPENAI), Plan::TryNative);
        assert_eq!(decide(Mode::Native, &auto, OPENAI), Plan::Native);
        assert_eq!(decide(Mode::Emulate, &auto, OPENAI), Plan::Emulate);
        assert_eq!(decide(Mode::Auto, &chat(false, ToolChoice::Auto), OPENAI), Plan::Plain);
        // A refusal is remembered.
        let refused = FirstUpstream { refused_tools: true, ..OPENAI };
        assert_eq!(decide(Mode::Auto, &auto, refused), Plan::Emulate);
        assert_eq!(decide(Mode::Native, &auto, refused), Plan::Native);
        // A forced choice goes under the grammar where there is one.
        let grammar = FirstUpstream { grammar: true, ..OPENAI };
        let forced = chat(true, ToolChoice::Named("get_weather".into()));
        assert_eq!(decide(Mode::Auto, &forced, grammar), Plan::Emulate);
        assert_eq!(decide(Mode::Auto, &forced, OPENAI), Plan::TryNative);
        assert_eq!(decide(Mode::Auto, &auto, grammar), Plan::TryNative);
        // A format is the pipeline's.
        let mut format = auto.clone();
        format.output =
            Some(crate::chat::OutputFormat { name: "o".into(), schema: None, strict: false });
        assert_eq!(decide(Mode::Auto, &format, OPENAI), Plan::Emulate);
    }
}
