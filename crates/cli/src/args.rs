//! The command line: one `clap` derive tree, no behaviour.

use std::{num::NonZeroUsize, path::PathBuf};

use clap::{Args, Parser, Subcommand};

/// Turns the tool calls that language models write as text into exact JSON calls.
#[derive(Debug, Parser)]
#[command(name = "toolshim", version, subcommand_required = true, arg_required_else_help = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// One variant per subcommand; `cmd::run` dispatches on it.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    Parse(ParseArgs),
    Serve(ServeArgs),
    Health(HealthArgs),
}

/// Ask a running gateway whether it is ready, for a container's health check
///
/// Sends `GET URL` (a gateway's `/readyz` by default) and prints the answer. Exits 0 when
/// it is a 2xx (ready, or degraded with an upstream still answering), 1 otherwise or when
/// nothing answers within the timeout. Plain HTTP only: it is meant for the gateway on its
/// own host (`HEALTHCHECK` in deploy/Dockerfile, a Kubernetes exec probe).
#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The URL to ask
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/readyz")]
    pub(crate) url: String,

    /// Seconds to wait for the whole answer
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub(crate) timeout: f64,
}

/// Serve the OpenAI, Anthropic, Gemini and Ollama APIs, giving a chat-only model tool calling
///
/// Listens for OpenAI Chat Completions (`POST /v1/chat/completions`) and Responses
/// (`/v1/responses`), Anthropic Messages (`/v1/messages`), Gemini
/// (`/v1beta/models/NAME:generateContent`, `:streamGenerateContent`) and Ollama (`/api/chat`,
/// `/api/generate`) requests, streaming or not, and forwards them to an upstream
/// OpenAI-compatible (or Anthropic) chat endpoint (llama.cpp server, Ollama, vLLM, LM Studio,
/// a hosted API). In `emulate` mode the tools are described in the
/// prompt, earlier calls and results are rendered as text, the reply is parsed for tool calls
/// in any dialect, `tool_choice` is enforced, bad replies are retried, and the client gets real
/// `tool_calls`. `native` sends the tools to the upstream natively; `auto` (the default) tries
/// native and falls back to emulation when the upstream rejects tools, on every API
/// (the other APIs' requests are translated to Chat Completions with their tools).
/// Also serves `GET /v1/models`,
/// `GET /healthz` (liveness), `GET /readyz` (the upstream answers) and `GET /metrics`. The first
/// line on standard error is
/// `toolshim: listening on http://ADDR`. SIGINT or SIGTERM stops it after in-flight requests
/// finish (up to `drain_timeout_secs`).
#[derive(Debug, Args)]
#[command(after_help = SERVE_AFTER_HELP)]
pub(crate) struct ServeArgs {
    /// Base URL of the upstream chat endpoint, e.g. http://127.0.0.1:8081 or https://host/v1
    #[arg(long, value_name = "URL")]
    pub(crate) upstream: Option<String>,

    /// The API the upstream speaks: openai (Chat Completions) or anthropic (Messages) [default: openai]
    #[arg(long, value_name = "API")]
    pub(crate) upstream_api: Option<String>,

    /// Address to listen on, `HOST:PORT` with an IP or a name (`localhost:8080`) [default: 127.0.0.1:8080]; port 0 picks a free port
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,

    /// A TOML config file (flags and environment override it)
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// How requests with tools get tool calling, on every API: emulate, native or auto
    /// (native first, emulated when the upstream refuses tools) [default: auto]
    #[arg(long, value_name = "MODE")]
    pub(crate) mode: Option<String>,

    /// A gateway API key that clients must send as `Authorization: Bearer KEY` (repeatable)
    #[arg(long = "api-key", value_name = "KEY")]
    pub(crate) api_keys: Vec<String>,

    /// How many times a bad emulated reply is asked for again [default: 1]
    #[arg(long, value_name = "N")]
    pub(crate) max_retries: Option<u32>,

    /// Where the Responses API keeps stored responses (`store: true`, for
    /// previous_response_id and item references): auto (a file in the state directory,
    /// ~/.local/state/toolshim/responses.db), memory, off, sqlite:PATH, or redis://HOST:PORT
    /// (shared by replicas, with the limits of named keys) [default: auto]
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,

