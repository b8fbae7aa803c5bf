//! The gateway's keys at run time (issue 27; docs/operations.md): which key a request
//! carries, whether it may use the model it names, its limits, and the usage it ran up, per
//! key and model. Names, never secrets, appear in logs, metrics and the admin endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use crate::body::OnEnd;
use crate::chat::Usage;
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::store::counters::{self, Counters, Limits};

/// The most models one key's usage is kept for, by name; later ones count as `other` (model
/// names come from clients), as does a name longer than [`MAX_MODEL_NAME`] bytes.
const MAX_MODELS: usize = 100;
const MAX_MODEL_NAME: usize = 128;

/// A gateway key (its `Debug` leaves the secret out).
pub(crate) struct Key {
    /// Its name (`[keys.NAME]`; `api_keys` are `key-1`, `key-2`, …).
    pub(crate) name: Arc<str>,
    secret: String,
    /// The models it may use; empty: all.
    models: Vec<String>,
    pub(crate) limits: Limits,
    /// It may read the admin endpoints.
    pub(crate) admin: bool,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Key {
    fn may_use(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|p| crate::routes::matches(p, model))
    }
}

/// What one key ran up with one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Tally {
    pub(crate) requests: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) cached_tokens: u64,
    /// Tokens of attempts that were asked for again (emulation's retries), counted apart.
    pub(crate) retry_prompt_tokens: u64,
    pub(crate) retry_completion_tokens: u64,
    /// Requests a limit refused.
    pub(crate) limited: u64,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.keys.iter().map(|key| &*key.name).collect();
        f.debug_struct("Keys").field("names", &names).finish_non_exhaustive()
    }
}

/// The keys, their counters and their usage.
pub(crate) struct Keys {
    keys: Vec<Arc<Key>>,
    counters: Box<dyn Counters>,
    usage: Mutex<BTreeMap<Arc<str>, BTreeMap<String, Tally>>>,
    metrics: Arc<Metrics>,
}

impl Keys {
    /// The keys `config` names (its `api_keys` as `key-1`, … and its `[keys.NAME]`), counted
    /// where its store says (Redis: shared by replicas).
    pub(crate) fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Keys, String> {
        let mut keys: Vec<Arc<Key>> = config
            .api_keys
            .iter()
            .enumerate()
            .map(|(i, secret)| {
                Arc::new(Key {
                    name: format!("key-{}", i + 1).into(),
                    secret: secret.clone(),
                    models: Vec::new(),
                    limits: Limits::default(),
                    admin: false,
                })
            })
            .collect();
        for (name, key) in &config.keys {
            let secret = key
                .secret(|var| std::env::var(var).ok())
                .map_err(|e| format!("keys.{name}: {e}"))?;
            let limits =
                Limits { rpm: key.rpm, tpm: key.tpm, tpd: key.tpd, concurrent: key.concurrent };
            let (models, admin) = (key.models.clone(), key.admin);
            keys.push(Arc::new(Key { name: name.as_str().into(), secret, models, limits, admin }));
        }
        let limited = keys.iter().any(|key| key.limits.any());
        // Counters are opened only when a key has limits: otherwise nothing is counted.
        let counters: Box<dyn Counters> = if limited {
            counters::open(&config.store.url).map_err(|err| format!("limits: {}", err.0))?
        } else {
            Box::new(counters::Local::default())
        };
        Ok(Keys { keys, counters, usage: Mutex::new(BTreeMap::new()), metrics })
    }

    /// The key `secret` is: every key is compared, each in constant time, so the time taken
    /// says nothing about which bytes matched.
    pub(crate) fn find(&self, secret: &str) -> Option<&Arc<Key>> {
        use subtle::ConstantTimeEq;
        let secret = secret.trim().as_bytes();
        let mut found = None;
        for key in &self.keys {
            if bool::from(key.secret.as_bytes().ct_eq(secret)) {
                found = Some(key);
            }
        }
        found
    }

    /// The key a request carries: its `x-api-key` if that is a key, else its
    /// `Authorization: Bearer` if that is one. (A family's own check decides which header it
    /// takes; the key found here is one of the request's, whichever it took.)
    pub(crate) fn of(&self, headers: &HeaderMap) -> Option<&Arc<Key>> {
        let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
        api_key
            .and_then(|secret| self.find(secret))
            .or_else(|| self.find(crate::api::bearer(headers)?))
    }

