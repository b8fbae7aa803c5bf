//! The configuration tree: defaults, then a TOML file, then the environment, then flags.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Url;
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
    /// The syntax the model's own chat template teaches: chosen from the upstream's model
    /// name, or, when the name says nothing, from the chat template llama.cpp's server shows
    /// at `GET /props`; `tool_call` when neither tells (`neutral::family`).
    #[default]
    Auto,
    /// `<tool_call>{"name":…,"arguments":{…}}</tool_call>` (Hermes, Qwen2.5, Qwen3; most open
    /// models know it).
    ToolCall,
    /// A bare JSON object `{"name":…,"arguments":{…}}` on its own line (for servers that strip
    /// special tokens such as `<tool_call>`).
    Json,
    /// `<function_calls><invoke name="…"><parameter name="…">…</parameter></invoke></function_calls>`.
    Xml,
    /// `[TOOL_CALLS][{"name":…,"arguments":{…}}]` (Mistral, Mixtral, Codestral, Devstral, …).
    Mistral,
    /// A bare JSON object `{"name":…,"parameters":{…}}` (Llama 3.1 to 4).
    Llama,
    /// `<tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>`
    /// (Qwen3-Coder, Qwen3.5 and later).
    Qwen3Coder,
}

/// Which engine serves an upstream, for what only some engines do: decode under a grammar
/// (`constrain`) and continue a final assistant message (`prefill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum Engine {
    /// llama.cpp's server, recognized by its `GET /props`, gets it; others do not.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Never.
    #[serde(rename = "off")]
    Off,
    /// llama.cpp's server: `grammar`; a final assistant message is continued as it is.
    #[serde(rename = "llama.cpp", alias = "llama-cpp", alias = "llamacpp")]
    LlamaCpp,
    /// vLLM: `structured_outputs.grammar`; `continue_final_message`.
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang: `ebnf`; `continue_final_message`.
    #[serde(rename = "sglang")]
    Sglang,
}

/// What happens to a call a model writes inside its reasoning (`<think>…</think>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningCalls {
    /// It stays reasoning: models often draft a call while thinking, then decide against it.
    #[default]
    Ignore,
    /// It is a call like any other (for models that call from inside their reasoning).
    Allow,
}

/// Everything the gateway needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on, `host:port`.
    pub listen: String,
    /// Gateway API keys clients must send as `Authorization: Bearer <key>`. Empty, and no
    /// named key: no auth.
    pub api_keys: Vec<String>,
    /// Named keys with their models and limits (`[keys.NAME]`).
    pub keys: BTreeMap<String, KeyConfig>,
    /// The upstream chat endpoint.
    pub upstream: UpstreamConfig,
    /// The mode for models without an entry in `models`.
    pub mode: Mode,
    /// How the tool prompt asks models to write calls (per model in `models`).
    pub call_format: CallFormat,
    /// Calls written inside reasoning (per model in `models`).
    pub reasoning_calls: ReasoningCalls,
    /// Per client model name: the upstream model and mode.
    pub models: BTreeMap<String, ModelConfig>,
    /// More upstreams, by name, each serving the models it names (`[upstreams.NAME]`).
    pub upstreams: BTreeMap<String, NamedUpstream>,
    /// Where a model no upstream names goes: an upstream's name. Without it, the `[upstream]`
    /// table (when it has a URL) serves every other model, and otherwise such a model is a 404.
    pub default_upstream: Option<String>,
    /// Seconds to remember that an upstream refused native tools (in `auto` mode) or
    /// `response_format` for a model, so that later requests do not offer them again; 0
    /// remembers nothing.
    pub native_refusal_secs: f64,
    /// How often a failed emulated reply is asked for again.
    pub max_retries: u32,
    /// Whether an emulated call's arguments are checked against its tool's schema (a call
    /// that does not fit is asked for again; one to a strict tool never goes out).
    pub check_arguments: bool,
    /// Whether a native reply to a request with tools is read for calls the upstream left in
    /// its text (Chat Completions in `native` and `auto` modes).
    pub native_repair: bool,
    /// The most calls continuation may add to a reply whose calls were read from its text
    /// (parallel calls a small model leaves out), on upstreams that continue a final
    /// assistant message (`prefill`); 0 turns it off.
    pub continue_calls: u32,
    /// Whether a call read from a reply's text whose required arguments hold a number or a
    /// short string given nowhere is dropped as a guess, under `tool_choice: auto` (a reply
    /// left with nothing is asked for again without tools), and an optional value the user
    /// stated and the call left out is added.
    pub check_grounding: bool,
    /// With `check_grounding`, a native reply that opens with a call the model gave lower
    /// odds than this of opening with any call is taken as no call (0 turns it off).
    pub min_call_confidence: f64,
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
    /// Seconds of silence after which a stream gets a keep-alive (an SSE comment, or an
    /// Anthropic `ping`), also before its first event while the reply is held for retries.
    pub stream_keepalive_secs: f64,
    /// Seconds a `/readyz` answer is reused (callers meanwhile share one probe of the
    /// upstreams); 0 probes for every call that did not wait for a probe in flight.
    pub readyz_cache_secs: f64,
    /// Where stored responses live (`[store]`).
    pub store: StoreConfig,
    /// Where traces go (`[traces]`).
    pub traces: TracesConfig,
    /// The request inspector (`[inspect]`).
    pub inspect: InspectConfig,
}

