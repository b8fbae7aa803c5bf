//! The configuration tree: defaults, then a TOML file, then the environment, then flags.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// How a model gets tool calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The upstream has no tool calling: describe the tools in the prompt and parse replies.
    Emulate,
    /// The upstream has tool calling: pass requests through.
    Native,
    /// Native, falling back to emulation when the upstream rejects a request with tools.
    #[default]
    Auto,
}

impl Mode {
    /// Parses `emulate`, `native` or `auto`.
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "emulate" => Some(Mode::Emulate),
            "native" => Some(Mode::Native),
            "auto" => Some(Mode::Auto),
            _ => None,
        }
    }
}

/// How the tool prompt asks the model to write a call. Replies are parsed in every dialect
/// whatever this says; it only decides what the model is taught (and how earlier calls are
/// shown to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CallFormat {
    /// `<tool_call>{"name":…,"arguments":{…}}</tool_call>` (Hermes; most open models know it).
    #[default]
    ToolCall,
    /// A bare JSON object `{"name":…,"arguments":{…}}` on its own line (for servers that strip
    /// special tokens such as `<tool_call>`).
    Json,
    /// `<function_calls><invoke name="…"><parameter name="…">…</parameter></invoke></function_calls>`.
    Xml,
}

/// Everything the gateway needs to run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on, `host:port`.
    pub listen: String,
    /// Gateway API keys clients must send as `Authorization: Bearer <key>`. Empty: no auth.
    pub api_keys: Vec<String>,
    /// The upstream chat endpoint.
    pub upstream: UpstreamConfig,
    /// The mode for models without an entry in `models`.
    pub mode: Mode,
    /// How the tool prompt asks models to write calls (per model in `models`).
    pub call_format: CallFormat,
    /// Per client model name: the upstream model and mode.
    pub models: BTreeMap<String, ModelConfig>,
    /// How often a failed emulated reply is asked for again.
    pub max_retries: u32,
    /// The largest request body accepted, in bytes.
    pub body_limit_bytes: usize,
    /// How long in-flight requests may take to finish after a shutdown signal, in seconds.
    pub drain_timeout_secs: f64,
    /// Open client connections at most (lowered to fit the file-descriptor limit); one more
    /// is answered 503 and closed.
    pub max_connections: usize,
    /// Seconds from the first byte of a request head to its end; a slower head closes the
    /// connection.
    pub header_read_timeout_secs: f64,
    /// Seconds from the end of the request head to the end of its body; a slower body gets a
    /// 408.
    pub body_read_timeout_secs: f64,
    /// Seconds a connection with no request in flight stays open.
    pub keep_alive_timeout_secs: f64,
}

/// Which API the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamApi {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    #[default]
    OpenAi,
    /// Anthropic Messages (`/v1/messages`), without tool support; always emulated.
    Anthropic,
}

impl UpstreamApi {
    /// Parses `openai` or `anthropic`.
    pub fn parse(text: &str) -> Option<UpstreamApi> {
        match text {
            "openai" => Some(UpstreamApi::OpenAi),
            "anthropic" => Some(UpstreamApi::Anthropic),
            _ => None,
        }
    }
}

/// The upstream chat endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Base URL, for example `http://127.0.0.1:8081` or `https://api.example.com/v1`.
    pub url: String,
    /// The API the upstream speaks: `openai` (default) or `anthropic`.
    pub api: UpstreamApi,
    /// Name of the environment variable holding the upstream API key.
    pub api_key_env: String,
    /// Seconds to establish a connection.
    pub connect_timeout_secs: f64,
    /// Seconds from the request until the upstream's first streamed event (SSE comments and
    /// pings do not count).
    pub first_byte_timeout_secs: f64,
    /// Seconds of silence allowed between streamed events (comments and pings are silence).
    pub idle_timeout_secs: f64,
    /// The most model text one reply may carry, in bytes (for a reply that is one JSON body,
    /// the most bytes that body may have); a larger reply ends with an error.
    pub max_reply_bytes: usize,
    /// The longest line of an upstream event stream, in bytes; a longer one ends the reply
    /// with an error.
    pub max_line_bytes: usize,
}

/// One client-visible model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The model name sent upstream (default: the client's name).
    pub upstream: Option<String>,
    /// The mode for this model (default: the top-level `mode`).
    pub mode: Option<Mode>,
    /// The call format for this model (default: the top-level `call_format`).
    pub call_format: Option<CallFormat>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:8080".into(),
            api_keys: Vec::new(),
            upstream: UpstreamConfig::default(),
            mode: Mode::Auto,
            call_format: CallFormat::ToolCall,
            models: BTreeMap::new(),
            max_retries: 1,
            body_limit_bytes: 16 << 20,
            drain_timeout_secs: 30.0,
            max_connections: 4096,
            header_read_timeout_secs: 10.0,
            body_read_timeout_secs: 60.0,
            keep_alive_timeout_secs: 60.0,
        }
    }
}

impl Default for UpstreamConfig {
    fn default() -> UpstreamConfig {
        UpstreamConfig {
            url: String::new(),
            api: UpstreamApi::OpenAi,
            api_key_env: "TOOLSHIM_UPSTREAM_API_KEY".into(),
            connect_timeout_secs: 10.0,
            first_byte_timeout_secs: 300.0,
            idle_timeout_secs: 120.0,
            max_reply_bytes: 16 << 20,
            max_line_bytes: 4 << 20,
        }
    }
}

