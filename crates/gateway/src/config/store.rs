//! `[store]`: where the Responses API's stored responses live (issue 26).

use std::path::PathBuf;

/// The response store (`[store]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `auto` (a file in the state directory: `$XDG_STATE_HOME/toolshim/responses.db`, else
    /// `~/.local/state/toolshim/responses.db`; in memory when neither is known), `memory`,
    /// `off` (nothing kept: `store: true` is answered `store: false`), `sqlite:PATH`, a path,
    /// or `redis://HOST:PORT[/DB]` (shared by replicas).
    pub url: String,
    /// Seconds a response is kept; 0 keeps it until the size cap drops it.
    pub ttl_secs: u64,
    /// The most bytes of responses kept; past it the oldest go first. 0: no cap.
    pub max_bytes: u64,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { url: "auto".into(), ttl_secs: 30 * 24 * 3600, max_bytes: 1 << 30 }
    }
}

impl StoreConfig {
    /// The database file `url` names; `None` for `off`, `memory`, or `auto` without a state
    /// directory.
    pub fn path(&self) -> Option<PathBuf> {
        let url = self.url.trim();
        match url {
            "off" | "memory" | "" => None,
            _ if url.contains("://") && !url.starts_with("sqlite://") => None,
            "auto" => state_dir().map(|dir| dir.join("toolshim").join("responses.db")),
            _ => {
                let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"));
                let path = path.unwrap_or(url);
                (!path.is_empty() && !path.contains("://")).then(|| PathBuf::from(path))
            }
        }
    }

    /// `auto` as what it stands for here: a path, or `memory`.
    pub fn resolved(&self) -> StoreConfig {
        if self.url.trim() != "auto" {
            return self.clone();
        }
        let url = self.path().map_or_else(|| "memory".to_owned(), |p| p.display().to_string());
        StoreConfig { url, ..self.clone() }
    }

    /// What is wrong with `url`, if anything.
    pub fn problem(&self) -> Option<String> {
        let url = self.url.trim();
        let redis = url.starts_with("redis://") || url.starts_with("rediss://");
        if matches!(url, "off" | "memory" | "auto") || redis || self.path().is_some() {
            return None;
        }
        Some(format!(
            "`{url}` is not a store: use `auto`, `memory`, `off`, `sqlite:PATH`, a path, or `redis://HOST:PORT`"
        ))
    }
}

fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("XDG_STATE_HOME").or_else(|| var("HOME").map(|home| home.join(".local").join("state")))
}
