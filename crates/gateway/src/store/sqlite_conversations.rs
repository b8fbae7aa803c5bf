//! Conversations in SQLite: a list of items under an owner, with metadata. Unlike responses
//! they have no TTL and do not count against the size cap: they last until they are deleted.
//! And the shared memory of refusals, each with the time it ends.

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};

use super::sqlite::Sqlite;
use super::{Conversations, Memory, StoreError, Stored, unix_now};

pub(super) const CONVERSATIONS: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created INTEGER NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_items (
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    item TEXT NOT NULL,
    PRIMARY KEY (conversation, seq)
);
CREATE INDEX IF NOT EXISTS conversation_items_id ON conversation_items (conversation, id);
CREATE TABLE IF NOT EXISTS memory (
    key TEXT PRIMARY KEY,
    until INTEGER NOT NULL
);
";

fn object(id: &str, created: i64, metadata: &str) -> Value {
    let metadata: Value = serde_json::from_str(metadata).unwrap_or_else(|_| json!({}));
    json!({"id": id, "object": "conversation", "created_at": created, "metadata": metadata})
}

fn parse(text: &str) -> Stored<Value> {
    serde_json::from_str(text).map_err(|err| StoreError(format!("an item cannot be read: {err}")))
}

impl Conversations for Sqlite {
    /// A new conversation `id` of `owner` with `metadata` and these items; its object.
    fn new_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Value> {
        let created = unix_now() as i64;
        let sql =
            "INSERT INTO conversations (id, owner, created, metadata) VALUES (?1, ?2, ?3, ?4)";
        self.run(sql, params![id, owner, created, meta.to_string()])?;
        Ok(object(id, created, &meta.to_string()))
    }

    /// The conversation object `id` of `owner`.
    fn conversation_object(&self, owner: &str, id: &str) -> Stored<Option<Value>> {
        let db = self.db();
        let row: Option<(i64, String)> = db
            .conn
            .query_row(
                "SELECT created, metadata FROM conversations WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        Ok(row.map(|(created, metadata)| object(id, created, &metadata)))
    }

    /// Sets the metadata of conversation `id`; its object, or `None` when there is none.
    fn update_conversation(&self, owner: &str, id: &str, meta: &Value) -> Stored<Option<Value>> {
        let sql = "UPDATE conversations SET metadata = ?3 WHERE id = ?1 AND owner = ?2";
        self.run(sql, params![id, owner, meta.to_string()])?;
        self.conversation_object(owner, id)
    }

    /// Deletes conversation `id` and its items; whether there was one.
    fn delete_conversation(&self, owner: &str, id: &str) -> Stored<bool> {
        let sql = "DELETE FROM conversations WHERE id = ?1 AND owner = ?2";
        Ok(self.run(sql, params![id, owner])? > 0)
    }

    /// Adds items at the end of conversation `id`; `false` when `owner` has no such
    /// conversation.
    fn add_items(&self, owner: &str, id: &str, items: &[Value]) -> Stored<bool> {
        let mut db = self.db();
        let tx = db.conn.transaction()?;
        let known: Option<i64> = tx
            .query_row(
                "SELECT (SELECT COALESCE(MAX(seq), 0) FROM conversation_items WHERE conversation = ?1) FROM conversations WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                |row| row.get(0),
            )
            .optional()?;
        let Some(last) = known else { return Ok(false) };
        for (n, item) in items.iter().enumerate() {
            tx.execute(
                "INSERT INTO conversation_items (conversation, seq, id, item) VALUES (?1, ?2, ?3, ?4)",
                params![id, last + 1 + n as i64, item["id"].as_str().unwrap_or_default(), item.to_string()],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Every item of conversation `id`, oldest first; `None` when `owner` has no such
    /// conversation.
    fn conversation_items(&self, owner: &str, id: &str) -> Stored<Option<Vec<Value>>> {
        if self.conversation_object(owner, id)?.is_none() {
            return Ok(None);
        }
        let db = self.db();
        let mut statement = db
            .conn
            .prepare("SELECT item FROM conversation_items WHERE conversation = ?1 ORDER BY seq")?;
        let texts = statement
            .query_map([id], |row| row.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        texts.iter().map(|text| parse(text)).collect::<Result<Vec<_>, _>>().map(Some)
    }

    /// Deletes item `item` of conversation `id`; whether there was one.
    fn delete_conversation_item(&self, owner: &str, id: &str, item: &str) -> Stored<bool> {
        if self.conversation_object(owner, id)?.is_none() {
            return Ok(false);
        }
        let sql = "DELETE FROM conversation_items WHERE conversation = ?1 AND id = ?2";
        Ok(self.run(sql, params![id, item])? > 0)
    }
}

impl Memory for Sqlite {
    fn remember(&self, key: &str, secs: u64) -> Stored<()> {
        let until = unix_now().saturating_add(secs) as i64;
        let db = self.db();
        db.conn.execute("DELETE FROM memory WHERE until <= ?1", [unix_now() as i64])?;
        db.conn.execute(
            "INSERT OR REPLACE INTO memory (key, until) VALUES (?1, ?2)",
            params![key, until],
        )?;
        Ok(())
    }

    fn recalls(&self, key: &str) -> Stored<bool> {
        let db = self.db();
        let until: Option<i64> = db
            .conn
            .query_row("SELECT until FROM memory WHERE key = ?1", [key], |row| row.get(0))
            .optional()?;
        Ok(until.is_some_and(|until| until > unix_now() as i64))
    }
}
