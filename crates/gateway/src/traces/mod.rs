//! OpenTelemetry traces (issue 27; docs/operations.md): one span per request (`SERVER`), one
//! per emulated attempt, one per upstream request (`CLIENT`), with the GenAI semantic
//! conventions' attributes and toolshim's own, exported over OTLP/HTTP in protobuf
//! (`otlp.rs`). A client's W3C `traceparent` is continued, and each upstream request carries
//! its own.
//!
//! The spans are `tracing` spans named `request`, `attempt` and `upstream`; `OtlpLayer` keeps
//! a `Live` record in each while it is open and sends it to the `Exporter` when it closes.
//! Attributes are set through `set` on the record itself, not as `tracing` fields, so logs
//! do not change. Off unless an endpoint is configured: then no layer is installed, the
//! `attempt` and `upstream` spans (at `debug`) are not even created, and `set` finds no
//! record.

pub(crate) mod otlp;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::span::{Attributes, Id, Record};
use tracing::{Span, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, Registry};

pub(crate) use otlp::Value;
use otlp::{Finished, Kind};

/// Spans waiting for export at most; past it they are dropped.
const QUEUE: usize = 4096;
/// The most spans one export carries.
const BATCH: usize = 512;
/// How long a span waits for its batch at most.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Where spans go: the OTLP/HTTP traces URL, its headers, and the service's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
}

impl Export {
    /// The export `config` and the environment (`var`) ask for, if any. The standard
    /// variables win over the file: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL),
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base: `/v1/traces` is added), `OTEL_SERVICE_NAME`,
    /// `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`); `OTEL_SDK_DISABLED=true` or
    /// `OTEL_TRACES_EXPORTER=none` turn it off.
    pub fn from_config(
        config: &crate::config::TracesConfig,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Export>, String> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return Ok(None);
        }
        let base = |url: String| format!("{}/v1/traces", url.trim().trim_end_matches('/'));
        let url =
            match (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
                (Some(url), _) => url.trim().to_owned(),
                (None, Some(url)) => base(url),
                (None, None) if !config.endpoint.trim().is_empty() => base(config.endpoint.clone()),
                (None, None) => return Ok(None),
            };
        match reqwest::Url::parse(&url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
            _ => return Err(format!("traces: `{url}` is not an http(s) URL")),
        }
        // Only OTLP/HTTP with protobuf is built: another protocol is said at the start.
        let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol.filter(|p| p.trim() != "http/protobuf") {
            return Err(format!(
                "traces: the OTLP protocol `{}` is not supported; toolshim sends http/protobuf (a collector's port 4318), or set OTEL_TRACES_EXPORTER=none",
                protocol.trim()
            ));
        }
        let mut headers = Vec::new();
        for pair in set("OTEL_EXPORTER_OTLP_HEADERS").unwrap_or_default().split(',') {
            if pair.trim().is_empty() {
                continue;
            }
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!("OTEL_EXPORTER_OTLP_HEADERS: `{pair}` is not key=value"));
            };
            headers.push((key.trim().to_owned(), percent_decoded(value.trim())));
        }
        let service_name = set("OTEL_SERVICE_NAME").unwrap_or_else(|| config.service_name.clone());
        Ok(Some(Export { url, headers, service_name }))
    }

    /// The layer to install in the subscriber, and the exporter to run beside the server.
    pub fn start(self) -> (OtlpLayer, Exporter) {
        let (sender, receiver) = mpsc::channel(QUEUE);
        (OtlpLayer { sender }, Exporter { receiver, export: self })
    }
}

/// `%XX` escapes decoded, as the OTLP headers variable is written (`Basic%20…`).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|_| b == b'%')
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a span's metadata is one the layer records (its per-layer filter).
pub fn traced(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.is_span()
        && metadata.target().starts_with("toolshim_gateway")
        && matches!(metadata.name(), "request" | "attempt" | "upstream")
}

/// An open span's record.
struct Live {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    kind: Kind,
    name: &'static str,
    start_nanos: u64,
    attributes: Vec<(String, Value)>,
    error: Option<String>,
}

