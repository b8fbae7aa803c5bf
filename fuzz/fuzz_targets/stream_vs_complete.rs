//! Differential: streaming over arbitrary chunk boundaries gives exactly what
//! `parse` gives over the whole input.
//!
//! Data layout: byte 0 says how many of the following bytes (0 to 15) are chunk
//! lengths; each of those gives a chunk length of 0 to 16 bytes (0 feeds an empty
//! chunk), used in turn and cycled. The rest of the data, converted lossily to a
//! `String`, is the input; every chunk end is moved forward to the next char
//! boundary so no UTF-8 character is split. No chunk lengths means 1-byte chunks.
//! Byte 0 divided by 16 also picks one of `common::configs`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolshim_parse::{Config, parse};

mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else { return };
    let n = usize::from(head % 16).min(rest.len());
    let (lens, text) = rest.split_at(n);
    let input = String::from_utf8_lossy(text).into_owned();
    let configs = &*CONFIGS;
    let Some(config) = configs.get(usize::from(head / 16) % configs.len()) else { return };

    let complete = parse(&input, config);
    common::check_invariants(&input, &complete);

    let streamed = common::stream(&input, lens, config);
    assert_eq!(streamed, complete, "streamed result differs from parse; chunk lengths {lens:?}");
});

static CONFIGS: std::sync::LazyLock<Vec<Config>> = std::sync::LazyLock::new(common::configs);
