//! `parse` on arbitrary UTF-8 never panics, and what it returns is well formed:
//! every call's arguments are a JSON object, every call's span lies in the input,
//! and `content` is never longer than the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolshim_parse::{Config, parse};

mod common;

fuzz_target!(|input: &str| {
    let parsed = parse(input, &Config::default());
    common::check_invariants(input, &parsed);
});
