//! Parser throughput on two synthetic workloads, with serde_json alongside as a floor.
//!
//! Run (from the repository root; takes a minute or two):
//!
//!     cargo bench -p toolshim-parse --bench parse
//!     cargo bench -p toolshim-parse --bench parse -- long_call     # filter by name
//!
//! Workloads (built in code by `workloads.rs`, each at 2 KB, 20 KB and 200 KB):
//!
//! - `many_calls`: `some prose <tool_call>\n{"name":"get_weather",…}\n</tool_call>\n`
//!   repeated up to the size (19, 195 and 1950 calls).
//! - `long_call`: one `<tool_call>` around a `write_file` call whose `content` string
//!   fills the size, mixing plain text, `\n`, `\"`, `\uXXXX` escapes and raw é, 東京, 😀.
//!
//! Rows, per workload and size:
//!
//! - `parse`: `toolshim_parse::parse` over the whole input.
//! - `stream_4b`: a `StreamParser` fed the input in chunks of about 4 bytes (never
//!   splitting a UTF-8 character), events folded into a `Parsed` as they come, then
//!   `finish`. Chunks are cut before timing starts.
//! - `serde_json`: `serde_json::from_str::<serde_json::Value>` on each JSON object of
//!   the input, one by one (the `{"name":…}` objects, without prose or markers). It
//!   does less work than the parser (no scanning, no repair, no canonical output),
//!   so it is a floor to compare against, not a competitor.
//! - `events_4b`: no parsing at all: for each of the `stream_4b` chunks, one `ArgsDelta`
//!   event holding the chunk, folded into a `Parsed` as `stream_4b` folds. What any
//!   streaming parser with this event API pays at this chunk size, whatever it does
//!   inside: `stream_4b` against it is the parser's own work per chunk.
//!
//! Reading the output: divan prints a tree `workload › row › size` with the fastest,
//! slowest, median and mean time per iteration, and under each time the throughput.
//! Every row of one workload and size counts the same bytes (the whole input, prose
//! and markers included, also for `serde_json`), so MB/s compares directly across
//! rows: `parse` against `serde_json` shows what scanning and canonicalizing costs
//! over plain JSON parsing, and `stream_4b` against `parse` shows the per-chunk
//! overhead. Use the median; samples are kept modest so the whole run stays short.

use divan::{Bencher, black_box, counter::BytesCount};
use toolshim_parse::{Config, Event, Fragment, Parsed, StreamParser};

mod workloads;

use workloads::{SIZES, Size};

fn main() {
    divan::main();
}

/// Many small calls between prose.
#[divan::bench_group(sample_count = 40, max_time = 3)]
mod many_calls {
    use divan::Bencher;

    use super::{SIZES, Size, workloads};

    #[divan::bench(args = SIZES)]
    fn parse(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_parse(bencher, &workloads::many_calls(size));
    }

    #[divan::bench(args = SIZES)]
    fn stream_4b(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_stream(bencher, &workloads::many_calls(size), 4);
    }

    #[divan::bench(args = SIZES)]
    fn serde_json(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_serde_json(bencher, &workloads::many_calls(size));
    }

    #[divan::bench(args = SIZES)]
    fn events_4b(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_events(bencher, &workloads::many_calls(size), 4);
    }
}

/// One call whose arguments fill the input.
#[divan::bench_group(sample_count = 40, max_time = 3)]
mod long_call {
    use divan::Bencher;

    use super::{SIZES, Size, workloads};

    #[divan::bench(args = SIZES)]
    fn parse(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_parse(bencher, &workloads::long_call(size));
    }

    #[divan::bench(args = SIZES)]
    fn stream_4b(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_stream(bencher, &workloads::long_call(size), 4);
    }

    #[divan::bench(args = SIZES)]
    fn serde_json(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_serde_json(bencher, &workloads::long_call(size));
    }

    #[divan::bench(args = SIZES)]
    fn events_4b(bencher: Bencher<'_, '_>, size: Size) {
        super::bench_events(bencher, &workloads::long_call(size), 4);
    }
}

fn bench_parse(bencher: Bencher<'_, '_>, input: &str) {
    let config = Config::default();
    bencher
        .counter(BytesCount::of_str(input))
        .bench(|| toolshim_parse::parse(black_box(input), &config));
}

fn bench_stream(bencher: Bencher<'_, '_>, input: &str, chunk_size: usize) {
    let config = Config::default();
    let chunks = workloads::chunks(input, chunk_size);
    bencher.counter(BytesCount::of_str(input)).bench(|| {
        let mut parser = StreamParser::new(&config);
        let mut events = Vec::new();
        let mut parsed = Parsed::default();
        for chunk in &chunks {
            parser.feed(black_box(chunk), &mut events);
            events.drain(..).for_each(|event| parsed.push(event));
        }
        parser.finish(&mut events);
        events.into_iter().for_each(|event| parsed.push(event));
        parsed
    });
}

fn bench_events(bencher: Bencher<'_, '_>, input: &str, chunk_size: usize) {
    let chunks = workloads::chunks(input, chunk_size);
    bencher.counter(BytesCount::of_str(input)).bench(|| {
        let mut events = Vec::new();
        let mut parsed = Parsed::default();
        for chunk in &chunks {
            let json = Fragment::from(*black_box(chunk));
            events.push(Event::ArgsDelta { call_idx: 0, json });
            events.drain(..).for_each(|event| parsed.push(event));
        }
        parsed
    });
}

fn bench_serde_json(bencher: Bencher<'_, '_>, input: &str) {
    let payloads = workloads::json_payloads(input);
    bencher.counter(BytesCount::of_str(input)).bench(|| {
        for payload in &payloads {
            let _ = black_box(serde_json::from_str::<serde_json::Value>(black_box(payload)));
        }
    });
}
