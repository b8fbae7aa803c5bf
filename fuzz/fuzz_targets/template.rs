//! Formats loaded at run time: a random format file (toolshim's rows or a
//! `response_template`) and random text. Loading never panics (a file the parser cannot
//! read is an error); a loaded format never panics, streams in arbitrary chunks exactly
//! as it parses complete, and keeps the invariants of `common::check_invariants`.
//!
//! Data layout: byte 0 says how many of the following bytes (0 to 15) are chunk lengths
//! (as in `stream_vs_complete`); the rest, converted lossily to a `String`, is the format
//! file, a NUL, then the model text. Byte 0 divided by 16, odd: the tools are declared.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolshim_parse::{Config, parse};

mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else { return };
    let n = usize::from(head % 16).min(rest.len());
    let (lens, text) = rest.split_at(n);
    let text = String::from_utf8_lossy(text);
    let Some((file, input)) = text.split_once('\0') else { return };
    let Ok(mut config) = Config::format_from_template(file) else { return };
    if (head / 16) % 2 == 1 {
        config.tools = common::tools_config().tools;
    }
    let complete = parse(input, &config);
    common::check_invariants(input, &complete);
    let streamed = common::stream(input, lens, &config);
    assert_eq!(streamed, complete, "streamed result differs from parse; chunk lengths {lens:?}");
});
