//! `toolshim serve` through the binary: configuration problems, help, draining on SIGTERM,
//! keys never logged, attempts without a key.

use super::*;

// ---- serve ----

/// `toolshim serve …` with no TOOLSHIM_* variables from the test's own environment.
pub(crate) fn serve(args: &[&str]) -> TestCommand {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut command = TestCommand::new(&all);
    for var in [
        "TOOLSHIM_UPSTREAM_URL",
        "TOOLSHIM_LISTEN",
        "TOOLSHIM_MODE",
        "TOOLSHIM_API_KEYS",
        "TOOLSHIM_MAX_RETRIES",
        "TOOLSHIM_STORE",
        "TOOLSHIM_CONFIG",
        "TOOLSHIM_WORKERS",
    ] {
        command.cmd.env_remove(var);
    }
    // Stored responses in memory: the tests leave nothing behind.
    command.cmd.env("TOOLSHIM_STORE", "memory");
    command
}

#[test]
fn serve_reports_every_configuration_problem_at_once() {
    let stderr =
        serve(&["--listen", "nowhere", "--mode", "fast", "--max-retries", "99"]).usage_error();
    for key in ["listen:", "mode:", "upstream.url:", "max_retries:"] {
        assert!(stderr.contains(key), "{key} missing from:\n{stderr}");
    }
}

#[test]
fn serve_names_an_unknown_config_key() {
    let dir = scratch_dir("serve_names_an_unknown_config_key");
    let path = write_file(&dir, "toolshim.toml", b"lisen = \"127.0.0.1:1\"\n");
    let stderr = serve(&["--config", &path]).usage_error();
    assert!(stderr.contains("lisen"), "{stderr}");
}

#[test]
fn serve_help_documents_environment_config_and_exit_codes() {
    let help = serve(&["--help"]).ok();
    for needle in [
        "--upstream",
        "--listen",
        "--mode",
        "--api-key",
        "--max-retries",
        "--config",
        "TOOLSHIM_UPSTREAM_API_KEY",
        "call_format",
        "reasoning_calls",
        "native_refusal_secs",
        "[upstreams.NAME]",
        "default_upstream",
        "docs/config.md",
        "Exit codes",
    ] {
        assert!(help.contains(needle), "{needle} missing from serve --help");
    }
}

// ---- serve: shutdown on SIGTERM ----

/// A one-shot upstream on 127.0.0.1:0: answers one chat request with `pieces` streamed as
/// OpenAI SSE, one delta every `every`, then `[DONE]`, and closes. Write errors (the gateway
/// went away) end it quietly.
pub(crate) fn slow_upstream(pieces: Vec<String>, every: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // The gateway's startup probe asks for the model list first: no list here.
        let mut stream = loop {
            let (mut stream, _) = listener.accept().unwrap();
            if read_request(&mut stream).starts_with("get ") {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                continue;
            }
            break stream;
        };
        let chunk = |delta: Value, finish: Value| {
            let chunk = serde_json::json!({"id": "chatcmpl-up", "object": "chat.completion.chunk",
                "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {chunk}\n\n")
        };
        let mut frames = vec![chunk(serde_json::json!({"role": "assistant"}), Value::Null)];
        frames.extend(pieces.iter().map(|p| chunk(serde_json::json!({"content": p}), Value::Null)));
        frames.push(chunk(serde_json::json!({}), serde_json::json!("stop")) + "data: [DONE]\n\n");
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        for frame in frames {
            // The scripted pace of the reply.
            std::thread::sleep(every);
            if stream.write_all(frame.as_bytes()).and_then(|()| stream.flush()).is_err() {
                return;
            }
        }
    });
    addr
}

/// Reads one HTTP/1.1 request (head and `content-length` body) from `stream`; its head, in
/// lower case.
pub(crate) fn read_request(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0; 4096];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the request ended early");
        received.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    while received.len() < head_end + length {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the request body ended early");
        received.extend_from_slice(&buf[..n]);
    }
    head
}

