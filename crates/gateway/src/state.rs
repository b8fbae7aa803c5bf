//! What every handler shares: the configuration, one client per upstream, the routes from
//! model names to them, metrics, and the shutdown cut.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::chat::{self, ChatRequest, Settings};
use crate::config::{CallFormat, Config, Mode};
use crate::error::{ApiError, Refuser};
use crate::metrics::Metrics;
use crate::neutral::{Refused, Upstream, UpstreamRequest, UpstreamStream};
use crate::upstream::client::{PayloadStream, UpstreamClient};
use crate::upstream::wire::Wire;

/// Shared state.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) config: Arc<Config>,
    /// One client per upstream, by name (`default` is the `[upstream]` table).
    pub(crate) upstreams: Arc<BTreeMap<String, UpstreamClient>>,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled when the drain timeout of a shutdown has passed: requests still running
    /// end at once (streams with an in-band error, others with a 503).
    pub(crate) cut: CancellationToken,
    /// The last probe of the upstreams, shared by `/readyz` and the startup check.
    readiness: Arc<tokio::sync::Mutex<Option<Readiness>>>,
    /// What each (upstream, model) refused lately: native tools, `response_format`.
    refusals: Refusals,
    /// The response store (`None`: `store.url = "off"`).
    pub(crate) store: Option<Arc<crate::store::Store>>,
    /// The gateway's keys, their limits and usage.
    pub(crate) keys: Arc<crate::keys::Keys>,
    /// The request inspector (`None`: `[inspect]` is off).
    pub(crate) inspector: Option<Arc<crate::inspect::Inspector>>,
}

/// When each upstream and model last refused something (a 400 or 422 to a request that
/// offered it), kept for `native_refusal_secs`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusals {
    at: Arc<Mutex<HashMap<RefusalKey, Instant>>>,
    /// The store replicas share (Redis, or one SQLite file): a refusal one replica meets is
    /// remembered there too, and the others look there for what they have not met.
    shared: Option<Arc<crate::store::Store>>,
    /// When each key was last looked up in `shared` and found absent: it is not asked again
    /// within [`SHARED_LOOKUP_EVERY`], so the shared store costs at most one read a second
    /// per key.
    looked: Arc<Mutex<HashMap<RefusalKey, Instant>>>,
}

/// How often a refusal not remembered here is looked up in the shared store.
const SHARED_LOOKUP_EVERY: Duration = Duration::from_secs(1);

fn shared_key((what, upstream, model): &RefusalKey) -> String {
    format!("refusal:{what:?}:{upstream}:{model}")
}

/// What was refused, by which upstream, for which model.
type RefusalKey = (Refused, String, String);

impl Refusals {
    /// Whether `upstream` refused `what` for `model` less than `within` before `now`.
    pub(crate) fn refused(
        &self,
        what: Refused,
        upstream: &str,
        model: &str,
        within: Duration,
        now: Instant,
    ) -> bool {
        let key = (what, upstream.to_owned(), model.to_owned());
        let known = {
            let at = self.at.lock().unwrap_or_else(PoisonError::into_inner);
            at.get(&key).is_some_and(|at| now.saturating_duration_since(*at) < within)
        };
        if known || within.is_zero() {
            return known;
        }
        let Some(shared) = &self.shared else { return false };
        {
            let mut looked = self.looked.lock().unwrap_or_else(PoisonError::into_inner);
            if looked
                .get(&key)
                .is_some_and(|t| now.saturating_duration_since(*t) < SHARED_LOOKUP_EVERY)
            {
                return false;
            }
            if looked.len() >= MAX_REFUSALS_KEPT {
                looked.clear();
            }
            looked.insert(key.clone(), now);
        }
        match shared.recalls(&shared_key(&key)) {
            Ok(true) => {
                tracing::debug!(?what, upstream, model, "a refusal another replica met");
                self.remember_here(key, now, within);
                true
            }
            Ok(false) => false,
            Err(err) => {
                tracing::debug!(error = %err.0, "the shared store did not answer; refusals as known here");
                false
            }
        }
    }

    /// Remembers that `upstream` refused `what` for `model` at `now`, for `within`. The
    /// model name can be the client's own (a `*` route), so what is kept is bounded:
    /// refusals past their time are dropped, and past [`MAX_REFUSALS_KEPT`] the oldest.
    pub(crate) fn remember(
        &self,
        what: Refused,
        upstream: &str,
        model: &str,
        now: Instant,
        within: Duration,
    ) {
        let key = (what, upstream.to_owned(), model.to_owned());
        if let Some(shared) = &self.shared {
            if let Err(err) = shared.remember(&shared_key(&key), within.as_secs().max(1)) {
                tracing::debug!(error = %err.0, "the shared store did not take the refusal");
            }
        }
        self.remember_here(key, now, within);
    }

