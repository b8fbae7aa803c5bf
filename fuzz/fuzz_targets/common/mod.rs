//! Checks shared by the fuzz targets.

use serde::de::IgnoredAny;
use toolshim_parse::Parsed;

/// Whether `text` is one JSON object by the grammar of RFC 8259. serde_json's
/// `IgnoredAny` checks the grammar without range-checking numbers, which the
/// arguments keep exactly as written (`1e999` is valid JSON, though no f64).
pub fn json_object(text: &str) -> Result<(), String> {
    if !text.trim_start().starts_with('{') {
        return Err("not an object".to_owned());
    }
    serde_json::from_str::<IgnoredAny>(text).map(|_| ()).map_err(|err| err.to_string())
}

/// Invariants that hold for every result of `parse` on any `input`.
pub fn check_invariants(input: &str, parsed: &Parsed) {
    for call in &parsed.calls {
        if let Err(why) = json_object(&call.arguments) {
            panic!(
                "arguments of {:?} are not a JSON object ({why}): {:?}",
                call.name, call.arguments
            );
        }
        assert!(
            call.span.start <= call.span.end && call.span.end <= input.len(),
            "span {:?} of {:?} is outside the input (len {})",
            call.span,
            call.name,
            input.len()
        );
    }
    assert!(
        parsed.content.len() <= input.len(),
        "content ({} bytes) is longer than the input ({} bytes)",
        parsed.content.len(),
        input.len()
    );
}