/// Which API the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamApi {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    #[default]
    OpenAi,
    /// Anthropic Messages (`/v1/messages`), without native tools; always emulated.
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
#[derive(Debug, Clone)]
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
    /// Seconds the readiness probe (`GET …/models` at startup and for `/readyz`), and the
    /// model list a client asks for, may take in all.
    pub probe_timeout_secs: f64,
    /// Seconds to read the body of an upstream error status (for its message); the idle
    /// timeout applies too, if shorter.
    pub error_body_timeout_secs: f64,
    /// Constrained decoding in emulation: `auto` (a grammar for llama.cpp servers), `off`,
    /// `llama.cpp`, `vllm` or `sglang`.
    pub constrain: Engine,
    /// Continuing a final assistant message (for parallel calls by continuation): `auto`
    /// (llama.cpp servers), `off`, `llama.cpp`, `vllm` or `sglang`.
    pub prefill: Engine,
}

/// One more upstream (`[upstreams.NAME]`): the endpoint, how it is used, and the models it
/// serves.
#[derive(Debug, Clone, Default)]
pub struct NamedUpstream {
    /// The endpoint, key variable, timeouts and caps, as in `[upstream]`.
    pub upstream: UpstreamConfig,
    /// The mode for its models (default: the top-level `mode`).
    pub mode: Option<Mode>,
    /// The call format for its models (default: the top-level `call_format`).
    pub call_format: Option<CallFormat>,
    /// The client model names it serves: exact names, or patterns with `*` (`claude-*`).
    pub models: Vec<String>,
    /// Client model name → the name the upstream knows (these names are served too).
    pub aliases: BTreeMap<String, String>,
    /// The upstream model name for client names without an alias (default: the client's).
    pub model: Option<String>,
    /// Upstreams to try, in order, when this one cannot be reached or fails with a 5xx
    /// before the reply began.
    pub fallback: Vec<String>,
}

/// One client-visible model.
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
    /// The model name sent upstream (default: the client's name).
    pub upstream: Option<String>,
    /// The mode for this model (default: the top-level `mode`).
    pub mode: Option<Mode>,
    /// The call format for this model (default: the top-level `call_format`).
    pub call_format: Option<CallFormat>,
    /// Calls inside this model's reasoning (default: the top-level `reasoning_calls`).
    pub reasoning_calls: Option<ReasoningCalls>,
    /// The one call format this model's replies are read in, from a format file (a
    /// `response_template`, the `tokenizer_config.json` holding one, or toolshim's rows):
    /// read when the configuration loads.
    pub format_file: Option<FormatFile>,
}

/// A format file, read: its path and the parser settings it gives.
#[derive(Debug, Clone)]
pub struct FormatFile {
    /// The file, as the configuration names it.
    pub path: std::path::PathBuf,
    /// The registry and reasoning setting the file describes.
    pub(crate) parse: toolshim_parse::Config,
}

