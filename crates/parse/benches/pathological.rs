//! The parser on hostile inputs (issue 8): time and memory at two sizes, a tenth and the
//! full size, so that linear growth shows as a ratio of about 10 between them.
//!
//! Run (from the repository root; takes a few minutes):
//!
//!     cargo bench -p toolshim-parse --bench pathological
//!     cargo bench -p toolshim-parse --bench pathological -- nesting     # filter by name
//!
//! Groups, each at two sizes:
//!
//! - `nesting`: `[` repeated 10k and 100k times inside a call's arguments
//!   (`<tool_call>{"name":"f","arguments":{"a":[[[…`), left open (`args_open`) or closed
//!   with as many `]` and `}}</tool_call>` (`args_closed`); and outside any call, as plain
//!   text (`text_square` for `[[[…`, `text_curly` for `{{{…`).
//! - `long_string`: one `write_file` call whose `content` string is 1 MB and 10 MB of
//!   text with escapes and multi-byte characters.
//! - `many_calls`: 10k and 100k calls in one output, as Hermes `<tool_call>` blocks and as
//!   one Mistral `[TOOL_CALLS]` list.
//! - `marker_prefix`: an unfinished marker repeated 100k and 1M times (`tool_ca` for
//!   `<tool_ca`, `pipe_tool_call` for `<|tool_call`, `tool_calls_bracket` for `[TOOL_CALL`,
//!   `less_than` for `<`): every repetition could start a marker until the next byte
//!   rules it out.
//!
//! Rows: `parse` is [`toolshim_parse::parse`] over the whole input; `stream_16b` and
//! `stream_4k` feed a `StreamParser` chunks of 16 bytes (about a token) and 4 KiB (a
//! network read) and drop the events of each chunk once counted, as a gateway that
//! forwards them does. Chunks are cut before timing starts and never split a UTF-8
//! character.
//!
//! Reading the output: the time is per iteration (use the median); the throughput counts
//! input bytes; the allocation rows (`max alloc`, `alloc`, `dealloc`, `grow`) come from
//! `divan::AllocProfiler` and give, per iteration, the peak of live heap bytes and the
//! total allocated. The peak of `parse` includes its result (all events, then the folded
//! `Parsed`); the peak of a stream row is the parser's own memory plus one chunk's events.

use divan::{AllocProfiler, Bencher, black_box, counter::BytesCount};
use toolshim_parse::{Config, Event, StreamParser};

#[expect(dead_code, reason = "the workloads serve parse.rs; this bench shares only the chunking")]
mod workloads;

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

/// Brackets nested inside a call's arguments and in plain text.
#[divan::bench_group(sample_count = 10, max_time = 2)]
mod nesting {
    use divan::Bencher;

    const DEPTHS: [usize; 2] = [10_000, 100_000];
    const HEAD: &str = r#"<tool_call>{"name":"f","arguments":{"a":"#;

    fn args_open(n: usize) -> String {
        format!("{HEAD}{}", "[".repeat(n))
    }

    fn args_closed(n: usize) -> String {
        format!("{HEAD}{}{}}}}}</tool_call>", "[".repeat(n), "]".repeat(n))
    }

    #[divan::bench(args = DEPTHS)]
    fn args_open_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &args_open(n));
    }

    #[divan::bench(args = DEPTHS)]
    fn args_open_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &args_open(n), 16);
    }

    #[divan::bench(args = DEPTHS)]
    fn args_closed_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &args_closed(n));
    }

    #[divan::bench(args = DEPTHS)]
    fn args_closed_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &args_closed(n), 16);
    }

    #[divan::bench(args = DEPTHS)]
    fn text_square_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"[".repeat(n));
    }

    #[divan::bench(args = DEPTHS)]
    fn text_square_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"[".repeat(n), 16);
    }

    #[divan::bench(args = DEPTHS)]
    fn text_curly_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"{".repeat(n));
    }

    #[divan::bench(args = DEPTHS)]
    fn text_curly_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"{".repeat(n), 16);
    }
}

/// One call with a huge string argument.
#[divan::bench_group(sample_count = 10, max_time = 2)]
mod long_string {
    use divan::Bencher;