    /// Whether `key` may use `model` (a 404 in the API's words if not).
    pub(crate) fn allow(&self, key: &Key, model: &str) -> Result<(), ApiError> {
        if key.may_use(model) {
            return Ok(());
        }
        self.metrics.key_limited(&key.name, "model");
        Err(ApiError::ModelNotFound(format!(
            "The model `{model}` does not exist or you do not have access to it."
        )))
    }

    /// Admits a request of `key` for `model`: the model allowed, then every limit of the key
    /// (a 429 naming the limit, with `retry-after`). A store that fails lets the request
    /// pass, logged: an outage of the counters does not stop the gateway.
    pub(crate) fn admit(self: &Arc<Self>, key: &Arc<Key>, model: &str) -> Result<Ticket, ApiError> {
        self.allow(key, model)?;
        let lease = key.limits.any().then(|| {
            let mut lease = String::from("lease-");
            lease.extend(std::iter::repeat_with(fastrand::alphanumeric).take(16));
            lease
        });
        if let Some(lease) = &lease {
            match self.counters.admit(&key.name, &key.limits, lease) {
                Ok(Ok(())) => {}
                Ok(Err(refusal)) => {
                    self.metrics.key_limited(&key.name, refusal.limit);
                    self.tally(key, model, |tally| tally.limited += 1);
                    return Err(limited(key, refusal.limit, refusal.wait_ms));
                }
                Err(err) => {
                    tracing::warn!(key = %key.name, counters = %self.counters.shown(), error = %err.0, "the limits could not be checked; the request passes");
                }
            }
        }
        Ok(Ticket { keys: Arc::clone(self), key: Arc::clone(key), model: model.to_owned(), lease })
    }

    /// Changes what `key` ran up with `model`; the model's name as counted (`other` past
    /// [`MAX_MODELS`]).
    fn tally<'m>(&self, key: &Key, model: &'m str, f: impl FnOnce(&mut Tally)) -> &'m str {
        let mut usage = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        let models = usage.entry(Arc::clone(&key.name)).or_default();
        let known = models.contains_key(model) || models.len() < MAX_MODELS;
        let model = if known && model.len() <= MAX_MODEL_NAME { model } else { "other" };
        f(models.entry(model.to_owned()).or_default());
        model
    }

    /// Usage per key and model since the start, each key with its limits and counts now:
    /// `GET /admin/usage`.
    pub(crate) fn usage(&self) -> Value {
        let usage = self.usage.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let keys: Vec<Value> = self
            .keys
            .iter()
            .map(|key| {
                let window = key.limits.any().then(|| self.counters.window(&key.name));
                let window = match window {
                    Some(Ok(window)) => json!(window),
                    Some(Err(err)) => json!({"error": err.0}),
                    None => Value::Null,
                };
                let limits = key.limits;
                json!({
                    "name": &*key.name,
                    "models": usage.get(&key.name).cloned().unwrap_or_default(),
                    "limits": {"rpm": limits.rpm, "tpm": limits.tpm, "tpd": limits.tpd,
                               "concurrent": limits.concurrent},
                    "now": window,
                })
            })
            .collect();
        json!({"object": "usage", "counters": self.counters.shown(), "keys": keys})
    }
}

/// The 429 for `limit` of `key`, waiting `wait_ms`.
fn limited(key: &Key, limit: &'static str, wait_ms: u64) -> ApiError {
    let seconds = wait_ms.div_ceil(1000).max(1);
    let (what, n) = match limit {
        "rpm" => ("requests per minute", key.limits.rpm),
        "tpm" => ("tokens per minute", key.limits.tpm),
        "tpd" => ("tokens per day", key.limits.tpd),
        _ => ("requests at once", key.limits.concurrent),
    };
    ApiError::RateLimited {
        message: format!(
            "Rate limit reached for key '{}': {n} {what} ({limit}). Please try again in {seconds}s.",
            key.name
        ),
        retry_after: seconds.to_string(),
        tokens: matches!(limit, "tpm" | "tpd"),
    }
}

