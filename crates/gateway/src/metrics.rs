//! Every metric name and label set, in one place (Prometheus text format on `/metrics`).

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

pub(crate) const REQUESTS: &str = "toolshim_requests";
pub(crate) const REQUEST_SECONDS: &str = "toolshim_request_duration_seconds";
pub(crate) const FIRST_TOKEN_SECONDS: &str = "toolshim_time_to_first_token_seconds";
pub(crate) const TOOL_CALLS: &str = "toolshim_tool_calls";
pub(crate) const RETRIES: &str = "toolshim_retries";
pub(crate) const ERRORS: &str = "toolshim_errors";
pub(crate) const REFUSALS: &str = "toolshim_refusals";
pub(crate) const PARSE_FAILURES: &str = "toolshim_parse_failures";
pub(crate) const UPSTREAM_REPAIRS: &str = "toolshim_upstream_repairs";
pub(crate) const HOSTED_TOOLS_LEFT_OUT: &str = "toolshim_hosted_tools_left_out";
pub(crate) const CONTINUATIONS: &str = "toolshim_continuations";
pub(crate) const GUESSED_CALLS: &str = "toolshim_guessed_calls";
pub(crate) const KEY_REQUESTS: &str = "toolshim_key_requests";
pub(crate) const KEY_TOKENS: &str = "toolshim_key_tokens";
pub(crate) const KEY_LIMITED: &str = "toolshim_key_limited";