    /// Threads that serve requests, 1 to 1024 [default: one per CPU the process may use]
    ///
    /// On a small host shared with other work (or the model), 1 answers a lone client faster
    /// (no handing a request between threads) and many clients at once slower
    /// (docs/operations.md measures both).
    #[arg(long, value_name = "N", value_parser = workers)]
    pub(crate) workers: Option<NonZeroUsize>,
}

/// Print the tool calls, text and warnings in one model output as JSON
///
/// Reads one model output (the raw text a language model produced) from FILE or standard
/// input, finds the tool calls in it in whatever syntax the model used (`<tool_call>` tags,
/// bare JSON, fenced blocks, …), and prints one JSON object: the calls with their arguments as
/// canonical JSON, the remaining visible text, the reasoning, calls to tools that are not in
/// the tool list, and warnings about anything repaired or left unused. Model output never
/// makes this command fail: text that is not a usable call stays in "content".
#[derive(Debug, Args)]
#[command(after_help = PARSE_AFTER_HELP)]
pub(crate) struct ParseArgs {
    /// File holding the model output; `-` or no FILE reads standard input
    #[arg(value_name = "FILE")]
    pub(crate) input: Option<PathBuf>,

    /// The tools the model was offered: an OpenAI or Anthropic `tools` array
    ///
    /// A JSON file holding an OpenAI `tools` array (`[{"type":"function","function":{…}}]`) or
    /// an Anthropic `tools` array (`[{"name":…,"input_schema":{…}}]`); the kind is detected.
    /// Call names are matched to these tools (forgiving case, `functions.` prefixes and
    /// `-`/`_` slips), argument values at every depth are coerced to their schema's types
    /// ("3" to 3, 12 to 12.0 for a number, 25 to "25" for a string; each is a "coerced"
    /// warning naming where), and calls to any other tool are listed under "rejected". Without
    /// --tools every name is accepted as written.
    #[arg(long, value_name = "FILE")]
    pub(crate) tools: Option<PathBuf>,

    /// Feed the input to the streaming parser N characters at a time
    ///
    /// Splits the input into chunks of N characters (never inside a character), feeds them to
    /// the streaming parser one by one as a live stream would arrive, and prints the object
    /// folded from its events. The result is the same as without --chunk-size; use it to
    /// check streaming. With --events, each chunk's events are printed as they come.
    #[arg(long, value_name = "N", value_parser = chunk_size)]
    pub(crate) chunk_size: Option<NonZeroUsize>,

    /// Print the streaming parser's events as JSON lines instead of the object
    ///
    /// One event per line, each with a "type": "text", "reasoning", "call_start",
    /// "args_delta" (a fragment of the call's arguments JSON), "call_end" (the finished call),
    /// "rejected" or "warning". The whole input is one chunk unless --chunk-size is given.
    #[arg(long)]
    pub(crate) events: bool,

    /// Pretty-print the object with 2-space indentation (event lines stay one per line)
    #[arg(long)]
    pub(crate) pretty: bool,

    /// Remove the text of calls to unknown tools from "content"
    ///
    /// By default the text of a call to a tool that is not in --tools stays in "content", so
    /// nothing is lost; with --hide-rejected it is removed and only listed under "rejected".
    #[arg(long)]
    pub(crate) hide_rejected: bool,

    /// Which call dialects to look for, in order of precedence (comma-separated ids)
    ///
    /// Ids: markup, fenced, python, keyvalue, react, json, free_text. The default is every one
    /// but free_text, in that order. Dialects not listed are off; when two could start at the
    /// same byte, the one listed first reads it.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub(crate) dialects: Vec<String>,

    /// Read only this model-native format (an id like `deepseek_v3` or a catalog id like `F24`)
    ///
    /// Without it every format is recognized from the text itself. `--list-formats` prints the
    /// ids.
    #[arg(long, value_name = "ID", conflicts_with_all = ["dialects", "model", "format_file"])]
    pub(crate) format: Option<String>,

    /// Read only the format a format file describes: a Hugging Face `response_template`
    /// (bare, or the model's `tokenizer_config.json` holding one) or toolshim's own rows as
    /// JSON or TOML (`--export-format` writes them)
    ///
    /// What the parser cannot express is an error naming the template's field.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dialects", "model"])]
    pub(crate) format_file: Option<PathBuf>,