/// What a reply cost, set by the path that served it when its last event passed: every
/// attempt's usage, and that of the attempts before the last; also set on the request's span
/// (the one current when it was made).
#[derive(Clone)]
pub(crate) struct Spent(Arc<Mutex<Option<(Usage, Usage)>>>, tracing::Span);

impl Spent {
    pub(crate) fn new() -> Spent {
        Spent(Arc::default(), tracing::Span::current())
    }

    /// The usage so far (the last report wins: some upstreams report it with every chunk).
    pub(crate) fn set(&self, usage: Usage, retried: Usage) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((usage, retried));
        let span = &self.1;
        crate::traces::set(span, "gen_ai.usage.input_tokens", usage.prompt_tokens);
        crate::traces::set(span, "gen_ai.usage.output_tokens", usage.completion_tokens);
        crate::traces::set(span, "toolshim.usage.cached_tokens", usage.cached_tokens);
        let retried = retried.prompt_tokens + retried.completion_tokens;
        crate::traces::set(span, "toolshim.usage.retry_tokens", retried);
    }

    /// The `usage` of a relayed Chat Completions body or chunk, if it has one.
    pub(crate) fn reported(&self, value: &Value) {
        let Some(usage) = value.get("usage").filter(|u| u.is_object()) else { return };
        let n = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        let usage = Usage {
            prompt_tokens: n("/prompt_tokens"),
            completion_tokens: n("/completion_tokens"),
            cached_tokens: n("/prompt_tokens_details/cached_tokens"),
        };
        self.set(usage, Usage::default());
    }
}

/// An admitted request: when its response ends, its usage is counted and its place among
/// the requests in flight given back.
pub(crate) struct Ticket {
    keys: Arc<Keys>,
    key: Arc<Key>,
    model: String,
    lease: Option<String>,
}

impl Ticket {
    /// `response`, whose end settles the ticket.
    pub(crate) fn settle_with(self, response: Response) -> Response {
        let spent = response.extensions().get::<Spent>().cloned();
        let span = tracing::Span::current();
        response.map(|body| Body::new(OnEnd::hook(body, span, move || self.settle(spent))))
    }

    /// Counts the usage; dropping the ticket then gives its place back.
    fn settle(self, spent: Option<Spent>) {
        let reported = spent.and_then(|s| *s.0.lock().unwrap_or_else(PoisonError::into_inner));
        let (usage, retried) = reported.unwrap_or_default();
        let keys = &self.keys;
        let last = Usage {
            prompt_tokens: usage.prompt_tokens.saturating_sub(retried.prompt_tokens),
            completion_tokens: usage.completion_tokens.saturating_sub(retried.completion_tokens),
            cached_tokens: usage.cached_tokens.saturating_sub(retried.cached_tokens),
        };
        let model = keys.tally(&self.key, &self.model, |tally| {
            tally.requests += 1;
            tally.prompt_tokens += last.prompt_tokens;
            tally.completion_tokens += last.completion_tokens;
            tally.cached_tokens += last.cached_tokens;
            tally.retry_prompt_tokens += retried.prompt_tokens;
            tally.retry_completion_tokens += retried.completion_tokens;
        });
        keys.metrics.key_usage(&self.key.name, model, last, retried);
        let tokens = usage.prompt_tokens + usage.completion_tokens;
        let limits = self.key.limits;
        if tokens > 0 && (limits.tpm > 0 || limits.tpd > 0) {
            if let Err(err) = keys.counters.spend(&self.key.name, tokens) {
                tracing::warn!(key = %self.key.name, error = %err.0, "the tokens spent could not be counted");
            }
        }
    }
}

impl Drop for Ticket {
    /// Gives the request's place among those in flight back (served, failed, or dropped).
    fn drop(&mut self) {
        let Some(lease) = self.lease.take().filter(|_| self.key.limits.concurrent > 0) else {
            return;
        };
        if let Err(err) = self.keys.counters.release(&self.key.name, &lease) {
            tracing::warn!(key = %self.key.name, error = %err.0, "a request in flight could not be given back; its lease expires");
        }
    }
}
