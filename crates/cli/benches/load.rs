//! The gateway under load, on loopback: `toolshim serve --mode emulate` (a child process,
//! so its memory can be read) in front of a scripted upstream, driven by a closed-loop
//! client that checks every reply. Prints Markdown tables; see docs/reliability.md.
//!
//!     cargo bench -p toolshim --bench load                   # everything (about 17 min)
//!     cargo bench -p toolshim --bench load -- --quick        # every scenario, briefly
//!     cargo bench -p toolshim --bench load -- --help

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

mod dos;
mod floor;
mod inspect;
mod limits;
mod loadgen;
mod store;

use loadgen::{Check, Gateway, Outcome, RssSampler, Script, Target, Upstream, percentile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// Every scenario below.
    All,
    /// Many concurrent streaming tool-call requests against an upstream that streams at
    /// a model's pace, straight and through the gateway: latency added, memory.
    Concurrent,
    /// As many requests as go through, streaming and not, at each concurrency.
    Throughput,
    /// One tool call with a large argument streamed through the gateway.
    Large,
    /// Attempts to take the gateway down without a key (issue 14): half-sent heads, idle
    /// connections, large unauthenticated bodies, half heads past the fd limit.
    Dos,
    /// Time to the first text byte of a plain answer (no call) streamed at a small local
    /// model's pace, straight and through the gateway with tools (issue 18).
    FirstText,
    /// Responses requests with `store` false and true on each store (off, memory, an SQLite
    /// file, Redis) (issue 26).
    Store,
    /// A key's `rpm` limit held by two gateways sharing one Redis, driven past it (issue 27).
    Limits,
    /// Requests through a gateway without the request inspector and one keeping them all
    /// under a small bound: throughput, the bytes kept, memory (issue 27).
    Inspect,
}

/// Load scenarios for the toolshim gateway (issue 8; docs/reliability.md).
#[derive(Debug, Parser)]
#[command(name = "load")]
pub(crate) struct Args {
    /// Which scenario to run.
    #[arg(long, value_enum, default_value = "all")]
    scenario: Scenario,
    /// Short runs of every scenario (seconds each) instead of the full figures.
    #[arg(long)]
    quick: bool,
    /// Concurrent streams in the concurrent scenario.
    #[arg(long, value_delimiter = ',', default_value = "256,1024")]
    streams: Vec<usize>,
    /// Seconds each concurrent-scenario phase lasts.
    #[arg(long, default_value_t = 60)]
    sustain: u64,
    /// The upstream's pause between streamed events in the concurrent scenario, in ms.
    #[arg(long, default_value_t = 25)]
    pace_ms: u64,
    /// Content deltas per streamed reply.
    #[arg(long, default_value_t = 20)]
    pub(crate) deltas: usize,
    /// Concurrency levels in the throughput scenario.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    concurrency: Vec<usize>,
    /// Seconds each throughput run lasts.
    #[arg(long, default_value_t = 30)]
    pub(crate) duration: u64,
    /// Runs of each throughput measurement through the gateway.
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// The large argument's size in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    large_bytes: usize,
    /// The toolshim binary to run (default: the one this bench was built with).
    #[arg(long)]
    toolshim: Option<PathBuf>,
    /// first-text and throughput: another toolshim binary (an older build) measured in the
    /// same run, beside the one under test.
    #[arg(long, value_name = "PATH")]
    before: Option<PathBuf>,
    /// first-text: also measure against a real model's OpenAI-compatible base URL (such as
    /// `scripts/local-model start` prints, http://127.0.0.1:PORT/v1).
    #[arg(long, value_name = "URL")]
    model_url: Option<String>,
    /// Accepted for `cargo bench`, which passes it.
    #[arg(long, hide = true)]
    bench: bool,
    /// Internal: serve as the bare relay (`floor.rs`) in front of this upstream URL.
    #[arg(long, hide = true, value_name = "URL")]
    relay_floor: Option<String>,
}

