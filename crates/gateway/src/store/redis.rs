//! The Redis backend, for replicas that share their state (`store.url = "redis://…"`).
//!
//! Keys, under `toolshim:`: `resp:ID` (a response with its owner, input items and the one it
//! followed), `item:OWNER:ID` (each of its items, for `item_reference`), `resp-items:ID` (the
//! item keys of a response, to delete them with it), each expiring after `ttl_secs`;
//! `conv:ID` (a conversation's owner, creation time and metadata) with `conv-items:ID` (its
//! items, a list), which do not expire; `mem:KEY`, a refusal replicas share, expiring with
//! it. The size cap is Redis's own (`maxmemory` with a policy such as `volatile-ttl`): the
//! gateway sets no other.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Conversations, Kept, Memory, Responses, StoreError, Stored, unix_now};

impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> StoreError {
        StoreError(format!("redis: {err}"))
    }
}

const PREFIX: &str = "toolshim:";

/// How long a connection, a command's reply or a write may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One connection to a Redis, made when first needed and again after a failure, each
/// command under [`TIMEOUT`].
pub(super) struct Conn {
    client: redis::Client,
    conn: Mutex<Option<redis::Connection>>,
}

impl Conn {
    pub(super) fn open(url: &str) -> Stored<Conn> {
        Ok(Conn { client: redis::Client::open(url)?, conn: Mutex::new(None) })
    }

    /// Runs `f` on the connection (made first if there is none); a failure drops it.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Stored<T> {
        let mut slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let conn = self.client.get_connection_with_timeout(TIMEOUT)?;
                conn.set_read_timeout(Some(TIMEOUT))?;
                conn.set_write_timeout(Some(TIMEOUT))?;
                conn
            }
        };
        let result = f(&mut conn);
        if result.is_ok() {
            *slot = Some(conn);
        }
        Ok(result?)
    }
}

pub(super) struct Redis {
    conn: Conn,
    ttl_secs: u64,
    /// The URL without its password.
    pub(super) shown: String,
}

fn parse(text: &str, what: &str) -> Stored<Value> {
    serde_json::from_str(text).map_err(|err| StoreError(format!("{what} cannot be read: {err}")))
}

/// `url` without its password, for logs.
pub(super) fn shown(url: &str) -> Stored<String> {
    let mut parsed = reqwest::Url::parse(url)
        .map_err(|err| StoreError(format!("`{url}` is not a URL: {err}")))?;
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    Ok(parsed.to_string())
}

impl Redis {
    /// A client for `url`, checked with a `PING`, so that a start with a store that is down
    /// says so at once.
    pub(super) fn open(url: &str, ttl_secs: u64) -> Stored<Redis> {
        let shown = shown(url)?;
        let redis = Redis { conn: Conn::open(url)?, ttl_secs, shown };
        redis.check().map_err(|err| StoreError(format!("{}: {}", redis.shown, err.0)))?;
        Ok(redis)
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Stored<T> {
        self.conn.with(f)
    }

    fn expiring(&self, pipe: &mut redis::Pipeline, key: &str, value: &str) {
        let set = pipe.cmd("SET").arg(key).arg(value);
        if self.ttl_secs > 0 {
            set.arg("EX").arg(self.ttl_secs);
        }
        set.ignore();
    }

    /// The record under `{PREFIX}{kind}:{id}` (`resp`, `conv`) if `owner` has it.
    fn record(&self, kind: &str, owner: &str, id: &str) -> Stored<Option<Value>> {
        let text: Option<String> =
            self.with(|c| redis::cmd("GET").arg(format!("{PREFIX}{kind}:{id}")).query(c))?;
        let Some(text) = text else { return Ok(None) };
        let record = parse(&text, &format!("record {kind}:{id}"))?;
        Ok((record["owner"] == owner).then_some(record))
    }

    fn stored(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        self.record("resp", owner, id)
    }

    fn conversation(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        self.record("conv", owner, id)
    }
}

impl Responses for Redis {
    fn put(&self, owner: &str, after: Option<&str>, input: &[Value], reply: &Value) -> Stored<()> {
        let id = reply["id"].as_str().unwrap_or_default();
        let record = json!({"owner": owner, "created": unix_now(), "previous": after,
            "input": input, "response": reply});
        let mut pipe = redis::pipe();
        pipe.atomic();
        self.expiring(&mut pipe, &format!("{PREFIX}resp:{id}"), &record.to_string());
        let output = reply["output"].as_array().map(Vec::as_slice).unwrap_or_default();
        let list = format!("{PREFIX}resp-items:{id}");
        for item in input.iter().chain(output) {
            if let Some(item_id) = item["id"].as_str() {
                let key = format!("{PREFIX}item:{owner}:{item_id}");
                self.expiring(&mut pipe, &key, &item.to_string());
                pipe.cmd("SADD").arg(&list).arg(&key).ignore();
            }
        }
        if self.ttl_secs > 0 {
            pipe.cmd("EXPIRE").arg(&list).arg(self.ttl_secs).ignore();
        }
        self.with(|c| pipe.query::<()>(c))
    }

