//! `[inspect]`: the request inspector (issue 27; docs/operations.md). Off unless enabled,
//! and then only for a key with `admin = true`.

/// The request inspector (`[inspect]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectConfig {
    /// Keep the last requests and serve them at `/inspect`.
    pub enabled: bool,
    /// How many requests are kept at most (the oldest finished one goes first).
    pub requests: usize,
    /// The most memory the kept requests' text may take, in bytes: the oldest finished
    /// requests go to make room, and a request's text past what is left is cut, saying so.
    pub max_bytes: u64,
}

impl Default for InspectConfig {
    fn default() -> InspectConfig {
        InspectConfig { enabled: false, requests: 200, max_bytes: 32 << 20 }
    }
}

/// The keys of the `[inspect]` table.
pub(super) const INSPECT_KEYS: &str = "enabled, requests, max_bytes";

impl InspectConfig {
    /// What is wrong with the table, as (key, problem); `admin` says whether a key may read
    /// admin endpoints.
    pub(super) fn problems(&self, admin: bool) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        if !self.enabled {
            return problems;
        }
        if !admin {
            problems.push((
                "inspect.enabled",
                "the inspector shows prompts and replies, so it needs a key with admin = true in a [keys.NAME] table to read it".into(),
            ));
        }
        if !(1..=100_000).contains(&self.requests) {
            problems.push(("inspect.requests", "must be between 1 and 100000".into()));
        }
        if self.max_bytes < 1 << 16 {
            problems.push(("inspect.max_bytes", "must be at least 65536 (64 KiB)".into()));
        }
        problems
    }
}
