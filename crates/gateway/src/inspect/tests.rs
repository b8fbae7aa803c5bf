use super::*;
use crate::config::{Config, InspectConfig, KeyConfig};

fn inspector(requests: usize, max_bytes: u64) -> Arc<Inspector> {
    let mut config = Config { api_keys: vec!["sk-plain-key".into()], ..Config::default() };
    let admin = KeyConfig { key: "sk-admin-secret".into(), admin: true, ..KeyConfig::default() };
    config.keys.insert("root".into(), admin);
    config.inspect = InspectConfig { enabled: true, requests, max_bytes };
    Inspector::new(&config).unwrap()
}

#[test]
fn off_unless_enabled() {
    assert!(Inspector::new(&Config::default()).is_none());
}

#[test]
fn keys_are_redacted_before_anything_is_kept() {
    let inspector = inspector(10, 1 << 20);
    let capture = inspector.begin("chat_completions", Some("root")).unwrap();
    let kept = capture.keep("key sk-admin-secret and sk-plain-key, twice: sk-admin-secret");
    assert_eq!(kept, "key [redacted] and [redacted], twice: [redacted]");
}

#[test]
fn the_bound_holds_and_the_oldest_finished_request_goes_first() {
    let max = 1 << 16;
    let inspector = inspector(100, max);
    let text = "y".repeat(10_000);
    let running = inspector.begin("messages", None).unwrap();
    running.keep(&text);
    for _ in 0..40 {
        let capture = inspector.begin("chat_completions", None).unwrap();
        let kept = capture.keep(&text);
        capture.note(|record| record.response = kept);
        capture.end(200);
        let (_, totals) = inspector.list();
        assert!(totals.bytes <= max as usize, "{totals:?}");
    }
    let (summaries, totals) = inspector.list();
    // The one still running is never pushed out; the newest finished ones stay.
    assert!(summaries.iter().any(|s| s.id == 1 && s.in_flight), "{summaries:?}");
    assert_eq!(summaries[0].id, 41);
    assert!(totals.kept < 41, "{totals:?}");
    // One record alone takes at most a quarter of the bound, saying what it left out.
    let capture = inspector.begin("responses", None).unwrap();
    let kept = capture.keep(&"z".repeat(max as usize));
    assert!(kept.len() <= max as usize / 4 + 64, "{}", kept.len());
    assert!(kept.ends_with("more bytes not kept]"), "{}", &kept[kept.len() - 40..]);
}

#[test]
fn at_most_the_configured_number_of_requests() {
    let inspector = inspector(3, 1 << 20);
    for _ in 0..7 {
        inspector.begin("chat_completions", None).unwrap().end(200);
    }
    let (summaries, totals) = inspector.list();
    assert_eq!(totals.kept, 3);
    assert_eq!(summaries.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7, 6, 5]);
}

#[test]
fn pages_escape_what_the_model_wrote_and_mark_what_the_parser_found() {
    let inspector = inspector(10, 1 << 20);
    let capture = inspector.begin("chat_completions", Some("r<o>ot")).unwrap();
    let raw = "<img src=x onerror=alert(1)> then <tool_call>{\"name\":\"f\"}</tool_call>";
    let start = raw.find("<tool_call>").unwrap();
    let findings = vec![Finding {
        kind: "call",
        name: "f\"><script>".into(),
        detail: "{}".into(),
        span: [start, raw.len()],
    }];
    capture.attempt(Attempt { number: 1, kind: "emulated", ..Attempt::default() });
    capture.read(raw, Some(FinishReason::Stop), findings, Usage::default());
    capture.verdict("answer", None);
    capture.end(200);
    let html = inspector.get(1).unwrap().read(page::detail);
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt; then "), "{html}");
    assert!(
        html.contains(
            "<mark class=\"call\" title=\"call: f&quot;&gt;&lt;script&gt;\">&lt;tool_call&gt;"
        ),
        "{html}"
    );
    assert!(html.contains("r&lt;o&gt;ot"));
    assert!(!html.contains("<img") && !html.contains("<script"), "{html}");
}

#[test]
fn times_are_utc_dates() {
    assert_eq!(page::time(0), "1970-01-01 00:00:00.000");
    assert_eq!(page::time(1_795_996_800_123), "2026-11-30 00:00:00.123");
    assert_eq!(page::time(951_782_400_000), "2000-02-29 00:00:00.000");
}
