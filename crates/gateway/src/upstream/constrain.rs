//! What differs by engine, per upstream: which request field carries the tool contract's
//! grammar (`chat::grammar`), how a final assistant message is continued
//! (`chat::continuation`), and, for `auto`, whether the upstream is a llama.cpp server (it
//! answers `GET /props` with its generation settings).

use reqwest::Url;
use serde_json::{Map, Value, json};

use crate::config::Engine;

/// How an upstream takes a grammar in a Chat Completions request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// llama.cpp's `llama-server`: `grammar` (GBNF).
    LlamaCpp,
    /// vLLM: `structured_outputs: {"grammar": …}` (its grammar backends read GBNF).
    Vllm,
    /// SGLang: `ebnf` (read by its grammar backend, GBNF syntax).
    Sglang,
}

impl Dialect {
    /// The dialect a setting names outright; `None` for `auto` (detected) and `off`.
    pub(crate) fn named(setting: Engine) -> Option<Dialect> {
        match setting {
            Engine::LlamaCpp => Some(Dialect::LlamaCpp),
            Engine::Vllm => Some(Dialect::Vllm),
            Engine::Sglang => Some(Dialect::Sglang),
            Engine::Auto | Engine::Off => None,
        }
    }

    /// Marks the last message of a Chat Completions body as one to continue: llama.cpp's
    /// server does so by itself; vLLM and SGLang are told.
    pub(crate) fn continue_final(self, body: &mut Map<String, Value>) {
        match self {
            Dialect::LlamaCpp => {}
            Dialect::Vllm | Dialect::Sglang => {
                body.insert("continue_final_message".into(), Value::Bool(true));
                body.insert("add_generation_prompt".into(), Value::Bool(false));
            }
        }
    }

    /// Puts `grammar` into a Chat Completions body in this dialect's field.
    pub(crate) fn insert(self, body: &mut Map<String, Value>, grammar: &str) {
        match self {
            Dialect::LlamaCpp => {
                body.insert("grammar".into(), Value::String(grammar.to_owned()));
            }
            Dialect::Vllm => {
                body.insert("structured_outputs".into(), json!({"grammar": grammar}));
            }
            Dialect::Sglang => {
                body.insert("ebnf".into(), Value::String(grammar.to_owned()));
            }
        }
    }
}

/// Where a llama.cpp server beside `endpoint` answers with its properties: `/props` at the
/// root of the endpoint's origin.
pub(crate) fn props_url(endpoint: &Url) -> Url {
    let mut url = endpoint.clone();
    url.set_path("/props");
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// Whether an answer to `GET /props` comes from llama.cpp's server.
pub(crate) fn is_llama_cpp(props: &Value) -> bool {
    props.get("default_generation_settings").is_some_and(Value::is_object)
}

/// The chat template in an answer to `GET /props`: the one for requests with tools when
/// the model has a separate one, else the main one.
pub(crate) fn chat_template(props: &Value) -> Option<&str> {
    ["chat_template_tool_use", "chat_template"]
        .iter()
        .find_map(|key| props.get(*key).and_then(Value::as_str).filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_dialect_writes_its_documented_field() {
        let cases = [
            (Dialect::LlamaCpp, json!({"grammar": "root ::= \"a\""})),
            (Dialect::Vllm, json!({"structured_outputs": {"grammar": "root ::= \"a\""}})),
            (Dialect::Sglang, json!({"ebnf": "root ::= \"a\""})),
        ];
        for (dialect, expected) in cases {
            let mut body = Map::new();
            dialect.insert(&mut body, "root ::= \"a\"");
            assert_eq!(Value::Object(body), expected);
        }
        assert_eq!(Dialect::named(Engine::Auto), None);
        assert_eq!(Dialect::named(Engine::Off), None);
        assert_eq!(Dialect::named(Engine::Vllm), Some(Dialect::Vllm));
    }

    #[test]
    fn props_live_at_the_origin_and_only_llama_cpp_has_generation_settings() {
        let endpoint = Url::parse("http://127.0.0.1:8081/v1/chat/completions?x=1").unwrap();
        assert_eq!(props_url(&endpoint).as_str(), "http://127.0.0.1:8081/props");
        assert!(is_llama_cpp(&json!({"default_generation_settings": {"n_ctx": 4096}})));
        assert!(!is_llama_cpp(&json!({"object": "list", "data": []})));
        assert!(!is_llama_cpp(&json!({"default_generation_settings": null})));
        let props =
            json!({"chat_template": "<tool_call>", "chat_template_tool_use": "[TOOL_CALLS]"});
        assert_eq!(chat_template(&props), Some("[TOOL_CALLS]"));
        assert_eq!(
            chat_template(&json!({"chat_template": "x", "chat_template_tool_use": null})),
            Some("x")
        );
        assert_eq!(chat_template(&json!({"chat_template": 3})), None);
    }
}
