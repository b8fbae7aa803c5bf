//! toolshim-parse against tool-parser 1.10 (its `QwenParser`, which reads the same
//! `<tool_call>\n{json}\n</tool_call>` format), on the inputs of
//! `crates/parse/benches/workloads.rs`, with serde_json alongside as a floor.
//!
//! `cargo run --release` prints a markdown table. See README.md for how to read it.
//!
//! Fast cases are timed in batches (median of at least 5 batches, about a second per
//! case). A case whose single run takes over half a second is timed once. tool-parser's
//! streaming cases run in a child process of this binary that is killed when it passes
//! the cap (`--cap SECS`, default 120), so a runaway case costs at most the cap.

use std::{
    env,
    io::Read,
    process::{Command, ExitCode, Stdio},
    thread,
    time::{Duration, Instant},
};

use openai_protocol::common::Tool;
use serde_json::json;
use tool_parser::{QwenParser, ToolParser};
use toolshim_parse::{Config, Parsed, StreamParser};

#[path = "../../crates/parse/benches/workloads.rs"]
mod workloads;

use workloads::{SIZES, Size};

/// Chunk size of every streaming case, in bytes (extended to a char boundary).
const CHUNK: usize = 4;
/// A case whose first single run takes at least this long is reported from that run.
const SINGLE_RUN: Duration = Duration::from_millis(500);
/// Target time of one batch of a fast case.
const BATCH: Duration = Duration::from_millis(20);
/// Time spent sampling one fast case, beyond the first 5 batches.
const CASE_BUDGET: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    ManyCalls,
    LongCall,
    /// `long_call` with each `\ud83d\ude00` escape replaced by a raw 😀 and spaces (same
    /// length): tool-parser's partial-JSON reader rejects escaped surrogate pairs, so
    /// on `long_call` its streaming stops early; this row shows its streaming cost on
    /// input it can follow to the end.
    LongCallNoSurrogates,
}

impl Workload {
    const ALL: [Workload; 3] =
        [Workload::ManyCalls, Workload::LongCall, Workload::LongCallNoSurrogates];

    fn name(self) -> &'static str {
        match self {
            Workload::ManyCalls => "many_calls",
            Workload::LongCall => "long_call",
            Workload::LongCallNoSurrogates => "long_call_no_surrogates",
        }
    }

    fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    fn input(self, size: Size) -> String {
        match self {
            Workload::ManyCalls => workloads::many_calls(size),
            Workload::LongCall => workloads::long_call(size),
            Workload::LongCallNoSurrogates => {
                workloads::long_call(size).replace("\\ud83d\\ude00", "😀        ")
            }
        }
    }
}

/// Time per run of one case.
#[derive(Debug, Clone, Copy)]
enum Timing {
    /// Median time per run over `runs` runs in total.
    Measured { per_run: Duration, runs: u64 },
    /// The single run had not finished when the cap was reached.
    OverCap(Duration),
    /// The child process failed.
    Failed,
}

impl Timing {
    fn cell(self, bytes: usize) -> String {
        match self {
            Timing::Measured { per_run, runs } => {
                let secs = per_run.as_secs_f64();
                let rate = if secs > 0.0 { bytes as f64 / secs / 1e6 } else { f64::INFINITY };
                let once = if runs == 1 { ", 1 run" } else { "" };
                format!("{} ({}{once})", human(per_run), rate_str(rate))
            }
            Timing::OverCap(cap) => format!("> {} s (stopped)", cap.as_secs()),
            Timing::Failed => "failed".to_owned(),
        }
    }
}