impl Live {
    fn set(&mut self, key: &str, value: Value) {
        match self.attributes.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((key.to_owned(), value)),
        }
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn finish(self) -> Finished {
        let text = |key| match self.get(key) {
            Some(Value::Str(text)) => Some(text.clone()),
            Some(Value::Int(n)) => Some(n.to_string()),
            _ => None,
        };
        // The GenAI conventions name a span `{operation} {model}`.
        let name = match (self.name, text("gen_ai.operation.name"), text("gen_ai.request.model")) {
            ("attempt", _, _) => {
                format!("attempt {}", text("toolshim.attempt").unwrap_or_default())
            }
            (_, Some(op), Some(model)) => format!("{op} {model}"),
            (name, _, _) => name.to_owned(),
        };
        Finished {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent: self.parent,
            name,
            kind: self.kind,
            start_nanos: self.start_nanos,
            end_nanos: now_nanos(),
            attributes: self.attributes,
            error: self.error,
        }
    }
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn random<const N: usize>() -> [u8; N] {
    let mut id = [0u8; N];
    while id == [0u8; N] {
        id.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    id
}

/// The `tracing` fields of a span, as attributes (`route` is `http.route`).
struct Fields<'a>(&'a mut Live);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let key = match field.name() {
            "route" => "http.route",
            "request_id" => "toolshim.request_id",
            other => other,
        };
        self.0.set(key, Value::Str(value.to_owned()));
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.set(field.name(), Value::Int(value));
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.set(field.name(), Value::Int(i64::try_from(value).unwrap_or(i64::MAX)));
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.set(field.name(), Value::Bool(value));
    }
}

/// The `tracing` layer that records the traced spans and sends them to the exporter.
pub struct OtlpLayer {
    sender: mpsc::Sender<Finished>,
}

impl<S> Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let (kind, name) = match attrs.metadata().name() {
            "request" => (Kind::Server, "request"),
            "attempt" => (Kind::Internal, "attempt"),
            "upstream" => (Kind::Client, "upstream"),
            _ => return,
        };
        let Some(span) = ctx.span(id) else { return };
        let parent = span
            .scope()
            .skip(1)
            .find_map(|p| p.extensions().get::<Live>().map(|l| (l.trace_id, l.span_id)));
        let (trace_id, parent) = match parent {
            Some((trace_id, span_id)) => (trace_id, Some(span_id)),
            None => (random(), None),
        };
        let mut live = Live {
            trace_id,
            span_id: random(),
            parent,
            kind,
            name,
            start_nanos: now_nanos(),
            attributes: Vec::new(),
            error: None,
        };
        attrs.record(&mut Fields(&mut live));
        span.extensions_mut().insert(live);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(live) = span.extensions_mut().get_mut::<Live>() {
                values.record(&mut Fields(live));
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(live) = span.extensions_mut().remove::<Live>() else { return };
        // A full queue drops the span: tracing never holds a request up.
        let _ = self.sender.try_send(live.finish());
    }
}

/// Runs `f` on `span`'s record, if it has one (traces on, and the span traced).
fn with_live<T>(span: &Span, f: impl FnOnce(&mut Live) -> T) -> Option<T> {
    span.with_subscriber(|(id, dispatch)| {
        let registry = dispatch.downcast_ref::<Registry>()?;
        let span = registry.span(id)?;
        let mut extensions = span.extensions_mut();
        extensions.get_mut::<Live>().map(f)
    })
    .flatten()
}

/// Sets an attribute of `span` (nothing when traces are off).
pub(crate) fn set(span: &Span, key: &str, value: impl Into<Value>) {
    with_live(span, |live| live.set(key, value.into()));
}

/// Marks `span` as failed with `message`.
pub(crate) fn fail(span: &Span, kind: &str, message: &str) {
    with_live(span, |live| {
        live.set("error.type", Value::Str(kind.to_owned()));
        live.error = Some(message.to_owned());
    });
}

/// Continues the client's trace: a W3C `traceparent` (`00-TRACE-PARENT-FLAGS`) makes `span`
/// a child of the client's span. One that is malformed is ignored.
pub(crate) fn continue_from(span: &Span, traceparent: &str) {
    if let Some((trace, parent)) = parse_traceparent(traceparent) {
        with_live(span, |live| {
            live.trace_id = trace;
            live.parent = Some(parent);
        });
    }
}

/// The trace and parent span ids of a well-formed `traceparent`.
fn parse_traceparent(traceparent: &str) -> Option<([u8; 16], [u8; 8])> {
    fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
        if text.len() != N * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; N];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    }
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let [version, trace, parent, flags] = parts.as_slice() else { return None };
    let (version, trace, parent) = (hex::<1>(version)?, hex::<16>(trace)?, hex::<8>(parent)?);
    hex::<1>(flags)?;
    (version != [0xff] && trace != [0; 16] && parent != [0; 8]).then_some((trace, parent))
}

