//! Finished spans written as an OTLP `ExportTraceServiceRequest` in protobuf (the OTLP/HTTP
//! binary encoding), by hand: the few messages a trace export needs, each field by its number
//! in the OpenTelemetry protocol's `trace.proto`, `resource.proto` and `common.proto`.

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Strs(Vec<String>),
}

/// OTLP's `SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// A span that ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) parent: Option<[u8; 8]>,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) start_nanos: u64,
    pub(crate) end_nanos: u64,
    pub(crate) attributes: Vec<(String, Value)>,
    /// An error's message: the span's status is then `ERROR`.
    pub(crate) error: Option<String>,
}

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from((field << 3) | wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, LEN);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A nested message: written into a buffer of its own, then as length-delimited bytes.
fn message(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    write(&mut inner);
    bytes(out, field, &inner);
}

fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&n.to_le_bytes());
}

/// `AnyValue`: `string_value` 1, `bool_value` 2, `int_value` 3, `array_value` 5
/// (`ArrayValue.values` 1).
fn any_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Str(text) => bytes(out, 1, text.as_bytes()),
        Value::Bool(b) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*b));
        }
        Value::Int(n) => {
            tag(out, 3, VARINT);
            varint(out, *n as u64);
        }
        Value::Strs(list) => message(out, 5, |array| {
            for text in list {
                message(array, 1, |any| bytes(any, 1, text.as_bytes()));
            }
        }),
    }
}

/// `KeyValue`: `key` 1, `value` 2.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    message(out, field, |kv| {
        bytes(kv, 1, key.as_bytes());
        message(kv, 2, |any| any_value(any, value));
    });
}

/// `Span`: `trace_id` 1, `span_id` 2, `parent_span_id` 4, `name` 5, `kind` 6,
/// `start_time_unix_nano` 7, `end_time_unix_nano` 8, `attributes` 9, `status` 15
/// (`message` 2, `code` 3: 2 is `ERROR`).
fn span(out: &mut Vec<u8>, span: &Finished) {
    message(out, 2, |s| {
        bytes(s, 1, &span.trace_id);
        bytes(s, 2, &span.span_id);
        if let Some(parent) = &span.parent {
            bytes(s, 4, parent);
        }
        bytes(s, 5, span.name.as_bytes());
        tag(s, 6, VARINT);
        varint(s, span.kind as u64);
        fixed64(s, 7, span.start_nanos);
        fixed64(s, 8, span.end_nanos);
        for (key, value) in &span.attributes {
            key_value(s, 9, key, value);
        }
        if let Some(error) = &span.error {
            message(s, 15, |status| {
                bytes(status, 2, error.as_bytes());
                tag(status, 3, VARINT);
                varint(status, 2);
            });
        }
    });
}

/// `ExportTraceServiceRequest` (`resource_spans` 1) with one `ResourceSpans` (`resource` 1,
/// with `attributes` 1; `scope_spans` 2) and one `ScopeSpans` (`scope` 1, with `name` 1 and
/// `version` 2; `spans` 2).
pub(crate) fn encode(resource: &[(String, Value)], spans: &[Finished]) -> Vec<u8> {
    let mut out = Vec::new();
    message(&mut out, 1, |resource_spans| {
        message(resource_spans, 1, |r| {
            for (key, value) in resource {
                key_value(r, 1, key, value);
            }
        });
        message(resource_spans, 2, |scope_spans| {
            message(scope_spans, 1, |scope| {
                bytes(scope, 1, b"toolshim-gateway");
                bytes(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for finished in spans {
                span(scope_spans, finished);
            }
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_a_span_are_written_as_protobuf_does() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
        let finished = Finished {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: None,
            name: "chat m".into(),
            kind: Kind::Server,
            start_nanos: 1,
            end_nanos: 2,
            attributes: vec![("k".into(), Value::Int(-1))],
            error: None,
        };
        let body = encode(&[], &[finished]);
        // A span's trace id: field 1, length 16, inside the nested messages.
        let at = body.windows(18).position(|w| w[0] == 0x0A && w[1] == 16 && w[2..] == [1; 16]);
        assert!(at.is_some(), "{body:02x?}");
        // An int of -1 is ten bytes of varint (two's complement, as protobuf writes int64).
        let minus_one = [0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        assert!(body.windows(11).any(|w| w == minus_one), "{body:02x?}");
    }
}