    /// Remembers in this process only.
    fn remember_here(&self, key: RefusalKey, now: Instant, within: Duration) {
        let mut at = self.at.lock().unwrap_or_else(PoisonError::into_inner);
        if at.len() >= MAX_REFUSALS_KEPT {
            at.retain(|_, when| now.saturating_duration_since(*when) < within);
        }
        if at.len() >= MAX_REFUSALS_KEPT {
            let oldest = at.iter().min_by_key(|(_, when)| **when).map(|(key, _)| key.clone());
            if let Some(key) = oldest {
                at.remove(&key);
            }
        }
        at.insert(key, now);
    }
}

/// The most refusals remembered at once (upstream, model and kind).
const MAX_REFUSALS_KEPT: usize = 1024;

/// One probe of every upstream, and when it ended.
#[derive(Debug, Clone)]
pub(crate) struct Readiness {
    pub(crate) at: Instant,
    pub(crate) upstreams: Arc<Vec<Probed>>,
}

/// One upstream's answer to a probe: its name, the upstream as logs show it, and whether it
/// answered.
pub(crate) type Probed = (String, String, Result<(), ApiError>);

/// A client model's route, ready to use.
#[derive(Debug, Clone)]
pub(crate) struct Routed {
    /// The upstreams in fallback order, each with the model name it is sent.
    pub(crate) chain: Chain,
    pub(crate) mode: Mode,
    pub(crate) settings: Settings,
}

/// Upstreams tried in order: the next one is asked when one cannot be reached, times out
/// or fails with a 5xx before its reply began.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    links: Vec<(String, UpstreamClient, String)>,
    refusals: Refusals,
    /// How long a refusal is remembered (zero: not at all).
    remember_for: Duration,
}

/// Whether an upstream error lets the next upstream of a chain be tried.
fn falls_back(err: &ApiError) -> bool {
    matches!(
        err,
        ApiError::UpstreamUnavailable { .. }
            | ApiError::UpstreamTimeout { .. }
            | ApiError::UpstreamOverloaded { .. }
            | ApiError::Upstream { .. }
    )
}

impl Chain {
    /// The first upstream: its name, client and model name.
    pub(crate) fn first(&self) -> Option<&(String, UpstreamClient, String)> {
        self.links.first()
    }

    /// The upstreams and their models in order (`name:model, name:model`), for the inspector.
    pub(crate) fn describe(&self) -> String {
        let links = self.links.iter().map(|(name, _, model)| format!("{name}:{model}"));
        links.collect::<Vec<_>>().join(", ")
    }

    /// Whether the first upstream refused `what` for its model lately.
    pub(crate) fn refused(&self, what: Refused) -> bool {
        self.links.first().is_some_and(|(name, _, model)| self.link_refused(what, name, model))
    }

    /// Remembers that the upstream and model `by` names refused `what`.
    pub(crate) fn remember(&self, what: Refused, by: &Refuser) {
        self.link_remember(what, &by.upstream, &by.model);
    }

    /// Logs a link's failure; the next link, if any, is tried.
    fn failed(&self, link: usize, name: &str, err: &ApiError) {
        if link + 1 < self.links.len() {
            tracing::warn!(upstream = %name, kind = err.kind(), detail = %err.detail(), "upstream failed; trying the next one");
        } else {
            tracing::debug!(upstream = %name, kind = err.kind(), "the route's last upstream failed");
        }
    }

    /// A link's error as the chain returns it: a refusal says which upstream and model
    /// refused, so what it refused can be remembered for them.
    fn refusal_of(&self, link: usize, err: ApiError) -> ApiError {
        match (err, self.links.get(link)) {
            (ApiError::UpstreamRejected { status, message, by: None }, Some((name, _, model))) => {
                let by = Refuser { upstream: name.clone(), model: model.clone() };
                ApiError::UpstreamRejected { status, message, by: Some(Box::new(by)) }
            }
            (err, _) => err,
        }
    }

    /// Sends a passthrough body (its `model` set per upstream), falling back in order. The
    /// body is OpenAI's: upstreams of the Anthropic kind in the chain are skipped.
    pub(crate) async fn relay(&self, body: &serde_json::Value) -> Result<PayloadStream, ApiError> {
        self.relay_in(body, None).await
    }

