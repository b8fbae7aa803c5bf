//! What an agent loop does next with one model output: run tools, stop, or report a failure.
//!
//! An agent worker offers the model two kinds of tools: normal tools, whose results go back
//! to the model, and exit tools (`finish`, `give_up`, …), whose calls end the loop. The
//! [`agent_outcome`] of a [`Parsed`] output sorts its calls into those two kinds, and turns
//! calls to any other tool, or tool-call syntax that yielded no call, into
//! [`Outcome::Failed`] with the raw output kept byte for byte.
//!
//! ```
//! use toolshim_parse::{AgentTools, Config, Outcome, Tool, ToolSet, agent_outcome, parse};
//!
//! let agent = AgentTools::new(["get_weather"], ["finish"]);
//! // The parser rejects calls to undeclared tools, so declare the exit tools too.
//! let declared = ToolSet::new(vec![Tool::new("get_weather", None)])?;
//! let config = Config::with_tools(agent.declare_exit_tools(&declared)?);
//!
//! let raw = concat!(
//!     r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#,
//!     "\n",
//!     r#"<tool_call>{"name": "finish", "arguments": {"answer": "sunny"}}</tool_call>"#,
//! );
//! let Outcome::Calls { calls, exits } = agent_outcome(&parse(raw, &config), raw, &agent) else {
//!     panic!("expected calls");
//! };
//! assert_eq!(calls[0].name, "get_weather"); // needs a tool result
//! assert_eq!(exits[0].name, "finish"); // a signal: no tool result
//!
//! let raw = r#"<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>"#;
//! let Outcome::Failed { reason, raw: kept } = agent_outcome(&parse(raw, &config), raw, &agent)
//! else {
//!     panic!("expected a failure");
//! };
//! assert_eq!(reason.code(), "unknown_tools");
//! assert_eq!(kept, raw);
//!
//! let raw = "It is sunny in Paris.";
//! assert_eq!(agent_outcome(&parse(raw, &config), raw, &agent), Outcome::Text);
//! # Ok::<(), toolshim_parse::Error>(())
//! ```

use std::fmt;

use crate::{
    error::Error,
    event::{Parsed, ToolCall},
    tools::{Tool, ToolSet},
};

/// The tool names of an agent loop: normal tools, whose calls need a tool result, and exit
/// tools, whose calls end the loop.
///
/// Names are compared exactly with [`ToolCall::name`]. With a [`ToolSet`] in the
/// [`crate::Config`] that is the declared name however the model spelled it; without one it
/// is the name as the model wrote it. A name listed as both normal and exit is an exit tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentTools {
    normal: NormalTools,
    /// Distinct, in the order given.
    exit: Vec<String>,
}

/// Which names count as normal tools.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NormalTools {
    /// Every name that is not an exit tool.
    Any,
    /// Only these names; any other name that is not an exit tool is unknown.
    Named(Vec<String>),
}

impl AgentTools {
    /// Tools named `normal` need results, tools named `exit` end the loop, and a call to
    /// any other name makes the outcome [`Outcome::Failed`].
    pub fn new<N, E>(normal: N, exit: E) -> AgentTools
    where
        N: IntoIterator,
        N::Item: Into<String>,
        E: IntoIterator,
        E::Item: Into<String>,
    {
        AgentTools { normal: NormalTools::Named(distinct(normal)), exit: distinct(exit) }
    }

    /// Tools named `exit` end the loop and every other accepted call is a normal call. Use it
    /// when the [`crate::Config`] has no tool list, or when its [`ToolSet`] already rejects
    /// the names the loop cannot run.
    pub fn any_normal<E>(exit: E) -> AgentTools
    where
        E: IntoIterator,
        E::Item: Into<String>,
    {
        AgentTools { normal: NormalTools::Any, exit: distinct(exit) }
    }

    /// The exit tool names, in the order given, without repeats.
    pub fn exit_tools(&self) -> &[String] {
        &self.exit
    }

    /// Whether `name` is an exit tool.
    pub fn is_exit(&self, name: &str) -> bool {
        self.exit.iter().any(|exit| exit == name)
    }

    /// Whether `name` is a normal tool (and not an exit tool).
    pub fn is_normal(&self, name: &str) -> bool {
        !self.is_exit(name)
            && match &self.normal {
                NormalTools::Any => true,
                NormalTools::Named(names) => names.iter().any(|normal| normal == name),
            }
    }

    /// `tools` plus every exit tool it does not declare under that exact name, as a tool
    /// without a parameter schema, so that the parser accepts exit calls instead of
    /// rejecting them. Fails only if an exit tool name is empty.
    pub fn declare_exit_tools(&self, tools: &ToolSet) -> Result<ToolSet, Error> {
        let mut all = tools.tools().to_vec();
        for exit in &self.exit {
            if !all.iter().any(|tool| tool.name() == exit) {
                all.push(Tool::new(exit.clone(), None));
            }
        }
        ToolSet::new(all)
    }
}

