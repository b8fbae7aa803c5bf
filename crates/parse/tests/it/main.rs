//! Integration tests of toolshim-parse: one binary for the crate (house style 2.6).

/// The corpus under `tests/corpus/<dialect>/*.txt`: each case parsed complete and streamed
/// at chunk sizes 1, 2, 3, 7 and a seeded random chunking, checked against its header
/// expectation, and snapshotted in `snapshots/`. Also the file format and grammar.
mod corpus;
/// Format files: every built-in format written as data and read back parses the corpus
/// the same; published response_templates load; what rows cannot express names its field.
mod format_file;
/// The catalog of model-native formats (`formats()`): every id listed once, documented,
/// and each format read has three corpus cases.
mod formats;
/// ARCHITECTURE.md's invariants over the sources: readers and rows never touch the
/// engine's buffer, settle mark or output.
mod layout;
/// `agent_outcome`: normal and exit calls, unknown tools and tool syntax without a call as
/// failures that keep the raw output, plain text as an answer.
mod outcome;
/// Hostile inputs (issue 8): deep nesting, a huge string argument, many calls, endless
/// marker prefixes and the hold limit, complete and streamed, with bytes conserved.
mod pathological;
/// Proptest properties: chunking invariance, text conservation, argument deltas that are
/// JSON prefixes adding up to a JSON object, no panic and bounded output.
mod properties;
/// Regression tests for bugs found by fuzzing, property tests and pathological inputs
/// (`issue_<n>_<what>`): each checks the result and that 1-, 3- and 4-character chunkings agree.
mod regression;
