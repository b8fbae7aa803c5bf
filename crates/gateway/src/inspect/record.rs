//! What the inspector keeps of a request: plain data, served as JSON and rendered as HTML.

use serde::Serialize;

/// The verdict on a reply that is asked for again with a correction.
pub(crate) const RETRY: &str = "retry";
/// The verdict on a reply that is asked for again without tools.
pub(crate) const PLAIN_ANSWER: &str = "plain answer";

/// One request, as it was served.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Record {
    pub(crate) id: u64,
    /// When it arrived, in milliseconds since the Unix epoch.
    pub(crate) started_ms: u64,
    /// The client API (`chat_completions`, `messages`, `responses`…).
    pub(crate) family: &'static str,
    /// The name of the key it came with.
    pub(crate) key: Option<String>,
    /// The model the client asked for.
    pub(crate) model: String,
    /// The upstreams and model it went to (`name:model`, in the route's order).
    pub(crate) route: Option<String>,
    /// How it was served: `emulate`, `native`, `native, then emulate`, `plain`, `passthrough`.
    pub(crate) mode: Option<String>,
    pub(crate) stream: bool,
    /// The HTTP status the client got.
    pub(crate) status: Option<u16>,
    /// How the reply ended (`stop`, `tool_calls`, `length`), or the error.
    pub(crate) outcome: Option<String>,
    pub(crate) latency_ms: Option<u64>,
    pub(crate) in_flight: bool,
    /// The request's body as the client sent it.
    pub(crate) request: String,
    /// Each request to an upstream, in order.
    pub(crate) attempts: Vec<Attempt>,
    /// The response body the client received (the whole stream, when it streamed).
    pub(crate) response: String,
}

/// One request to an upstream.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Attempt {
    /// From 1.
    pub(crate) number: usize,
    /// `emulated` (the tool contract in the prompt), `native` (tools declared to the
    /// upstream), `plain` (asked without tools), `passthrough`.
    pub(crate) kind: &'static str,
    /// The upstream's model.
    pub(crate) model: String,
    /// The system text the upstream got (the tool contract, emulated).
    pub(crate) system: String,
    /// The conversation as the upstream got it (the projected history, emulated).
    pub(crate) turns: Vec<Turn>,
    /// The JSON body sent (native and passthrough).
    pub(crate) body: String,
    /// The correction this attempt carried: why the one before it was asked for again.
    pub(crate) correction: Option<String>,
    /// Under the contract's grammar (constrained decoding).
    pub(crate) grammar: bool,
    /// The text the upstream wrote.
    pub(crate) raw: String,
    /// How the upstream said its reply ended.
    pub(crate) finish_reason: Option<String>,
    /// Calls the parser read, unknown tools it rejected, and its warnings; spans are byte
    /// ranges of `raw`.
    pub(crate) findings: Vec<Finding>,
    /// What was wrong with the reply (a retry reason), if anything.
    pub(crate) problem: Option<String>,
    /// What was done with it: `answer`, `retry`, `plain answer`, `failed`.
    pub(crate) verdict: Option<String>,
    /// The upstream's error, when it failed.
    pub(crate) error: Option<String>,
    /// Tokens, as the upstream reported them (`[prompt, completion]`).
    pub(crate) usage: Option<[u64; 2]>,
}

/// A conversation turn as the upstream got it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Turn {
    pub(crate) role: &'static str,
    pub(crate) text: String,
    /// How many images it carried (not kept).
    pub(crate) images: usize,
}

/// Something the parser found in a reply's text.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    /// `call`, `incomplete_call`, `rejected` (an unknown tool) or `warning`.
    pub(crate) kind: &'static str,
    /// The tool's name (calls, rejected) or the warning's code.
    pub(crate) name: String,
    /// The call's arguments, why a call was rejected, or the warning's message.
    pub(crate) detail: String,
    /// The bytes of the reply's text it came from.
    pub(crate) span: [usize; 2],
}

/// A line of the list.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) id: u64,
    pub(crate) started_ms: u64,
    pub(crate) key: Option<String>,
    pub(crate) family: &'static str,
    pub(crate) model: String,
    pub(crate) route: Option<String>,
    pub(crate) mode: Option<String>,
    pub(crate) status: Option<u16>,
    pub(crate) outcome: Option<String>,
    pub(crate) latency_ms: Option<u64>,
    pub(crate) attempts: usize,
    pub(crate) retries: usize,
    pub(crate) in_flight: bool,
}

impl Record {
    pub(crate) fn new(id: u64, started_ms: u64, family: &'static str, key: Option<&str>) -> Record {
        Record {
            id,
            started_ms,
            family,
            key: key.map(str::to_owned),
            model: String::new(),
            route: None,
            mode: None,
            stream: false,
            status: None,
            outcome: None,
            latency_ms: None,
            in_flight: true,
            request: String::new(),
            attempts: Vec::new(),
            response: String::new(),
        }
    }

    /// The attempts whose reply was asked for again (a retry, or a plain answer).
    pub(crate) fn retries(&self) -> usize {
        let again =
            |attempt: &&Attempt| matches!(attempt.verdict.as_deref(), Some(RETRY | PLAIN_ANSWER));
        self.attempts.iter().filter(again).count()
    }

    pub(crate) fn summary(&self) -> Summary {
        Summary {
            id: self.id,
            started_ms: self.started_ms,
            key: self.key.clone(),
            family: self.family,
            model: self.model.clone(),
            route: self.route.clone(),
            mode: self.mode.clone(),
            status: self.status,
            outcome: self.outcome.clone(),
            latency_ms: self.latency_ms,
            attempts: self.attempts.len(),
            retries: self.retries(),
            in_flight: self.in_flight,
        }
    }
}
