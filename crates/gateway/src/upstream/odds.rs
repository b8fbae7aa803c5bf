//! The model's own odds of opening its reply with a call (`min_call_confidence`, issue 24):
//! a one-token request asking for the first token's alternatives (`logprobs`), read before
//! the request itself is sent. A small model that calls a tool where none fits often does so
//! with odds it would not bet on: the first token of the call syntax wins with 55% against
//! 45% for a word.

use serde_json::{Value, json};

/// How many alternatives of the first token are read.
const ALTERNATIVES: u64 = 5;

/// The first token of a reply: whether it opens structure (`{`, `[`, `<` or a code fence:
/// how every call syntax begins), and the probability, in millionths, the model gave the
/// tokens among its top alternatives that do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Odds {
    pub(crate) opens: bool,
    pub(crate) opening_ppm: u32,
}

impl Odds {
    /// The odds of one token from its text and its alternatives (`(text, logprob)`, the
    /// token itself among them); `None` without alternatives.
    pub(crate) fn of<'a>(token: &str, top: impl Iterator<Item = (&'a str, f64)>) -> Option<Odds> {
        let opens = |text: &str| text.trim_start().starts_with(['{', '[', '<', '`']);
        let mut seen = false;
        let mut opening = 0.0;
        for (text, logprob) in top {
            seen = true;
            if opens(text) && logprob.is_finite() {
                opening += logprob.exp();
            }
        }
        // A probability (0 to 1) in whole millionths; the clamp keeps the cast exact.
        let opening_ppm = (opening.clamp(0.0, 1.0) * 1e6).round() as u32;
        seen.then_some(Odds { opens: opens(token), opening_ppm })
    }

    /// Whether these are the odds of a reply that opens with a call the model gave less
    /// than `bar_ppm` (millionths) of opening with one.
    pub(crate) fn unsure(self, bar_ppm: u32) -> bool {
        self.opens && self.opening_ppm < bar_ppm
    }

    /// The odds in words, for logs and the inspector.
    pub(crate) fn describe(self, bar_ppm: u32) -> String {
        format!(
            "the model gave {:.0}% odds to opening with a call (min_call_confidence is {:.0}%)",
            f64::from(self.opening_ppm) / 1e4,
            f64::from(bar_ppm) / 1e4
        )
    }
}

/// A Chat Completions body that asks for the first token of the reply to `body`, and its
/// odds: the same conversation and tools (so the engine's prompt cache serves the request
/// that follows), one token, not streamed (llama.cpp's server refuses `logprobs` on a
/// streamed request with tools). The prompt-cache key is left out: the engines that report
/// odds cache prefixes by themselves, and one that refused the key would fail the probe.
pub(crate) fn probe(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(object) = body.as_object_mut() {
        for key in ["stream_options", "max_completion_tokens", "n", "prompt_cache_key"] {
            object.remove(key);
        }
        let top = object.get("top_logprobs").and_then(Value::as_u64).unwrap_or(0);
        object.insert("stream".into(), Value::Bool(false));
        object.insert("max_tokens".into(), json!(1));
        object.insert("logprobs".into(), Value::Bool(true));
        object.insert("top_logprobs".into(), json!(top.max(ALTERNATIVES)));
    }
    body
}

/// The odds of the first token of a whole completion's first choice
/// (`choices[0].logprobs.content[0]`: `{token, logprob, top_logprobs: [{token, logprob}]}`),
/// when the upstream sent them.
pub(crate) fn first_token(completion: &Value) -> Option<Odds> {
    let first = completion.pointer("/choices/0/logprobs/content/0")?;
    let token = first.get("token")?.as_str()?;
    let top = first.get("top_logprobs")?.as_array()?;
    Odds::of(
        token,
        top.iter().filter_map(|t| Some((t.get("token")?.as_str()?, t.get("logprob")?.as_f64()?))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(token: &str, top: &[(&str, f64)]) -> Value {
        let top: Vec<Value> =
            top.iter().map(|(t, p)| json!({"token": t, "logprob": p.ln()})).collect();
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": token},
            "logprobs": {"content": [{"token": token, "logprob": -0.5, "top_logprobs": top}]}}]})
    }

    #[test]
    fn issue_24_the_odds_of_opening_with_a_call_are_every_opening_token_s() {
        let odds = first_token(&completion("```", &[("```", 0.6), ("{\"", 0.1), ("The", 0.3)]));
        assert_eq!(odds, Some(Odds { opens: true, opening_ppm: 700_000 }));
        assert!(odds.is_some_and(|odds| odds.unsure(750_000) && !odds.unsure(700_000)));
        // A reply that opens with a word is never unsure of a call, whatever the odds.
        let words = first_token(&completion("The", &[("The", 0.9), (" {", 0.1)]));
        assert_eq!(words, Some(Odds { opens: false, opening_ppm: 100_000 }));
        assert!(words.is_some_and(|odds| !odds.unsure(750_000)));
        assert_eq!(
            Odds { opens: true, opening_ppm: 552_000 }.describe(750_000),
            "the model gave 55% odds to opening with a call (min_call_confidence is 75%)"
        );
    }

    #[test]
    fn issue_24_a_reply_without_readable_odds_has_none() {
        for odd in [
            json!({"choices": []}),
            json!({"choices": [{"logprobs": null}]}),
            json!({"choices": [{"logprobs": {"content": 5}}]}),
            json!({"choices": [{"logprobs": {"content": [{"token": "x"}]}}]}),
            json!({"choices": [{"logprobs": {"content": [{"token": "x", "top_logprobs": []}]}}]}),
        ] {
            assert_eq!(first_token(&odd), None, "{odd}");
        }
    }

    #[test]
    fn issue_24_the_probe_asks_for_one_token_and_its_odds_unstreamed() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": "f"}}], "stream": true,
            "stream_options": {"include_usage": true}, "max_completion_tokens": 99, "n": 2,
            "temperature": 0, "top_logprobs": 8, "prompt_cache_key": "k"});
        let probe = probe(&body);
        assert_eq!(
            probe,
            json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                "tools": [{"type": "function", "function": {"name": "f"}}], "stream": false,
                "max_tokens": 1, "temperature": 0, "logprobs": true, "top_logprobs": 8})
        );
        let probe = super::probe(&json!({"model": "m", "messages": []}));
        assert_eq!(probe["top_logprobs"], json!(5));
    }
}
