//! `call_format = "auto"`: the call syntax a model's own chat template teaches, so that an
//! emulated model is asked for calls in the form it was trained to write (issue 24, lever 3).
//!
//! The chat template llama.cpp's server shows at `GET /props` decides first (`by_template`):
//! each family's template spells out its call markers, and it is the model really served,
//! whatever name the client sent (Claude Code sends `claude-…` to a local Qwen). Without one,
//! the upstream's model name does (`by_name`): names carry the family in every engine's
//! naming (`Qwen/Qwen2.5-7B-Instruct`, `qwen2.5-coder:0.5b`,
//! `mistralai/Mistral-7B-Instruct-v0.3`, `llama3.2:3b`). Neither: `tool_call`, the Hermes form
//! most open models know.

use crate::config::CallFormat;

/// Name fragments (lower case, `_` and spaces read as `-`) and the syntax of their family's
/// template, most specific first: a Hermes fine-tune of Llama writes Hermes calls, Qwen3-Coder
/// is not Qwen2.5.
const BY_NAME: &[(&str, CallFormat)] = &[
    ("hermes", CallFormat::ToolCall),
    ("qwen3-coder", CallFormat::Qwen3Coder),
    ("qwen3.5", CallFormat::Qwen3Coder),
    ("qwen3.6", CallFormat::Qwen3Coder),
    ("qwen", CallFormat::ToolCall),
    ("qwq", CallFormat::ToolCall),
    ("mistral", CallFormat::Mistral),
    ("mixtral", CallFormat::Mistral),
    ("codestral", CallFormat::Mistral),
    ("ministral", CallFormat::Mistral),
    ("magistral", CallFormat::Mistral),
    ("devstral", CallFormat::Mistral),
    ("pixtral", CallFormat::Mistral),
    ("llama-3", CallFormat::Llama),
    ("llama3", CallFormat::Llama),
    ("llama-4", CallFormat::Llama),
    ("llama4", CallFormat::Llama),
    ("claude", CallFormat::Xml),
];

/// The syntax a model's family writes, from its name; `None` when the name names no family
/// this table knows.
pub(crate) fn by_name(model: &str) -> Option<CallFormat> {
    let name = model.to_lowercase().replace(['_', ' '], "-");
    BY_NAME.iter().find(|(fragment, _)| name.contains(fragment)).map(|(_, format)| *format)
}

/// The syntax a chat template teaches, from the markers it writes calls with; `None` when it
/// shows none of them (a template without tools).
pub(crate) fn by_template(template: &str) -> Option<CallFormat> {
    let has = |marker: &str| template.contains(marker);
    if has("<function=") && has("<parameter=") {
        Some(CallFormat::Qwen3Coder)
    } else if has("[TOOL_CALLS]") {
        Some(CallFormat::Mistral)
    } else if has("<tool_call>") {
        Some(CallFormat::ToolCall)
    } else if has("<|python_tag|>") || (has("<|eot_id|>") && has("\"parameters\"")) {
        Some(CallFormat::Llama)
    } else if has("<function_calls>") && has("<invoke") {
        Some(CallFormat::Xml)
    } else {
        None
    }
}

/// The format a request is asked in: as configured, or for `auto` the template's (`template`:
/// what the upstream shows, which is the model it really serves, whatever name a client
/// sent), else the model name's family, else `tool_call`. Never `Auto`.
pub(crate) async fn resolve<F>(configured: CallFormat, model: &str, template: F) -> CallFormat
where
    F: std::future::Future<Output = Option<CallFormat>>,
{
    if configured != CallFormat::Auto {
        return configured;
    }
    template.await.or_else(|| by_name(model)).unwrap_or(CallFormat::ToolCall)
}