/// Two format files are the same file: settings compare them by path.
impl PartialEq for FormatFile {
    fn eq(&self, other: &FormatFile) -> bool {
        self.path == other.path
    }
}

impl Eq for FormatFile {}

impl FormatFile {
    /// Reads and loads a format file; the error says why it cannot be used.
    pub fn load(path: std::path::PathBuf) -> Result<FormatFile, String> {
        let text = std::fs::read_to_string(&path)
            .map_err(|err| format!("cannot read `{}`: {err}", path.display()))?;
        let parse = toolshim_parse::Config::format_from_template(&text)
            .map_err(|err| format!("`{}`: {err}", path.display()))?;
        Ok(FormatFile { path, parse })
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: "127.0.0.1:8080".into(),
            api_keys: Vec::new(),
            keys: BTreeMap::new(),
            upstream: UpstreamConfig::default(),
            mode: Mode::Auto,
            call_format: CallFormat::Auto,
            reasoning_calls: ReasoningCalls::Ignore,
            models: BTreeMap::new(),
            upstreams: BTreeMap::new(),
            default_upstream: None,
            native_refusal_secs: 600.0,
            max_retries: 1,
            check_arguments: true,
            native_repair: true,
            continue_calls: 8,
            check_grounding: true,
            min_call_confidence: 0.75,
            body_limit_bytes: 16 << 20,
            drain_timeout_secs: 30.0,
            max_connections: 4096,
            header_read_timeout_secs: 10.0,
            body_read_timeout_secs: 60.0,
            keep_alive_timeout_secs: 60.0,
            stream_keepalive_secs: 10.0,
            readyz_cache_secs: 5.0,
            store: StoreConfig::default(),
            traces: TracesConfig::default(),
            inspect: InspectConfig::default(),
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
            probe_timeout_secs: 10.0,
            error_body_timeout_secs: 10.0,
            constrain: Engine::Auto,
            prefill: Engine::Auto,
        }
    }
}

