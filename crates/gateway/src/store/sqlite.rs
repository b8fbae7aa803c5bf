//! The SQLite backend: one file (several processes on one machine may share it) or memory.
//! Responses past their TTL, and the oldest past the size cap, are dropped on each write.

use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::sqlite_conversations::CONVERSATIONS;
use super::{Kept, Responses, StoreError, Stored, unix_now};

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> StoreError {
        StoreError(err.to_string())
    }
}

pub(super) struct Sqlite {
    db: Mutex<Db>,
    ttl_secs: u64,
    max_bytes: u64,
}

pub(super) struct Db {
    pub(super) conn: Connection,
    /// The bytes of every kept response, kept up to date on each write.
    bytes: u64,
    /// When responses past their TTL were last dropped (reads skip them meanwhile).
    swept: u64,
}

/// How often responses past their TTL are dropped, in seconds.
const SWEEP_EVERY: u64 = 60;

const SCHEMA: &str = "
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created INTEGER NOT NULL,
    previous TEXT,
    input TEXT NOT NULL,
    response TEXT NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
CREATE TABLE IF NOT EXISTS items (
    owner TEXT NOT NULL,
    id TEXT NOT NULL,
    response TEXT NOT NULL REFERENCES responses (id) ON DELETE CASCADE,
    item TEXT NOT NULL,
    PRIMARY KEY (owner, id)
);
CREATE INDEX IF NOT EXISTS items_response ON items (response);
";

impl Sqlite {
    /// The database at `path` (made, with its folder, when new), or one in memory.
    pub(super) fn open(
        path: Option<&std::path::Path>,
        ttl_secs: u64,
        max_bytes: u64,
    ) -> Stored<Sqlite> {
        let conn = match path {
            None => Connection::open_in_memory()?,
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|err| {
                        StoreError(format!("cannot make {}: {err}", dir.display()))
                    })?;
                }
                let conn = Connection::open(path)
                    .map_err(|err| StoreError(format!("cannot open {}: {err}", path.display())))?;
                // Several processes may share the file: wait for another's write, and let
                // readers go on beside a writer.
                conn.busy_timeout(std::time::Duration::from_secs(5))?;
                conn.pragma_update(None, "journal_mode", "WAL")?;
                conn.pragma_update(None, "synchronous", "NORMAL")?;
                conn
            }
        };
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(CONVERSATIONS)?;
        let bytes: i64 =
            conn.query_row("SELECT COALESCE(SUM(bytes), 0) FROM responses", [], |row| row.get(0))?;
        Ok(Sqlite {
            db: Mutex::new(Db { conn, bytes: u64::try_from(bytes).unwrap_or(0), swept: 0 }),
            ttl_secs,
            max_bytes,
        })
    }

    /// The creation time of the oldest response not past its TTL.
    fn oldest_kept(&self) -> i64 {
        if self.ttl_secs == 0 { 0 } else { unix_now().saturating_sub(self.ttl_secs) as i64 }
    }

    pub(super) fn db(&self) -> std::sync::MutexGuard<'_, Db> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one statement; how many rows it changed.
    pub(super) fn run(&self, sql: &str, params: impl rusqlite::Params) -> Stored<usize> {
        Ok(self.db().conn.execute(sql, params)?)
    }

    /// Drops responses older than the TTL (at most once a [`SWEEP_EVERY`]), then the oldest
    /// while over the size cap.
    fn prune(&self, db: &mut Db, now: u64) -> Stored<()> {
        if self.ttl_secs > 0 && now >= db.swept.saturating_add(SWEEP_EVERY) {
            db.swept = now;
            let before = now.saturating_sub(self.ttl_secs) as i64;
            let gone: i64 = db
                .conn
                .prepare_cached("SELECT COALESCE(SUM(bytes), 0) FROM responses WHERE created < ?1")?
                .query_row([before], |row| row.get(0))?;
            if gone > 0 {
                db.conn.execute("DELETE FROM responses WHERE created < ?1", [before])?;
                db.bytes = db.bytes.saturating_sub(gone as u64);
            }
        }
        while self.max_bytes > 0 && db.bytes > self.max_bytes {
            let oldest: Option<(String, i64)> = db
                .conn
                .query_row(
                    "SELECT id, bytes FROM responses ORDER BY created, rowid LIMIT 1",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            let Some((id, bytes)) = oldest else {
                db.bytes = 0;
                break;
            };
            db.conn.execute("DELETE FROM responses WHERE id = ?1", [&id])?;
            db.bytes = db.bytes.saturating_sub(bytes as u64);
        }
        Ok(())
    }
}

