//! Parser settings.

use std::sync::Arc;

use crate::dialect::Dialects;
use crate::error::Error;
use crate::tools::ToolSet;

/// What happens to the text of a call to a tool that is not in the tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RejectedText {
    /// The call's text stays in `content` (nothing is lost).
    #[default]
    Keep,
    /// The call's text is removed from `content`; [`crate::Rejected`] still reports it.
    Hide,
}

/// What happens to tool calls written inside reasoning (`<think>…</think>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReasoningCalls {
    /// They stay reasoning text; a [`crate::WarningCode::CallInReasoning`] warning
    /// says one was seen. Models often draft a call while thinking and then decide
    /// against it.
    #[default]
    Ignore,
    /// They are calls like any other; the reasoning text around them stays reasoning.
    Allow,
}

/// The example guard: a call presented as an example is not a call.
///
/// A block is an example when the last line of text before it contains one of
/// `phrases` (compared in lowercase): a fenced block, or a bare JSON object or
/// Python call at the start of a line. Inline code (a call between single
/// backticks after other text on the same line) is always an example while the
/// guard is on. Python fences that define a function or use a call inside a
/// program are examples whatever the phrases. The text stays visible, unchanged,
/// and a [`crate::WarningCode::Example`] warning records the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExampleGuard {
    /// Whether the guard is on.
    pub enabled: bool,
    /// Phrases that introduce an example, in lowercase.
    pub phrases: Arc<[String]>,
}

/// The phrases [`ExampleGuard::default`] uses.
pub const EXAMPLE_PHRASES: &[&str] = &[
    "for example",
    "e.g.",
    "for instance",
    "such as",
    "looks like",
    "look like",
    "would look",
    "an example",
    "example:",
    "example call",
    "sample call",
    "for illustration",
    "the format is",
    "the syntax is",
    "something like",
];

impl Default for ExampleGuard {
    fn default() -> ExampleGuard {
        ExampleGuard {
            enabled: true,
            phrases: EXAMPLE_PHRASES.iter().map(|p| (*p).to_owned()).collect(),
        }
    }
}

impl ExampleGuard {
    /// The guard switched off: every block is read for calls.
    pub fn off() -> ExampleGuard {
        ExampleGuard { enabled: false, phrases: Arc::from([]) }
    }

    /// Whether `line` (the last line of text before a block) introduces an example.
    pub(crate) fn introduces(&self, line: &str) -> bool {
        if !self.enabled || line.is_empty() {
            return false;
        }
        let lower = line.to_lowercase();
        self.phrases.iter().any(|phrase| !phrase.is_empty() && lower.contains(phrase.as_str()))
    }
}

/// Parser settings. Cheap to clone: the tool list and custom dialects are shared.
/// Settings that will grow: build one from [`Config::default`] or [`Config::with_tools`]
/// and set the fields you need.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The declared tools. `None` accepts every name and coerces nothing.
    pub tools: Option<Arc<ToolSet>>,
    /// What happens to the text of rejected calls.
    pub rejected_text: RejectedText,
    /// The most bytes held back while the input cannot yet be told apart (a JSON
    /// object that may or may not be a call, say). Past it the parser decides
    /// with what it has and records [`crate::WarningCode::LimitReached`].
    pub max_held_bytes: usize,
    /// The deepest JSON nesting accepted inside a call. A bracket past it ends the
    /// call there (what was open is closed), the rest of the input is read as if the
    /// call had ended, and [`crate::WarningCode::LimitReached`] is recorded.
    pub max_depth: usize,
    /// The dialects to look for, in order of precedence.
    pub dialects: Dialects,
    /// The prompt opened a reasoning block (`<think>`), so the output starts inside
    /// it and its first `</think>` closes it.
    pub reasoning_open: bool,
    /// What happens to calls inside reasoning.
    pub reasoning_calls: ReasoningCalls,
    /// The example guard.
    pub example_guard: ExampleGuard,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tools: None,
            rejected_text: RejectedText::Keep,
            max_held_bytes: 1 << 20,
            max_depth: 128,
            dialects: Dialects::default(),
            reasoning_open: false,
            reasoning_calls: ReasoningCalls::Ignore,
            example_guard: ExampleGuard::default(),
        }
    }
}

impl Config {
    /// Default settings with a tool list.
    pub fn with_tools(tools: ToolSet) -> Config {
        Config { tools: Some(Arc::new(tools)), ..Config::default() }
    }

    /// Default settings that read the one format a format file describes: a Hugging Face
    /// `response_template` (bare, or the `tokenizer_config.json` that holds it) or
    /// toolshim's own rows ([`Dialects::from_format_file`]). A template whose reasoning
    /// has no open marker (the prompt opens it) sets [`Config::reasoning_open`].
    pub fn format_from_template(text: &str) -> Result<Config, Error> {
        let loaded = crate::rows::file::load(text)?;
        Ok(Config {
            dialects: loaded.dialects,
            reasoning_open: loaded.reasoning_open,
            ..Config::default()
        })
    }
}
