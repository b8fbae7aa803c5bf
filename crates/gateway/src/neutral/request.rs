//! The neutral request: what every client family's request becomes and what every upstream
//! wire is written from, in the gateway's own terms (no client or upstream JSON).

use serde_json::{Number, Value};

/// A chat request in the gateway's own terms.
#[derive(Debug, Clone)]
pub(crate) struct ChatRequest {
    /// The model the client asked for.
    pub(crate) model: String,
    /// The conversation.
    pub(crate) messages: Vec<Message>,
    /// Declared tools (or, with none declared, the tools seen in the history).
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) tool_choice: ToolChoice,
    /// `false`: at most one call per reply.
    pub(crate) parallel_tool_calls: bool,
    /// Sampling and length options, forwarded to the upstream.
    pub(crate) sampling: Sampling,
    /// The client asked to see the model's reasoning (Anthropic `thinking`, OpenAI-compatible
    /// `reasoning_effort`, `include_reasoning`, …); without it, reasoning is left out.
    pub(crate) show_reasoning: bool,
    /// The format the answer must have (structured outputs), if the client set one.
    pub(crate) output: Option<OutputFormat>,
    /// The client marked parts of its prompt for caching (Anthropic's `cache_control`): an
    /// upstream that caches only where asked (Anthropic's) is asked to cache the prompt.
    pub(crate) cache_breakpoints: bool,
    /// The client's key for the upstream's prompt cache (OpenAI's `prompt_cache_key`), passed
    /// to an upstream that takes it, so requests that share a prefix land where it is cached.
    pub(crate) cache_key: Option<String>,
    /// Images the conversation carries, each with the index of the message it came with (a
    /// user message, or a tool result): passed to the upstream as image parts, emulated or
    /// native.
    pub(crate) images: Vec<(usize, Image)>,
}

/// An image, or a file (a document such as a PDF): an `http(s)` URL, passed on and never
/// fetched by the gateway, or a `data:` URL holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) url: String,
    /// A file rather than a picture: its name (empty when the client gave none).
    pub(crate) file: Option<String>,
}

impl Image {
    pub(crate) fn picture(url: impl Into<String>) -> Image {
        Image { url: url.into(), file: None }
    }

    /// The media type and base64 data of a `data:` URL.
    pub(crate) fn data(&self) -> Option<(&str, &str)> {
        let rest = self.url.strip_prefix("data:")?;
        let (media, data) = rest.split_once(',')?;
        Some((media.strip_suffix(";base64")?, data))
    }
}

impl ChatRequest {
    /// The images that came with message `index`.
    pub(crate) fn images_of(&self, index: usize) -> impl Iterator<Item = &Image> {
        self.images.iter().filter(move |(at, _)| *at == index).map(|(_, image)| image)
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    System(String),
    User(String),
    Assistant { text: String, calls: Vec<PriorCall> },
    ToolResult { call_id: String, name: Option<String>, content: String, is_error: bool },
}

/// A call the assistant made earlier in the conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PriorCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as the client sent them back (normally JSON text).
    pub(crate) arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) parameters: Option<Value>,
    /// The client asked for its schema to be kept exactly (`strict: true`): a call whose
    /// arguments break it never reaches the client.
    pub(crate) strict: bool,
}

#[cfg(test)]
impl ToolSpec {
    /// A tool by its name and schema (tests).
    pub(crate) fn named(name: &str, parameters: Option<Value>) -> ToolSpec {
        ToolSpec { name: name.into(), description: None, parameters, strict: false }
    }
}

#[cfg(test)]
impl ChatRequest {
    /// One user message to model `m` with these tools (tests).
    pub(crate) fn asking(user: &str, tools: Vec<ToolSpec>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![Message::User(user.into())],
            tools,
            ..ChatRequest::default()
        }
    }
}

/// Which calls the reply must (or must not) contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    None,
    Auto,
    Required,
    Named(String),
}

/// The format a client asked the answer to have.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutputFormat {
    /// A name for the schema (OpenAI's `json_schema.name`).
    pub(crate) name: String,
    /// The schema, or `None` for any JSON object (`json_object`).
    pub(crate) schema: Option<Value>,
    /// Strict: keys the schema does not allow are errors too.
    pub(crate) strict: bool,
}

/// Sampling and length options, typed. Each family reads its own names into it
/// (`max_completion_tokens`, `max_output_tokens` and `max_tokens` are all `max_tokens`;
/// `stop_sequences` is `stop`), and each upstream wire writes what it takes. Numbers are
/// kept as the client wrote them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sampling {
    pub(crate) temperature: Option<Number>,
    pub(crate) top_p: Option<Number>,
    pub(crate) top_k: Option<Number>,
    pub(crate) min_p: Option<Number>,
    /// The most tokens the reply may have.
    pub(crate) max_tokens: Option<Number>,
    /// Stop sequences.
    pub(crate) stop: Vec<String>,
    pub(crate) seed: Option<Number>,
    pub(crate) presence_penalty: Option<Number>,
    pub(crate) frequency_penalty: Option<Number>,
    pub(crate) repeat_penalty: Option<Number>,
    /// Token id to bias.
    pub(crate) logit_bias: Option<serde_json::Map<String, Value>>,
}

impl Sampling {
    /// The numeric options under their OpenAI-compatible names (llama.cpp's and vLLM's too),
    /// in a fixed order.
    pub(crate) fn numbers(&self) -> [(&'static str, Option<&Number>); 9] {
        [
            ("temperature", self.temperature.as_ref()),
            ("top_p", self.top_p.as_ref()),
            ("top_k", self.top_k.as_ref()),
            ("min_p", self.min_p.as_ref()),
            ("max_tokens", self.max_tokens.as_ref()),
            ("seed", self.seed.as_ref()),
            ("presence_penalty", self.presence_penalty.as_ref()),
            ("frequency_penalty", self.frequency_penalty.as_ref()),
            ("repeat_penalty", self.repeat_penalty.as_ref()),
        ]
    }

    /// The option named `key` (an OpenAI-compatible name), for a family's reader.
    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<Number>> {
        Some(match key {
            "temperature" => &mut self.temperature,
            "top_p" => &mut self.top_p,
            "top_k" => &mut self.top_k,
            "min_p" => &mut self.min_p,
            "max_tokens" => &mut self.max_tokens,
            "seed" => &mut self.seed,
            "presence_penalty" => &mut self.presence_penalty,
            "frequency_penalty" => &mut self.frequency_penalty,
            "repeat_penalty" => &mut self.repeat_penalty,
            _ => return None,
        })
    }
}

impl Default for ChatRequest {
    /// An empty conversation for no model, no tools, parallel calls allowed.
    fn default() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            sampling: Sampling::default(),
            show_reasoning: false,
            output: None,
            cache_breakpoints: false,
            cache_key: None,
            images: Vec::new(),
        }
    }
}