/// Values that override the file, from the environment or from flags.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub upstream_url: Option<String>,
    pub upstream_api: Option<String>,
    pub mode: Option<String>,
    pub api_keys: Vec<String>,
    pub max_retries: Option<u32>,
}

impl Config {
    /// Reads a TOML file. Unknown keys are errors that name the key.
    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|err| err.to_string())
    }

    /// Applies overrides (environment first, then flags, so flags win).
    pub fn apply(&mut self, overrides: &Overrides) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if let Some(listen) = &overrides.listen {
            self.listen.clone_from(listen);
        }
        if let Some(url) = &overrides.upstream_url {
            self.upstream.url.clone_from(url);
        }
        if let Some(api) = &overrides.upstream_api {
            match UpstreamApi::parse(api) {
                Some(api) => self.upstream.api = api,
                None => {
                    problems.push(format!("upstream.api: `{api}` is not one of openai, anthropic"))
                }
            }
        }
        if let Some(mode) = &overrides.mode {
            match Mode::parse(mode) {
                Some(mode) => self.mode = mode,
                None => {
                    problems.push(format!("mode: `{mode}` is not one of emulate, native, auto"))
                }
            }
        }
        if !overrides.api_keys.is_empty() {
            self.api_keys.clone_from(&overrides.api_keys);
        }
        if let Some(n) = overrides.max_retries {
            self.max_retries = n;
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// Every problem at once, each naming its key.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            problems
                .push(format!("listen: `{}` is not an address like 127.0.0.1:8080", self.listen));
        }
        let url = self.upstream.url.trim();
        if url.is_empty() {
            problems.push(
                "upstream.url: missing; pass --upstream URL or set it in the config file".into(),
            );
        } else if !(url.starts_with("http://") || url.starts_with("https://")) {
            problems.push(format!("upstream.url: `{url}` must start with http:// or https://"));
        }
        for (key, value) in [
            ("upstream.connect_timeout_secs", self.upstream.connect_timeout_secs),
            ("upstream.first_byte_timeout_secs", self.upstream.first_byte_timeout_secs),
            ("upstream.idle_timeout_secs", self.upstream.idle_timeout_secs),
            ("drain_timeout_secs", self.drain_timeout_secs),
            ("header_read_timeout_secs", self.header_read_timeout_secs),
            ("body_read_timeout_secs", self.body_read_timeout_secs),
            ("keep_alive_timeout_secs", self.keep_alive_timeout_secs),
        ] {
            if !(value.is_finite() && value > 0.0) {
                problems.push(format!("{key}: must be a positive number of seconds, not {value}"));
            }
        }
        if self.max_retries > 10 {
            problems.push(format!("max_retries: {} is more than the allowed 10", self.max_retries));
        }
        if self.upstream.max_reply_bytes < 1024 {
            problems.push("upstream.max_reply_bytes: must be at least 1024".into());
        }
        if self.upstream.max_line_bytes < 1024 {
            problems.push("upstream.max_line_bytes: must be at least 1024".into());
        }
        if self.max_connections == 0 {
            problems.push("max_connections: must be at least 1".into());
        }
        if self.body_limit_bytes < 1024 {
            problems.push("body_limit_bytes: must be at least 1024".into());
        }
        for key in &self.api_keys {
            if key.trim().is_empty() {
                problems.push("api_keys: a key is empty".into());
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The upstream model name and mode for a client model name.
    pub fn route(&self, model: &str) -> (String, Mode) {
        match self.models.get(model) {
            Some(entry) => (
                entry.upstream.clone().unwrap_or_else(|| model.to_owned()),
                entry.mode.unwrap_or(self.mode),
            ),
            None => (model.to_owned(), self.mode),
        }
    }

    /// The call format for a client model name.
    pub fn call_format(&self, model: &str) -> CallFormat {
        self.models.get(model).and_then(|entry| entry.call_format).unwrap_or(self.call_format)
    }

    pub(crate) fn secs(value: f64) -> Duration {
        Duration::from_secs_f64(value.clamp(0.001, 86_400.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut config = Config::from_toml("listen = \"nope\"\nmax_retries = 99\n[upstream]\nurl = \"ftp://x\"\nidle_timeout_secs = 0").unwrap();
        config.drain_timeout_secs = -1.0;
        let problems = config.validate().unwrap_err();
        for key in [
            "listen:",
            "upstream.url:",
            "upstream.idle_timeout_secs:",
            "max_retries:",
            "drain_timeout_secs:",
        ] {
            assert!(problems.iter().any(|p| p.starts_with(key)), "{key} in {problems:?}");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::from_toml("lisen = \"x\"").unwrap_err();
        assert!(err.contains("lisen"), "{err}");
    }

    #[test]
    fn models_route_to_upstream_names_and_modes() {
        let config = Config::from_toml(
            "mode = \"emulate\"\n[models.small]\nupstream = \"qwen2.5\"\nmode = \"native\"",
        )
        .unwrap();
        assert_eq!(config.route("small"), ("qwen2.5".into(), Mode::Native));
        assert_eq!(config.route("other"), ("other".into(), Mode::Emulate));
    }
}