    /// Sends a body written in `wire` (a native request), to the upstreams in the chain that
    /// speak it, falling back in order.
    pub(crate) async fn relay_native(
        &self,
        body: &serde_json::Value,
        wire: Wire,
    ) -> Result<PayloadStream, ApiError> {
        self.relay_in(body, Some(wire)).await
    }

    /// Whether the upstream `name` refused `what` for `model` lately.
    fn link_refused(&self, what: Refused, name: &str, model: &str) -> bool {
        self.refusals.refused(what, name, model, self.remember_for, Instant::now())
    }

    /// Remembers that the upstream `name` refused `what` for `model`.
    fn link_remember(&self, what: Refused, name: &str, model: &str) {
        tracing::info!(upstream = %name, model = %model, refused = ?what, "remembering the refusal");
        self.refusals.remember(what, name, model, Instant::now(), self.remember_for);
    }

    /// What link `link`'s answer means for the chain: `Some` to return it (a reply, or an
    /// error that is the answer), `None` to try the next link after a failure that falls
    /// back (kept in `last`).
    fn answer<T>(
        &self,
        link: usize,
        name: &str,
        sent: Result<T, ApiError>,
        last: &mut Option<ApiError>,
    ) -> Option<Result<T, ApiError>> {
        match sent {
            Ok(reply) => Some(Ok(reply)),
            Err(err) if falls_back(&err) => {
                self.failed(link, name, &err);
                *last = Some(err);
                None
            }
            Err(err) => Some(Err(self.refusal_of(link, err))),
        }
    }

    /// The wire the route's first upstream speaks.
    pub(crate) fn first_wire(&self) -> Option<Wire> {
        self.links.first().map(|(_, client, _)| client.wire())
    }

    async fn relay_in(
        &self,
        body: &serde_json::Value,
        wire: Option<Wire>,
    ) -> Result<PayloadStream, ApiError> {
        let mut last = None;
        for (link, (name, client, model)) in self.links.iter().enumerate() {
            let takes = match wire {
                Some(wire) => client.wire() == wire,
                None => client.takes_chat_completions(),
            };
            if !takes {
                tracing::debug!(upstream = %name, "an upstream of another API cannot take this request; skipped");
                continue;
            }
            let mut body = std::borrow::Cow::Borrowed(body);
            if body.get(CACHE_KEY).is_some() && self.link_refused(Refused::CacheKey, name, model) {
                without_cache_key(body.to_mut());
            }
            let mut sent = client.relay(&body, model).await;
            if refuses_cache_key(&sent, body.get(CACHE_KEY).is_some()) {
                self.link_remember(Refused::CacheKey, name, model);
                without_cache_key(body.to_mut());
                sent = client.relay(&body, model).await;
            }
            if let Some(answer) = self.answer(link, name, sent, &mut last) {
                return answer;
            }
        }
        Err(last.unwrap_or_else(|| {
            ApiError::Internal(
                "a route without an upstream of the request's API to relay to".into(),
            )
        }))
    }
}

/// OpenAI's name for the prompt-cache key.
const CACHE_KEY: &str = "prompt_cache_key";

/// Whether `sent` is an upstream's refusal of the prompt-cache key it was given: a 400 or
/// 422 that names the field (as servers that reject unknown fields do). The request then
/// goes again without it, and the refusal is remembered.
fn refuses_cache_key<T>(sent: &Result<T, ApiError>, had_key: bool) -> bool {
    had_key
        && matches!(sent, Err(ApiError::UpstreamRejected { status: 400 | 422, message, .. })
            if message.contains(CACHE_KEY))
}

fn without_cache_key(body: &mut serde_json::Value) {
    if let Some(object) = body.as_object_mut() {
        object.remove(CACHE_KEY);
    }
}