    fn get(&self, owner: &str, id: &str) -> Stored<Option<Kept>> {
        let Some(mut record) = self.stored(owner, id)? else { return Ok(None) };
        let input = match record["input"].take() {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        let previous = record["previous"].as_str().map(str::to_owned);
        Ok(Some(Kept { response: record["response"].take(), input, previous }))
    }

    fn delete(&self, owner: &str, id: &str) -> Stored<bool> {
        if self.stored(owner, id)?.is_none() {
            return Ok(false);
        }
        let list = format!("{PREFIX}resp-items:{id}");
        let items: Vec<String> = self.with(|c| redis::cmd("SMEMBERS").arg(&list).query(c))?;
        self.with(|c| {
            redis::cmd("DEL")
                .arg(format!("{PREFIX}resp:{id}"))
                .arg(&list)
                .arg(&items)
                .query::<()>(c)
        })?;
        Ok(true)
    }

    fn item(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        let text: Option<String> =
            self.with(|c| redis::cmd("GET").arg(format!("{PREFIX}item:{owner}:{id}")).query(c))?;
        text.map(|text| parse(&text, &format!("item {id}"))).transpose()
    }

    fn check(&self) -> Stored<()> {
        self.with(|c| redis::cmd("PING").query::<String>(c)).map(|_| ())
    }
}

fn object(id: &str, record: &Value) -> Value {
    json!({"id": id, "object": "conversation", "created_at": record["created"],
        "metadata": record["metadata"]})
}

impl Conversations for Redis {
    fn new_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Value> {
        let record = json!({"owner": owner, "created": unix_now(), "metadata": meta});
        let key = format!("{PREFIX}conv:{id}");
        self.with(|c| redis::cmd("SET").arg(key).arg(record.to_string()).query::<()>(c))?;
        Ok(object(id, &record))
    }

    fn conversation_object(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        Ok(self.conversation(owner, id)?.map(|record| object(id, &record)))
    }

    fn update_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Option<Value>> {
        let Some(mut record) = self.conversation(owner, id)? else { return Ok(None) };
        record["metadata"] = meta.clone();
        let key = format!("{PREFIX}conv:{id}");
        self.with(|c| redis::cmd("SET").arg(&key).arg(record.to_string()).query::<()>(c))?;
        Ok(Some(object(id, &record)))
    }

    fn delete_conversation(&self, owner: &str, id: &str) -> Stored<bool> {
        if self.conversation(owner, id)?.is_none() {
            return Ok(false);
        }
        self.with(|c| {
            redis::cmd("DEL")
                .arg(format!("{PREFIX}conv:{id}"))
                .arg(format!("{PREFIX}conv-items:{id}"))
                .query::<()>(c)
        })?;
        Ok(true)
    }

    fn add_items(&self, owner: &str, id: &str, items: &[Value]) -> Stored<bool> {
        if self.conversation(owner, id)?.is_none() {
            return Ok(false);
        }
        if items.is_empty() {
            return Ok(true);
        }
        let texts: Vec<String> = items.iter().map(Value::to_string).collect();
        let key = format!("{PREFIX}conv-items:{id}");
        self.with(|c| redis::cmd("RPUSH").arg(&key).arg(&texts).query::<()>(c))?;
        Ok(true)
    }

    fn conversation_items(&self, owner: &str, id: &str) -> Stored<Option<Vec<Value>>> {
        if self.conversation(owner, id)?.is_none() {
            return Ok(None);
        }
        let key = format!("{PREFIX}conv-items:{id}");
        let texts: Vec<String> =
            self.with(|c| redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(c))?;
        texts.iter().map(|t| parse(t, "a conversation item")).collect::<Result<_, _>>().map(Some)
    }

    fn delete_conversation_item(&self, owner: &str, id: &str, item: &str) -> Stored<bool> {
        if self.conversation(owner, id)?.is_none() {
            return Ok(false);
        }
        let key = format!("{PREFIX}conv-items:{id}");
        let texts: Vec<String> =
            self.with(|c| redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(c))?;
        let found = texts.iter().find(|t| parse(t, "an item").is_ok_and(|v| v["id"] == item));
        let Some(text) = found else { return Ok(false) };
        let removed: i64 = self.with(|c| redis::cmd("LREM").arg(&key).arg(1).arg(text).query(c))?;
        Ok(removed > 0)
    }
}

impl Memory for Redis {
    fn remember(&self, key: &str, secs: u64) -> Stored<()> {
        let key = format!("{PREFIX}mem:{key}");
        self.with(|c| redis::cmd("SET").arg(&key).arg(1).arg("EX").arg(secs.max(1)).query::<()>(c))
    }

    fn recalls(&self, key: &str) -> Stored<bool> {
        let key = format!("{PREFIX}mem:{key}");
        self.with(|c| redis::cmd("EXISTS").arg(&key).query::<i64>(c)).map(|n| n > 0)
    }
}