fn human(d: Duration) -> String {
    let ns = d.as_secs_f64() * 1e9;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

fn rate_str(mb_per_s: f64) -> String {
    if mb_per_s >= 100.0 {
        format!("{mb_per_s:.0} MB/s")
    } else if mb_per_s >= 1.0 {
        format!("{mb_per_s:.1} MB/s")
    } else {
        format!("{:.1} kB/s", mb_per_s * 1e3)
    }
}

/// Times `run(n)`, which must do `n` runs of the case.
fn time(mut run: impl FnMut(u64)) -> Timing {
    let start = Instant::now();
    run(1);
    let first = start.elapsed();
    if first >= SINGLE_RUN {
        return Timing::Measured { per_run: first, runs: 1 };
    }
    let mut iters: u64 = 1;
    let mut elapsed = first;
    while elapsed < BATCH && iters < 1 << 30 {
        iters *= 2;
        let start = Instant::now();
        run(iters);
        elapsed = start.elapsed();
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 5 || (start.elapsed() < CASE_BUDGET && samples.len() < 50) {
        let t = Instant::now();
        run(iters);
        samples.push(t.elapsed() / u32::try_from(iters).unwrap_or(u32::MAX));
    }
    samples.sort();
    Timing::Measured { per_run: samples[samples.len() / 2], runs: iters * samples.len() as u64 }
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(err) => panic!("cannot start a tokio runtime: {err}"),
    }
}

/// The tools that tool-parser's streaming checks names against.
fn declared_tools() -> Vec<Tool> {
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}},
    ]);
    match serde_json::from_value(tools) {
        Ok(tools) => tools,
        Err(err) => panic!("tool list does not deserialize: {err}"),
    }
}

fn toolshim_stream(chunks: &[&str], config: &Config) -> Parsed {
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    let mut parsed = Parsed::default();
    for chunk in chunks {
        parser.feed(std::hint::black_box(chunk), &mut events);
        events.drain(..).for_each(|event| parsed.push(event));
    }
    parser.finish(&mut events);
    events.into_iter().for_each(|event| parsed.push(event));
    parsed
}

/// What a parser made of an input: the number of calls and all their arguments,
/// concatenated in order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    calls: usize,
    arguments: String,
}

/// Streams through tool-parser as a consumer would: every chunk, then the
/// end-of-stream calls for unstreamed arguments and held-back text.
async fn tool_parser_stream(chunks: &[&str], tools: &[Tool]) -> Found {
    let mut parser = QwenParser::new();
    let mut found = Found::default();
    let mut text = String::new();
    for chunk in chunks {
        match parser.parse_incremental(std::hint::black_box(chunk), tools).await {
            Ok(result) => {
                text.push_str(&result.normal_text);
                for item in result.calls {
                    found.calls += usize::from(item.name.is_some());
                    found.arguments.push_str(&item.parameters);
                }
            }
            Err(err) => panic!("tool-parser streaming failed: {err}"),
        }
    }
    for item in parser.get_unstreamed_tool_args().unwrap_or_default() {
        found.arguments.push_str(&item.parameters);
    }
    text.push_str(&parser.take_unstreamed_normal_text());
    std::hint::black_box(text);
    found
}

async fn tool_parser_complete(parser: &QwenParser, input: &str) -> Found {
    match parser.parse_complete(std::hint::black_box(input)).await {
        Ok((_text, calls)) => Found {
            calls: calls.len(),
            arguments: calls.iter().map(|c| c.function.arguments.as_str()).collect(),
        },
        Err(err) => panic!("tool-parser parse_complete failed: {err}"),
    }
}

/// One row of the table.
struct Row {
    workload: Workload,
    size: Size,
    bytes: usize,
    ts_parse: Timing,
    tp_parse: Timing,
    ts_stream: Timing,
    tp_stream: Timing,
    serde: Timing,
    check: Check,
}

/// What each parser found, to tell whether the timings are of real work.
struct Check {
    expected_calls: usize,
    ts_parse_calls: usize,
    ts_stream_calls: usize,
    /// Whether the folded stream equals `parse` (calls, content, warnings, everything).
    ts_stream_same: bool,
    tp_parse: Found,
    /// Calls announced and argument bytes streamed; None when the child did not finish.
    tp_stream: Option<(usize, usize, bool)>,
}

