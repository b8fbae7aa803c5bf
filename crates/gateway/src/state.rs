//! What every handler shares: the configuration, one client per upstream, the routes from
//! model names to them, metrics, and the shutdown cut.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::chat::{self, ChatEvent, ChatRequest, Settings};
use crate::config::{Config, Mode};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::upstream::client::{PayloadStream, UpstreamClient};
use crate::upstream::{Upstream, UpstreamRequest, UpstreamStream};

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
    /// When each (upstream, model) last refused native tools, in `auto` mode.
    native_refused: Arc<Mutex<HashMap<(String, String), Instant>>>,
}

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

    /// Sends a passthrough body (its `model` set per upstream), falling back in order.
    pub(crate) async fn relay(&self, body: &serde_json::Value) -> Result<PayloadStream, ApiError> {
        let mut last = None;
        for (name, client, model) in &self.links {
            let mut body = body.clone();
            body["model"] = serde_json::Value::String(model.clone());
            match client.relay(&body).await {
                Ok(payloads) => return Ok(payloads),
                Err(err) if falls_back(&err) => {
                    tracing::warn!(upstream = %name, kind = err.kind(), detail = %err.detail(), "upstream failed; trying the next one");
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| ApiError::Internal("a route without upstreams".into())))
    }
}

impl Upstream for Chain {
    async fn chat(&self, request: UpstreamRequest) -> Result<UpstreamStream, ApiError> {
        let mut last = None;
        for (name, client, model) in &self.links {
            let mut request = request.clone();
            request.model.clone_from(model);
            match client.chat(request).await {
                Ok(stream) => return Ok(stream),
                Err(err) if falls_back(&err) => {
                    tracing::warn!(upstream = %name, kind = err.kind(), detail = %err.detail(), "upstream failed; trying the next one");
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| ApiError::Internal("a route without upstreams".into())))
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
        Ok(AppState {
            config: Arc::new(config),
            upstreams: Arc::new(upstreams),
            metrics,
            cut: CancellationToken::new(),
            native_refused: Arc::new(Mutex::new(HashMap::new())),
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
        Ok(Routed {
            chain: Chain { links },
            mode: route.mode,
            settings: Settings {
                upstream_model,
                call_format: route.call_format,
                max_retries: self.config.max_retries,
                reasoning_calls: route.reasoning_calls,
            },
        })
    }

    /// Runs the emulation pipeline for `req` on its route.
    pub(crate) fn emulate(
        &self,
        req: ChatRequest,
        stream: bool,
    ) -> impl Stream<Item = Result<ChatEvent, ApiError>> + Send + use<> {
        let routed = self.route(&req.model);
        let metrics = Arc::clone(&self.metrics);
        async_stream::stream! {
            let routed = match routed {
                Ok(routed) => routed,
                Err(err) => {
                    yield Err(err);
                    return;
                }
            };
            let events = chat::run(routed.chain, routed.settings, metrics, req, stream);
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                yield event;
            }
        }
    }

    /// An estimate of the prompt's tokens as the upstream will see it.
    pub(crate) fn estimate_input_tokens(&self, req: &ChatRequest) -> u64 {
        let format =
            self.config.resolve(&req.model).map_or(self.config.call_format, |r| r.call_format);
        chat::prompt::estimate_input_tokens(req, format)
    }

    /// Whether `upstream` refused native tools for `model` within `native_refusal_secs`.
    pub(crate) fn refused_native(&self, upstream: &str, model: &str) -> bool {
        let within = Config::secs(self.config.native_refusal_secs);
        let refused = self.native_refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused
            .get(&(upstream.to_owned(), model.to_owned()))
            .is_some_and(|at| at.elapsed() < within)
    }

    /// Remembers that `upstream` refused native tools for `model`.
    pub(crate) fn remember_native_refusal(&self, upstream: &str, model: &str) {
        let mut refused = self.native_refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused.insert((upstream.to_owned(), model.to_owned()), Instant::now());
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
        let name = self.config.default_upstream.as_deref().unwrap_or(crate::routes::LEGACY);
        self.upstreams.get(name).or_else(|| self.upstreams.values().next())
    }
}
