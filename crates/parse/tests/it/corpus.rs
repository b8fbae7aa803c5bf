//! The corpus: every `tests/corpus/<dialect>/<case>.txt`, parsed complete and streamed at
//! several chunkings, checked against the expectation in its header and snapshotted.
//!
//! A case file starts with one or two header lines, then the model output byte for byte:
//!
//! ```text
//! # source: <what the output comes from or models>, expect: <expectation>
//! # tools: <name>            (optional: tests/corpus/_tools/<name>.json is the tool list)
//! # config: <opt>, <opt>      (optional: reasoning_open | reasoning_calls=allow | free_text)
//! <model output, everything after the newline that ends the last header line>
//! ```
//!
//! The expectation is the text after the last `, expect: ` of the first line:
//!
//! ```text
//! expectation = "none" | "text" | item *( ";" item )
//! item        = "calls=" names | "incomplete=" names | "rejected=" names | "args=" digest
//!               (each key at most once)
//! names       = name *( "," name )                      (no spaces inside a name)
//! digest      = 16 lowercase hex digits
//! ```
//!
//! `calls=` lists the accepted call names in order, `incomplete=` the names of the calls the
//! output cut off (in `Parsed::incomplete`) and `rejected=` the rejected names, in order;
//! a list that is not given must be empty. `args=` is required with `calls=` (a case
//! without it fails, and the failure gives it): the FNV-1a 64 digest of the calls'
//! arguments, in order, joined by `\n` ([`args_digest`]), so the arguments are checked by
//! the header, not only by the snapshots. `none` means no
//! call, nothing rejected, and `content` equal to the whole input; `text` means no call and
//! nothing rejected, with content that may differ from the input (reasoning split off, a
//! marker removed).
//!
//! Snapshot updates are reviewed: run with `INSTA_UPDATE=new`, read every `.snap.new`
//! against its `.snap` (`cargo insta review`, or a diff), and accept the ones that are
//! right. `INSTA_UPDATE=always` is refused (`snapshot_updates_are_reviewed`).
//!
//! `check` goes through `parse_complete` and `stream_events`, the only two functions of this
//! test binary that call the parser (`properties.rs` uses them too).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use toolshim_parse::{
    Builtin, Config, Event, Parsed, ReasoningCalls, StreamParser, ToolSet, parse,
};

/// One corpus file, read and checked for form.
pub(crate) struct Case {
    /// Path under `tests/corpus`, with `/` separators (`hermes/two_blocks.txt`).
    pub(crate) name: String,
    /// The `source:` part of the header.
    pub(crate) source: String,
    /// The `expect:` part of the header.
    pub(crate) expect: Expect,
    /// The `# tools:` name, if any.
    pub(crate) tools: Option<String>,
    /// Default settings, with the tool list when the case names one.
    pub(crate) config: Config,
    /// The model output.
    pub(crate) input: String,
}

/// What the header says the parse must give.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// No call, nothing rejected, and the content is the whole input.
    None,
    /// No call and nothing rejected.
    Text,
    /// Exactly these accepted call names and rejected names, in order, and the digest of
    /// the calls' arguments ([`args_digest`]).
    Names { calls: Vec<String>, incomplete: Vec<String>, rejected: Vec<String>, args: Option<u64> },
}

/// The chunk sizes, in characters, every case is streamed at (besides one seeded chunking).
const CHUNK_SIZES: [usize; 4] = [1, 2, 3, 7];

