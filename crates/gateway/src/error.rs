//! Gateway errors, grouped by cause. Each API family renders them in its own shape
//! (`api::openai::error`); `status` and `kind` are the only places that classify them.

use axum::http::StatusCode;

/// What was wrong with the credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No key at all.
    Missing,
    /// An `x-api-key` that is not a gateway key.
    BadKey,
    /// A Bearer token that is not a gateway key.
    BadBearer,
    /// A gateway key without `admin = true`, at an admin endpoint.
    NotAdmin,
}

/// What went wrong with an upstream's answer (`ApiError::Upstream`), each its own metric and
/// log kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamFault {
    /// It redirected the request (the gateway does not follow with its credentials).
    Redirect,
    /// It refused the gateway's own credentials (401, 403, 407).
    Credentials,
    /// It failed (a 5xx other than the overloaded ones, or a status nothing else covers).
    Failed,
    /// Its reply cannot be read: not JSON, not an event stream, an unknown encoding, an event
    /// of the wrong shape, a stream where one body was asked for.
    Unreadable,
    /// Its reply passed a configured cap.
    TooLarge,
    /// Its reply broke off or ended unfinished.
    BrokeOff,
    /// Its reply was an error object instead of output.
    Reported,
}

impl UpstreamFault {
    fn kind(self) -> &'static str {
        match self {
            UpstreamFault::Redirect => "upstream_redirect",
            UpstreamFault::Credentials => "upstream_credentials",
            UpstreamFault::Failed => "upstream_failed",
            UpstreamFault::Unreadable => "upstream_unreadable",
            UpstreamFault::TooLarge => "upstream_too_large",
            UpstreamFault::BrokeOff => "upstream_broke_off",
            UpstreamFault::Reported => "upstream_reported",
        }
    }
}

/// The upstream (by its configured name) and the model name whose request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refuser {
    pub(crate) upstream: String,
    pub(crate) model: String,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The client's request is malformed or inconsistent.
    InvalidRequest { message: String, param: Option<String>, code: Option<String> },
    /// No valid gateway API key.
    Auth(AuthFailure),
    /// An unknown route.
    NotFound(String),
    /// A known route asked with a method it does not serve (`GET /v1/chat/completions`).
    MethodNotAllowed(String),
    /// A model no upstream serves; the message names the models there are.
    ModelNotFound(String),
    /// The request body is larger than the configured limit.
    BodyTooLarge { limit: usize },
    /// The request body did not arrive within `body_read_timeout_secs`.
    RequestTimeout,
    /// The gateway is shutting down and its drain timeout passed before the request ended.
    ShuttingDown,
    /// The response store failed (its file cannot be read or written); the cause is for the
    /// log only.
    StoreUnavailable(String),
    /// The upstream answered with an error status or an unusable body; `fault` says which.
    /// `detail` is for the log only: the upstream and what happened.
    Upstream { fault: UpstreamFault, message: String, detail: String },
    /// The upstream refused the request as the client made it (a 4xx other than 401, 403,
    /// 408 and 429); the client gets that status and the upstream's message. `by` says which
    /// upstream and model refused it, once a route's chain knows (so what was refused can be
    /// remembered for them).
    UpstreamRejected { status: u16, message: String, by: Option<Box<Refuser>> },
    /// A limit of the caller's key refused the request (`[keys.NAME]`): the message names the
    /// limit; `retry_after` is in seconds; `tokens`: a token limit (else a request limit).
    RateLimited { message: String, retry_after: String, tokens: bool },
    /// The upstream rate-limited the request; `retry_after` is its header, if any.
    UpstreamRateLimited { message: String, retry_after: Option<String> },
    /// The upstream says it is overloaded (503 or 529); `retry_after` is its header, if any.
    UpstreamOverloaded { retry_after: Option<String> },
    /// The prompt does not fit the upstream model's context window.
    ContextOverflow { tokens: u64, limit: u64 },
    /// The upstream could not be reached.
    UpstreamUnavailable { message: String, detail: String },
    /// The upstream did not answer (or went silent) within its timeout.
    UpstreamTimeout { detail: String },
    /// `tool_choice` required a call and the model did not produce one, retries included.
    ToolCallMissing { message: String },
    /// The answer never had the format the client asked for, retries included.
    OutputInvalid { message: String },
    /// A call ended incomplete (cut off inside its arguments, or arguments that are not
    /// JSON) without a token limit to blame, retries included: no finish reason fits it.
    CallIncomplete { message: String },
    /// A bug in the gateway.
    Internal(String),
}

