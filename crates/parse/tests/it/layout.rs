//! ARCHITECTURE.md's invariant "readers never touch the buffer, the settle mark or the
//! output", checked over the sources (the compiler checks most of it: `Out`'s and
//! `Segments`' methods are `pub(in crate::engine)`): no file under `src/read` or
//! `src/rows` names an `Event`, `Out`, the engine's `buf` or a region's `seg`.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// Whether `pattern` stands in `line` with no word character before it (when `left`) and
/// none after it (when `right`): grep's `\b` on that side.
fn bounded(line: &str, pattern: &str, left: bool, right: bool) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(pattern).any(|(at, _)| {
        let before = line.get(..at).and_then(|s| s.chars().next_back());
        let after = line.get(at + pattern.len()..).and_then(|s| s.chars().next());
        (!left || !before.is_some_and(is_word)) && (!right || !after.is_some_and(is_word))
    })
}

#[test]
fn readers_and_rows_never_touch_the_engines_state() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("read"), &mut files).unwrap();
    rust_files(&src.join("rows"), &mut files).unwrap();
    assert!(files.len() > 10, "{files:?}");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            // grep -E '\bEvent::|\bOut\b|\bbuf\b|\.seg\b'
            let hit = bounded(line, "Event::", true, false)
                || bounded(line, "Out", true, true)
                || bounded(line, "buf", true, true)
                || bounded(line, ".seg", false, true);
            if hit {
                found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
