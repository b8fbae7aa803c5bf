//! `[keys.NAME]`: gateway keys with a name, the models they may use and their limits
//! (issue 27; docs/operations.md). The unnamed `api_keys` stay, each with no limit.

/// One named key (`[keys.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyConfig {
    /// The secret clients send, as written in the file (`key`).
    pub key: String,
    /// The environment variable holding the secret instead (`key_env`).
    pub key_env: String,
    /// The client model names it may use: exact names, or patterns with `*`; empty: all.
    pub models: Vec<String>,
    /// Requests in any 60 seconds, at most (0: no limit).
    pub rpm: u64,
    /// Tokens (prompt and completion, every attempt) in one clock minute, at most.
    pub tpm: u64,
    /// Tokens in one UTC day, at most.
    pub tpd: u64,
    /// Requests in flight at once, at most.
    pub concurrent: u64,
    /// It may read the admin endpoints (`/admin/usage`).
    pub admin: bool,
}

/// The keys a `[keys.NAME]` table may have.
pub(super) const KEY_KEYS: &str = "key, key_env, models, rpm, tpm, tpd, concurrent, admin";

impl KeyConfig {
    /// The secret: `key`, else the variable `key_env` names, read through `var`; `Err` says
    /// what is wrong.
    pub fn secret(&self, var: impl Fn(&str) -> Option<String>) -> Result<String, String> {
        match (self.key.is_empty(), self.key_env.trim()) {
            (false, "") => Ok(self.key.clone()),
            (false, _) => Err("set key or key_env, not both".into()),
            (true, "") => {
                Err("has no secret: set key, or key_env to a variable that holds it".into())
            }
            (true, env) => match var(env) {
                Some(secret) if !secret.trim().is_empty() => Ok(secret),
                Some(_) => Err(format!("the variable {env} (key_env) is blank")),
                None => Err(format!("the variable {env} (key_env) is not set")),
            },
        }
    }
}

/// Whether a key name is usable as a metric label and in URLs: letters, digits, `-`, `_`,
/// `.`, at most 64.
pub(super) fn name_problem(name: &str) -> Option<String> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    (!fine).then(|| "a key name has 1 to 64 letters, digits, '-', '_' or '.'".to_owned())
}
