//! ARCHITECTURE.md's layout invariants, checked over the sources (issue 25): which module
//! may name which, where tasks may be spawned, and how long a file may be. Each rule is a
//! search over the text of the files below `src/` (their code before the `#[cfg(test)]`
//! module, which may reach across for fixtures), so a change that breaks one fails here,
//! naming the file and line.

use std::path::{Path, PathBuf};

/// The gateway's `src/`.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The file's lines before its test module, numbered from 1, comments dropped.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line.to_owned()))
        .collect()
}

/// The places in the files of `module` (a folder or `NAME.rs` below `src/`) whose code
/// names one of `forbidden`, except lines holding one of `allowed`.
fn violations(module: &str, forbidden: &[&str], allowed: &[&str]) -> Vec<String> {
    let root = src();
    let dir = root.join(module);
    let files =
        if dir.is_dir() { rust_files(&dir) } else { vec![root.join(format!("{module}.rs"))] };
    assert!(files.iter().all(|f| f.exists()) && !files.is_empty(), "no module {module}");
    let mut found = Vec::new();
    for file in files {
        for (number, line) in code_lines(&file) {
            let named = forbidden.iter().find(|pattern| line.contains(*pattern));
            if let Some(pattern) = named {
                if !allowed.iter().any(|ok| line.contains(ok)) {
                    let shown = file.strip_prefix(&root).unwrap_or(&file).display();
                    found.push(format!("{shown}:{number}: names {pattern}: {}", line.trim()));
                }
            }
        }
    }
    found
}

/// The neutral types know neither a client family, nor emulation, nor an upstream wire.
#[test]
fn the_neutral_core_depends_on_no_family_and_no_wire() {
    let found = violations(
        "neutral",
        &["crate::api", "crate::chat", "crate::upstream", "crate::dispatch", "crate::state"],
        &[],
    );
    assert!(found.is_empty(), "{found:#?}");
    // And it holds no JSON of anyone's: no body or event is built here.
    let found = violations("neutral", &["json!("], &[]);
    assert!(found.is_empty(), "{found:#?}");
}

/// Emulation (`chat`) and the upstream wires (`upstream`) both build on the neutral types
/// and not on each other: no import cycle between them, and neither knows a client family.
#[test]
fn emulation_and_the_upstream_wires_do_not_import_each_other() {
    let found = violations(
        "chat",
        &["crate::upstream", "crate::api", "crate::dispatch", "crate::state"],
        &[],
    );
    assert!(found.is_empty(), "{found:#?}");
    let found = violations(
        "upstream",
        &["crate::chat", "crate::api", "crate::dispatch", "crate::state"],
        &[],
    );
    assert!(found.is_empty(), "{found:#?}");
}

/// Only `api` knows the client families' wires: the core, the dispatch and the upstream
/// wires never name one. A client family reaches an upstream through `dispatch` and the
/// route's chain, except that Chat Completions' passthrough relays the upstream's own Chat
/// Completions payloads.
#[test]
fn only_api_knows_the_client_wires() {
    for module in ["neutral", "chat", "upstream", "dispatch", "state", "config", "error"] {
        let found = violations(module, &["crate::api"], &[]);
        assert!(found.is_empty(), "{found:#?}");
    }
    let found = violations(
        "api",
        &["crate::upstream"],
        &["crate::upstream::client::PayloadStream;", "crate::upstream::reply::Payload;"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

/// Each upstream wire is answered in one place: only `upstream/wire.rs` matches on a `Wire`
/// (its variants named anywhere else would be a wire's behaviour spread over the crate).
#[test]
fn only_the_wire_module_matches_on_a_wire() {
    let found: Vec<String> = violations("", &["Wire::OpenAi", "Wire::Anthropic"], &[])
        .into_iter()
        .filter(|place| !place.starts_with("upstream/wire.rs:"))
        .collect();
    assert!(found.is_empty(), "{found:#?}");
}

/// No untracked tasks: every response is a polled stream, so a client that hangs up drops
/// the upstream request with it.
#[test]
fn no_task_is_spawned() {
    let found = violations("", &["tokio::spawn", "task::spawn", "spawn_blocking"], &[]);
    assert!(found.is_empty(), "{found:#?}");
}

/// State lives in `AppState` (the refusal memories, the readiness probe) and in the response
/// store (`store/`), never in a process-wide `static`: two gateways in one process share
/// nothing, and a store is the one place that outlives a request. A `tokio::task_local!` is
/// not process-wide (it holds a value only inside the future it scopes: the inspector's record
/// of the request its handler serves), so it is allowed.
#[test]
fn no_global_state() {
    let mut found = Vec::new();
    for path in rust_files(&src()) {
        let mut task_local = false;
        for (n, line) in code_lines(&path) {
            let item =
                line.trim_start().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
            if (item.starts_with("static ") && !task_local) || line.contains("thread_local!") {
                found.push(format!("{}:{n}: {line}", path.display()));
            }
            task_local = line.trim() == "tokio::task_local! {";
        }
    }
    assert!(found.is_empty(), "{found:#?}");
    let elsewhere: Vec<String> = rust_files(&src())
        .into_iter()
        .filter(|path| !path.starts_with(src().join("store")))
        .flat_map(|path| {
            code_lines(&path)
                .into_iter()
                .filter(|(_, line)| line.contains("rusqlite") || line.contains("redis::"))
                .map(move |(n, line)| format!("{}:{n}: {line}", path.display()))
        })
        .collect();
    assert!(elsewhere.is_empty(), "only store/ speaks SQLite and Redis: {elsewhere:#?}");
}

/// No source or documentation file in the workspace is over 900 lines (data files, lock
/// files and snapshots are not counted).
#[test]
fn no_file_is_over_900_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let skip = ["target", "node_modules", ".git", "corpus", "artifacts", "snapshots", ".venv"];
    let kinds = ["rs", "py", "sh", "js", "mjs", "ts", "md", "toml"];
    let mut long = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !skip.contains(&name) && !name.starts_with('.') {
                    stack.push(path);
                }
                continue;
            }
            let kind = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
            if kinds.contains(&kind) && name != "Cargo.lock" {
                let lines = std::fs::read_to_string(&path).map_or(0, |t| t.lines().count());
                if lines > 900 {
                    long.push(format!("{}: {lines} lines", path.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "{long:#?}");
}