impl Responses for Sqlite {
    /// Keeps `response` (its `id` and `output` items) with its own `input` items and the
    /// response it followed; then drops what is past its time or over the size cap.
    fn put(&self, owner: &str, after: Option<&str>, input: &[Value], reply: &Value) -> Stored<()> {
        let id = reply["id"].as_str().unwrap_or_default();
        let input_text = Value::Array(input.to_vec()).to_string();
        let response_text = reply.to_string();
        let bytes = (input_text.len() + response_text.len()) as u64;
        let now = unix_now();
        let mut db = self.db();
        let tx = db.conn.transaction()?;
        tx.prepare_cached(
            "INSERT OR REPLACE INTO responses (id, owner, created, previous, input, response, bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![id, owner, now as i64, after, input_text, response_text, bytes as i64])?;
        let output = reply["output"].as_array().map(Vec::as_slice).unwrap_or_default();
        for item in input.iter().chain(output) {
            if let Some(item_id) = item["id"].as_str() {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO items (owner, id, response, item) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![owner, item_id, id, item.to_string()])?;
            }
        }
        tx.commit()?;
        db.bytes += bytes;
        self.prune(&mut db, now)
    }

    /// The response `id` if `owner` kept it (and it has not expired).
    fn get(&self, owner: &str, id: &str) -> Stored<Option<Kept>> {
        let db = self.db();
        let row: Option<(String, String, Option<String>, i64)> = db
            .conn
            .query_row(
                "SELECT response, input, previous, created FROM responses WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        let Some((response, input, previous, created)) = row else { return Ok(None) };
        if self.ttl_secs > 0 && (created as u64).saturating_add(self.ttl_secs) < unix_now() {
            return Ok(None);
        }
        let parse = |text: &str| {
            serde_json::from_str::<Value>(text)
                .map_err(|err| StoreError(format!("response {id} cannot be read: {err}")))
        };
        let input = match parse(&input)? {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        Ok(Some(Kept { response: parse(&response)?, input, previous }))
    }

    /// Deletes the response `id` of `owner` and its items; whether there was one.
    fn delete(&self, owner: &str, id: &str) -> Stored<bool> {
        let mut db = self.db();
        let sql = "SELECT bytes FROM responses WHERE id = ?1 AND owner = ?2";
        let bytes: Option<i64> =
            db.conn.query_row(sql, params![id, owner], |row| row.get(0)).optional()?;
        let Some(bytes) = bytes else { return Ok(false) };
        db.conn
            .execute("DELETE FROM responses WHERE id = ?1 AND owner = ?2", params![id, owner])?;
        db.bytes = db.bytes.saturating_sub(bytes as u64);
        Ok(true)
    }

    /// The item `id` (an input or output item of a kept response) of `owner`.
    fn item(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        let db = self.db();
        let text: Option<String> = db
            .conn
            .query_row(
                "SELECT items.item FROM items JOIN responses ON responses.id = items.response WHERE items.owner = ?1 AND items.id = ?2 AND responses.created >= ?3",
                params![owner, id, self.oldest_kept()],
                |row| row.get(0),
            )
            .optional()?;
        text.map(|text| {
            serde_json::from_str(&text)
                .map_err(|err| StoreError(format!("item {id} cannot be read: {err}")))
        })
        .transpose()
    }

    /// Whether the store answers (for `/readyz`).
    fn check(&self) -> Stored<()> {
        let db = self.db();
        db.conn.query_row("SELECT 1", [], |_| Ok(()))?;
        Ok(())
    }
}