fn measure_in_process(workload: Workload, size: Size) -> Row {
    let input = workload.input(size);
    let chunks = workloads::chunks(&input, CHUNK);
    let payloads = workloads::json_payloads(&input);
    let config = Config::default();
    let rt = runtime();
    let tp = QwenParser::new();

    let ts_parse = time(|n| {
        for _ in 0..n {
            std::hint::black_box(toolshim_parse::parse(std::hint::black_box(&input), &config));
        }
    });
    let ts_stream = time(|n| {
        for _ in 0..n {
            std::hint::black_box(toolshim_stream(&chunks, &config));
        }
    });
    let serde = time(|n| {
        for _ in 0..n {
            for payload in &payloads {
                let _ = std::hint::black_box(serde_json::from_str::<serde_json::Value>(
                    std::hint::black_box(payload),
                ));
            }
        }
    });
    let tp_parse = time(|n| {
        rt.block_on(async {
            for _ in 0..n {
                std::hint::black_box(tool_parser_complete(&tp, &input).await);
            }
        });
    });

    let parsed = toolshim_parse::parse(&input, &config);
    let streamed = toolshim_stream(&chunks, &config);
    let check = Check {
        expected_calls: payloads.len(),
        ts_parse_calls: parsed.calls.len(),
        ts_stream_calls: streamed.calls.len(),
        ts_stream_same: streamed == parsed,
        tp_parse: rt.block_on(tool_parser_complete(&tp, &input)),
        tp_stream: None,
    };
    Row {
        workload,
        size,
        bytes: input.len(),
        ts_parse,
        tp_parse,
        ts_stream,
        tp_stream: Timing::Failed,
        serde,
        check,
    }
}

/// In the child process: time tool-parser streaming of one case and print
/// `RESULT <nanos per run> <runs> <calls> <argument bytes> <same as parse_complete: 0|1>`.
fn child_tool_parser_stream(workload: Workload, size: Size) {
    let input = workload.input(size);
    let chunks = workloads::chunks(&input, CHUNK);
    let tools = declared_tools();
    let rt = runtime();
    let complete = rt.block_on(tool_parser_complete(&QwenParser::new(), &input));
    // The first run is checked, and is the measurement when it is slow.
    let start = Instant::now();
    let found = rt.block_on(tool_parser_stream(&chunks, &tools));
    let first = start.elapsed();
    let timing = if first >= SINGLE_RUN {
        Timing::Measured { per_run: first, runs: 1 }
    } else {
        time(|n| {
            rt.block_on(async {
                for _ in 0..n {
                    std::hint::black_box(tool_parser_stream(&chunks, &tools).await);
                }
            });
        })
    };
    if let Timing::Measured { per_run, runs } = timing {
        println!(
            "RESULT {} {runs} {} {} {}",
            per_run.as_nanos(),
            found.calls,
            found.arguments.len(),
            u8::from(found == complete)
        );
    }
}

/// Runs [`child_tool_parser_stream`] in a child process, stopped at `cap`.
fn tool_parser_stream_capped(
    workload: Workload,
    size: Size,
    cap: Duration,
) -> (Timing, Option<(usize, usize, bool)>) {
    let Ok(exe) = env::current_exe() else { return (Timing::Failed, None) };
    let spawned = Command::new(exe)
        .args(["--child-stream", workload.name(), &size.0.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let Ok(mut child) = spawned else { return (Timing::Failed, None) };
    let deadline = Instant::now() + cap;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return (Timing::OverCap(cap), None);
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(_) => return (Timing::Failed, None),
        }
    }
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let Some(fields) = out.lines().find_map(|line| line.strip_prefix("RESULT ")) else {
        return (Timing::Failed, None);
    };
    let nums: Vec<u64> = fields.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    match nums[..] {
        [nanos, runs, calls, arg_bytes, same] => (
            Timing::Measured { per_run: Duration::from_nanos(nanos), runs },
            Some((
                usize::try_from(calls).unwrap_or(usize::MAX),
                usize::try_from(arg_bytes).unwrap_or(usize::MAX),
                same == 1,
            )),
        ),
        _ => (Timing::Failed, None),
    }
}