/// A running `toolshim serve` with its address; killed on drop if still running.
pub(crate) struct Server {
    /// `None` once waited for.
    pub(crate) child: Option<std::process::Child>,
    pub(crate) addr: SocketAddr,
    /// Every line the server wrote to standard error so far.
    pub(crate) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Server {
    /// Starts `toolshim serve` against `upstream` with this drain timeout; waits for its address.
    pub(crate) fn start(test: &str, upstream: SocketAddr, drain_secs: f64) -> Server {
        let config = format!("drain_timeout_secs = {drain_secs}\n");
        Server::start_with(
            test,
            &config,
            &["--upstream", &format!("http://{upstream}")],
            &[("RUST_LOG", "warn")],
        )
    }

    /// Starts `toolshim serve --mode emulate` with this config file, more arguments (with
    /// `--listen 127.0.0.1:0` unless they have a `--listen`) and environment; waits for its
    /// address.
    pub(crate) fn start_with(
        test: &str,
        config: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let dir = scratch_dir(test);
        let config = write_file(&dir, "toolshim.toml", config.as_bytes());
        let mut all = vec!["--config", &config, "--mode", "emulate"];
        if !args.contains(&"--listen") {
            all.extend_from_slice(&["--listen", "127.0.0.1:0"]);
        }
        all.extend_from_slice(args);
        let mut command = serve(&all).cmd;
        command.env("RUST_LOG", "warn").stdin(Stdio::null()).stdout(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.stderr(Stdio::piped()).spawn().expect("toolshim starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = std::sync::Arc::clone(&log);
        // Reads stderr to its end, so the pipe never fills; reports the address once.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("toolshim: listening on http://") {
                    let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let addr = rx.recv_timeout(SERVE_DEADLINE).expect("toolshim serve reports its address");
        Server { child: Some(child), addr, log }
    }

    /// The server's standard error so far, one string.
    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits (up to `within`) until the log has a line containing `text`.
    fn wait_log(&self, text: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log().contains(text) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Sends SIGTERM.
    fn terminate(&self) {
        let pid = self.child.as_ref().expect("still running").id();
        let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        assert!(status.unwrap().success(), "kill -TERM failed");
    }

    /// Waits (up to `within`) for the process to exit; its exit code.
    fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let mut child = self.child.take().expect("waited for once");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        rx.recv_timeout(within).ok().map(|status| status.unwrap().code().expect("an exit code"))
    }
}

/// Upper bound for any wait in these tests; a hang fails instead of blocking the run.
pub(crate) const SERVE_DEADLINE: Duration = Duration::from_secs(10);

/// Sends a streaming chat request; returns the connection once the first SSE event arrived,
/// and the bytes read so far.
pub(crate) fn start_stream(addr: SocketAddr) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SERVE_DEADLINE)).unwrap();
    let body =
        r#"{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Count."}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut received = Vec::new();
    let mut buf = [0; 4096];
    while !received.windows(4).any(|w| w == b"\n\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended before its first event");
        received.extend_from_slice(&buf[..n]);
    }
    (stream, received)
}

/// The body of a chunked HTTP/1.1 response, as far as its chunks are complete.
pub(crate) fn chunked_body(response: &[u8]) -> String {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&response[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    let mut rest = &response[head_end..];
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16);
        let size = size.unwrap();
        let Some(chunk) = rest.get(line_end + 2..line_end + 2 + size) else { break };
        body.extend_from_slice(chunk);
        rest = &rest[(line_end + 4 + size).min(rest.len())..];
    }
    String::from_utf8(body).unwrap()
}

/// Tries to connect until the server refuses, or the deadline passes.
pub(crate) fn refuses_connections(addr: SocketAddr) -> bool {
    let deadline = Instant::now() + SERVE_DEADLINE;
    while Instant::now() < deadline {
        match TcpStream::connect(addr) {
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => return true,
            _ => std::thread::yield_now(),
        }
    }
    false
}

/// SIGTERM with a stream in flight: new connections are refused at once, the stream runs to
/// its end (`[DONE]`, every piece of text), and the process exits 0 as soon as it is done,
/// well within its drain timeout.
#[test]
fn serve_drains_streams_on_sigterm() {
    let pieces: Vec<String> = (1..=10).map(|n| format!("{n} ")).collect();
    let upstream = slow_upstream(pieces.clone(), Duration::from_millis(50));
    let mut server = Server::start("serve_drains_streams_on_sigterm", upstream, 20.0);
    let (mut stream, mut received) = start_stream(server.addr);
    let terminated = Instant::now();
    server.terminate();
    assert!(refuses_connections(server.addr), "new connections are still accepted");
    stream.read_to_end(&mut received).unwrap();
    let body = chunked_body(&received);
    assert!(body.ends_with("data: [DONE]\n\n"), "the stream did not finish: {body}");
    let content: String = body
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(content, pieces.concat());
    assert_eq!(server.exit_code(SERVE_DEADLINE), Some(0));
    assert!(terminated.elapsed() < Duration::from_secs(5), "{:?}", terminated.elapsed());
}

