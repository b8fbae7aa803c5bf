//! `ApiError` as the Responses API words it: OpenAI's error shape (`api::openai::error`), with
//! the codes and messages clients read from a Responses failure: a
//! rate limit says when to try again ("Please try again in 3s.", which Codex reads for its retry
//! delay), and a context overflow names `input`.

use axum::response::Response;
use serde_json::json;

use crate::api::openai;
use crate::error::ApiError;

/// The HTTP response for an error raised before streaming began.
pub(crate) fn response(err: ApiError) -> Response {
    let mut body = openai::error::body(&err);
    body["error"]["message"] = json!(message(&err));
    if matches!(err, ApiError::ContextOverflow { .. }) {
        body["error"]["param"] = json!("input");
    }
    openai::error::response_with(err, body)
}

/// The `error.code` of a failed response.
pub(crate) fn code(err: &ApiError) -> &'static str {
    match err {
        ApiError::ContextOverflow { .. } => "context_length_exceeded",
        ApiError::UpstreamRateLimited { .. } | ApiError::RateLimited { .. } => {
            "rate_limit_exceeded"
        }
        ApiError::UpstreamOverloaded { .. } => "server_is_overloaded",
        // The gateway's own failures of a reply: their labels.
        ApiError::ToolCallMissing { .. }
        | ApiError::OutputInvalid { .. }
        | ApiError::CallIncomplete { .. } => err.kind(),
        // Everything else is a failure on the server's side to a Responses client.
        _ => "server_error",
    }
}

/// The message of a failed response or an error body: a rate limit with the delay Codex
/// reads ("try again in Ns", from the upstream's `retry-after`, else 1 s), a context
/// overflow in the Responses API's words, anything else as the other APIs say it.
pub(crate) fn message(err: &ApiError) -> String {
    match err {
        ApiError::UpstreamRateLimited { retry_after, .. } => {
            let seconds = retry_after
                .as_deref()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .unwrap_or(1.0);
            format!("Rate limit reached for the upstream model. Please try again in {seconds}s.")
        }
        ApiError::ContextOverflow { tokens, limit } if *limit > 0 => format!(
            "Your input exceeds the context window of this model ({limit} tokens; the input has {tokens}). Please adjust your input and try again."
        ),
        ApiError::ContextOverflow { .. } => {
            "Your input exceeds the context window of this model. Please adjust your input and try again.".into()
        }
        other => other.message(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate_limited(retry_after: Option<&str>) -> ApiError {
        ApiError::UpstreamRateLimited {
            message: "slow down".into(),
            retry_after: retry_after.map(str::to_owned),
        }
    }

    /// The delay as Codex reads it: `try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)`.
    fn delay(message: &str) -> Option<f64> {
        let rest = &message[message.find("try again in ")? + "try again in ".len()..];
        let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        rest[number.len()..].starts_with('s').then(|| number.parse().ok()).flatten()
    }

    #[test]
    fn a_rate_limit_says_when_to_try_again() {
        assert_eq!(code(&rate_limited(Some("3"))), "rate_limit_exceeded");
        assert_eq!(delay(&message(&rate_limited(Some("3")))), Some(3.0));
        assert_eq!(delay(&message(&rate_limited(Some(" 1.5 ")))), Some(1.5));
        for unreadable in [None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), Some("-4"), Some("inf")] {
            assert_eq!(delay(&message(&rate_limited(unreadable))), Some(1.0), "{unreadable:?}");
        }
    }

    #[test]
    fn a_context_overflow_has_its_code_and_the_numbers_when_known() {
        let err = ApiError::ContextOverflow { tokens: 9000, limit: 8192 };
        assert_eq!(code(&err), "context_length_exceeded");
        let text = message(&err);
        assert!(text.contains("8192 tokens") && text.contains("9000"), "{text}");
        let unknown = message(&ApiError::ContextOverflow { tokens: 1, limit: 0 });
        assert!(unknown.starts_with("Your input exceeds the context window"), "{unknown}");
    }

    #[test]
    fn other_errors_keep_their_message_and_codes() {
        let err = ApiError::Upstream {
            fault: crate::error::UpstreamFault::Failed,
            message: "The upstream model failed.".into(),
            detail: String::new(),
        };
        assert_eq!(
            (code(&err), message(&err).as_str()),
            ("server_error", "The upstream model failed.")
        );
        assert_eq!(
            code(&ApiError::UpstreamOverloaded { retry_after: None }),
            "server_is_overloaded"
        );
        assert_eq!(
            code(&ApiError::ToolCallMissing { message: String::new() }),
            "tool_call_missing"
        );
    }
}
