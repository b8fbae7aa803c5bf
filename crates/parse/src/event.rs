//! What the parser produces: events while streaming, [`Parsed`] when folded.

use std::ops::Range;

/// One step of parser output. Streamed events, folded with [`Parsed::push`],
/// give exactly what [`crate::parse`] returns for the same input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Visible text, in input order.
    Text(String),
    /// Reasoning text (the inside of a `<think>` block), in input order.
    Reasoning(String),
    /// A tool call begins. Its name is final (already matched to the tool list).
    CallStart {
        /// Index of the call among the accepted calls of this output, from 0.
        call_idx: usize,
        /// The id the model wrote for the call, when it wrote one before its arguments.
        id: Option<String>,
        /// The canonical tool name.
        name: String,
    },
    /// A fragment of the call's arguments as canonical JSON text. The fragments
    /// of one call concatenate to exactly [`ToolCall::arguments`], and every
    /// prefix of that concatenation is a prefix of valid JSON.
    ArgsDelta {
        /// The call the fragment belongs to.
        call_idx: usize,
        /// The fragment.
        json: String,
    },
    /// A tool call is complete.
    CallEnd {
        /// The call that ended.
        call_idx: usize,
        /// The finished call.
        call: ToolCall,
    },
    /// Tool-call syntax named a tool that is not in the tool list.
    Rejected(Rejected),
    /// Something was repaired, coerced or could not be used; see [`WarningCode`].
    Warning(Warning),
}

/// A finished tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The id the model gave the call, if any.
    pub id: Option<String>,
    /// The canonical tool name (as declared in the tool list, when there is one).
    pub name: String,
    /// The arguments: a JSON object in canonical form (compact, keys in the
    /// order the model wrote them, strings re-escaped minimally, numbers exactly
    /// as written).
    pub arguments: String,
    /// Byte range of the input that this call consumed, markers included.
    pub span: Range<usize>,
}

/// A call to a tool that is not in the tool list. It is never returned as a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The name as the model wrote it.
    pub name: String,
    /// Why it was rejected.
    pub reason: String,
    /// Byte range of the input the rejected call covers.
    pub span: Range<usize>,
}

/// A note about the input: a repair, a coercion, or tool syntax that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// What happened.
    pub code: WarningCode,
    /// A human-readable explanation; carries the raw text where something was not used.
    pub message: String,
    /// The accepted call this warning belongs to, if any.
    pub call_idx: Option<usize>,
    /// Byte range of the input the warning is about.
    pub span: Range<usize>,
}

/// The kinds of [`Warning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningCode {
    /// JSON was repaired (quotes, commas, comments, literals, raw control characters).
    RepairedJson,
    /// The output ended inside a call; what was open has been closed.
    Truncated,
    /// A call's end marker was missing or misspelled.
    MissingEndMarker,
    /// A value was converted to the type its schema asks for.
    Coerced,
    /// A required parameter is missing.
    MissingRequired,
    /// A parameter that the schema does not declare.
    UnknownParameter,
    /// The arguments were not a JSON object and could not be used as one.
    InvalidArguments,
    /// A key of the call envelope that toolshim does not use was ignored.
    IgnoredField,
    /// Tool-call syntax could not be turned into a call; its text stays visible.
    MalformedCall,
    /// A buffer limit forced a decision before the input could settle it.
    LimitReached,
    /// Call syntax was taken as an example, not a call (see [`crate::ExampleGuard`]);
    /// its text stays visible.
    Example,
    /// A call inside reasoning was not used (see [`crate::ReasoningCalls`]).
    CallInReasoning,
    /// A `</think>` closed a reasoning block that was never opened; it was removed.
    StrayReasoningEnd,
    /// A call was guessed from plain prose ([`crate::Builtin::FreeText`]).
    FreeText,
}

impl WarningCode {
    /// The stable snake_case identifier used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::RepairedJson => "repaired_json",
            WarningCode::Truncated => "truncated",
            WarningCode::MissingEndMarker => "missing_end_marker",
            WarningCode::Coerced => "coerced",
            WarningCode::MissingRequired => "missing_required",
            WarningCode::UnknownParameter => "unknown_parameter",
            WarningCode::InvalidArguments => "invalid_arguments",
            WarningCode::IgnoredField => "ignored_field",
            WarningCode::MalformedCall => "malformed_call",
            WarningCode::LimitReached => "limit_reached",
            WarningCode::Example => "example",
            WarningCode::CallInReasoning => "call_in_reasoning",
            WarningCode::StrayReasoningEnd => "stray_reasoning_end",
            WarningCode::FreeText => "free_text",
        }
    }

    /// Whether this warning shows that the model attempted tool-call syntax.
    pub fn shows_tool_syntax(self) -> bool {
        matches!(self, WarningCode::MalformedCall)
    }
}

/// The result of parsing a whole output: [`crate::parse`], or streamed events folded
/// with [`Parsed::push`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Accepted calls, in order.
    pub calls: Vec<ToolCall>,
    /// Visible text: everything that is not a call, reasoning or hidden rejected call.
    pub content: String,
    /// Reasoning text.
    pub reasoning: String,
    /// Calls to tools not in the tool list.
    pub rejected: Vec<Rejected>,
    /// Repairs, coercions and problems, in input order.
    pub warnings: Vec<Warning>,
    /// Whether the output contained tool-call syntax (an accepted, rejected or malformed call).
    pub saw_tool_syntax: bool,
}

impl Parsed {
    /// Folds one streamed event into the result.
    pub fn push(&mut self, event: Event) {
        match event {
            Event::Text(text) => self.content.push_str(&text),
            Event::Reasoning(text) => self.reasoning.push_str(&text),
            Event::CallStart { .. } | Event::ArgsDelta { .. } => {}
            Event::CallEnd { call, .. } => {
                self.saw_tool_syntax = true;
                self.calls.push(call);
            }
            Event::Rejected(rejected) => {
                self.saw_tool_syntax = true;
                self.rejected.push(rejected);
            }
            Event::Warning(warning) => {
                self.saw_tool_syntax |= warning.code.shows_tool_syntax();
                self.warnings.push(warning);
            }
        }
    }

    /// Folds a sequence of events.
    pub fn from_events(events: impl IntoIterator<Item = Event>) -> Parsed {
        let mut parsed = Parsed::default();
        for event in events {
            parsed.push(event);
        }
        parsed
    }
}
