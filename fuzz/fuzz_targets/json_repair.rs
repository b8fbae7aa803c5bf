//! Arbitrary text in the arguments slot of a `<tool_call>`: whatever the engine
//! repairs (or gives up on), every call it returns has a JSON object as arguments.
//! When the text already is a valid JSON object (and holds no `<`, so no marker can
//! hide in it, and no key repeats, which leaves the choice of value open), repair
//! must leave it unchanged: one call `f` whose arguments are the same JSON value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use toolshim_parse::{Config, parse};

mod common;

fuzz_target!(|data: &[u8]| {
    let args = String::from_utf8_lossy(data);
    let input = format!("<tool_call>{{\"name\":\"f\",\"arguments\":{args}}}</tool_call>");
    let parsed = parse(&input, &Config::default());
    common::check_invariants(&input, &parsed);

    if args.contains('<') {
        return;
    }
    let Ok(expected @ Value::Object(_)) = serde_json::from_str::<Value>(&args) else { return };
    if depth(&expected) > 64 || serde_json::from_str::<UniqueKeys>(&args).is_err() {
        return;
    }
    assert_eq!(parsed.calls.len(), 1, "valid arguments did not give exactly one call: {parsed:?}");
    let got: Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap_or(Value::Null);
    assert_eq!(got, expected, "valid JSON arguments were changed");
});

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Deserializes any JSON value, failing on an object with a repeated key.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key) {
                return Err(de::Error::custom("repeated key"));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}
