//! `parse` on arbitrary UTF-8 never panics, and what it returns is well formed:
//! every call's arguments are a JSON object, every call's span lies in the input,
//! and `content` is never longer than the input. Every input runs under each of
//! `common::configs`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolshim_parse::{Config, parse};

mod common;

fuzz_target!(|input: &str| {
    for config in CONFIGS.iter() {
        let parsed = parse(input, config);
        common::check_invariants(input, &parsed);
    }
});

static CONFIGS: std::sync::LazyLock<Vec<Config>> = std::sync::LazyLock::new(common::configs);