#[test]
fn corpus_meets_header_expectations() {
    let paths = case_paths().expect("the corpus directory is readable");
    assert!(!paths.is_empty(), "no corpus cases found under {}", corpus_dir().display());
    let mut failures = Vec::new();
    for path in &paths {
        match load_case(path) {
            Err(err) => failures.push(format!("{}: {err}", path.display())),
            Ok(case) => {
                let (_, problems) = check(&case);
                if !problems.is_empty() {
                    let tools = case.tools.as_deref().unwrap_or("(no tools file)");
                    let mut report = format!(
                        "tests/corpus/{} (source: {}; tools: {tools})",
                        case.name, case.source
                    );
                    for problem in problems {
                        let _ = write!(report, "\n  - {}", problem.replace('\n', "\n    "));
                    }
                    failures.push(report);
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus cases failed:\n\n{}\n",
        failures.len(),
        paths.len(),
        failures.join("\n\n")
    );
}

/// Snapshots are accepted after review, never rewritten wholesale (`INSTA_UPDATE=always`
/// would turn every difference into a new snapshot without anyone reading it).
#[test]
fn snapshot_updates_are_reviewed() {
    let update = std::env::var("INSTA_UPDATE").unwrap_or_default();
    let forced = std::env::var_os("INSTA_FORCE_PASS").is_some();
    assert!(
        update != "always" && !forced,
        "snapshot updates are reviewed: run with INSTA_UPDATE=new, read each .snap.new \
         against its .snap (cargo insta review, or a diff), and accept the right ones"
    );
}

#[test]
fn corpus_matches_snapshots() {
    insta::glob!("../corpus", "**/*.txt", |path| {
        // A file that cannot be read is reported by `corpus_meets_header_expectations`.
        let Ok(case) = load_case(path) else { return };
        let (parsed, _) = check(&case);
        insta::with_settings!({ description => case.source.as_str(), omit_expression => true }, {
            insta::assert_snapshot!(render(&parsed));
        });
    });
}

/// Parses `case.input` complete and streamed at every chunking; returns the complete
/// result and every problem found (empty when the case passes).
fn check(case: &Case) -> (Parsed, Vec<String>) {
    let complete = parse_complete(&case.input, &case.config);
    let mut problems = Vec::new();

    let mut chunkings: Vec<(String, Vec<&str>)> = CHUNK_SIZES
        .iter()
        .map(|&size| (format!("chunks of {size} char(s)"), chunk_by_chars(&case.input, size)))
        .collect();
    let seed = seed_from_name(&case.name);
    chunkings.push((format!("seeded chunks (seed {seed:#x})"), chunk_seeded(&case.input, seed)));
    for (label, chunks) in chunkings {
        let streamed = Parsed::from_events(stream_events(chunks, &case.config));
        if streamed != complete {
            problems.push(format!(
                "{label}: the folded stream differs from parse(): {}",
                first_difference(&complete, &streamed)
            ));
        }
    }

    let got_calls: Vec<&str> = complete.calls.iter().map(|call| call.name.as_str()).collect();
    let got_incomplete: Vec<&str> =
        complete.incomplete.iter().map(|call| call.name.as_str()).collect();
    let incomplete_none = |problems: &mut Vec<String>| {
        if !got_incomplete.is_empty() {
            problems.push(format!("incomplete: expected none, got {got_incomplete:?}"));
        }
    };
    let got_rejected: Vec<&str> = complete.rejected.iter().map(|r| r.name.as_str()).collect();
    match &case.expect {
        Expect::None => {
            if !got_calls.is_empty() {
                problems.push(format!("calls: expected none, got {got_calls:?}"));
            }
            if !got_rejected.is_empty() {
                problems.push(format!("rejected: expected none, got {got_rejected:?}"));
            }
            incomplete_none(&mut problems);
            if complete.content != case.input {
                problems.push(format!(
                    "content: expected the whole input, got {}",
                    text_difference(&case.input, &complete.content)
                ));
            }
        }
        Expect::Text => {
            if !got_calls.is_empty() {
                problems.push(format!("calls: expected none, got {got_calls:?}"));
            }
            incomplete_none(&mut problems);
            if !got_rejected.is_empty() {
                problems.push(format!("rejected: expected none, got {got_rejected:?}"));
            }
        }
        Expect::Names { calls, incomplete, rejected, args } => {
            if got_calls != *calls {
                problems.push(format!("calls: expected {calls:?}, got {got_calls:?}"));
            }
            if got_incomplete != *incomplete {
                problems
                    .push(format!("incomplete: expected {incomplete:?}, got {got_incomplete:?}"));
            }
            if got_rejected != *rejected {
                problems.push(format!("rejected: expected {rejected:?}, got {got_rejected:?}"));
            }
            let digest = args_digest(&complete);
            if !calls.is_empty() && *args != Some(digest) {
                let arguments: Vec<&str> =
                    complete.calls.iter().map(|call| call.arguments.as_str()).collect();
                problems.push(format!(
                    "args: the header says {}, the arguments give args={digest:016x}: {arguments:?}",
                    args.map_or_else(|| "nothing".to_owned(), |args| format!("args={args:016x}"))
                ));
            }
        }
    }
    (complete, problems)
}

/// The complete parse. With [`stream_events`], the only code here that calls the parser.
pub(crate) fn parse_complete(input: &str, config: &Config) -> Parsed {
    parse(input, config)
}

/// Feeds `chunks` in order to a new [`StreamParser`], finishes it, and returns all events.
pub(crate) fn stream_events<'a>(
    chunks: impl IntoIterator<Item = &'a str>,
    config: &Config,
) -> Vec<Event> {
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut events);
    }
    parser.finish(&mut events);
    events
}