    /// Print a catalogued format (an id or catalog id, or `default` for every format at once)
    /// as a format file of toolshim's rows, then exit
    #[arg(long, value_name = "ID")]
    pub(crate) export_format: Option<String>,

    /// Read the format this model writes, from a table of common model ids (`--list-formats`)
    ///
    /// Matched as a case-insensitive substring (`Qwen/Qwen3-Coder-30B` → qwen3_coder). An
    /// unknown model keeps auto-detection.
    #[arg(long, value_name = "NAME", conflicts_with = "dialects")]
    pub(crate) model: Option<String>,

    /// Print the model-native formats (id, catalog id, support, models) and the model table,
    /// then exit
    #[arg(long)]
    pub(crate) list_formats: bool,

    /// Also read calls written between two custom markers, with a JSON body (repeatable)
    ///
    /// `--tag-pair '<my_call>' '</my_call>'` reads `<my_call>{"name":…,"arguments":{…}}</my_call>`.
    /// Custom pairs come before the built-in dialects.
    #[arg(long, value_names = ["START", "END"], num_args = 2, action = clap::ArgAction::Append)]
    pub(crate) tag_pair: Vec<String>,

    /// Guess a call from plain prose ("call get_weather with city Paris") as a last resort
    ///
    /// Needs --tools; used only when the output holds no other call; the prose stays in
    /// "content" and a "free_text" warning says the call was guessed.
    #[arg(long)]
    pub(crate) free_text: bool,

    /// The prompt opened a `<think>` block: the output starts inside reasoning
    #[arg(long)]
    pub(crate) reasoning_open: bool,

    /// Use calls written inside `<think>` reasoning (by default they stay reasoning, with a
    /// "call_in_reasoning" warning)
    #[arg(long)]
    pub(crate) reasoning_calls: bool,

    /// Read calls that are presented as examples (after "for example", in inline code, in a
    /// Python program); by default they stay text with an "example" warning
    #[arg(long)]
    pub(crate) no_example_guard: bool,

    /// Add an agent-loop "outcome": NAMES are the tools that end the loop (comma-separated)
    ///
    /// For agent workers. NAMES (comma-separated, repeatable) are exit tools such as
    /// `finish,give_up`: their calls are signals that end the loop, not calls that need a tool
    /// result. The normal tools are the ones in --tools; without --tools every other accepted
    /// call is normal. Exit tools missing from --tools are added to it without a schema, so
    /// their calls are accepted. Adds an "outcome" object (see below): "calls" with the calls
    /// to run and the exit calls apart, "text" for a plain answer, or "failed" when unknown
    /// tools were called or tool-call syntax yielded no call, with the input kept verbatim in
    /// "raw". Names are compared exactly with the parsed call names, so without --tools a
    /// misspelled exit tool counts as a normal call. The exit code stays 0. Not with --events.
    #[arg(
        long = "exit-tools",
        value_name = "NAMES",
        value_delimiter = ',',
        conflicts_with = "events"
    )]
    pub(crate) exit_tools: Vec<String>,
}

const SERVE_AFTER_HELP: &str = "\
Environment (overridden by flags):
  TOOLSHIM_UPSTREAM_URL      the upstream base URL (like --upstream)
  TOOLSHIM_UPSTREAM_API      like --upstream-api
  TOOLSHIM_UPSTREAM_API_KEY  the upstream's API key (Bearer for openai, x-api-key for anthropic)
  TOOLSHIM_LISTEN            like --listen
  TOOLSHIM_MODE              like --mode
  TOOLSHIM_API_KEYS          comma-separated gateway keys (like --api-key)
  TOOLSHIM_MAX_RETRIES       like --max-retries
  TOOLSHIM_STORE             like --store
  TOOLSHIM_CONFIG            the config file, when --config is not given
  TOOLSHIM_WORKERS           like --workers
  OTEL_EXPORTER_OTLP_ENDPOINT  a collector's OTLP/HTTP base URL: traces are sent there
                             (also OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SERVICE_NAME,
                             OTEL_EXPORTER_OTLP_HEADERS; docs/operations.md)
  RUST_LOG                   log filter, e.g. info or toolshim_gateway=debug