/// The same without the template, for estimates made before a request is sent.
pub(crate) fn resolve_by_name(configured: CallFormat, model: &str) -> CallFormat {
    match configured {
        CallFormat::Auto => by_name(model).unwrap_or(CallFormat::ToolCall),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_every_engine_s_spelling_give_their_family() {
        let cases = [
            ("Qwen/Qwen2.5-Coder-0.5B-Instruct", Some(CallFormat::ToolCall)),
            ("qwen2.5-coder:0.5b", Some(CallFormat::ToolCall)),
            ("Qwen/Qwen3-Coder-30B-A3B-Instruct", Some(CallFormat::Qwen3Coder)),
            ("qwen3_coder", Some(CallFormat::Qwen3Coder)),
            ("Qwen3.5-9B", Some(CallFormat::Qwen3Coder)),
            ("NousResearch/Hermes-3-Llama-3.1-8B", Some(CallFormat::ToolCall)),
            ("mistralai/Mistral-7B-Instruct-v0.3", Some(CallFormat::Mistral)),
            ("devstral-small-2505", Some(CallFormat::Mistral)),
            ("meta-llama/Llama-3.1-8B-Instruct", Some(CallFormat::Llama)),
            ("llama3.2:3b", Some(CallFormat::Llama)),
            ("Llama 4 Scout", Some(CallFormat::Llama)),
            ("claude-sonnet-4-5", Some(CallFormat::Xml)),
            ("gpt-4o-mini", None),
            ("local", None),
            ("smollm2-135m", None),
        ];
        for (name, expected) in cases {
            assert_eq!(by_name(name), expected, "{name}");
        }
    }

    #[test]
    fn templates_are_known_by_their_call_markers() {
        // Fragments of the families' templates, with the markers as they write them.
        let qwen25 = "{%- if tools %}<tools>{{ tool | tojson }}</tools>\nFor each function call, \
                      return a json object within <tool_call></tool_call> XML tags";
        let qwen3_coder = "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>";
        let mistral = "{%- if message.tool_calls %}[TOOL_CALLS][{{ message.tool_calls | tojson }}]";
        let llama = "Respond in the format {\"name\": function name, \"parameters\": dictionary of \
                     argument name and its value}.<|eot_id|>";
        let llama_builtin = "<|python_tag|>{{ tool_call.name }}.call(";
        let xml = "<function_calls>\n<invoke name=\"$FUNCTION_NAME\">";
        let plain = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>{% endfor %}";
        assert_eq!(by_template(qwen25), Some(CallFormat::ToolCall));
        assert_eq!(by_template(qwen3_coder), Some(CallFormat::Qwen3Coder));
        assert_eq!(by_template(mistral), Some(CallFormat::Mistral));
        assert_eq!(by_template(llama), Some(CallFormat::Llama));
        assert_eq!(by_template(llama_builtin), Some(CallFormat::Llama));
        assert_eq!(by_template(xml), Some(CallFormat::Xml));
        assert_eq!(by_template(plain), None);
    }

    #[tokio::test]
    async fn the_template_decides_before_the_name_and_a_setting_before_both() {
        let never = async { panic!("the template is not looked up") };
        assert_eq!(resolve(CallFormat::Json, "mistral-7b", never).await, CallFormat::Json);
        let template = async { Some(CallFormat::ToolCall) };
        assert_eq!(
            resolve(CallFormat::Auto, "claude-sonnet-4-5", template).await,
            CallFormat::ToolCall
        );
        assert_eq!(
            resolve(CallFormat::Auto, "mistral-7b", async { None }).await,
            CallFormat::Mistral
        );
        let template = async { Some(CallFormat::Llama) };
        assert_eq!(resolve(CallFormat::Auto, "local", template).await, CallFormat::Llama);
        assert_eq!(resolve(CallFormat::Auto, "local", async { None }).await, CallFormat::ToolCall);
        assert_eq!(resolve_by_name(CallFormat::Auto, "llama3.2"), CallFormat::Llama);
        assert_eq!(resolve_by_name(CallFormat::Auto, "gpt-4o"), CallFormat::ToolCall);
        assert_eq!(resolve_by_name(CallFormat::Xml, "qwen"), CallFormat::Xml);
    }
}