pub(crate) fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("corpus")
}

/// Every `*.txt` under the corpus directory, sorted.
pub(crate) fn case_paths() -> std::io::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|ext| ext == "txt") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut paths = Vec::new();
    walk(&corpus_dir(), &mut paths)?;
    paths.sort();
    Ok(paths)
}

/// Every corpus case; the first unreadable one is an error.
pub(crate) fn load_cases() -> Result<Vec<Case>, String> {
    let paths = case_paths().map_err(|err| format!("cannot list the corpus: {err}"))?;
    paths.iter().map(|path| load_case(path)).collect()
}

/// Reads one case file and its tool list.
pub(crate) fn load_case(path: &Path) -> Result<Case, String> {
    let name = path
        .strip_prefix(corpus_dir())
        .unwrap_or(path)
        .components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    let text = fs::read_to_string(path).map_err(|err| format!("cannot read: {err}"))?;
    let (first, rest) = text.split_once('\n').ok_or("the header line has no newline after it")?;
    let header =
        first.strip_prefix("# source: ").ok_or("the first line must start with `# source: `")?;
    let (source, expect) = header
        .rsplit_once(", expect: ")
        .ok_or("the first line must end with `, expect: <expectation>`")?;
    let expect = parse_expect(expect)?;
    let (tools, input) = match rest.strip_prefix("# tools: ") {
        Some(after) => {
            let (tools, input) =
                after.split_once('\n').ok_or("the `# tools:` line has no newline after it")?;
            (Some(tools.to_owned()), input)
        }
        None => (None, rest),
    };
    let (options, input) = match input.strip_prefix("# config: ") {
        Some(after) => {
            let (options, input) =
                after.split_once('\n').ok_or("the `# config:` line has no newline after it")?;
            (Some(options), input)
        }
        None => (None, input),
    };
    let mut config = match &tools {
        Some(tools) => Config::with_tools(load_tools(tools)?),
        None => Config::default(),
    };
    for option in options.into_iter().flat_map(|o| o.split(',')).map(str::trim) {
        match option {
            "reasoning_open" => config.reasoning_open = true,
            "reasoning_calls=allow" => config.reasoning_calls = ReasoningCalls::Allow,
            "free_text" => {
                config.dialects.add(Builtin::FreeText);
            }
            _ => return Err(format!("unknown `# config:` option `{option}`")),
        }
    }
    if let (Expect::Names { rejected, .. }, None) = (&expect, &tools) {
        if !rejected.is_empty() {
            return Err(
                "`rejected=` needs a `# tools:` line: without tools every name is accepted"
                    .to_owned(),
            );
        }
    }
    Ok(Case { name, source: source.to_owned(), expect, tools, config, input: input.to_owned() })
}

/// Reads `tests/corpus/_tools/<name>.json`.
pub(crate) fn load_tools(name: &str) -> Result<ToolSet, String> {
    let path = corpus_dir().join("_tools").join(format!("{name}.json"));
    let text =
        fs::read_to_string(&path).map_err(|err| format!("tools `{}`: {err}", path.display()))?;
    ToolSet::from_json_str(&text).map_err(|err| format!("tools `{}`: {err}", path.display()))
}

fn parse_expect(text: &str) -> Result<Expect, String> {
    let text = text.trim();
    if text == "none" {
        return Ok(Expect::None);
    }
    if text == "text" {
        return Ok(Expect::Text);
    }
    let mut calls = None;
    let mut incomplete = None;
    let mut rejected = None;
    let mut args = None;
    for item in text.split(';').map(str::trim) {
        let (key, names) =
            item.split_once('=').ok_or_else(|| format!("expectation item `{item}` has no `=`"))?;
        let slot = match key {
            "calls" => &mut calls,
            "incomplete" => &mut incomplete,
            "rejected" => &mut rejected,
            "args" => {
                if args.is_some() {
                    return Err("expectation key `args` is given twice".to_owned());
                }
                let digest = (names.len() == 16)
                    .then(|| u64::from_str_radix(names, 16).ok())
                    .flatten()
                    .filter(|_| names.bytes().all(|b| !b.is_ascii_uppercase()))
                    .ok_or_else(|| format!("`args={names}` is not 16 lowercase hex digits"))?;
                args = Some(digest);
                continue;
            }
            _ => {
                return Err(format!(
                    "unknown expectation key `{key}`; use `calls`, `incomplete`, `rejected` or `args`"
                ));
            }
        };
        if slot.is_some() {
            return Err(format!("expectation key `{key}` is given twice"));
        }
        let names: Vec<String> = names.split(',').map(|name| name.trim().to_owned()).collect();
        if names.iter().any(|name| name.is_empty() || name.contains(char::is_whitespace)) {
            return Err(format!("expectation item `{item}` has an empty or spaced name"));
        }
        *slot = Some(names);
    }
    // A case with calls and no `args=` fails its check, which gives the digest.
    let calls = calls.unwrap_or_default();
    if calls.is_empty() && args.is_some() {
        return Err("`args=` without `calls=`: there are no arguments to check".into());
    }
    Ok(Expect::Names {
        calls,
        incomplete: incomplete.unwrap_or_default(),
        rejected: rejected.unwrap_or_default(),
        args,
    })
}