Config file keys (every problem in a file is reported at once, with its line; a problem with
a value names where it came from: the file and line, the variable or the flag):
  listen, api_keys, mode (emulate, native or auto [auto], on every API; an anthropic
  upstream is always emulated), call_format (auto, tool_call, json, xml, mistral, llama or
  qwen3_coder [auto]: how the prompt asks for calls; auto picks the syntax the model's chat
  template teaches, from the model name or llama.cpp's /props; replies are parsed in every
  dialect), reasoning_calls (ignore or allow [ignore]:
  whether calls inside reasoning count), max_retries [1], check_arguments (true or false
  [true]: an emulated call's arguments are checked against the tool's schema; one that does
  not fit is asked for again, one to a strict tool never goes out), native_repair (true or
  false [true]: in native and auto modes, calls the upstream left in its text become calls),
  continue_calls [8] (the most calls a continuation may add: a reply whose calls were read
  from its text is continued from the opening of another call, for the parallel calls a
  small model leaves out; a continued call is kept only if the user asked for what it
  names; 0: off), check_grounding (true or false [true]: under tool_choice auto, a call
  whose required arguments hold a number, or a short name or date, given nowhere is dropped
  as a guess, and a reply left with nothing is asked for again without tools; an optional
  value the user plainly stated and the call left out is added),
  min_call_confidence [0.75] (with check_grounding, from llama.cpp's server or an engine in
  upstream.prefill: a native reply that opens with a call the model gave lower odds than
  this of being one is taken as no call; 0: off), body_limit_bytes [16 MiB],
  drain_timeout_secs [30]
  connection limits: max_connections [4096, lowered to fit `ulimit -n`],
  header_read_timeout_secs [10], body_read_timeout_secs [60], keep_alive_timeout_secs [60],
  stream_keepalive_secs [10], readyz_cache_secs [5]
  [upstream] url, api (openai or anthropic), api_key_env, connect_timeout_secs [10],
  first_byte_timeout_secs [300], idle_timeout_secs [120], probe_timeout_secs [10] (readiness
  and the model list), error_body_timeout_secs [10], max_reply_bytes [16 MiB],
  max_line_bytes [4 MiB], constrain (auto, off, llama.cpp, vllm or sglang [auto]: a forced
  tool choice is decoded under a grammar of the tools' schemas; auto: llama.cpp servers),
  prefill (the same values [auto]: how a final assistant message is continued, for
  continue_calls; auto: llama.cpp servers)
  [models.NAME] upstream (the name the upstream knows), mode, call_format, reasoning_calls,
  format_file (a response_template or toolshim's rows: its replies are read in that format)
  several upstreams, routed by the client's model name:
  [upstreams.NAME] the [upstream] keys, plus models (exact names or patterns such as
  claude-*), aliases (a table: client name = upstream name), model, mode, call_format,
  fallback (upstreams tried when this one is down or fails with a 5xx);
  default_upstream (serves the names no upstream lists; else they are a 404),
  native_refusal_secs [600] (how long an upstream's refusal of native tools in auto mode, or
  of response_format, is remembered per model; 0: not at all)
  [store] url (like --store), ttl_secs [2592000: 30 days], max_bytes [1 GiB; the oldest
  responses go first]
  [keys.NAME] a named gateway key: key (the secret) or key_env (a variable holding it),
  models (names or patterns it may use), rpm, tpm, tpd, concurrent (limits; a 429 with
  retry-after past one, shared by replicas through a redis:// store), admin (may read
  /admin/usage: usage per key and model)
  [traces] endpoint (a collector's OTLP/HTTP base URL; the OTEL_* variables win),
  service_name [toolshim]
  [inspect] enabled [false] (keep the last requests, each attempt's prompt, raw text, parse
  and verdict, at /inspect for an admin key: open it in a browser, the key as password),
  requests [200], max_bytes [32 MiB]
See docs/config.md for every key with an example, docs/security.md for what each limit
protects against, and docs/operations.md for keys, limits, usage and metrics.

Example:
  toolshim serve --upstream http://127.0.0.1:8081 --mode emulate
  curl http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' \\
    -d '{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'

Exit codes: 0 after a clean shutdown, 2 for an invalid configuration or usage, 1 when the
server fails (for example, the address is in use), 3 when a shutdown had to cut off requests
still in flight after drain_timeout_secs (streams got an in-band error, others a 503).";

const PARSE_AFTER_HELP: &str = "\
Output (one line, keys always in this order):
  {\"calls\":[{\"id\":null|\"…\",\"name\":\"…\",\"arguments\":{…}}],\"incomplete\":[…],\"content\":\"…\",
   \"reasoning\":\"…\",\"rejected\":[{\"name\":\"…\",\"reason\":\"…\"}],
   \"warnings\":[{\"code\":\"…\",\"message\":\"…\"}],\"saw_tool_syntax\":true|false}
  \"incomplete\" holds calls the output cut off inside their arguments (a \"truncated\" warning
  says so), or whose arguments were not JSON (their text stays in \"content\"; a
  \"malformed_call\" warning says so): never run them. Whitespace a template writes around
  calls is not content.
  With --exit-tools, one more key, \"outcome\", last; its calls are objects like those in \"calls\":
  {\"kind\":\"calls\",\"calls\":[…calls that need a tool result…],\"exits\":[…exit calls…]}
  {\"kind\":\"text\"}                             no tool-call syntax: a plain answer
  {\"kind\":\"failed\",\"reason\":\"unknown_tools\"|\"no_call_parsed\",\"message\":\"…\",
   \"unknown_tools\":[\"…\"] (empty for no_call_parsed),\"raw\":\"…the input, verbatim…\"}

Examples:
  toolshim parse examples/hermes.txt --tools examples/tools.json
  echo '<tool_call>{\"name\":\"get_time\",\"arguments\":{\"timezone\":\"UTC\"}}</tool_call>' |
    toolshim parse --chunk-size 3 --events
  toolshim parse examples/hermes.txt --tools examples/tools.json --exit-tools finish,give_up

Exit codes:
  0  success, whatever the model wrote (model output never fails, even with a \"failed\" outcome)
  1  the output could not be written (or an internal error)
  2  usage error: a bad flag, --chunk-size 0, an empty --exit-tools name, an unknown
     --dialects id, an unknown --format, an unreadable or invalid --format-file, an unreadable or
     non-UTF-8 input, or an unreadable or invalid --tools file; the message says what to fix
  A closed standard output (`toolshim parse … | head`) exits 0 quietly.";

fn chunk_size(text: &str) -> Result<NonZeroUsize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| "expected a whole number of characters per chunk, at least 1".to_owned())?;
    NonZeroUsize::new(n).ok_or_else(|| "must be at least 1 character per chunk".to_owned())
}

/// The most threads `--workers` (and `TOOLSHIM_WORKERS`) may ask for.
pub(crate) const MAX_WORKERS: usize = 1024;

/// `--workers` and `TOOLSHIM_WORKERS`: a whole number of threads from 1 to `MAX_WORKERS`.
pub(crate) fn workers(text: &str) -> Result<NonZeroUsize, String> {
    let n: usize = text.trim().parse().map_err(|_| {
        format!("expected a whole number of threads from 1 to {MAX_WORKERS}, not `{text}`")
    })?;
    NonZeroUsize::new(n)
        .filter(|n| n.get() <= MAX_WORKERS)
        .ok_or_else(|| format!("must be from 1 to {MAX_WORKERS} threads, not {n}"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn workers_must_be_a_whole_number_from_one_to_the_cap() {
        assert_eq!(workers("2"), Ok(NonZeroUsize::new(2).unwrap()));
        assert!(workers("0").unwrap_err().contains("from 1 to 1024"));
        assert!(workers("1025").unwrap_err().contains("from 1 to 1024"));
        assert!(workers("two").unwrap_err().contains("not `two`"));
    }

    #[test]
    fn chunk_size_must_be_a_positive_whole_number() {
        assert_eq!(chunk_size("3"), Ok(NonZeroUsize::new(3).unwrap()));
        assert!(chunk_size("0").unwrap_err().contains("at least 1"));
        assert!(chunk_size("-1").unwrap_err().contains("whole number"));
        assert!(chunk_size("x").unwrap_err().contains("whole number"));
    }
}