/// Where a configuration value came from, for the messages that report a problem with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of a config file.
    File { path: String, line: usize },
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag.
    Flag(&'static str),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{path} line {line}"),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// The origin of every value that is not a default, by key (`upstream.url`), and the keys
/// of a file whose values were refused (reported already, so `validate_from` says nothing
/// more of them).
#[derive(Debug, Clone, Default)]
pub struct Origins {
    set: BTreeMap<String, Origin>,
    refused: std::collections::BTreeSet<String>,
}

impl Origins {
    fn set(&mut self, key: &str, origin: Origin) {
        self.refused.remove(key);
        self.set.insert(key.to_owned(), origin);
    }

    /// Where `key` came from, if it was set.
    pub fn of(&self, key: &str) -> Option<&Origin> {
        self.set.get(key)
    }

    /// Whether the file's value of `key`, or of a table holding it, was refused.
    fn refused(&self, key: &str) -> bool {
        self.refused.iter().any(|refused| {
            key.strip_prefix(refused.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
    }

    /// The first key set below `table` (to place a problem of the table on a line).
    fn first_under(&self, table: &str) -> Option<&str> {
        let prefix = format!("{table}.");
        self.set.keys().find(|key| key.starts_with(&prefix)).map(String::as_str)
    }

    /// ` (from …)` for a message about `key`, or nothing for a default.
    fn note(&self, key: &str) -> String {
        self.of(key).map_or_else(String::new, |origin| format!(" (from {origin})"))
    }
}

/// Which layer a set of [`Overrides`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layer {
    /// The `TOOLSHIM_*` environment variables.
    #[default]
    Env,
    /// Command-line flags.
    Flags,
}

/// The keys that the environment and flags can set: key, variable, flag.
const OVERRIDABLE: &[(&str, &str, &str)] = &[
    ("listen", "TOOLSHIM_LISTEN", "--listen"),
    ("upstream.url", "TOOLSHIM_UPSTREAM_URL", "--upstream"),
    ("upstream.api", "TOOLSHIM_UPSTREAM_API", "--upstream-api"),
    ("mode", "TOOLSHIM_MODE", "--mode"),
    ("api_keys", "TOOLSHIM_API_KEYS", "--api-key"),
    ("max_retries", "TOOLSHIM_MAX_RETRIES", "--max-retries"),
    ("store.url", "TOOLSHIM_STORE", "--store"),
];

/// Values that override the file, from the environment or from flags. A value that is
/// present is applied as it is, blank or not: a blank one is a problem `validate` reports
/// with its origin, never a silent default.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub layer: Layer,
    pub listen: Option<String>,
    pub upstream_url: Option<String>,
    pub upstream_api: Option<String>,
    pub mode: Option<String>,
    /// `None`: not given (the file's keys stay); `Some`: these keys, as given.
    pub api_keys: Option<Vec<String>>,
    pub max_retries: Option<String>,
    pub store: Option<String>,
}

impl Overrides {
    /// The overrides in the environment, read through `var` (unset variables are `None`).
    /// `TOOLSHIM_API_KEYS` is split at commas, each key kept as written.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Overrides {
        Overrides {
            layer: Layer::Env,
            listen: var("TOOLSHIM_LISTEN"),
            upstream_url: var("TOOLSHIM_UPSTREAM_URL"),
            upstream_api: var("TOOLSHIM_UPSTREAM_API"),
            mode: var("TOOLSHIM_MODE"),
            api_keys: var("TOOLSHIM_API_KEYS")
                .map(|keys| keys.split(',').map(str::to_owned).collect()),
            max_retries: var("TOOLSHIM_MAX_RETRIES"),
            store: var("TOOLSHIM_STORE"),
        }
    }

    fn origin(&self, key: &str) -> Origin {
        let (env, flag) = OVERRIDABLE
            .iter()
            .find(|(k, _, _)| *k == key)
            .map_or(("TOOLSHIM_*", "--*"), |(_, env, flag)| (*env, *flag));
        match self.layer {
            Layer::Env => Origin::Env(env),
            Layer::Flags => Origin::Flag(flag),
        }
    }
}

impl Config {
    /// Reads a TOML config file (`path` names it in messages). Every problem is reported at
    /// once, each with its line: syntax errors, unknown keys, values of the wrong type.
    pub fn from_toml(text: &str, path: &str) -> Result<(Config, Origins), Vec<String>> {
        let (config, origins, problems) = Config::read_toml(text, path);
        if problems.is_empty() { Ok((config, origins)) } else { Err(problems) }
    }

    /// Reads a TOML config file as far as it can: the configuration from every value that
    /// could be read (defaults elsewhere), and every problem, each with its line. The keys
    /// whose values were refused are marked in the origins, so that `validate_from` can
    /// check the rest without reporting them twice.
    pub fn read_toml(text: &str, path: &str) -> (Config, Origins, Vec<String>) {
        let (document, errors) = toml::de::DeTable::parse_recoverable(text);
        let line_of = |at: usize| text.get(..at).map_or(1, |head| head.matches('\n').count() + 1);
        let mut problems: Vec<String> = errors
            .iter()
            .map(|err| {
                let line = err.span().map_or(1, |span| line_of(span.start));
                format!("{path} line {line}: {}", err.message().trim())
            })
            .collect();
        let mut config = Config::default();
        let mut origins = Origins::default();
        let mut walk = Walk {
            path,
            line_of: &line_of,
            config: &mut config,
            origins: &mut origins,
            problems: &mut problems,
        };
        walk.table(document.get_ref(), &mut Vec::new());
        // In the order of the file (a table's keys are walked in name order).
        problems.sort_by_key(|problem| {
            problem
                .split(" line ")
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0)
        });
        (config, origins, problems)
    }

    /// Applies overrides (the environment first, then flags, so flags win), recording where
    /// each value came from.
    pub fn apply(
        &mut self,
        overrides: &Overrides,
        origins: &mut Origins,
    ) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if let Some(listen) = &overrides.listen {
            self.listen.clone_from(listen);
            origins.set("listen", overrides.origin("listen"));
        }
        if let Some(url) = &overrides.upstream_url {
            self.upstream.url.clone_from(url);
            origins.set("upstream.url", overrides.origin("upstream.url"));
        }
        if let Some(api) = &overrides.upstream_api {
            let origin = overrides.origin("upstream.api");
            match UpstreamApi::parse(api) {
                Some(api) => self.upstream.api = api,
                None => problems.push(format!(
                    "upstream.api: `{api}` is not one of openai, anthropic (from {origin})"
                )),
            }
            origins.set("upstream.api", origin);
        }
        if let Some(mode) = &overrides.mode {
            let origin = overrides.origin("mode");
            match Mode::parse(mode) {
                Some(mode) => self.mode = mode,
                None => problems.push(format!(
                    "mode: `{mode}` is not one of emulate, native, auto (from {origin})"
                )),
            }
            origins.set("mode", origin);
        }
        if let Some(keys) = &overrides.api_keys {
            self.api_keys.clone_from(keys);
            origins.set("api_keys", overrides.origin("api_keys"));
        }
        if let Some(text) = &overrides.max_retries {
            let origin = overrides.origin("max_retries");
            match text.trim().parse() {
                Ok(n) => self.max_retries = n,
                Err(_) => problems
                    .push(format!("max_retries: `{text}` is not a whole number (from {origin})")),
            }
            origins.set("max_retries", origin);
        }
        if let Some(url) = &overrides.store {
            self.store.url.clone_from(url);
            origins.set("store.url", overrides.origin("store.url"));
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// Every problem at once, each naming its key.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        self.validate_from(&Origins::default())
    }

    /// Every problem at once, each naming its key and where the value came from.
    pub fn validate_from(&self, origins: &Origins) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, text: String| {
            if !origins.refused(key) {
                problems.push(format!("{key}: {text}{}", origins.note(key)));
            }
        };
        if let Err(text) = listen_address(&self.listen) {
            problem("listen", text);
        }
        if let Some(text) = self.store.problem() {
            problem("store.url", text);
        }
        let url = self.upstream.url.trim();
        if url.is_empty() && self.upstreams.is_empty() {
            problem(
                "upstream.url",
                "missing; pass --upstream URL or set it in the config file".into(),
            );
        }
        for (name, upstream) in self.upstream_configs() {
            let prefix =
                if name == LEGACY { "upstream".to_owned() } else { format!("upstreams.{name}") };
            if upstream.url.trim().is_empty() {
                problem(&format!("{prefix}.url"), "missing".into());
            } else if let Err(text) = endpoints(upstream.url.trim(), upstream.api) {
                problem(
                    &format!("{prefix}.url"),
                    text.trim_start_matches("upstream.url: ").to_owned(),
                );
            }
            for (key, value) in [
                ("connect_timeout_secs", upstream.connect_timeout_secs),
                ("first_byte_timeout_secs", upstream.first_byte_timeout_secs),
                ("idle_timeout_secs", upstream.idle_timeout_secs),
                ("probe_timeout_secs", upstream.probe_timeout_secs),
                ("error_body_timeout_secs", upstream.error_body_timeout_secs),
            ] {
                if !(value.is_finite() && value > 0.0) {
                    problem(
                        &format!("{prefix}.{key}"),
                        format!("must be a positive number of seconds, not {value}"),
                    );
                }
            }
            for (key, value) in [
                ("max_reply_bytes", upstream.max_reply_bytes),
                ("max_line_bytes", upstream.max_line_bytes),
            ] {
                if value < 1024 {
                    problem(
                        &format!("{prefix}.{key}"),
                        format!("must be at least 1024, not {value}"),
                    );
                }
            }
        }
        for text in self.route_problems() {
            let (key, text) = text.split_once(": ").unwrap_or(("upstreams", text.as_str()));
            problem(key, text.to_owned());
        }
        for (key, value) in [
            ("drain_timeout_secs", self.drain_timeout_secs),
            ("header_read_timeout_secs", self.header_read_timeout_secs),
            ("body_read_timeout_secs", self.body_read_timeout_secs),
            ("keep_alive_timeout_secs", self.keep_alive_timeout_secs),
            ("stream_keepalive_secs", self.stream_keepalive_secs),
        ] {
            if !(value.is_finite() && value > 0.0) {
                problem(key, format!("must be a positive number of seconds, not {value}"));
            }
        }
        if !(self.readyz_cache_secs.is_finite() && self.readyz_cache_secs >= 0.0) {
            problem(
                "readyz_cache_secs",
                format!(
                    "must be 0 or a positive number of seconds, not {}",
                    self.readyz_cache_secs
                ),
            );
        }
        // Zero: refusals are not remembered.
        if !(self.native_refusal_secs.is_finite() && self.native_refusal_secs >= 0.0) {
            problem(
                "native_refusal_secs",
                format!(
                    "must be 0 or a positive number of seconds, not {}",
                    self.native_refusal_secs
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.min_call_confidence) {
            let value = self.min_call_confidence;
            problem("min_call_confidence", format!("must be from 0 to 1, not {value}"));
        }
        if self.max_retries > 10 {
            problem("max_retries", format!("{} is more than the allowed 10", self.max_retries));
        }
        if self.body_limit_bytes < 1024 {
            problem(
                "body_limit_bytes",
                format!("must be at least 1024, not {}", self.body_limit_bytes),
            );
        }
        if self.max_connections == 0 {
            problem("max_connections", "must be at least 1".into());
        }
        let n_keys = self.api_keys.len();
        for (i, key) in self.api_keys.iter().enumerate() {
            let which = if n_keys == 1 {
                "the key".to_owned()
            } else {
                format!("key {} of {n_keys}", i + 1)
            };
            if key.trim().is_empty() {
                problem(
                    "api_keys",
                    format!("{which} is blank; a blank key would turn authentication off"),
                );
            } else if key.trim() != key {
                problem(
                    "api_keys",
                    format!(
                        "{which} has white space around it, so no client could send it; remove the spaces"
                    ),
                );
            }
        }
        let mut secrets: BTreeMap<String, &str> = BTreeMap::new();
        for (name, key) in &self.keys {
            // A problem of the table is placed on the line of its secret, or of its first key.
            let table = format!("keys.{name}");
            let at = match (key.key.is_empty(), key.key_env.is_empty()) {
                (true, false) => format!("{table}.key_env"),
                (false, _) => format!("{table}.key"),
                (true, true) => origins.first_under(&table).unwrap_or(&table).to_owned(),
            };
            if let Some(text) = keys::name_problem(name) {
                problem(&at, text);
            }
            match key.secret(|var| std::env::var(var).ok()) {
                Ok(secret) if secret.trim() != secret => {
                    problem(&at, "has white space around it, so no client could send it".into());
                }
                Ok(secret) => {
                    let other = if self.api_keys.contains(&secret) {
                        Some("one of api_keys".to_owned())
                    } else {
                        secrets.get(&secret).map(|other| format!("keys.{other}'s"))
                    };
                    if let Some(other) = other {
                        problem(&at, format!("its secret is also {other}; each key needs its own"));
                    }
                    secrets.insert(secret, name);
                }
                Err(text) => problem(&at, text),
            }
        }
        let admin = self.keys.values().any(|key| key.admin);
        for (key, text) in self.inspect.problems(admin) {
            problem(key, text);
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// Whether clients must send a key (`api_keys` or `[keys.NAME]` set).
    pub fn auth_on(&self) -> bool {
        !self.api_keys.is_empty() || !self.keys.is_empty()
    }

    pub(crate) fn secs(value: f64) -> Duration {
        Duration::from_secs_f64(value.clamp(0.001, 86_400.0))
    }
}

/// The name the `[upstream]` table has among the upstreams.
pub(crate) const LEGACY: &str = "default";

/// The upstreams as a whole: their names, and the names the routes use.
impl Config {
    /// Every upstream by name: the `[upstream]` table as `default` (when it has a URL), and
    /// each `[upstreams.NAME]`.
    pub(crate) fn upstream_configs(&self) -> Vec<(String, &UpstreamConfig)> {
        let mut all = Vec::new();
        if !self.upstream.url.trim().is_empty() {
            all.push((LEGACY.to_owned(), &self.upstream));
        }
        all.extend(self.upstreams.iter().map(|(name, named)| (name.clone(), &named.upstream)));
        all
    }

    /// The problems with the upstream names the routes use.
    pub(crate) fn route_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let known: Vec<String> =
            self.upstream_configs().into_iter().map(|(name, _)| name).collect();
        if self.upstreams.contains_key(LEGACY) && !self.upstream.url.trim().is_empty() {
            problems.push(format!(
                "upstreams.{LEGACY}: the name is taken by the [upstream] table; name this upstream otherwise"
            ));
        }
        if let Some(name) = &self.default_upstream {
            if !known.contains(name) {
                problems.push(format!(
                    "default_upstream: no upstream is named `{name}`; the upstreams are: {}",
                    known.join(", ")
                ));
            }
        }
        for (name, named) in &self.upstreams {
            for fallback in &named.fallback {
                if !known.contains(fallback) {
                    problems.push(format!(
                        "upstreams.{name}.fallback: no upstream is named `{fallback}`"
                    ));
                }
            }
            if named.models.iter().any(String::is_empty) {
                problems.push(format!("upstreams.{name}.models: a model name is empty"));
            }
            if named.models.is_empty()
                && named.aliases.is_empty()
                && self.default_upstream.as_deref() != Some(name)
            {
                problems.push(format!(
                    "upstreams.{name}: serves no model; list them in `models` (patterns like claude-* work), or make it the default_upstream"
                ));
            }
        }
        problems
    }
}

/// The chat endpoint and the models URL for a configured upstream URL: a base URL (`…` or
/// `…/v1`) gets `/v1/chat/completions` or `/v1/messages`; a URL that already ends with the
/// endpoint's path is used as it is.
pub(crate) fn endpoints(url: &str, api: UpstreamApi) -> Result<(Url, Url), String> {
    let mut base = Url::parse(url.trim())
        .map_err(|err| format!("upstream.url: `{url}` is not a URL ({err})"))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(format!("upstream.url: `{url}` must start with http:// or https://"));
    }
    let (own, other) = match api {
        UpstreamApi::OpenAi => ("/chat/completions", "/messages"),
        UpstreamApi::Anthropic => ("/messages", "/chat/completions"),
    };
    let path = base.path().trim_end_matches('/').to_owned();
    if path.ends_with(other) {
        let fixed = path.trim_end_matches(other);
        return Err(format!(
            "upstream.url: `{url}` is a {} endpoint but upstream.api is {}; set upstream.api to match, or use the base URL `{}`",
            if other == "/messages" { "Messages" } else { "Chat Completions" },
            match api {
                UpstreamApi::OpenAi => "openai",
                UpstreamApi::Anthropic => "anthropic",
            },
            {
                let mut b = base.clone();
                b.set_path(fixed);
                b
            }
        ));
    }
    let root = if let Some(root) = path.strip_suffix(own) {
        root.to_owned()
    } else if path.ends_with("/v1") {
        path.clone()
    } else {
        format!("{path}/v1")
    };
    let mut endpoint = base.clone();
    endpoint.set_path(&format!("{root}{own}"));
    base.set_path(&format!("{root}/models"));
    Ok((endpoint, base))
}

/// Checks a listen address: `host:port`, where the host is an IP address or a name
/// (`localhost`) and the port a number from 0 to 65535.
fn listen_address(listen: &str) -> Result<(), String> {
    if listen.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let Some((host, port)) = listen.rsplit_once(':') else {
        return Err(format!("`{listen}` is not an address like 127.0.0.1:8080 or localhost:8080"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "`{listen}` has no valid port: `{port}` is not a number from 0 to 65535"
        ));
    }
    let name_ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if !name_ok {
        return Err(format!("`{listen}` is not an address like 127.0.0.1:8080 or localhost:8080"));
    }
    Ok(())
}

mod inspect;
mod keys;
mod store;
mod traces;
mod walk;
pub use inspect::InspectConfig;
pub use keys::KeyConfig;
pub use store::StoreConfig;
pub use traces::TracesConfig;
use walk::Walk;

#[cfg(test)]
mod tests;