/// SIGTERM with a stream that outlasts the drain timeout: once the timeout has passed the
/// stream is cut off with an in-band error, and the process exits 3 (work was cut).
#[test]
fn serve_exits_after_its_drain_timeout_on_sigterm() {
    let pieces: Vec<String> = (1..=100).map(|n| format!("{n} ")).collect();
    let upstream = slow_upstream(pieces, Duration::from_millis(100));
    let mut server = Server::start("serve_exits_after_its_drain_timeout_on_sigterm", upstream, 0.5);
    let (mut stream, mut received) = start_stream(server.addr);
    let terminated = Instant::now();
    server.terminate();
    assert_eq!(server.exit_code(SERVE_DEADLINE), Some(3));
    let elapsed = terminated.elapsed();
    assert!(elapsed >= Duration::from_millis(400), "exited before the drain timeout: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "exited {elapsed:?} after SIGTERM");
    let _ = stream.read_to_end(&mut received);
    let body = chunked_body(&received);
    assert!(!body.contains("[DONE]"), "the stream was cut off: {body}");
    let last = body.trim_end().rsplit("\n\n").next().unwrap_or_default();
    assert!(
        last.starts_with("data: {\"error\"") && last.contains("shutting_down"),
        "the cut stream ends with an in-band error: {body}"
    );
}

// ---- issue 14: safe to expose ----

/// An upstream that answers every request 401 with a body that echoes the key it was sent
/// (as some servers do); GETs get the same.
pub(crate) fn key_echoing_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let head = read_request(&mut stream);
            let key = head
                .lines()
                .find_map(|line| line.strip_prefix("authorization: bearer "))
                .unwrap_or("none")
                .trim()
                .to_owned();
            let body =
                format!(r#"{{"error": {{"message": "Incorrect API key provided: {key}"}}}}"#);
            let response = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    addr
}

/// Sends one non-streaming chat request with this request id; the raw response.
pub(crate) fn chat_once(addr: SocketAddr, request_id: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SERVE_DEADLINE)).unwrap();
    let body = r#"{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: {request_id}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The upstream key never reaches the log, even at debug level and when the upstream's
/// error body echoes it; the failure is logged with the request's id, the upstream URL and
/// the cause, and the client is told that the gateway's own key was refused.
#[test]
fn serve_never_logs_the_upstream_key_and_names_the_cause() {
    let upstream = key_echoing_upstream();
    let key = "sk-test-secret-4c1d9e";
    let server = Server::start_with(
        "serve_never_logs_the_upstream_key_and_names_the_cause",
        "",
        &["--upstream", &format!("http://{upstream}")],
        &[("RUST_LOG", "debug"), ("TOOLSHIM_UPSTREAM_API_KEY", key)],
    );
    let response = chat_once(server.addr, "it-req-7");
    assert!(response.starts_with("HTTP/1.1 502"), "{response}");
    assert!(response.contains("gateway's own credentials"), "{response}");
    assert!(!response.contains(key), "{response}");
    assert!(server.wait_log("request failed", SERVE_DEADLINE), "{}", server.log());
    let log = server.log();
    assert!(!log.contains(key), "the key is in the log:\n{log}");
    let failed = log.lines().find(|line| line.contains("request failed")).unwrap();
    let url = format!("http://{upstream}/v1/chat/completions");
    for part in ["it-req-7", "status 401", &url] {
        assert!(failed.contains(part), "{part} missing from: {failed}");
    }
}

/// At startup the gateway checks the upstream and says, with its URL and the cause, that it
/// cannot be reached; and it warns when it listens beyond loopback without keys.
#[test]
fn serve_warns_at_startup_about_an_unreachable_upstream_and_open_access() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = Server::start_with(
        "serve_warns_at_startup_about_an_unreachable_upstream_and_open_access",
        "",
        &["--upstream", &format!("http://{closed}"), "--listen", "0.0.0.0:0"],
        &[],
    );
    assert!(server.wait_log("cannot be reached", SERVE_DEADLINE), "{}", server.log());
    let log = server.log();
    let line = log.lines().find(|line| line.contains("cannot be reached")).unwrap();
    assert!(line.contains(&format!("http://{closed}/v1/chat/completions")), "{line}");
    assert!(line.contains("connection refused"), "{line}");
    assert!(log.contains("no gateway API keys are set"), "{log}");
}