/// The digest a header's `args=` states: FNV-1a 64 of the calls' arguments, in order,
/// joined by `\n`.
pub(crate) fn args_digest(parsed: &Parsed) -> u64 {
    let joined =
        parsed.calls.iter().map(|call| call.arguments.as_str()).collect::<Vec<_>>().join("\n");
    fnv1a(&joined)
}

/// `input` cut into chunks of `size` characters (the last may be shorter).
pub(crate) fn chunk_by_chars(input: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut chunks = Vec::new();
    let mut start = 0;
    for (n_chars, (idx, _)) in input.char_indices().enumerate() {
        if n_chars > 0 && n_chars % size == 0 {
            chunks.push(&input[start..idx]);
            start = idx;
        }
    }
    if start < input.len() {
        chunks.push(&input[start..]);
    }
    chunks
}

/// `input` cut into chunks of 0 to 16 characters, lengths drawn by xorshift from `seed`.
/// Empty chunks are fed too.
pub(crate) fn chunk_seeded(input: &str, seed: u64) -> Vec<&str> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let bounds: Vec<usize> =
        input.char_indices().map(|(idx, _)| idx).chain([input.len()]).collect();
    let mut chunks = Vec::new();
    let mut char_pos = 0;
    let n_chars = bounds.len() - 1;
    while char_pos < n_chars {
        let len = usize::try_from(next() % 17).unwrap_or(1);
        let end = (char_pos + len).min(n_chars);
        chunks.push(&input[bounds[char_pos]..bounds[end]]);
        char_pos = end;
    }
    chunks
}

/// FNV-1a 64 of `text`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// FNV-1a of the case name: a stable seed per file.
fn seed_from_name(name: &str) -> u64 {
    fnv1a(name)
}

/// The snapshot text of a result: calls, rejected calls, warning codes, content, reasoning.
/// Warning messages and rejection reasons are prose and are left out; the streamed
/// results are still compared with them.
pub(crate) fn render(parsed: &Parsed) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "calls: {}", parsed.calls.len());
    for (call_idx, call) in parsed.calls.iter().enumerate() {
        let id = call.id.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "  [{call_idx}] {} id={id} span={}..{}",
            call.name, call.span.start, call.span.end
        );
        let _ = writeln!(out, "      arguments: {}", call.arguments);
    }
    if !parsed.incomplete.is_empty() {
        let _ = writeln!(out, "incomplete: {}", parsed.incomplete.len());
        for call in &parsed.incomplete {
            let _ = writeln!(
                out,
                "  {} span={}..{}\n      arguments: {}",
                call.name, call.span.start, call.span.end, call.arguments
            );
        }
    }
    let _ = writeln!(out, "rejected: {}", parsed.rejected.len());
    for rejected in &parsed.rejected {
        let _ = writeln!(
            out,
            "  {} span={}..{}",
            rejected.name, rejected.span.start, rejected.span.end
        );
    }
    let _ = writeln!(out, "warnings: {}", parsed.warnings.len());
    for warning in &parsed.warnings {
        let call_idx = warning.call_idx.map_or_else(|| "-".to_owned(), |idx| idx.to_string());
        let _ = writeln!(
            out,
            "  {} call={call_idx} span={}..{}",
            warning.code.as_str(),
            warning.span.start,
            warning.span.end
        );
    }
    let _ = writeln!(out, "saw_tool_syntax: {}", parsed.saw_tool_syntax);
    render_text(&mut out, "content", &parsed.content);
    render_text(&mut out, "reasoning", &parsed.reasoning);
    out
}