/// The gateway's metrics.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    first_token: Histogram,
    tool_calls: Counter,
    retries: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    refusals: Counter,
    parse_failures: Counter,
    upstream_repairs: Family<Labels, Counter>,
    hosted_tools: Family<Labels, Counter>,
    continuations: Family<Labels, Counter>,
    guessed_calls: Counter,
    key_requests: Family<Labels, Counter>,
    key_tokens: Family<Labels, Counter>,
    key_limited: Family<Labels, Counter>,
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.5, 14))
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        let latency = Family::<Labels, Histogram>::new_with_constructor(
            seconds_histogram as fn() -> Histogram,
        );
        let first_token = seconds_histogram();
        let tool_calls = Counter::default();
        let retries = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let refusals = Counter::default();
        let parse_failures = Counter::default();
        let upstream_repairs = Family::<Labels, Counter>::default();
        let hosted_tools = Family::<Labels, Counter>::default();
        let continuations = Family::<Labels, Counter>::default();
        let guessed_calls = Counter::default();
        let key_requests = Family::<Labels, Counter>::default();
        let key_tokens = Family::<Labels, Counter>::default();
        let key_limited = Family::<Labels, Counter>::default();
        registry.register(
            KEY_REQUESTS,
            "Requests served per gateway key (its name) and client model",
            key_requests.clone(),
        );
        registry.register(
            KEY_TOKENS,
            "Tokens per gateway key and client model, by kind (prompt, completion, cached: the prompt's tokens read from the upstream's cache) and attempt (final, or retry: attempts asked for again)",
            key_tokens.clone(),
        );
        registry.register(
            KEY_LIMITED,
            "Requests refused per gateway key, by limit (rpm, tpm, tpd, concurrent, model)",
            key_limited.clone(),
        );
        registry.register(REQUESTS, "HTTP requests by route and status class", requests.clone());
        registry.register(REQUEST_SECONDS, "Request latency by route", latency.clone());
        registry.register(
            FIRST_TOKEN_SECONDS,
            "Time to the first streamed event",
            first_token.clone(),
        );
        registry.register(TOOL_CALLS, "Tool calls returned to clients", tool_calls.clone());
        registry.register(
            RETRIES,
            "Emulated replies asked for again, by reason and whether a retry was left",
            retries.clone(),
        );
        registry.register(ERRORS, "Errors by kind", errors.clone());
        registry.register(
            REFUSALS,
            "Replies in which the model said it has no tools",
            refusals.clone(),
        );
        registry.register(
            PARSE_FAILURES,
            "Replies with tool-call syntax that gave no usable call (malformed, unknown tool, cut off)",
            parse_failures.clone(),
        );
        registry.register(
            UPSTREAM_REPAIRS,
            "Faults in upstream replies that the gateway repaired, by kind (lone_surrogate: a lone UTF-16 surrogate escape, invalid_utf8: a byte sequence that is not UTF-8; each replaced with U+FFFD)",
            upstream_repairs.clone(),
        );
        registry.register(
            HOSTED_TOOLS_LEFT_OUT,
            "Hosted tools in Responses requests (web_search, file_search, …) left out of the prompt, by type",
            hosted_tools.clone(),
        );
        registry.register(
            CONTINUATIONS,
            "Continuations of a reply for one more call, by result (kept; repeat, unasked_value, nothing_new: the call was not kept; no_call; failed)",
            continuations.clone(),
        );
        registry.register(
            GUESSED_CALLS,
            "Calls dropped because their required arguments hold values given nowhere in the conversation or the tool list",
            guessed_calls.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            first_token,
            tool_calls,
            retries,
            errors,
            refusals,
            parse_failures,
            upstream_repairs,
            hosted_tools,
            continuations,
            guessed_calls,
            key_requests,
            key_tokens,
            key_limited,
        }
    }

    /// A request of gateway key `key` for `model` served: the last attempt's tokens, and
    /// those of the attempts before it.
    pub(crate) fn key_usage(
        &self,
        key: &str,
        model: &str,
        last: crate::chat::Usage,
        retried: crate::chat::Usage,
    ) {
        let labels = |kind: &str, attempt: &str| {
            vec![
                ("key", key.to_owned()),
                ("model", model.to_owned()),
                ("kind", kind.to_owned()),
                ("attempt", attempt.to_owned()),
            ]
        };
        self.key_requests
            .get_or_create(&vec![("key", key.to_owned()), ("model", model.to_owned())])
            .inc();
        for (attempt, usage) in [("final", last), ("retry", retried)] {
            for (kind, n) in [
                ("prompt", usage.prompt_tokens),
                ("completion", usage.completion_tokens),
                ("cached", usage.cached_tokens),
            ] {
                if n > 0 || attempt == "final" {
                    self.key_tokens.get_or_create(&labels(kind, attempt)).inc_by(n);
                }
            }
        }
    }

    /// A request of gateway key `key` refused by `limit`.
    pub(crate) fn key_limited(&self, key: &str, limit: &str) {
        self.key_limited
            .get_or_create(&vec![("key", key.to_owned()), ("limit", limit.to_owned())])
            .inc();
    }

    /// One continuation and its result (`kept`, a `continuation::Stop`, `no_call`, `failed`).
    pub(crate) fn continuation(&self, result: &'static str) {
        self.continuations.get_or_create(&vec![("result", result.to_owned())]).inc();
    }

    pub(crate) fn guessed_calls(&self, n: usize) {
        self.guessed_calls.inc_by(n as u64);
    }

    pub(crate) fn request(&self, route: &str, status: u16, elapsed: Duration) {
        let class = format!("{}xx", status / 100);
        self.requests.get_or_create(&vec![("route", route.to_owned()), ("status", class)]).inc();
        self.latency
            .get_or_create(&vec![("route", route.to_owned())])
            .observe(elapsed.as_secs_f64());
    }

    pub(crate) fn first_token(&self, elapsed: Duration) {
        self.first_token.observe(elapsed.as_secs_f64());
    }

    pub(crate) fn calls(&self, n: usize) {
        self.tool_calls.inc_by(n as u64);
    }

    pub(crate) fn retry(&self, reason: &str, retried: bool) {
        let labels = vec![("reason", reason.to_owned()), ("retried", retried.to_string())];
        self.retries.get_or_create(&labels).inc();
        match reason {
            "refusal" => {
                self.refusals.inc();
            }
            "malformed" | "unknown_tool" | "truncated" => {
                self.parse_failures.inc();
            }
            _ => {}
        }
    }

    pub(crate) fn upstream_repair(&self, kind: &str, n: usize) {
        self.upstream_repairs.get_or_create(&vec![("kind", kind.to_owned())]).inc_by(n as u64);
    }

    pub(crate) fn hosted_tool_left_out(&self, kind: &str) {
        // Tool types come from clients: keep the label set small. Anthropic's carry a date
        // (`web_search_20250305`): the label is the type without it.
        let kind = match kind.rsplit_once('_') {
            Some((base, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
                base
            }
            _ => kind,
        };
        let kind = match kind {
            "web_search"
            | "web_search_preview"
            | "file_search"
            | "code_interpreter"
            | "image_generation"
            | "computer_use_preview"
            | "mcp"
            | "local_shell"
            | "tool_search"
            | "shell"
            | "apply_patch"
            | "web_fetch"
            | "code_execution"
            | "bash"
            | "text_editor"
            | "computer"
            | "memory" => kind,
            _ => "other",
        };
        self.hosted_tools.get_or_create(&vec![("type", kind.to_owned())]).inc();
    }

    pub(crate) fn error(&self, kind: &str) {
        self.errors.get_or_create(&vec![("kind", kind.to_owned())]).inc();
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