/// The names in `names`, converted, first occurrences only.
fn distinct<I>(names: I) -> Vec<String>
where
    I: IntoIterator,
    I::Item: Into<String>,
{
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let name = name.into();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// What an agent loop should do with one model output; see [`agent_outcome`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The output called only known tools. `calls` (normal tools, in order) each need a tool
    /// result; `exits` (exit tools, in order) are signals that end the loop and get no
    /// result. Either list may be empty, not both. When both are present the output ran
    /// tools and asked to stop in one turn: the caller decides whether to run `calls` first.
    Calls {
        /// Calls to normal tools: run them and send their results back.
        calls: Vec<ToolCall>,
        /// Calls to exit tools: signals, never sent a tool result.
        exits: Vec<ToolCall>,
    },
    /// No tool-call syntax at all: the output is a plain answer ([`Parsed::content`]).
    Text,
    /// The output cannot be acted on.
    Failed {
        /// What went wrong.
        reason: ToolParseError,
        /// The model output exactly as given to [`agent_outcome`], never rewritten.
        raw: String,
    },
}

/// Why an [`Outcome`] is [`Outcome::Failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolParseError {
    /// The output called tools that are neither normal nor exit tools: calls the
    /// [`ToolSet`] rejected ([`Parsed::rejected`]) and accepted calls to other names.
    UnknownTools {
        /// The names in input order, each once, as the model wrote them (rejected calls) or
        /// as the parser returned them (accepted calls).
        names: Vec<String>,
    },
    /// The output held tool-call syntax ([`Parsed::saw_tool_syntax`]) but no call, accepted
    /// or rejected, could be read from it; [`Parsed::warnings`] says what was wrong.
    NoCallParsed,
}

impl ToolParseError {
    /// The stable snake_case identifier used in JSON output: `unknown_tools` or
    /// `no_call_parsed`.
    pub fn code(&self) -> &'static str {
        match self {
            ToolParseError::UnknownTools { .. } => "unknown_tools",
            ToolParseError::NoCallParsed => "no_call_parsed",
        }
    }
}

impl fmt::Display for ToolParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolParseError::UnknownTools { names } => {
                f.write_str("the output calls unknown tools: ")?;
                for (idx, name) in names.iter().enumerate() {
                    if idx > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{name}`")?;
                }
                f.write_str("; call only the offered tools, or offer these too")
            }
            ToolParseError::NoCallParsed => f.write_str(
                "the output has tool-call syntax but no call could be read from it; \
                 see the warnings and write each call in the format the prompt asks for",
            ),
        }
    }
}

impl std::error::Error for ToolParseError {}

/// Sorts the calls of `parsed` (the result of parsing `raw`) for an agent loop.
///
/// - Any call to a tool that is neither normal nor exit (including every
///   [`Parsed::rejected`] call) makes it [`Outcome::Failed`] with
///   [`ToolParseError::UnknownTools`], even when other calls are fine.
/// - Tool-call syntax with no call read from it makes it [`Outcome::Failed`] with
///   [`ToolParseError::NoCallParsed`]. Malformed syntax next to at least one good call does
///   not: the good calls are returned and [`Parsed::warnings`] describes the rest.
/// - Otherwise calls give [`Outcome::Calls`], and no tool-call syntax gives
///   [`Outcome::Text`].
///
/// `raw` is copied into [`Outcome::Failed`] unchanged; nothing else reads it.
pub fn agent_outcome(parsed: &Parsed, raw: &str, tools: &AgentTools) -> Outcome {
    let mut unknown: Vec<(usize, &str)> = parsed
        .rejected
        .iter()
        .map(|rejected| (rejected.span.start, rejected.name.as_str()))
        .chain(
            parsed
                .calls
                .iter()
                .filter(|call| !tools.is_exit(&call.name) && !tools.is_normal(&call.name))
                .map(|call| (call.span.start, call.name.as_str())),
        )
        .collect();
    if !unknown.is_empty() {
        unknown.sort_by_key(|&(start, _)| start);
        let names = distinct(unknown.into_iter().map(|(_, name)| name));
        return failed(ToolParseError::UnknownTools { names }, raw);
    }
    if parsed.calls.is_empty() {
        return if parsed.saw_tool_syntax {
            failed(ToolParseError::NoCallParsed, raw)
        } else {
            Outcome::Text
        };
    }
    let (exits, calls) = parsed.calls.iter().cloned().partition(|call| tools.is_exit(&call.name));
    Outcome::Calls { calls, exits }
}

fn failed(reason: ToolParseError, raw: &str) -> Outcome {
    Outcome::Failed { reason, raw: raw.to_owned() }
}
