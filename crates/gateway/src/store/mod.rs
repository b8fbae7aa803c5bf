//! The response store (issue 26): what the Responses API keeps with `store: true`, and the
//! Conversations API's conversations, so later requests can refer to them
//! (`previous_response_id`, `item_reference`, `conversation`) and clients can read them back or
//! delete them. Each response is kept with its own input items and the response it followed,
//! under an owner: a digest of the caller's key, so a caller never reads another key's.
//!
//! One small interface ([`Responses`], [`Conversations`], and the [`Memory`] of refusals that
//! replicas share), two backends: SQLite (a file,
//! or memory; `sqlite.rs`) for one machine, Redis (`redis.rs`) for replicas that share it. The
//! calls are short reads and writes, made from the request's task; every one is bounded (a
//! busy timeout, a socket timeout).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::StoreConfig;

pub(crate) mod counters;
mod redis;
mod redis_counters;
mod sqlite;
mod sqlite_conversations;

/// A store that failed: its file cannot be opened or written, its server does not answer, or
/// a row cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreError(pub(crate) String);

/// What a store call gives: its value, or how the store failed.
pub(crate) type Stored<T> = Result<T, StoreError>;

impl From<StoreError> for crate::error::ApiError {
    fn from(err: StoreError) -> crate::error::ApiError {
        crate::error::ApiError::StoreUnavailable(err.0)
    }
}

/// A kept response: the response object as it was returned, its own input items (each with
/// an id) and the response it followed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Kept {
    pub(crate) response: Value,
    pub(crate) input: Vec<Value>,
    pub(crate) previous: Option<String>,
}

/// Kept responses and their items.
pub(crate) trait Responses: Send + Sync {
    /// Keeps `response` (its `id` and `output` items) with its own `input` items and the
    /// response it followed; drops what is past its time (and, where the backend caps it,
    /// the oldest past the size cap).
    fn put(&self, owner: &str, after: Option<&str>, input: &[Value], reply: &Value) -> Stored<()>;
    /// The response `id` if `owner` kept it (and it has not expired).
    fn get(&self, owner: &str, id: &str) -> Stored<Option<Kept>>;
    /// Deletes the response `id` of `owner` and its items; whether there was one.
    fn delete(&self, owner: &str, id: &str) -> Stored<bool>;
    /// The item `id` (an input or output item of a kept response) of `owner`.
    fn item(&self, owner: &str, id: &str) -> Stored<Option<Value>>;
    /// Whether the store answers (for `/readyz`).
    fn check(&self) -> Stored<()>;
}

/// Conversations: items under an owner, with metadata; no TTL.
pub(crate) trait Conversations: Send + Sync {
    /// A new conversation `id` of `owner` with `meta`, without items; its object.
    fn new_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Value>;
    /// The conversation object `id` of `owner`.
    fn conversation_object(&self, owner: &str, id: &str) -> Stored<Option<Value>>;
    /// Sets the metadata of conversation `id`; its object, or `None` when there is none.
    fn update_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Option<Value>>;
    /// Deletes conversation `id` and its items; whether there was one.
    fn delete_conversation(&self, owner: &str, id: &str) -> Stored<bool>;
    /// Adds items at the end of conversation `id`; `false` when `owner` has none such.
    fn add_items(&self, owner: &str, id: &str, items: &[Value]) -> Stored<bool>;
    /// Every item of conversation `id`, oldest first; `None` when `owner` has none such.
    fn conversation_items(&self, owner: &str, id: &str) -> Stored<Option<Vec<Value>>>;
    /// Deletes item `item` of conversation `id`; whether there was one.
    fn delete_conversation_item(&self, owner: &str, id: &str, item: &str) -> Stored<bool>;
}

/// Short-lived facts that replicas share: what an upstream refused (`native_refusal_secs`).
pub(crate) trait Memory: Send + Sync {
    /// Remembers `key` for `secs`.
    fn remember(&self, key: &str, secs: u64) -> Stored<()>;
    /// Whether `key` is remembered and not past its time.
    fn recalls(&self, key: &str) -> Stored<bool>;
}

/// A backend: all three.
pub(crate) trait Backend: Responses + Conversations + Memory {}

impl<T: Responses + Conversations + Memory> Backend for T {}

/// The longest chain of `previous_response_id` links followed.
const MAX_CHAIN: usize = 10_000;

/// The response store: a backend, and where it lives.
pub(crate) struct Store {
    backend: Box<dyn Backend>,
    /// Where it lives, for logs and `/readyz` (`memory`, the file's path, or the Redis URL
    /// without its password).
    pub(crate) shown: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("shown", &self.shown).finish_non_exhaustive()
    }
}

impl std::ops::Deref for Store {
    type Target = dyn Backend;

    fn deref(&self) -> &(dyn Backend + 'static) {
        self.backend.as_ref()
    }
}

/// The owner of what a caller keeps: a digest of the key it sent (none: the empty key).
pub(crate) fn owner(key: Option<&str>) -> String {
    let digest = Sha256::digest(key.unwrap_or_default().trim().as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Store {
    /// The store `config` names (`auto` already resolved), opened; `None` when it is `off`.
    pub(crate) fn open(config: &StoreConfig) -> Stored<Option<Store>> {
        let url = config.url.trim();
        let (ttl, cap) = (config.ttl_secs, config.max_bytes);
        let (backend, shown): (Box<dyn Backend>, String) = match url {
            "off" => return Ok(None),
            "memory" => (Box::new(sqlite::Sqlite::open(None, ttl, cap)?), "memory".into()),
            _ if url.starts_with("redis://") || url.starts_with("rediss://") => {
                let redis = redis::Redis::open(url, ttl)?;
                let shown = redis.shown.clone();
                (Box::new(redis), shown)
            }
            _ => {
                let path = config.path().ok_or_else(|| {
                    StoreError(format!(
                        "`{url}` is not `off`, `memory`, `sqlite:PATH`, a path or a redis:// URL"
                    ))
                })?;
                let shown = path.display().to_string();
                (Box::new(sqlite::Sqlite::open(Some(&path), ttl, cap)?), shown)
            }
        };
        Ok(Some(Store { backend, shown }))
    }

    /// The conversation that ends with response `id`: the input and output items of it and
    /// of every response before it, oldest first; `None` when `id` is not kept (or one link
    /// of its chain is gone).
    pub(crate) fn conversation(&self, owner: &str, id: &str) -> Stored<Option<Vec<Value>>> {
        let mut chain = Vec::new();
        let mut next = Some(id.to_owned());
        while let Some(id) = next.take() {
            if chain.len() >= MAX_CHAIN {
                return Err(StoreError(format!("the chain of responses before {id} is too long")));
            }
            let Some(kept) = self.get(owner, &id)? else { return Ok(None) };
            next = kept.previous.clone();
            chain.push(kept);
        }
        let mut items = Vec::new();
        for kept in chain.into_iter().rev() {
            items.extend(kept.input);
            if let Some(output) = kept.response["output"].as_array() {
                items.extend(output.iter().cloned());
            }
        }
        Ok(Some(items))
    }
}

#[cfg(test)]
mod tests;