    /// Content sizes: 1 MB and 10 MB.
    const SIZES: [usize; 2] = [1 << 20, 10 << 20];

    /// A line of file content, JSON-escaped: escapes, é, 東京, 😀.
    const PIECE: &str =
        "fn main() {\\n    println!(\\\"h\\u00e9llo, 東京 😀\\\");\\n}\\n/* é */ ..";

    fn input(size: usize) -> String {
        let content = PIECE.repeat(size / PIECE.len());
        format!(
            "<tool_call>{{\"name\":\"write_file\",\"arguments\":{{\"path\":\"a.txt\",\"content\":\"{content}\"}}}}</tool_call>"
        )
    }

    #[divan::bench(args = SIZES)]
    fn parse(bencher: Bencher<'_, '_>, size: usize) {
        super::bench_parse(bencher, &input(size));
    }

    #[divan::bench(args = SIZES)]
    fn stream_16b(bencher: Bencher<'_, '_>, size: usize) {
        super::bench_stream(bencher, &input(size), 16);
    }

    #[divan::bench(args = SIZES)]
    fn stream_4k(bencher: Bencher<'_, '_>, size: usize) {
        super::bench_stream(bencher, &input(size), 4096);
    }
}

/// Many calls in one output.
#[divan::bench_group(sample_count = 10, max_time = 2)]
mod many_calls {
    use divan::Bencher;

    const COUNTS: [usize; 2] = [10_000, 100_000];
    const CALL: &str = r#"{"name":"get_weather","arguments":{"city":"Paris"}}"#;

    fn hermes(n: usize) -> String {
        format!("<tool_call>\n{CALL}\n</tool_call>\n").repeat(n)
    }

    fn mistral(n: usize) -> String {
        format!("[TOOL_CALLS][{}]", vec![CALL; n].join(", "))
    }

    #[divan::bench(args = COUNTS)]
    fn hermes_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &hermes(n));
    }

    #[divan::bench(args = COUNTS)]
    fn hermes_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &hermes(n), 16);
    }

    #[divan::bench(args = COUNTS)]
    fn mistral_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &mistral(n));
    }

    #[divan::bench(args = COUNTS)]
    fn mistral_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &mistral(n), 16);
    }
}

/// A marker prefix repeated: each repetition is held until the next byte rules it out.
#[divan::bench_group(sample_count = 10, max_time = 2)]
mod marker_prefix {
    use divan::Bencher;

    const COUNTS: [usize; 2] = [100_000, 1_000_000];

    #[divan::bench(args = COUNTS)]
    fn tool_ca_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"<tool_ca".repeat(n));
    }

    #[divan::bench(args = COUNTS)]
    fn tool_ca_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"<tool_ca".repeat(n), 16);
    }

    #[divan::bench(args = COUNTS)]
    fn pipe_tool_call_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"<|tool_call".repeat(n));
    }

    #[divan::bench(args = COUNTS)]
    fn pipe_tool_call_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"<|tool_call".repeat(n), 16);
    }

    #[divan::bench(args = COUNTS)]
    fn tool_calls_bracket_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"[TOOL_CALL".repeat(n));
    }

    #[divan::bench(args = COUNTS)]
    fn tool_calls_bracket_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"[TOOL_CALL".repeat(n), 16);
    }

    #[divan::bench(args = COUNTS)]
    fn less_than_parse(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_parse(bencher, &"<".repeat(n));
    }

    #[divan::bench(args = COUNTS)]
    fn less_than_stream_16b(bencher: Bencher<'_, '_>, n: usize) {
        super::bench_stream(bencher, &"<".repeat(n), 16);
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
        let mut out_bytes = 0;
        for chunk in &chunks {
            parser.feed(black_box(chunk), &mut events);
            out_bytes += events.drain(..).map(|event| event_bytes(&event)).sum::<usize>();
        }
        parser.finish(&mut events);
        out_bytes + events.iter().map(event_bytes).sum::<usize>()
    });
}

/// The input bytes an event gives back: text, or the span of an ended call.
fn event_bytes(event: &Event) -> usize {
    match event {
        Event::Text(text) => text.len(),
        Event::CallEnd { call, .. } => call.span.len(),
        _ => 0,
    }
}
