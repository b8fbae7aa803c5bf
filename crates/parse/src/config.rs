//! Parser settings.

use std::sync::Arc;

use crate::tools::ToolSet;

/// What happens to the text of a call to a tool that is not in the tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RejectedText {
    /// The call's text stays in `content` (nothing is lost).
    #[default]
    Keep,
    /// The call's text is removed from `content`; [`crate::Rejected`] still reports it.
    Hide,
}

/// Parser settings. Cheap to clone: the tool list is shared.
#[derive(Debug, Clone)]
pub struct Config {
    /// The declared tools. `None` accepts every name and coerces nothing.
    pub tools: Option<Arc<ToolSet>>,
    /// What happens to the text of rejected calls.
    pub rejected_text: RejectedText,
    /// The most bytes held back while the input cannot yet be told apart (a JSON
    /// object that may or may not be a call, say). Past it the parser decides
    /// with what it has and records [`crate::WarningCode::LimitReached`].
    pub max_held_bytes: usize,
    /// The deepest JSON nesting accepted inside a call.
    pub max_depth: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tools: None,
            rejected_text: RejectedText::Keep,
            max_held_bytes: 1 << 20,
            max_depth: 128,
        }
    }
}

impl Config {
    /// Default settings with a tool list.
    pub fn with_tools(tools: ToolSet) -> Config {
        Config { tools: Some(Arc::new(tools)), ..Config::default() }
    }
}
