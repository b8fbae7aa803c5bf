//! The load scenario's parts: a scripted OpenAI-compatible upstream, a `toolshim serve`
//! child process, a closed-loop HTTP driver that checks every reply, latency
//! percentiles and an RSS sampler.
//!
//! `benches/load.rs` runs the full scenario (`cargo bench -p toolshim --bench load`);
//! the CLI tests include this file and run a few seconds of it for correctness.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use serde_json::{Value, json};

/// The call every scripted reply makes, as the model writes it.
pub(crate) const CALL_TEXT: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";

/// What the scripted upstream answers to every chat request.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    /// The reply's content.
    pub(crate) text: String,
    /// How many content deltas a streamed reply splits it into.
    pub(crate) deltas: usize,
    /// The pause before each streamed event after the first.
    pub(crate) delay: Duration,
}

impl Script {
    /// [`CALL_TEXT`] in `deltas` pieces, `delay` apart.
    pub(crate) fn call(deltas: usize, delay: Duration) -> Script {
        Script { text: CALL_TEXT.to_owned(), deltas, delay }
    }
}

struct Scripted {
    /// Role event, content deltas, finish event, `[DONE]`.
    events: Vec<Bytes>,
    json: Bytes,
    delay: Duration,
    base: Instant,
    /// When the last content delta left, in nanoseconds after `base` (0: not yet).
    last_delta_nanos: AtomicU64,
}

/// The scripted upstream, serving `POST /v1/chat/completions` on `127.0.0.1:0` from a
/// runtime of its own; it stops when dropped.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    scripted: Arc<Scripted>,
    _runtime: tokio::runtime::Runtime,
}

impl Upstream {
    /// Starts serving `script` on `threads` worker threads.
    pub(crate) fn start(script: &Script, threads: usize) -> std::io::Result<Upstream> {
        let scripted = Arc::new(Scripted {
            events: sse_events(script),
            json: Bytes::from(completion(&script.text).to_string()),
            delay: script.delay,
            base: Instant::now(),
            last_delta_nanos: AtomicU64::new(0),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&scripted));
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        runtime.spawn(async move { axum::serve(listener, app).await });
        Ok(Upstream { addr, scripted, _runtime: runtime })
    }

    /// The base URL the gateway is pointed at.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// When the last content delta of the most recent streamed reply left.
    pub(crate) fn last_delta_sent(&self) -> Option<Instant> {
        let nanos = self.scripted.last_delta_nanos.load(Ordering::Relaxed);
        (nanos > 0).then(|| self.scripted.base + Duration::from_nanos(nanos))
    }
}

