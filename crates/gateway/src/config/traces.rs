//! `[traces]`: OpenTelemetry traces over OTLP/HTTP (issue 27; docs/operations.md). The
//! standard `OTEL_*` variables override it (`traces::Export::from_config`).

/// The trace export (`[traces]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracesConfig {
    /// The collector's OTLP/HTTP base URL (`http://collector:4318`; spans go to `/v1/traces`);
    /// empty: no traces.
    pub endpoint: String,
    /// `service.name` of the spans.
    pub service_name: String,
}

impl Default for TracesConfig {
    fn default() -> TracesConfig {
        TracesConfig { endpoint: String::new(), service_name: "toolshim".into() }
    }
}