/// Blank or padded gateway keys refuse to start, naming where they came from; so do bad
/// ports; host names are fine; every problem of a config file comes at once (those of the
/// values that could be read too), each with its line.
#[test]
fn serve_refuses_bad_keys_and_addresses_naming_their_source() {
    // A blank variable, a lone comma (two blank keys) and a blank between keys.
    for (keys, says) in [
        (" ", "the key is blank"),
        (",", "key 1 of 2 is blank"),
        ("sk-a,,sk-b", "key 2 of 3 is blank"),
    ] {
        let mut blank = serve(&["--upstream", "http://127.0.0.1:1"]);
        blank.cmd.env("TOOLSHIM_API_KEYS", keys);
        let stderr = blank.usage_error();
        assert!(
            stderr.contains(&format!("api_keys: {says}"))
                && stderr.contains("(from environment variable TOOLSHIM_API_KEYS)"),
            "{keys:?}: {stderr}"
        );
    }
    let stderr = serve(&["--upstream", "http://127.0.0.1:1", "--api-key", " sk-a"]).usage_error();
    assert!(stderr.contains("white space") && stderr.contains("flag --api-key"), "{stderr}");
    let stderr = serve(&["--upstream", "http://127.0.0.1:1", "--api-key", ""]).usage_error();
    assert!(stderr.contains("blank"), "{stderr}");
    let stderr =
        serve(&["--upstream", "http://127.0.0.1:1", "--listen", "127.0.0.1:70000"]).usage_error();
    assert!(stderr.contains("no valid port") && stderr.contains("flag --listen"), "{stderr}");
    let dir = scratch_dir("serve_refuses_bad_keys_and_addresses_naming_their_source");
    let path = write_file(
        &dir,
        "toolshim.toml",
        b"api_keys = [\"\"]\nmode = \"fast\"\n[upstream]\nurll = \"x\"\n",
    );
    let stderr = serve(&["--config", &path]).usage_error();
    // The values that could be read are checked too: every problem at once.
    for expected in [
        "line 2: mode:",
        "line 4: unknown key `upstream.urll`",
        "api_keys: the key is blank; a blank key would turn authentication off (from ",
        "toolshim.toml line 1)",
    ] {
        assert!(stderr.contains(expected), "{expected} missing from: {stderr}");
    }
    let server = Server::start_with(
        "serve_listens_on_a_host_name",
        "",
        &["--upstream", "http://127.0.0.1:1", "--listen", "localhost:0"],
        &[],
    );
    assert!(server.addr.ip().is_loopback(), "{}", server.addr);
}