impl Upstream for Chain {
    async fn chat(&self, request: UpstreamRequest) -> Result<UpstreamStream, ApiError> {
        let mut last = None;
        for (link, (name, client, model)) in self.links.iter().enumerate() {
            let mut request = request.clone();
            request.model.clone_from(model);
            let refused = |what| self.link_refused(what, name, model);
            // An upstream that refused the format lately gets it in the prompt alone (the
            // prompt always asks for it); one that refused the grammar, the prompt alone.
            if request.response_format.is_some() && refused(Refused::ResponseFormat) {
                request.response_format = None;
            }
            if request.grammar.is_some() && refused(Refused::Grammar) {
                request.grammar = None;
            }
            if request.cache_key.is_some() && refused(Refused::CacheKey) {
                request.cache_key = None;
            }
            let sent = if request.cache_key.is_some() {
                // Kept for a second try without the key, only when there is one.
                let sent = client.chat(request.clone()).await;
                if refuses_cache_key(&sent, true) {
                    self.link_remember(Refused::CacheKey, name, model);
                    request.cache_key = None;
                    client.chat(request).await
                } else {
                    sent
                }
            } else {
                client.chat(request).await
            };
            if let Some(answer) = self.answer(link, name, sent, &mut last) {
                return answer;
            }
        }
        Err(last.unwrap_or_else(|| ApiError::Internal("a route without upstreams".into())))
    }

    fn refused(&self, what: Refused, by: &Refuser) {
        self.remember(what, by);
    }

    async fn continues(&self) -> bool {
        match self.links.first() {
            Some((_, client, _)) => client.prefill_dialect().await.is_some(),
            None => false,
        }
    }

    async fn template_format(&self) -> Option<CallFormat> {
        match self.links.first() {
            Some((_, client, _)) => client.template_format().await,
            None => None,
        }
    }
}

impl AppState {
    /// Builds the state for a validated config: one client per upstream.
    pub fn new(config: Config) -> Result<AppState, String> {
        let metrics = Arc::new(Metrics::new());
        let mut upstreams = BTreeMap::new();
        for (name, upstream) in config.upstream_configs() {
            upstreams.insert(name, UpstreamClient::new(upstream, Arc::clone(&metrics))?);
        }
        let store = crate::store::Store::open(&config.store.resolved())
            .map_err(|err| format!("store.url: {}", err.0))?
            .map(Arc::new);
        let keys = Arc::new(crate::keys::Keys::new(&config, Arc::clone(&metrics))?);
        let inspector = crate::inspect::Inspector::new(&config);
        Ok(AppState {
            inspector,
            config: Arc::new(config),
            upstreams: Arc::new(upstreams),
            keys,
            metrics,
            cut: CancellationToken::new(),
            readiness: Arc::new(tokio::sync::Mutex::new(None)),
            refusals: Refusals { shared: store.clone(), ..Refusals::default() },
            store,
        })
    }

    /// How `model` is served, or a 404 naming the models there are.
    pub(crate) fn route(&self, model: &str) -> Result<Routed, ApiError> {
        let route = self.config.resolve(model).ok_or_else(|| {
            let known = self.config.listed_models();
            ApiError::ModelNotFound(if known.is_empty() {
                format!("The model `{model}` does not exist: no upstream serves it.")
            } else {
                format!(
                    "The model `{model}` does not exist: no upstream serves it. Models: {}.",
                    known.join(", ")
                )
            })
        })?;
        let links = route
            .chain
            .iter()
            .filter_map(|(name, model)| {
                self.upstreams.get(name).map(|client| (name.clone(), client.clone(), model.clone()))
            })
            .collect::<Vec<_>>();
        let upstream_model =
            links.first().map(|(_, _, m)| m.clone()).unwrap_or_else(|| model.to_owned());
        let span = tracing::Span::current();
        crate::traces::set(&span, "gen_ai.response.model", upstream_model.as_str());
        if let Some((name, client, _)) = links.first() {
            crate::traces::set(&span, "toolshim.upstream", name.as_str());
            crate::traces::set(&span, "gen_ai.provider.name", client.provider());
        }
        crate::traces::set(&span, "toolshim.mode", format!("{:?}", route.mode).to_lowercase());
        let format = format!("{:?}", route.call_format).to_lowercase();
        crate::traces::set(&span, "toolshim.call_format", format);
        let remember_for = match self.config.native_refusal_secs {
            secs if secs > 0.0 => Config::secs(secs),
            _ => Duration::ZERO,
        };
        Ok(Routed {
            chain: Chain { links, refusals: self.refusals.clone(), remember_for },
            mode: route.mode,
            settings: Settings {
                upstream_model,
                call_format: route.call_format,
                max_retries: self.config.max_retries,
                reasoning_calls: route.reasoning_calls,
                format_file: route.format_file,
                check_arguments: self.config.check_arguments,
                check_grounding: self.config.check_grounding,
                continue_calls: self.config.continue_calls,
            },
        })
    }