fn print_table(rows: &[Row], cap: Duration) {
    println!("## toolshim-parse vs tool-parser 1.10 (QwenParser), with serde_json as a floor");
    println!();
    println!(
        "Time per run (throughput over the whole input). Streaming feeds chunks of {CHUNK} bytes, \
         never splitting a UTF-8 character. tool-parser streaming is stopped after {} s. \
         serde_json parses only the JSON objects of the input, one by one.",
        cap.as_secs()
    );
    println!();
    println!(
        "| workload | size | toolshim parse | tool-parser parse | toolshim stream {CHUNK} B \
         | tool-parser stream {CHUNK} B | serde_json |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.workload.name(),
            row.size,
            row.ts_parse.cell(row.bytes),
            row.tp_parse.cell(row.bytes),
            row.ts_stream.cell(row.bytes),
            row.tp_stream.cell(row.bytes),
            row.serde.cell(row.bytes),
        );
    }
    println!();
    println!(
        "What each parser found (a timing means little if the parser skipped work). \
         Stream cells say whether the streamed result equals the same parser's complete \
         result: for toolshim the whole folded `Parsed`, for tool-parser the concatenated \
         arguments (deltas plus `get_unstreamed_tool_args`)."
    );
    println!();
    println!(
        "| workload | size | calls in input | toolshim parse | toolshim stream \
         | tool-parser parse | tool-parser stream |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        let c = &row.check;
        let ts_stream = if c.ts_stream_same {
            format!("{}, same", calls(c.ts_stream_calls))
        } else {
            format!("{}, **differs**", calls(c.ts_stream_calls))
        };
        let tp_parse =
            format!("{}, {} B of args", calls(c.tp_parse.calls), c.tp_parse.arguments.len());
        let tp_stream = match c.tp_stream {
            None => "–".to_owned(),
            Some((n, bytes, true)) => format!("{}, {bytes} B of args, same", calls(n)),
            Some((n, bytes, false)) => {
                format!("{}, {bytes} B of args, **differs**", calls(n))
            }
        };
        println!(
            "| {} | {} | {} | {} | {ts_stream} | {tp_parse} | {tp_stream} |",
            row.workload.name(),
            row.size,
            c.expected_calls,
            calls(c.ts_parse_calls),
        );
    }
}

fn calls(n: usize) -> String {
    if n == 1 { "1 call".to_owned() } else { format!("{n} calls") }
}

fn usage() -> ExitCode {
    eprintln!("usage: toolshim-compare [--cap SECS]");
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let mut cap = Duration::from_secs(120);
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => {}
        ["--cap", secs] => match secs.parse() {
            Ok(secs) => cap = Duration::from_secs(secs),
            Err(_) => return usage(),
        },
        ["--child-stream", workload, size] => {
            let (Some(workload), Ok(size)) = (Workload::from_name(workload), size.parse()) else {
                return usage();
            };
            child_tool_parser_stream(workload, Size(size));
            return ExitCode::SUCCESS;
        }
        _ => return usage(),
    }

    let mut rows = Vec::new();
    for workload in Workload::ALL {
        for size in SIZES {
            eprintln!("measuring {} {size} ...", workload.name());
            rows.push(measure_in_process(workload, size));
        }
    }
    // tool-parser streaming last, in child processes, so a case that runs past the
    // cap is killed and cannot load the machine while the others are measured.
    for row in &mut rows {
        eprintln!("measuring tool-parser streaming {} {} ...", row.workload.name(), row.size);
        let started = Instant::now();
        let (timing, found) = tool_parser_stream_capped(row.workload, row.size, cap);
        eprintln!("  done in {:.1} s", started.elapsed().as_secs_f64());
        row.tp_stream = timing;
        row.check.tp_stream = found;
    }
    print_table(&rows, cap);
    ExitCode::SUCCESS
}