/// The `traceparent` that names `span` to the next service.
pub(crate) fn traceparent(span: &Span) -> Option<String> {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    with_live(span, |live| format!("00-{}-{}-01", hex(&live.trace_id), hex(&live.span_id)))
}

/// Sends the finished spans in batches, until `stop` (then what is queued).
pub struct Exporter {
    receiver: mpsc::Receiver<Finished>,
    export: Export,
}

impl Exporter {
    pub async fn run(mut self, stop: CancellationToken) {
        #[expect(clippy::disallowed_methods, reason = "the trace exporter's own client")]
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build();
        let Ok(client) = client else { return };
        let resource = vec![
            ("service.name".to_owned(), Value::Str(self.export.service_name.clone())),
            ("service.version".to_owned(), Value::Str(env!("CARGO_PKG_VERSION").to_owned())),
            ("telemetry.sdk.name".to_owned(), Value::Str("toolshim".to_owned())),
        ];
        let mut batch = Vec::new();
        let mut due = tokio::time::Instant::now() + FLUSH_EVERY;
        loop {
            tokio::select! {
                got = self.receiver.recv() => match got {
                    Some(span) => {
                        if batch.is_empty() {
                            due = tokio::time::Instant::now() + FLUSH_EVERY;
                        }
                        batch.push(span);
                        if batch.len() >= BATCH {
                            self.send(&client, &resource, &mut batch).await;
                        }
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(due), if !batch.is_empty() => {
                    self.send(&client, &resource, &mut batch).await;
                }
                () = stop.cancelled() => break,
            }
        }
        while let Ok(span) = self.receiver.try_recv() {
            batch.push(span);
        }
        if !batch.is_empty() {
            self.send(&client, &resource, &mut batch).await;
        }
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        resource: &[(String, Value)],
        batch: &mut Vec<Finished>,
    ) {
        let body = otlp::encode(resource, batch);
        let n = batch.len();
        batch.clear();
        let mut request = client
            .post(&self.export.url)
            .header("content-type", "application/x-protobuf")
            .body(body);
        for (key, value) in &self.export.headers {
            request = request.header(key, value);
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => {
                tracing::warn!(status = response.status().as_u16(), spans = n, url = %self.export.url, "the trace collector refused spans");
            }
            Err(err) => {
                tracing::warn!(error = %err, spans = n, url = %self.export.url, "spans could not be exported");
            }
        }
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Str(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Str(text)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TracesConfig;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn the_otel_variables_win_over_the_file_and_can_turn_traces_off() {
        let file = TracesConfig { endpoint: "http://file:4318/".into(), service_name: "gw".into() };
        let from_file = Export::from_config(&file, env(&[])).unwrap().unwrap();
        assert_eq!(
            (from_file.url.as_str(), from_file.service_name.as_str()),
            ("http://file:4318/v1/traces", "gw")
        );
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
            ("OTEL_SERVICE_NAME", "edge"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc, authorization = Basic%20dTpw"),
        ];
        let export = Export::from_config(&file, env(&vars)).unwrap().unwrap();
        assert_eq!(export.url, "http://base:4318/v1/traces");
        assert_eq!(export.service_name, "edge");
        assert_eq!(
            export.headers,
            [("x-api-key".into(), "abc".into()), ("authorization".into(), "Basic dTpw".into())]
        );
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert!(Export::from_config(&file, env(&grpc)).unwrap_err().contains("`grpc` is not"));
        let whole = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://c/otlp/traces")];
        assert_eq!(
            Export::from_config(&file, env(&whole)).unwrap().unwrap().url,
            "https://c/otlp/traces"
        );
        assert_eq!(Export::from_config(&TracesConfig::default(), env(&[])).unwrap(), None);
        let off =
            [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"), ("OTEL_SDK_DISABLED", "true")];
        assert_eq!(Export::from_config(&file, env(&off)).unwrap(), None);
        let bad = [("OTEL_EXPORTER_OTLP_HEADERS", "novalue")];
        assert!(Export::from_config(&file, env(&bad)).unwrap_err().contains("novalue"));
        let bad = [("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")];
        assert!(Export::from_config(&file, env(&bad)).unwrap_err().contains("not an http(s) URL"));
    }

    #[test]
    fn a_traceparent_is_read_only_when_well_formed() {
        let (trace, parent) =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!((trace[0], trace[15], parent[0], parent[7]), (0x4b, 0x36, 0x00, 0xb7));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        // Without a layer there is no record: nothing to continue, no traceparent to give.
        let span = tracing::Span::none();
        continue_from(&span, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(traceparent(&span), None);
    }
}