fn chunk(delta: &Value, finish: Option<&str>) -> Bytes {
    let event = json!({
        "id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0, "model": "load",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Bytes::from(format!("data: {event}\n\n"))
}

fn sse_events(script: &Script) -> Vec<Bytes> {
    let chars: Vec<char> = script.text.chars().collect();
    let per = chars.len().div_ceil(script.deltas.max(1)).max(1);
    let mut events = vec![chunk(&json!({"role": "assistant", "content": ""}), None)];
    for piece in chars.chunks(per) {
        let piece: String = piece.iter().collect();
        events.push(chunk(&json!({"content": piece}), None));
    }
    events.push(chunk(&json!({}), Some("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-load", "object": "chat.completion", "created": 0, "model": "load",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    })
}

async fn chat(State(scripted): State<Arc<Scripted>>, body: Bytes) -> Response {
    let stream = memchr::memmem::find(&body, b"\"stream\":true").is_some()
        || memchr::memmem::find(&body, b"\"stream\": true").is_some();
    if !stream {
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(scripted.json.clone()))
            .unwrap_or_default();
    }
    let last_delta = scripted.events.len().saturating_sub(3);
    let events = futures::stream::unfold(0usize, move |i| {
        let scripted = Arc::clone(&scripted);
        async move {
            let event = scripted.events.get(i)?.clone();
            if i > 0 && !scripted.delay.is_zero() {
                tokio::time::sleep(scripted.delay).await;
            }
            if i == last_delta {
                let nanos = u64::try_from(scripted.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
                scripted.last_delta_nanos.store(nanos.max(1), Ordering::Relaxed);
            }
            Some((Ok::<_, Infallible>(event), i + 1))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap_or_default()
}

/// A `toolshim serve --mode emulate` child process in front of an upstream; killed when
/// dropped.
pub(crate) struct Gateway {
    pub(crate) addr: SocketAddr,
    child: Child,
}

impl Gateway {
    /// Starts `bin serve` on `127.0.0.1:0` and waits for its "listening" line. Its log
    /// (the default `info` unless `RUST_LOG` says otherwise) is read and dropped.
    pub(crate) fn start(bin: &Path, upstream: &str) -> std::io::Result<Gateway> {
        Gateway::start_with(bin, upstream, &[], None)
    }

    /// Like `start`, with more arguments, and under a file-descriptor limit (`ulimit -n`,
    /// through `sh`) when one is given.
    pub(crate) fn start_with(
        bin: &Path,
        upstream: &str,
        extra: &[&str],
        fd_limit: Option<u32>,
    ) -> std::io::Result<Gateway> {
        let mut args =
            vec!["serve", "--mode", "emulate", "--listen", "127.0.0.1:0", "--upstream", upstream];
        args.extend_from_slice(extra);
        let mut command = match fd_limit {
            Some(limit) => {
                let mut command = Command::new("sh");
                command.arg("-c").arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\"")).arg(bin);
                command
            }
            None => Command::new(bin),
        };
        command.args(&args);
        // Stored responses in memory unless a run names a store: nothing left on disk (a
        // variable, which an older build without a store ignores).
        if !extra.contains(&"--store") {
            command.env("TOOLSHIM_STORE", "memory");
        }
        Gateway::spawn(command)
    }

    /// Runs `command`, a server that reports its address on stderr as `toolshim serve` does
    /// ("toolshim: listening on http://ADDR"), and waits for that line.
    pub(crate) fn spawn(mut command: Command) -> std::io::Result<Gateway> {
        let mut child =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
        let stderr = child.stderr.take().ok_or_else(|| std::io::Error::other("no stderr"))?;
        let mut lines = BufReader::new(stderr).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line?;
            if let Some(rest) = line.strip_prefix("toolshim: listening on http://") {
                addr = rest.trim().parse().ok();
                break;
            }
        }
        let Some(addr) = addr else {
            let _ = child.kill();
            return Err(std::io::Error::other("toolshim serve did not report its address"));
        };
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Gateway { addr, child })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's resident set size in KiB (`/proc/PID/status`), where the OS has one.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time a process has used, user and system (`/proc/PID/stat`, in clock ticks of
/// 10 ms, the Linux default), where the OS has one.
pub(crate) fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after its `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Samples a process's RSS every 20 ms on a thread of its own until [`RssSampler::stop`].
pub(crate) struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    pub(crate) fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_kib(pid).unwrap_or(0)));
        let thread = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kib) = rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        RssSampler { stop, peak, thread: Some(thread) }
    }

    /// Stops sampling; the highest RSS seen, in KiB.
    pub(crate) fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// How a reply is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Through the gateway: one `get_weather` call with `{"city":"Paris","days":3}`.
    Call,
    /// Straight from the upstream: the scripted text.
    Upstream,
    /// A Responses reply (not streamed) whose output is the same call.
    Response,
}

/// One kind of request, sent over and over.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) body: Bytes,
    pub(crate) stream: bool,
    pub(crate) check: Check,
}

impl Target {
    /// A Responses request (not streamed) with the `get_weather` tool to `base`, kept by the
    /// gateway when `store`.
    pub(crate) fn responses(base: &str, store: bool) -> Target {
        let body = json!({
            "model": "load",
            "store": store,
            "input": "What is the weather in Paris for 3 days?",
            "tools": [{"type": "function", "name": "get_weather",
                "description": "Weather forecast for a city",
                "parameters": {"type": "object", "properties": {
                    "city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"]}}],
        });
        Target {
            url: format!("{base}/v1/responses"),
            body: Bytes::from(body.to_string()),
            stream: false,
            check: Check::Response,
        }
    }

    /// A chat request with the `get_weather` tool to `base`.
    pub(crate) fn chat(base: &str, stream: bool, check: Check) -> Target {
        let body = json!({
            "model": "load",
            "stream": stream,
            "messages": [{"role": "user", "content": "What is the weather in Paris for 3 days?"}],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "description": "Weather forecast for a city",
                "parameters": {"type": "object", "properties": {
                    "city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"]}}}],
        });
        Target {
            url: format!("{base}/v1/chat/completions"),
            body: Bytes::from(body.to_string()),
            stream,
            check,
        }
    }
}

/// What a run of the driver saw.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// Time to the first body byte, per successful request.
    pub(crate) ttfb: Vec<Duration>,
    /// Time until the client could know the call's name: through the gateway, its first
    /// `tool_calls` delta; straight from the upstream, the delta that completes the name
    /// in the model's text. Streaming requests only.
    pub(crate) call: Vec<Duration>,
    /// Time to the end of the body, per successful request.
    pub(crate) total: Vec<Duration>,
    pub(crate) elapsed: Duration,
}

impl Outcome {
    pub(crate) fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn merge(&mut self, other: Outcome) {
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.ttfb.extend(other.ttfb);
        self.call.extend(other.call);
        self.total.extend(other.total);
    }

    fn sort(&mut self) {
        self.ttfb.sort_unstable();
        self.call.sort_unstable();
        self.total.sort_unstable();
    }
}

/// The `p`-th percentile (0–100) of sorted samples, nearest rank.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// An HTTP client for `concurrency` connections at once.
pub(crate) fn client(concurrency: usize) -> reqwest::Result<reqwest::Client> {
    #[expect(clippy::disallowed_methods, reason = "the load driver's own client")]
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
}

/// `concurrency` workers send `target` back to back, each starting a new request until
/// `duration` has passed; every reply is checked.
pub(crate) async fn drive(
    client: &reqwest::Client,
    target: &Arc<Target>,
    concurrency: usize,
    duration: Duration,
) -> Outcome {
    let start = Instant::now();
    let deadline = start + duration;
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, target) = (client.clone(), Arc::clone(target));
        #[expect(clippy::disallowed_methods, reason = "workers are joined below")]
        workers.push(tokio::spawn(async move {
            let mut outcome = Outcome::default();
            while Instant::now() < deadline {
                match request(&client, &target).await {
                    Ok(Timing { ttfb, call, total }) => {
                        outcome.ok += 1;
                        outcome.ttfb.push(ttfb);
                        outcome.call.extend(call);
                        outcome.total.push(total);
                    }
                    Err(err) => {
                        outcome.errors += 1;
                        outcome.first_error.get_or_insert(err);
                    }
                }
            }
            outcome
        }));
    }
    let mut outcome = Outcome::default();
    for worker in workers {
        match worker.await {
            Ok(part) => outcome.merge(part),
            Err(err) => {
                outcome.errors += 1;
                outcome.first_error.get_or_insert(err.to_string());
            }
        }
    }
    outcome.elapsed = start.elapsed();
    outcome.sort();
    outcome
}

/// One request's times.
struct Timing {
    ttfb: Duration,
    call: Option<Duration>,
    total: Duration,
}

async fn request(client: &reqwest::Client, target: &Target) -> Result<Timing, String> {
    let start = Instant::now();
    let mut response = client
        .post(&target.url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(target.body.clone())
        .send()
        .await
        .map_err(|err| format!("request failed: {err}"))?;
    let status = response.status();
    let mut body = Vec::new();
    let mut arrivals: Vec<(Duration, usize)> = Vec::new();
    while let Some(piece) = response.chunk().await.map_err(|err| format!("body failed: {err}"))? {
        body.extend_from_slice(&piece);
        arrivals.push((start.elapsed(), body.len()));
    }
    let total = start.elapsed();
    if !status.is_success() {
        return Err(format!("status {status}: {}", String::from_utf8_lossy(&body)));
    }
    check(target, &body)?;
    let ttfb = arrivals.first().map_or(total, |a| a.0);
    let call = if target.stream { name_known_at(target.check, &body) } else { None };
    let call = call.and_then(|at| arrivals.iter().find(|a| a.1 >= at)).map(|a| a.0);
    Ok(Timing { ttfb, call, total })
}

/// The offset in a streamed body just past the event that lets a client know the call's
/// name: the first `tool_calls` delta (gateway), or the content delta that completes
/// `"name": "get_weather"` in the model's text (upstream).
fn name_known_at(check: Check, body: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(body).ok()?;
    match check {
        // Not streamed.
        Check::Response => None,
        Check::Call => {
            let at = text.find("\"tool_calls\"")?;
            Some(at + text.get(at..)?.find("\n\n")? + 2)
        }
        Check::Upstream => {
            let mut content = String::new();
            let mut offset = 0;
            for event in text.split_inclusive("\n\n") {
                offset += event.len();
                let Some(data) = event.strip_prefix("data: ") else { continue };
                let Ok(value) = serde_json::from_str::<Value>(data.trim_end()) else { continue };
                if let Some(piece) = value["choices"][0]["delta"]["content"].as_str() {
                    content.push_str(piece);
                    if content.contains("\"get_weather\"") {
                        return Some(offset);
                    }
                }
            }
            None
        }
    }
}

fn check(target: &Target, body: &[u8]) -> Result<(), String> {
    match (target.check, target.stream) {
        (Check::Upstream, true) => body
            .ends_with(b"data: [DONE]\n\n")
            .then_some(())
            .ok_or_else(|| "the upstream stream did not end with [DONE]".to_owned()),
        (Check::Upstream, false) => {
            let reply: Value = serde_json::from_slice(body).map_err(|err| err.to_string())?;
            (reply["choices"][0]["message"]["content"] == CALL_TEXT)
                .then_some(())
                .ok_or_else(|| "the upstream reply is not the script".to_owned())
        }
        (Check::Response, _) => {
            let reply: Value = serde_json::from_slice(body).map_err(|err| err.to_string())?;
            let output = reply["output"].as_array().map(Vec::as_slice).unwrap_or_default();
            let call = output.iter().find(|item| item["type"] == "function_call");
            let arguments = call
                .and_then(|c| c["arguments"].as_str())
                .and_then(|a| serde_json::from_str::<Value>(a).ok());
            match (call, arguments) {
                (Some(call), Some(arguments))
                    if call["name"] == "get_weather"
                        && arguments == json!({"city": "Paris", "days": 3}) =>
                {
                    Ok(())
                }
                _ => Err(format!("not the call: {reply}")),
            }
        }
        (Check::Call, stream) => {
            let (name, arguments, finish) =
                if stream { streamed_call(body)? } else { completed_call(body)? };
            let arguments: Value = serde_json::from_str(&arguments)
                .map_err(|err| format!("arguments are not JSON ({err}): {arguments}"))?;
            if name != "get_weather"
                || arguments != json!({"city": "Paris", "days": 3})
                || finish != "tool_calls"
            {
                return Err(format!("wrong call: {name} {arguments} finish {finish}"));
            }
            Ok(())
        }
    }
}

fn completed_call(body: &[u8]) -> Result<(String, String, String), String> {
    let reply: Value = serde_json::from_slice(body).map_err(|err| err.to_string())?;
    let choice = &reply["choices"][0];
    let function = &choice["message"]["tool_calls"][0]["function"];
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    Ok((text(&function["name"]), text(&function["arguments"]), text(&choice["finish_reason"])))
}

/// The first call of a streamed Chat Completions reply: its name, its arguments put
/// together from every fragment, and the finish reason; the stream must end in `[DONE]`.
pub(crate) fn streamed_call(body: &[u8]) -> Result<(String, String, String), String> {
    let text = std::str::from_utf8(body).map_err(|err| err.to_string())?;
    let (mut name, mut arguments, mut finish, mut done) =
        (String::new(), String::new(), String::new(), false);
    for data in text.split("\n\n").filter_map(|event| event.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let event: Value = serde_json::from_str(data).map_err(|err| format!("{err}: {data}"))?;
        let choice = &event["choices"][0];
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = reason.to_owned();
        }
        let Some(calls) = choice["delta"]["tool_calls"].as_array() else { continue };
        for call in calls.iter().filter(|call| call["index"] == 0) {
            if let Some(part) = call["function"]["name"].as_str() {
                name.push_str(part);
            }
            if let Some(part) = call["function"]["arguments"].as_str() {
                arguments.push_str(part);
            }
        }
    }
    if !done {
        return Err("the stream did not end with [DONE]".to_owned());
    }
    Ok((name, arguments, finish))
}

/// What streaming one large argument through the gateway cost.
#[derive(Debug)]
pub(crate) struct LargeArgument {
    /// The argument's size in bytes.
    pub(crate) bytes: usize,
    /// From the request to the first byte of the call's arguments at the client.
    pub(crate) first_argument_byte: Duration,
    /// From the request to the end of the reply.
    pub(crate) total: Duration,
    /// How much of the reply the client had when the upstream sent its last content delta.
    pub(crate) share_before_upstream_end: f64,
    /// From the upstream's last content delta to the end of the reply at the client.
    pub(crate) tail: Duration,
}

/// A `write_file` call with a `size`-byte `content`, as the model writes it.
pub(crate) fn write_file_script(size: usize, deltas: usize, delay: Duration) -> Script {
    let line = "fn main() { let answer = 42; } // filler for a large file; ";
    let content: String = line.chars().cycle().take(size).collect();
    let text = format!(
        "<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {{\"path\": \"big.rs\", \"content\": \"{content}\"}}}}\n</tool_call>"
    );
    Script { text, deltas, delay }
}

/// Streams one `write_file` call (from [`write_file_script`]) through `gateway` and
/// checks that its `content` arrives whole and while the upstream is still sending.
pub(crate) async fn large_argument(
    client: &reqwest::Client,
    gateway: &str,
    upstream: &Upstream,
    size: usize,
) -> Result<LargeArgument, String> {
    let body = json!({
        "model": "load", "stream": true,
        "messages": [{"role": "user", "content": "Write big.rs"}],
        "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"},
            "content": {"type": "string"}}, "required": ["path", "content"]}}}],
    });
    let start = Instant::now();
    let mut response = client
        .post(format!("{gateway}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .map_err(|err| err.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let mut received = Vec::new();
    let mut arrivals: Vec<(Instant, usize)> = Vec::new();
    let mut first_argument_byte = None;
    while let Some(piece) = response.chunk().await.map_err(|err| err.to_string())? {
        received.extend_from_slice(&piece);
        arrivals.push((Instant::now(), received.len()));
        if first_argument_byte.is_none()
            && memchr::memmem::find(&received, b"\"arguments\":\"").is_some()
        {
            first_argument_byte = Some(start.elapsed());
        }
    }
    let total = start.elapsed();
    let (name, arguments, finish) = streamed_call(&received)?;
    let arguments: Value = serde_json::from_str(&arguments).map_err(|err| err.to_string())?;
    let content = arguments["content"].as_str().unwrap_or_default();
    if name != "write_file" || content.len() != size || finish != "tool_calls" {
        return Err(format!(
            "wrong call: {name}, {} content bytes, finish {finish}",
            content.len()
        ));
    }
    let upstream_end = upstream.last_delta_sent().ok_or("the upstream never finished")?;
    let before =
        arrivals.iter().take_while(|(at, _)| *at <= upstream_end).last().map_or(0, |a| a.1);
    Ok(LargeArgument {
        bytes: size,
        first_argument_byte: first_argument_byte.unwrap_or(total),
        total,
        share_before_upstream_end: before as f64 / received.len().max(1) as f64,
        tail: (start + total).saturating_duration_since(upstream_end),
    })
}
