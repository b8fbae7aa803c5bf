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
use toolshim_parse::{Config, Event, Parsed, StreamParser, parse};

mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else { return };
    let n = usize::from(head % 16).min(rest.len());
    let (lens, text) = rest.split_at(n);
    let mut lens: Vec<usize> = lens.iter().map(|&b| usize::from(b % 17)).collect();
    if lens.iter().all(|&len| len == 0) {
        lens = vec![1];
    }
    let input = String::from_utf8_lossy(text).into_owned();
    let configs = &*CONFIGS;
    let Some(config) = configs.get(usize::from(head / 16) % configs.len()) else { return };

    let complete = parse(&input, config);
    common::check_invariants(&input, &complete);

    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    let mut rest = input.as_str();
    for &len in lens.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let mut end = len.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        parser.feed(chunk, &mut events);
        rest = tail;
    }
    parser.finish(&mut events);

    check_args_deltas(&events);
    let streamed = Parsed::from_events(events);
    assert_eq!(streamed, complete, "streamed result differs from parse; chunk lengths {lens:?}");
});

static CONFIGS: std::sync::LazyLock<Vec<Config>> = std::sync::LazyLock::new(common::configs);

/// Each call's `ArgsDelta` fragments concatenate to its final arguments.
fn check_args_deltas(events: &[Event]) {
    let mut open: Vec<(usize, String)> = Vec::new();
    for event in events {
        match event {
            Event::CallStart { call_idx, .. } => open.push((*call_idx, String::new())),
            Event::ArgsDelta { call_idx, json } => {
                if let Some((_, args)) = open.iter_mut().find(|(idx, _)| idx == call_idx) {
                    args.push_str(json);
                }
            }
            Event::CallEnd { call_idx, call } => {
                if let Some(pos) = open.iter().position(|(idx, _)| idx == call_idx) {
                    let (_, args) = open.swap_remove(pos);
                    assert_eq!(
                        args, call.arguments,
                        "ArgsDelta fragments of call {call_idx} do not add up"
                    );
                }
            }
            _ => {}
        }
    }
}
