//! Every model-native format detector, one at a time: the format picked by the first
//! byte is pinned (`Format::dialects`, as `--format` does), and the rest of the data
//! is streamed in arbitrary chunks and parsed whole; both must agree and be well
//! formed.
//!
//! Data layout: byte 0 picks the format (`formats()[byte % n]`) and whether the tool
//! list is declared (`byte / n` odd); byte 1 modulo 16 says how many of the next
//! bytes are chunk lengths (each modulo 17, as in `stream_vs_complete`); the rest,
//! converted lossily to a `String`, is the input. Seeds are the format corpus
//! (`crates/parse/tests/corpus/formats`) behind its format's byte; see the README.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolshim_parse::{Config, Parsed, formats, parse};

mod common;

fuzz_target!(|data: &[u8]| {
    let [pick, plan, rest @ ..] = data else { return };
    let all = formats();
    let Some(format) = all.get(usize::from(*pick) % all.len()) else { return };
    let Some(dialects) = format.dialects() else { return };
    let tools = (usize::from(*pick) / all.len()) % 2 == 1;
    let base = if tools { common::tools_config() } else { Config::default() };
    let mut config = base;
    config.dialects = dialects;

    let n = usize::from(plan % 16).min(rest.len());
    let (lens, text) = rest.split_at(n);
    let input = String::from_utf8_lossy(text).into_owned();

    let complete = parse(&input, &config);
    common::check_invariants(&input, &complete);
    let streamed: Parsed = common::stream(&input, lens, &config);
    assert_eq!(streamed, complete, "{}: streamed result differs from parse", format.id);
});