pub(crate) type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let mut args = Args::parse();
    if let Some(upstream) = &args.relay_floor {
        return floor::serve(upstream);
    }
    if args.quick {
        args.streams = vec![64, 256];
        args.sustain = 3;
        args.duration = 2;
        args.runs = 1;
        args.large_bytes = 256 << 10;
    }
    let bin =
        args.toolshim.clone().unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolshim")));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "# toolshim load ({})", machine())?;
    let all = args.scenario == Scenario::All;
    if all || args.scenario == Scenario::Concurrent {
        concurrent(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Throughput {
        throughput(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Large {
        large(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Dos {
        attacks(&runtime, &bin, args.quick, &mut out)?;
    }
    if all || args.scenario == Scenario::FirstText {
        first_text(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Store {
        store::store(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Limits {
        limits::limits(&runtime, &bin, &args, &mut out)?;
    }
    if all || args.scenario == Scenario::Inspect {
        inspect::inspect(&runtime, &bin, &args, &mut out)?;
    }
    Ok(())
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cores} cores, {model}")
}

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1000.0)
}

fn signed_ms(a: Duration, b: Duration) -> String {
    format!("{:+.2}", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

pub(crate) fn fail_on_errors(what: &str, outcome: &Outcome) -> Result<(), Error> {
    if outcome.errors > 0 {
        return Err(format!(
            "{what}: {} errors of {} requests; first: {}",
            outcome.errors,
            outcome.errors + outcome.ok,
            outcome.first_error.as_deref().unwrap_or("?")
        )
        .into());
    }
    Ok(())
}

fn concurrent(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let script = Script::call(args.deltas, Duration::from_millis(args.pace_ms));
    let upstream = Upstream::start(&script, 2)?;
    let gateway = Gateway::start(bin, &upstream.url())?;
    let relay = floor::start(&std::env::current_exe()?, &upstream.url())?;
    let sustain = Duration::from_secs(args.sustain);
    writeln!(
        out,
        "\n## Concurrent streaming tool calls ({} s per phase; the upstream streams {} deltas, {} ms apart)\n",
        args.sustain, args.deltas, args.pace_ms
    )?;
    writeln!(
        out,
        "| streams | path | requests | errors | req/s | TTFB p50 ms | TTFB p99 ms | call name known p50 ms | p99 ms | total p50 ms | total p99 ms | CPU ms per request: gateway (or relay) / load+upstream | gateway RSS idle / peak / after MiB |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for &streams in &args.streams {
        let client = loadgen::client(streams)?;
        let direct = Arc::new(Target::chat(&upstream.url(), true, Check::Upstream));
        let via = Arc::new(Target::chat(&gateway.url(), true, Check::Call));
        let own = std::process::id();
        let cpu_before = loadgen::cpu_time(own).unwrap_or_default();
        let straight = runtime.block_on(loadgen::drive(&client, &direct, streams, sustain));
        let cpu_straight = loadgen::cpu_time(own).unwrap_or_default().saturating_sub(cpu_before);
        let idle = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
        let sampler = RssSampler::start(gateway.pid());
        let (own_before, gateway_before) = (
            loadgen::cpu_time(own).unwrap_or_default(),
            loadgen::cpu_time(gateway.pid()).unwrap_or_default(),
        );
        let through = runtime.block_on(loadgen::drive(&client, &via, streams, sustain));
        let cpu_own = loadgen::cpu_time(own).unwrap_or_default().saturating_sub(own_before);
        let cpu_gateway =
            loadgen::cpu_time(gateway.pid()).unwrap_or_default().saturating_sub(gateway_before);
        let peak = sampler.stop();
        let relayed_at = Arc::new(Target::chat(&relay.url(), true, Check::Upstream));
        let (own_before, relay_before) = (
            loadgen::cpu_time(own).unwrap_or_default(),
            loadgen::cpu_time(relay.pid()).unwrap_or_default(),
        );
        let relayed = runtime.block_on(loadgen::drive(&client, &relayed_at, streams, sustain));
        let cpu_own_relayed = loadgen::cpu_time(own).unwrap_or_default().saturating_sub(own_before);
        let cpu_relay =
            loadgen::cpu_time(relay.pid()).unwrap_or_default().saturating_sub(relay_before);
        drop(client);
        std::thread::sleep(Duration::from_secs(1));
        let after = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
        let per = |cpu: Duration, outcome: &Outcome| {
            format!("{:.3}", cpu.as_secs_f64() * 1000.0 / outcome.ok.max(1) as f64)
        };
        for (path, outcome, cpu, rss) in [
            (
                "upstream",
                &straight,
                format!("- / {}", per(cpu_straight, &straight)),
                String::from("-"),
            ),
            (
                "gateway",
                &through,
                format!("{} / {}", per(cpu_gateway, &through), per(cpu_own, &through)),
                format!("{} / {} / {}", mib(idle), mib(peak), mib(after)),
            ),
            (
                "bare relay (floor)",
                &relayed,
                format!("{} / {}", per(cpu_relay, &relayed), per(cpu_own_relayed, &relayed)),
                String::from("-"),
            ),
        ] {
            writeln!(
                out,
                "| {streams} | {path} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {cpu} | {rss} |",
                outcome.ok,
                outcome.errors,
                outcome.per_second(),
                ms(percentile(&outcome.ttfb, 50.0)),
                ms(percentile(&outcome.ttfb, 99.0)),
                ms(percentile(&outcome.call, 50.0)),
                ms(percentile(&outcome.call, 99.0)),
                ms(percentile(&outcome.total, 50.0)),
                ms(percentile(&outcome.total, 99.0)),
            )?;
        }
        writeln!(
            out,
            "| {streams} | added | | | | {} | {} | {} | {} | {} | {} | | |",
            signed_ms(percentile(&through.ttfb, 50.0), percentile(&straight.ttfb, 50.0)),
            signed_ms(percentile(&through.ttfb, 99.0), percentile(&straight.ttfb, 99.0)),
            signed_ms(percentile(&through.call, 50.0), percentile(&straight.call, 50.0)),
            signed_ms(percentile(&through.call, 99.0), percentile(&straight.call, 99.0)),
            signed_ms(percentile(&through.total, 50.0), percentile(&straight.total, 50.0)),
            signed_ms(percentile(&through.total, 99.0), percentile(&straight.total, 99.0)),
        )?;
        out.flush()?;
        fail_on_errors("upstream", &straight)?;
        fail_on_errors("gateway", &through)?;
        fail_on_errors("bare relay", &relayed)?;
    }
    Ok(())
}

fn throughput(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let script = Script::call(args.deltas, Duration::ZERO);
    let upstream = Upstream::start(&script, 2)?;
    let gateway = Gateway::start(bin, &upstream.url())?;
    let relay = floor::start(&std::env::current_exe()?, &upstream.url())?;
    // An older build, measured run for run beside this one.
    let before = args.before.as_deref().map(|b| Gateway::start(b, &upstream.url())).transpose()?;
    let duration = Duration::from_secs(args.duration);
    writeln!(
        out,
        "\n## Throughput ({} s per run, {} run(s) through the gateway; the upstream answers at once, streams in {} deltas)\n",
        args.duration, args.runs, args.deltas
    )?;
    writeln!(
        out,
        "| mode | concurrency | upstream alone req/s | bare relay (floor) req/s | gateway req/s (each run) | before req/s (each run) | gateway p50 ms | relay p50 ms | upstream p50 ms | added p50 ms | errors |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for stream in [false, true] {
        for &concurrency in &args.concurrency {
            let client = loadgen::client(concurrency)?;
            let direct = Arc::new(Target::chat(&upstream.url(), stream, Check::Upstream));
            let via = Arc::new(Target::chat(&gateway.url(), stream, Check::Call));
            let relayed_at = Arc::new(Target::chat(&relay.url(), stream, Check::Upstream));
            let alone = runtime.block_on(loadgen::drive(&client, &direct, concurrency, duration));
            fail_on_errors("upstream", &alone)?;
            let relayed =
                runtime.block_on(loadgen::drive(&client, &relayed_at, concurrency, duration));
            fail_on_errors("bare relay", &relayed)?;
            let mut rates = Vec::new();
            let mut before_rates = Vec::new();
            let mut last = Outcome::default();
            let mut errors = 0;
            for _ in 0..args.runs.max(1) {
                last = runtime.block_on(loadgen::drive(&client, &via, concurrency, duration));
                errors += last.errors;
                rates.push(format!("{:.0}", last.per_second()));
                fail_on_errors("gateway", &last)?;
                if let Some(before) = &before {
                    let target = Arc::new(Target::chat(&before.url(), stream, Check::Call));
                    let run =
                        runtime.block_on(loadgen::drive(&client, &target, concurrency, duration));
                    fail_on_errors("before", &run)?;
                    before_rates.push(format!("{:.0}", run.per_second()));
                }
            }
            if before_rates.is_empty() {
                before_rates.push("-".into());
            }
            writeln!(
                out,
                "| {} | {concurrency} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {errors} |",
                if stream { "stream" } else { "non-stream" },
                alone.per_second(),
                relayed.per_second(),
                rates.join(" / "),
                before_rates.join(" / "),
                ms(percentile(&last.total, 50.0)),
                ms(percentile(&relayed.total, 50.0)),
                ms(percentile(&alone.total, 50.0)),
                signed_ms(percentile(&last.total, 50.0), percentile(&alone.total, 50.0)),
            )?;
            out.flush()?;
        }
    }
    Ok(())
}

fn large(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    // The model writes the file in 4 KiB deltas, 4 ms apart (about 1 MB/s).
    let deltas = args.large_bytes.div_ceil(4096).max(1);
    let script = loadgen::write_file_script(args.large_bytes, deltas, Duration::from_millis(4));
    let upstream = Upstream::start(&script, 2)?;
    let gateway = Gateway::start(bin, &upstream.url())?;
    let client = loadgen::client(1)?;
    let idle = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
    let sampler = RssSampler::start(gateway.pid());
    let result = runtime.block_on(loadgen::large_argument(
        &client,
        &gateway.url(),
        &upstream,
        args.large_bytes,
    ));
    let peak = sampler.stop();
    let large = result?;
    writeln!(
        out,
        "\n## A {} KiB write_file argument streamed through the gateway ({deltas} deltas, 4 ms apart)\n",
        large.bytes >> 10
    )?;
    writeln!(
        out,
        "| first argument byte ms | total ms | reply received before the upstream's last delta | last delta to end of reply ms | gateway RSS idle / peak MiB |"
    )?;
    writeln!(out, "|---|---|---|---|---|")?;
    writeln!(
        out,
        "| {} | {} | {:.1} % | {} | {} / {} |",
        ms(large.first_argument_byte),
        ms(large.total),
        large.share_before_upstream_end * 100.0,
        ms(large.tail),
        mib(idle),
        mib(peak),
    )?;
    Ok(())
}

/// The percentile of a list of durations, in seconds, with one decimal.
fn secs_at(durations: &[Duration], p: f64) -> String {
    let mut sorted = durations.to_vec();
    sorted.sort();
    format!("{:.1}", percentile(&sorted, p).as_secs_f64())
}

/// Issue 14: what it costs to try to take the gateway down without a key, with its default
/// limits (`--quick`: header-read and keep-alive timeouts of 1 s, fewer connections).
fn attacks(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    quick: bool,
    out: &mut impl Write,
) -> Result<(), Error> {
    let script = Script::call(20, Duration::ZERO);
    let upstream = Upstream::start(&script, 1)?;
    let dir = std::env::temp_dir().join(format!("toolshim-dos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("toolshim.toml");
    let (header_secs, keep_alive_secs) = if quick { (1.0, 1.0) } else { (10.0, 60.0) };
    std::fs::write(
        &config,
        format!(
            "header_read_timeout_secs = {header_secs}\nkeep_alive_timeout_secs = {keep_alive_secs}\n"
        ),
    )?;
    let config = config.display().to_string();
    let extra = ["--api-key", "sk-bench", "--config", &config];
    let (n_half, n_idle, n_bodies) = if quick { (100, 200, 10) } else { (300, 2000, 30) };
    writeln!(
        out,
        "\n## Without a key (header-read timeout {header_secs} s, keep-alive timeout {keep_alive_secs} s)\n"
    )?;
    writeln!(out, "| attempt | gateway RSS before → peak MiB | what happened |")?;
    writeln!(out, "|---|---|---|")?;

    let gateway = Gateway::start_with(bin, &upstream.url(), &extra, None)?;
    let addr = gateway.addr;
    let before = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
    let sampler = RssSampler::start(gateway.pid());
    let (closed, health) = runtime.block_on(async {
        let streams = dos::open(addr, n_half, dos::HALF_HEAD).await;
        let health = dos::health(addr).await;
        (dos::closed_after(streams, Duration::from_secs_f64(header_secs * 3.0 + 5.0)).await, health)
    });
    let peak = sampler.stop();
    let times: Vec<Duration> = closed.iter().flatten().copied().collect();
    writeln!(
        out,
        "| {n_half} half-sent request heads | {} → {} | closed after {} s (p50) / {} s (max), {} left open; /healthz meanwhile {} in {} ms |",
        mib(before),
        mib(peak),
        secs_at(&times, 0.5),
        secs_at(&times, 1.0),
        closed.len() - times.len(),
        health.0,
        ms(health.1)
    )?;

    let before = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
    let sampler = RssSampler::start(gateway.pid());
    let closed = runtime.block_on(async {
        let streams = dos::open(addr, n_idle, b"").await;
        dos::closed_after(streams, Duration::from_secs_f64(keep_alive_secs * 2.0 + 5.0)).await
    });
    let peak = sampler.stop();
    let after = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
    let times: Vec<Duration> = closed.iter().flatten().copied().collect();
    writeln!(
        out,
        "| {n_idle} idle connections | {} → {} (after: {}) | closed after {} s (max), {} left open |",
        mib(before),
        mib(peak),
        mib(after),
        secs_at(&times, 1.0),
        closed.len() - times.len()
    )?;

    let before = loadgen::rss_kib(gateway.pid()).unwrap_or(0);
    let sampler = RssSampler::start(gateway.pid());
    let answers = runtime.block_on(dos::unauthenticated_bodies(addr, n_bodies, 16 << 20));
    let peak = sampler.stop();
    let refused = answers.iter().filter(|(status, _)| *status == 401).count();
    let slowest = answers.iter().map(|(_, at)| *at).max().unwrap_or_default();
    writeln!(
        out,
        "| {n_bodies} unauthenticated 16 MiB bodies at once | {} → {} | {refused} × 401, the last after {} ms |",
        mib(before),
        mib(peak),
        ms(slowest)
    )?;
    drop(gateway);

    let limited = Gateway::start_with(bin, &upstream.url(), &extra, Some(256))?;
    let addr = limited.addr;
    let (burst, later, after) = runtime.block_on(async {
        let streams = dos::open(addr, 300, dos::HALF_HEAD).await;
        let burst = dos::health(addr).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let later = dos::health(addr).await;
        let closed =
            dos::closed_after(streams, Duration::from_secs_f64(header_secs * 3.0 + 5.0)).await;
        drop(closed);
        (burst, later, dos::health(addr).await)
    });
    writeln!(
        out,
        "| 300 half-sent heads, gateway at `ulimit -n 256` (cap 96) | | /healthz right after the burst: {} in {} ms; 0.5 s later: {} in {} ms; once they were closed: {} |",
        burst.0,
        ms(burst.1),
        later.0,
        ms(later.1),
        after.0
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A plain answer, as a model that needs no tool writes it.
const PLAIN_ANSWER: &str = "Paris in spring is mild and often sunny. Chestnut trees bloom along \
    the boulevards, cafe terraces fill from late morning on, and evenings stay light until nine. \
    A short shower rarely lasts long enough to matter, so a light coat and an umbrella are all \
    you need for a week of walking.";

/// Time from sending a streaming request to its first non-empty text delta.
async fn first_text_after(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> Result<Duration, Error> {
    use futures::StreamExt;
    let started = std::time::Instant::now();
    let response = client.post(url).json(body).send().await?;
    let mut bytes = response.bytes_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = bytes.next().await {
        buffer.extend_from_slice(&chunk?);
        let text = String::from_utf8_lossy(&buffer);
        for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
                if value["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty()) {
                    return Ok(started.elapsed());
                }
            }
        }
    }
    Err("the reply ended without text".into())
}

/// The p50 of some durations.
fn p50(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    percentile(&sorted, 0.5)
}

/// First-text times of `runs` requests in a row to `url` (a block, so that a real model's
/// prompt cache serves every request after the first alike).
async fn first_text_block(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    runs: usize,
) -> Result<Duration, Error> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        times.push(first_text_after(client, url, body).await?);
    }
    Ok(p50(&times))
}

/// Issue 18: how long a plain streamed answer waits in the gateway before its first byte:
/// against the scripted upstream at a small model's pace and, with `--model-url`, against a
/// real model; with `--before`, an older binary in the same run.
fn first_text(
    runtime: &tokio::runtime::Runtime,
    bin: &std::path::Path,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), Error> {
    let mut binaries = Vec::new();
    if let Some(before) = &args.before {
        binaries.push(("before", before.as_path()));
    }
    binaries.push(("this build", bin));
    let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let runs = if args.quick { 3 } else { 20 };

    // About 40 tokens a second: 4 characters every 25 ms.
    let deltas = PLAIN_ANSWER.chars().count().div_ceil(4);
    let script = Script { text: PLAIN_ANSWER.to_owned(), deltas, delay: Duration::from_millis(25) };
    let upstream = Upstream::start(&script, 1)?;
    let body = serde_json::json!({"model": "m", "stream": true,
        "messages": [{"role": "user", "content": "What is Paris like in spring?"}], "tools": tools});
    writeln!(
        out,
        "\n## Time to first text: a plain answer at a model's pace (4 characters every 25 ms), {runs} runs each\n"
    )?;
    first_text_table(
        runtime,
        &binaries,
        &upstream.url(),
        "/v1/chat/completions",
        &body,
        runs,
        out,
    )?;

    if let Some(url) = &args.model_url {
        let url = url.trim_end_matches('/');
        let body = serde_json::json!({"model": "local", "stream": true, "temperature": 0, "max_tokens": 48,
            "messages": [{"role": "user", "content": "Tell me two facts about the history of the bicycle."}],
            "tools": tools});
        writeln!(
            out,
            "\n## Time to first text: a plain answer from the model at {url}, {runs} runs each\n"
        )?;
        first_text_table(runtime, &binaries, url, "/chat/completions", &body, runs, out)?;
    }
    Ok(())
}

/// One table: the upstream straight (the same request without tools, since it has none of
/// its own) and through each binary (with tools, so the gateway holds the reply).
fn first_text_table(
    runtime: &tokio::runtime::Runtime,
    binaries: &[(&str, &std::path::Path)],
    base: &str,
    path: &str,
    body: &serde_json::Value,
    runs: usize,
    out: &mut impl Write,
) -> Result<(), Error> {
    let client = loadgen::client(1)?;
    let mut plain = body.clone();
    if let Some(object) = plain.as_object_mut() {
        object.remove("tools");
    }
    let straight =
        runtime.block_on(first_text_block(&client, &format!("{base}{path}"), &plain, runs))?;
    writeln!(out, "| path | first text byte p50 ms | added p50 ms |")?;
    writeln!(out, "|---|---|---|")?;
    writeln!(out, "| upstream, no tools | {} | |", ms(straight))?;
    for (label, bin) in binaries {
        let gateway = Gateway::start(bin, base)?;
        let url = format!("{}/v1/chat/completions", gateway.url());
        let through = runtime.block_on(first_text_block(&client, &url, body, runs))?;
        writeln!(
            out,
            "| gateway ({label}), with tools | {} | {} |",
            ms(through),
            signed_ms(through, straight)
        )?;
    }
    Ok(())
}