impl ApiError {
    /// The HTTP status. One exhaustive match, no catch-all.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Auth(AuthFailure::NotAdmin) => StatusCode::FORBIDDEN,
            ApiError::Auth(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) | ApiError::ModelNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::ShuttingDown | ApiError::StoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Upstream { .. } => StatusCode::BAD_GATEWAY,
            ApiError::UpstreamRejected { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST)
            }
            ApiError::UpstreamRateLimited { .. } | ApiError::RateLimited { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::UpstreamOverloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::ContextOverflow { .. } => StatusCode::BAD_REQUEST,
            ApiError::UpstreamUnavailable { .. } => StatusCode::BAD_GATEWAY,
            ApiError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::ToolCallMissing { .. } => StatusCode::BAD_GATEWAY,
            ApiError::OutputInvalid { .. } => StatusCode::BAD_GATEWAY,
            ApiError::CallIncomplete { .. } => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A short, stable label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest { .. } => "invalid_request",
            ApiError::Auth(_) => "auth",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::ModelNotFound(_) => "model_not_found",
            ApiError::BodyTooLarge { .. } => "body_too_large",
            ApiError::RequestTimeout => "request_timeout",
            ApiError::ShuttingDown => "shutting_down",
            ApiError::StoreUnavailable(_) => "store_unavailable",
            ApiError::Upstream { fault, .. } => fault.kind(),
            ApiError::UpstreamRejected { .. } => "upstream_rejected",
            ApiError::UpstreamRateLimited { .. } => "upstream_rate_limited",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::UpstreamOverloaded { .. } => "upstream_overloaded",
            ApiError::ContextOverflow { .. } => "context_overflow",
            ApiError::UpstreamUnavailable { .. } => "upstream_unavailable",
            ApiError::UpstreamTimeout { .. } => "upstream_timeout",
            ApiError::ToolCallMissing { .. } => "tool_call_missing",
            ApiError::OutputInvalid { .. } => "output_invalid",
            ApiError::CallIncomplete { .. } => "call_incomplete",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The message shown to clients (sanitized: never an upstream body).
    pub fn message(&self) -> String {
        match self {
            ApiError::InvalidRequest { message, .. }
            | ApiError::RateLimited { message, .. }
            | ApiError::Upstream { message, .. }
            | ApiError::UpstreamRateLimited { message, .. }
            | ApiError::UpstreamUnavailable { message, .. }
            | ApiError::ToolCallMissing { message }
            | ApiError::OutputInvalid { message }
            | ApiError::CallIncomplete { message } => message.clone(),
            ApiError::UpstreamRejected { status, message, .. } => {
                format!("The upstream model rejected the request (status {status}): {message}")
            }
            ApiError::Auth(AuthFailure::NotAdmin) => {
                "This endpoint needs a gateway key with `admin = true` ([keys.NAME] in the config file).".into()
            }
            ApiError::Auth(_) => {
                "Incorrect API key provided. Pass a gateway key as `Authorization: Bearer <key>`."
                    .into()
            }
            ApiError::UpstreamOverloaded { .. } => {
                "The upstream model is overloaded; try again later.".into()
            }
            ApiError::ContextOverflow { tokens, limit } => format!(
                "This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."
            ),
            ApiError::NotFound(what)
            | ApiError::ModelNotFound(what)
            | ApiError::MethodNotAllowed(what) => what.clone(),
            ApiError::BodyTooLarge { limit } => {
                format!("The request body is larger than the gateway's limit of {limit} bytes.")
            }
            ApiError::UpstreamTimeout { .. } => "The upstream model did not answer in time.".into(),
            ApiError::RequestTimeout => {
                "The request body did not arrive in time; send it again.".into()
            }
            ApiError::ShuttingDown => {
                "The gateway is shutting down and could not finish this request; send it again."
                    .into()
            }
            ApiError::StoreUnavailable(_) => {
                "The gateway's response store is unavailable; try again later, or send the whole conversation with store: false.".into()
            }
            ApiError::Internal(_) => {
                "The server had an error while processing your request. Sorry about that!".into()
            }
        }
    }

    /// What the log says of the error: the upstream and the cause where there is one, else
    /// the client's message.
    pub fn detail(&self) -> String {
        match self {
            ApiError::Upstream { detail, .. }
            | ApiError::UpstreamUnavailable { detail, .. }
            | ApiError::UpstreamTimeout { detail } => detail.clone(),
            ApiError::Internal(what) | ApiError::StoreUnavailable(what) => what.clone(),
            other => other.message(),
        }
    }

    /// Whether a client's retry of the same request may succeed, sent as `x-should-retry`
    /// (the OpenAI and Anthropic SDKs honour it; without it they retry every 5xx twice).
    /// `Some(false)` for errors the same request will meet again: the request itself, the
    /// keys, and an emulation whose retries ran out. `Some(true)` for the transient ones.
    /// `None` where the gateway cannot tell (an upstream's own failure, a bug): the SDKs then
    /// go by the status. One exhaustive match, no catch-all.
    pub fn should_retry(&self) -> Option<bool> {
        match self {
            ApiError::InvalidRequest { .. }
            | ApiError::Auth(_)
            | ApiError::NotFound(_)
            | ApiError::MethodNotAllowed(_)
            | ApiError::ModelNotFound(_)
            | ApiError::BodyTooLarge { .. }
            | ApiError::UpstreamRejected { .. }
            | ApiError::ContextOverflow { .. }
            | ApiError::ToolCallMissing { .. }
            | ApiError::OutputInvalid { .. }
            | ApiError::CallIncomplete { .. } => Some(false),
            ApiError::RequestTimeout
            | ApiError::ShuttingDown
            | ApiError::StoreUnavailable(_)
            | ApiError::UpstreamRateLimited { .. }
            | ApiError::RateLimited { .. }
            | ApiError::UpstreamOverloaded { .. }
            | ApiError::UpstreamUnavailable { .. }
            | ApiError::UpstreamTimeout { .. } => Some(true),
            ApiError::Upstream { .. } | ApiError::Internal(_) => None,
        }
    }

    /// The upstream's `retry-after`, passed on to the client (the SDKs honour it).
    pub fn retry_after(&self) -> Option<&str> {
        match self {
            ApiError::UpstreamRateLimited { retry_after, .. }
            | ApiError::UpstreamOverloaded { retry_after } => retry_after.as_deref(),
            ApiError::RateLimited { retry_after, .. } => Some(retry_after),
            _ => None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError::InvalidRequest {
            message: message.into(),
            param: param.map(str::to_owned),
            code: None,
        }
    }
}
