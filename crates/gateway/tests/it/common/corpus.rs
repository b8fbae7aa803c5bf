//! The parser crate's corpus, for gateway tests that feed model outputs through the
//! gateway. Included by the integration tests (`common`) and by `prompt.rs`'s unit tests.

/// Corpus cases of the parser crate that hold calls, with names a tool list can have:
/// (path under the corpus, text without its header lines, call names, sorted and unique).
pub(crate) fn corpus_calls() -> Vec<(String, String, Vec<String>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../parse/tests/corpus");
    let mut cases = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&root).unwrap().map(|d| d.unwrap().path()).collect();
    dirs.sort();
    for dir in dirs.into_iter().filter(|d| d.is_dir()) {
        let mut files: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|f| f.unwrap().path()).collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let header = text.lines().next().unwrap_or_default();
            let Some(names) = header.split("calls=").nth(1) else { continue };
            let mut names: Vec<String> = names
                .split([';', ' '])
                .next()
                .unwrap_or_default()
                .split(',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect();
            names.sort();
            names.dedup();
            let valid =
                |n: &String| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if names.is_empty() || !names.iter().all(valid) {
                continue;
            }
            let body: String =
                text.split_inclusive('\n').skip_while(|l| l.starts_with("# ")).collect();
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            cases.push((name, body, names));
        }
    }
    cases
}
