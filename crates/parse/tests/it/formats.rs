//! The catalog of model-native formats: every id is listed once, and every format the
//! parser reads has corpus cases under `tests/corpus/formats/<id>__<variant>.txt`.

use std::collections::HashSet;

use toolshim_parse::{Support, formats};

use crate::corpus::corpus_dir;

/// The catalog ids of `F1`–`F38` and `L1`–`L9`.
fn catalog_ids() -> Vec<String> {
    (1..=38).map(|n| format!("F{n}")).chain((1..=9).map(|n| format!("L{n}"))).collect()
}

#[test]
fn every_catalogued_format_is_listed_once_with_a_unique_id() {
    let table = formats();
    let listed: Vec<&str> = table.iter().map(|f| f.catalog).collect();
    for id in catalog_ids() {
        let n = listed.iter().filter(|listed| **listed == id).count();
        assert_eq!(n, 1, "{id} is listed {n} times in formats()");
    }
    assert_eq!(listed.len(), catalog_ids().len(), "formats() lists ids outside the catalog");
    let mut ids = HashSet::new();
    for format in table {
        assert!(ids.insert(format.id), "format id `{}` is used twice", format.id);
        assert!(
            !format.models.is_empty() && !format.read_by.is_empty(),
            "{} is undocumented",
            format.id
        );
        if let Support::Partial(note) | Support::Missing(note) = format.support {
            assert!(!note.is_empty(), "{} says nothing about what is missing", format.id);
        }
    }
}

#[test]
fn every_format_read_has_three_corpus_cases() {
    let dir = corpus_dir().join("formats");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut missing = Vec::new();
    for format in formats() {
        if matches!(format.support, Support::Missing(_)) {
            continue;
        }
        let prefix = format!("{}__", format.id);
        let n = files.iter().filter(|name| name.starts_with(&prefix)).count();
        if n < 3 {
            missing.push(format!("{} ({}): {n} case(s)", format.id, format.catalog));
        }
    }
    assert!(missing.is_empty(), "formats with fewer than 3 corpus cases:\n{}", missing.join("\n"));
}
