//! The catalog of model-native formats: every id is listed once, and every format the
//! parser reads has corpus cases under `tests/corpus/formats/<id>__<variant>.txt`.

use std::collections::HashSet;

use toolshim_parse::{Format, Support, formats};

use crate::corpus::corpus_dir;

/// The catalog ids of `F1`–`F38` and `L1`–`L20`.
fn catalog_ids() -> Vec<String> {
    (1..=38).map(|n| format!("F{n}")).chain((1..=20).map(|n| format!("L{n}"))).collect()
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

/// Model ids people pass to `--model` (Hugging Face names) find their format, the
/// canitoolcall families' reference models among them.
#[test]
fn issue_17_model_ids_find_their_format() {
    let cases = [
        ("openai/gpt-oss-20b", "gpt_oss"),
        ("openai/gpt-oss-120b", "gpt_oss"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder"),
        ("Qwen/Qwen3.8-27B", "qwen3_coder"),
        ("Qwen/Qwen3-0.6B", "hermes"),
        ("moonshotai/Kimi-K3", "kimi_k3"),
        ("moonshotai/Kimi-K2.6", "kimi_k2"),
        ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek_v41"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "pythonic"),
        ("google/gemma-4-31B-it", "gemma4"),
        ("zai-org/GLM-5.3", "glm45"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
    ];
    for (model, id) in cases {
        let found = Format::for_model(model).map(|format| format.id);
        assert_eq!(found, Some(id), "{model}");
    }
}