/// Writes `text` one line per input line between `|`s, so trailing spaces and a final
/// newline (shown as a last empty line) stay visible; other control characters are escaped.
fn render_text(out: &mut String, label: &str, text: &str) {
    let _ = writeln!(out, "{label}: {} bytes", text.len());
    if text.is_empty() {
        return;
    }
    for line in text.split('\n') {
        let _ = writeln!(out, "  |{}|", escape_controls(line));
    }
}

fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// The first line where the complete and the streamed results differ, as rendered (or as
/// `Debug` when the rendering hides the difference, e.g. in a warning message).
fn first_difference(expected: &Parsed, got: &Parsed) -> String {
    let rendered = (render(expected), render(got));
    let (expected_text, got_text) = if rendered.0 == rendered.1 {
        (format!("{expected:#?}"), format!("{got:#?}"))
    } else {
        rendered
    };
    let mut expected_lines = expected_text.lines();
    let mut got_lines = got_text.lines();
    for line_no in 1.. {
        match (expected_lines.next(), got_lines.next()) {
            (None, None) => break,
            (expected_line, got_line) if expected_line != got_line => {
                return format!(
                    "first difference at line {line_no}\n    parse(): {}\n    stream:  {}",
                    expected_line.unwrap_or("<end>"),
                    got_line.unwrap_or("<end>")
                );
            }
            _ => {}
        }
    }
    "the results differ in a way neither rendering shows".to_owned()
}

/// Where `got` first departs from `expected`, with a little context from each.
fn text_difference(expected: &str, got: &str) -> String {
    let at = expected.bytes().zip(got.bytes()).take_while(|(a, b)| a == b).count();
    let around = |text: &str| -> String {
        let start = floor_char_boundary(text, at.saturating_sub(20));
        let end = floor_char_boundary(text, at.saturating_add(40));
        format!("{:?}", &text[start..end])
    };
    format!(
        "{} bytes instead of {}; first difference at byte {at}\n    expected: …{}…\n    got:      …{}…",
        got.len(),
        expected.len(),
        around(expected),
        around(got)
    )
}

fn floor_char_boundary(text: &str, idx: usize) -> usize {
    let mut idx = idx.min(text.len());
    while !text.is_char_boundary(idx) {
        idx -= 1;
    }
    idx
}

#[test]
fn chunkings_cover_the_input_on_char_boundaries() {
    let input = "a東京😀b\ncd";
    for size in CHUNK_SIZES {
        let chunks = chunk_by_chars(input, size);
        assert_eq!(chunks.concat(), input);
        let (last, full) = chunks.split_last().expect("the input is not empty");
        assert!(full.iter().all(|chunk| chunk.chars().count() == size));
        assert!((1..=size).contains(&last.chars().count()));
    }
    assert_eq!(chunk_by_chars(input, 2), ["a東", "京😀", "b\n", "cd"]);
    let seeded = chunk_seeded(input, seed_from_name("hermes/x.txt"));
    assert_eq!(seeded.concat(), input);
    assert_eq!(seeded, chunk_seeded(input, seed_from_name("hermes/x.txt")));
}

#[test]
fn expectation_grammar_is_strict() {
    let names = |list: &[&str]| list.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
    assert_eq!(parse_expect("none"), Ok(Expect::None));
    assert_eq!(
        parse_expect("calls=a,b;rejected=c;args=00000000000000ff"),
        Ok(Expect::Names {
            calls: names(&["a", "b"]),
            incomplete: Vec::new(),
            rejected: names(&["c"]),
            args: Some(255)
        })
    );
    assert_eq!(
        parse_expect("rejected=x"),
        Ok(Expect::Names {
            calls: Vec::new(),
            incomplete: Vec::new(),
            rejected: names(&["x"]),
            args: None
        })
    );
    assert_eq!(
        parse_expect("calls=a"),
        Ok(Expect::Names {
            calls: names(&["a"]),
            incomplete: Vec::new(),
            rejected: Vec::new(),
            args: None
        }),
        "calls without args parse; the check fails them with the digest"
    );
    assert!(parse_expect("rejected=x;args=00000000000000ff").is_err(), "args without calls");
    assert!(parse_expect("calls=a;args=00ff").is_err(), "a short digest");
    assert!(parse_expect("calls=a;args=00000000000000FF").is_err(), "an uppercase digest");
    assert!(parse_expect("calls=").is_err());
    assert!(parse_expect("calls=a;calls=b").is_err());
    assert!(parse_expect("call=a").is_err());
    assert!(parse_expect("none;calls=a").is_err());
}