    /// An estimate of the prompt's tokens as the upstream will see it.
    pub(crate) fn estimate_input_tokens(&self, req: &ChatRequest) -> u64 {
        let format = match self.config.resolve(&req.model) {
            Some(route) => {
                let model = route.chain.first().map_or(req.model.as_str(), |(_, m)| m.as_str());
                crate::neutral::family::resolve_by_name(route.call_format, model)
            }
            None => crate::neutral::family::resolve_by_name(self.config.call_format, &req.model),
        };
        chat::prompt::estimate_input_tokens(req, format)
    }

    /// Whether each upstream answers. One probe at a time: a caller that arrives while a
    /// probe runs waits for it and takes its result, and a result is reused for
    /// `readyz_cache_secs`, so callers without a key cannot multiply the load on the
    /// upstreams or the connections held for it.
    pub(crate) async fn readiness(&self) -> Readiness {
        let asked = Instant::now();
        let mut last = self.readiness.lock().await;
        let fresh = Config::secs(self.config.readyz_cache_secs);
        if let Some(found) = last.as_ref() {
            // Ended after this caller arrived (it waited for it), or recent enough.
            if found.at >= asked
                || (self.config.readyz_cache_secs > 0.0 && found.at.elapsed() < fresh)
            {
                return found.clone();
            }
        }
        let probes =
            futures::future::join_all(self.upstreams.iter().map(|(name, client)| async move {
                (name.clone(), client.shown().to_owned(), client.probe().await)
            }))
            .await;
        let found = Readiness { at: Instant::now(), upstreams: Arc::new(probes) };
        *last = Some(found.clone());
        found
    }

    /// The models `GET /v1/models` lists: those the configuration names, or else the default
    /// upstream's own list.
    pub(crate) async fn model_ids(&self) -> Result<Vec<String>, ApiError> {
        let listed = self.config.listed_models();
        if !listed.is_empty() {
            return Ok(listed);
        }
        match self.default_upstream() {
            Some(client) => client.model_ids().await,
            None => Ok(Vec::new()),
        }
    }

    /// The default upstream's client, for the model list when the configuration names none.
    pub(crate) fn default_upstream(&self) -> Option<&UpstreamClient> {
        let name = self.config.default_upstream.as_deref().unwrap_or(crate::config::LEGACY);
        self.upstreams.get(name).or_else(|| self.upstreams.values().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal is remembered for its time and no longer; a time of zero remembers nothing.
    #[test]
    fn issue_18_a_refusal_is_forgotten_when_its_time_has_passed() {
        let refusals = Refusals::default();
        let at = Instant::now();
        let within = Duration::from_secs(600);
        refusals.remember(Refused::Tools, "local", "qwen", at, within);
        let refused = |what, model, later: Duration, within| {
            refusals.refused(what, "local", model, within, at + later)
        };
        assert!(refused(Refused::Tools, "qwen", Duration::from_secs(599), within));
        assert!(!refused(Refused::Tools, "qwen", Duration::from_secs(600), within));
        assert!(!refused(Refused::Tools, "other", Duration::ZERO, within), "per model");
        assert!(!refused(Refused::ResponseFormat, "qwen", Duration::ZERO, within), "per kind");
        assert!(!refused(Refused::Tools, "qwen", Duration::ZERO, Duration::ZERO));
    }

    /// Model names a client makes up cannot grow what is remembered without bound: past the
    /// cap, refusals past their time go first, then the oldest.
    #[test]
    fn remembered_refusals_are_bounded() {
        let refusals = Refusals::default();
        let start = Instant::now();
        let within = Duration::from_secs(600);
        for i in 0..3 * MAX_REFUSALS_KEPT {
            let at = start + Duration::from_millis(i as u64);
            refusals.remember(Refused::Tools, "any", &format!("model-{i}"), at, within);
        }
        let kept = refusals.at.lock().unwrap().len();
        assert_eq!(kept, MAX_REFUSALS_KEPT);
        let now = start + Duration::from_secs(1);
        let last = format!("model-{}", 3 * MAX_REFUSALS_KEPT - 1);
        assert!(refusals.refused(Refused::Tools, "any", &last, within, now));
        assert!(!refusals.refused(Refused::Tools, "any", "model-0", within, now));

        // Expired ones make room first.
        let later = start + within + Duration::from_secs(10);
        refusals.remember(Refused::Tools, "any", "fresh", later, within);
        assert_eq!(refusals.at.lock().unwrap().len(), 1);
    }
}