/// Attempts to take the gateway down without a key, briefly (the full run is the load
/// bench's `dos` scenario): half-sent heads are closed after the header-read timeout while
/// /healthz answers, idle connections after the keep-alive timeout, unauthenticated 16 MiB
/// bodies get their 401 without being read (RSS stays flat), and a gateway at
/// `ulimit -n 256` with 300 half heads serves /healthz well before they time out.
#[test]
fn serve_withstands_attempts_without_a_key() {
    let bin = Path::new(env!("CARGO_BIN_EXE_toolshim"));
    let script = loadgen::Script::call(2, Duration::ZERO);
    let upstream = loadgen::Upstream::start(&script, 1).unwrap();
    let dir = scratch_dir("serve_withstands_attempts_without_a_key");
    let config = write_file(
        &dir,
        "toolshim.toml",
        b"header_read_timeout_secs = 1\nkeep_alive_timeout_secs = 1\n",
    );
    let extra = ["--api-key", "sk-test", "--config", &config];
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    let gateway = loadgen::Gateway::start_with(bin, &upstream.url(), &extra, None).unwrap();
    let addr = gateway.addr;
    let before = loadgen::rss_kib(gateway.pid()).unwrap();
    let (closed, health) = runtime.block_on(async {
        let streams = dos::open(addr, 100, dos::HALF_HEAD).await;
        let health = dos::health(addr).await;
        (dos::closed_after(streams, Duration::from_secs(5)).await, health)
    });
    assert_eq!(health.0, 200, "/healthz beside 100 half heads");
    assert!(closed.iter().all(|c| c.is_some_and(|t| t < Duration::from_secs(4))), "{closed:?}");
    let closed = runtime.block_on(async {
        let streams = dos::open(addr, 300, b"").await;
        dos::closed_after(streams, Duration::from_secs(5)).await
    });
    assert!(closed.iter().all(Option::is_some), "idle connections stay open");
    let sampler = loadgen::RssSampler::start(gateway.pid());
    let answers = runtime.block_on(dos::unauthenticated_bodies(addr, 10, 16 << 20));
    let peak = sampler.stop();
    assert!(answers.iter().all(|(status, _)| *status == 401), "{answers:?}");
    assert!(peak < before + 16 * 1024, "RSS went from {before} KiB to {peak} KiB");
    drop(gateway);

    // Under the fd limit, with heads that would wait 10 s: /healthz is served well before
    // that, because waiting connections make room for new ones.
    let slow = write_file(&dir, "slow.toml", b"header_read_timeout_secs = 10\n");
    let extra = ["--api-key", "sk-test", "--config", &slow];
    let limited = loadgen::Gateway::start_with(bin, &upstream.url(), &extra, Some(256)).unwrap();
    let addr = limited.addr;
    let served_after = runtime.block_on(async {
        let streams = dos::open(addr, 300, dos::HALF_HEAD).await;
        let started = Instant::now();
        let served = loop {
            if dos::health(addr).await.0 == 200 {
                break Some(started.elapsed());
            }
            if started.elapsed() > Duration::from_secs(3) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        drop(streams);
        served
    });
    let served_after = served_after.expect("/healthz was not served within 3 s of the burst");
    assert!(served_after < Duration::from_secs(2), "/healthz first served after {served_after:?}");
}

/// `--workers` (or `TOOLSHIM_WORKERS`) sets the threads that serve requests: one serves a
/// stream end to end, five are five threads beside the main one; 0, too many or a word is a
/// usage error that names where it came from.
#[test]
fn serve_runs_on_the_workers_asked_for() {
    let upstream = slow_upstream(vec!["Hello".into(), " there".into()], Duration::from_millis(1));
    let one = Server::start_with(
        "serve_runs_on_the_workers_asked_for",
        "",
        &["--upstream", &format!("http://{upstream}"), "--workers", "1"],
        &[],
    );
    let (mut stream, mut received) = start_stream(one.addr);
    stream.read_to_end(&mut received).unwrap();
    let body = chunked_body(&received);
    assert!(body.contains("Hello") && body.contains(" there") && body.contains("[DONE]"), "{body}");
    let upstream = slow_upstream(vec!["hi".into()], Duration::from_millis(1));
    let five = Server::start_with(
        "serve_runs_on_the_workers_asked_for_5",
        "",
        &["--upstream", &format!("http://{upstream}")],
        &[("TOOLSHIM_WORKERS", "5")],
    );
    let pid = five.child.as_ref().expect("running").id();
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
    assert!(threads > 5, "{threads} threads with TOOLSHIM_WORKERS=5");
    let stderr = serve(&["--workers", "0"]).usage_error();
    assert!(stderr.contains("--workers") && stderr.contains("from 1 to 1024"), "{stderr}");
    let mut command = serve(&["--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:0"]);
    command.cmd.env("TOOLSHIM_WORKERS", "many");
    let stderr = command.usage_error();
    assert!(stderr.contains("TOOLSHIM_WORKERS") && stderr.contains("not `many`"), "{stderr}");
}

/// `toolshim health`, the container image's health check: 0 for a ready gateway, 1 when
/// nothing answers; only `http://` URLs.
#[test]
fn health_asks_a_running_gateway() {
    let upstream = slow_upstream(vec!["hi".into()], Duration::from_millis(1));
    let server = Server::start("health_asks_a_running_gateway", upstream, 5.0);
    let url = format!("http://{}/healthz", server.addr);
    let out = TestCommand::new(&["health", "--url", &url]).ok();
    assert!(out.contains("\"ok\""), "{out}");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let url = format!("http://{closed}/readyz");
    let outcome = TestCommand::new(&["health", "--url", &url, "--timeout", "1"]).run();
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(outcome.stderr.contains("nothing answers"), "{outcome:?}");
    let stderr = TestCommand::new(&["health", "--url", "https://example.org/readyz"]).usage_error();
    assert!(stderr.contains("only http://"), "{stderr}");
}
