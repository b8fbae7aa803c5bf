//! What `parse` returns: [`PyParsed`] with its [`PyToolCall`]s, [`PyRejected`] calls,
//! [`PyWarning`]s and, with `exit_tools`, a [`PyOutcome`].
//!
//! Each class keeps the parser's own value, so `to_dict()` goes through the `serde` shapes
//! `toolshim parse` prints (the same keys, the arguments as the JSON they are), and equality
//! compares what Python sees (byte spans are not exposed, so they are not compared).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString};
use serde::Serialize;
use toolshim_parse::{Event, Outcome, Parsed, Rejected, ToolCall, ToolParseError, Warning};

/// `json.loads`, imported once.
static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `text` read by Python's `json.loads`.
pub(crate) fn loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    LOADS.import(py, "json", "loads")?.call1((text,))
}

/// `value` in its `serde` shape, as Python objects.
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    value: &impl Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|err| PyRuntimeError::new_err(format!("toolshim: {err}")))?;
    loads(py, &text)
}

/// `repr()` of a Python value, for the classes' own `__repr__`.
pub(crate) fn repr(value: &Bound<'_, PyAny>) -> String {
    value.repr().map_or_else(|_| "?".to_owned(), |text| text.to_string())
}

/// Python's `repr()` of a str.
pub(crate) fn str_repr(py: Python<'_>, text: &str) -> String {
    repr(PyString::new(py, text).as_any())
}

/// Python's `repr()` of an optional str.
pub(crate) fn opt_repr(py: Python<'_>, text: Option<&str>) -> String {
    text.map_or_else(|| "None".to_owned(), |text| str_repr(py, text))
}

/// A finished tool call.
#[pyclass(frozen, module = "toolshim", name = "ToolCall")]
pub(crate) struct PyToolCall {
    call: ToolCall,
    /// `arguments`, read by `json.loads` on first use.
    arguments: PyOnceLock<Py<PyAny>>,
}

impl PyToolCall {
    pub(crate) fn new(call: ToolCall) -> PyToolCall {
        PyToolCall { call, arguments: PyOnceLock::new() }
    }

    pub(crate) fn call(&self) -> &ToolCall {
        &self.call
    }

    pub(crate) fn key(&self) -> CallKey<'_> {
        call_key(&self.call)
    }
}

/// What Python sees of a call, for equality.
pub(crate) type CallKey<'a> = (&'a Option<String>, &'a str, &'a str, bool);

fn call_key(call: &ToolCall) -> CallKey<'_> {
    (&call.id, &call.name, &call.arguments, call.complete)
}

fn rejected_key(rejected: &Rejected) -> (&str, &str) {
    (&rejected.name, &rejected.reason)
}

fn warning_key(warning: &Warning) -> (&str, &str, Option<usize>) {
    (warning.code.as_str(), &warning.message, warning.call_idx)
}

#[pymethods]
impl PyToolCall {
    /// The id the model gave the call, or None.
    #[getter]
    fn id(&self) -> Option<&str> {
        self.call.id.as_deref()
    }

    /// The tool's name (as declared in the tools list, when there is one).
    #[getter]
    fn name(&self) -> &str {
        &self.call.name
    }

    /// The arguments as a dict (`json.loads(arguments_json)`, read once).
    #[getter]
    fn arguments(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.arguments
            .get_or_try_init(py, || loads(py, &self.call.arguments).map(Bound::unbind))
            .map(|value| value.clone_ref(py))
    }

    /// Whether the call stands: false when the output cut it off inside its arguments
    /// (they were closed to stay JSON), or when its arguments were not JSON (its text is
    /// in `Parsed.content`); such a call is in `Parsed.incomplete`, never to be run.
    #[getter]
    fn complete(&self) -> bool {
        self.call.complete
    }

    /// The arguments as the exact JSON text the parser produced: compact, keys in the
    /// order the model wrote them, numbers as written.
    #[getter]
    fn arguments_json(&self) -> &str {
        &self.call.arguments
    }

    /// `{"id": …, "name": …, "arguments": {…}}`, as in `toolshim parse` output.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.call)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.key() == other.key()
    }

    pub(crate) fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ToolCall(id={}, name={}, arguments_json={})",
            opt_repr(py, self.call.id.as_deref()),
            str_repr(py, &self.call.name),
            str_repr(py, &self.call.arguments)
        )
    }
}

/// A call to a tool that is not in the tools list (also an event of `StreamParser`).
#[pyclass(frozen, module = "toolshim", name = "Rejected")]
pub(crate) struct PyRejected {
    rejected: Rejected,
}

impl PyRejected {
    pub(crate) fn new(rejected: Rejected) -> PyRejected {
        PyRejected { rejected }
    }

    pub(crate) fn event(&self) -> Event {
        Event::Rejected(Box::new(self.rejected.clone()))
    }
}

#[pymethods]
impl PyRejected {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "rejected"
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("name", "reason")
    }

    /// The name as the model wrote it.
    #[getter]
    fn name(&self) -> &str {
        &self.rejected.name
    }

    /// Why it was rejected.
    #[getter]
    fn reason(&self) -> &str {
        &self.rejected.reason
    }

    /// `{"type": "rejected", "name": …, "reason": …}`, as `toolshim parse --events` prints it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.event())
    }

    fn __eq__(&self, other: &Self) -> bool {
        rejected_key(&self.rejected) == rejected_key(&other.rejected)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Rejected(name={}, reason={})",
            str_repr(py, &self.rejected.name),
            str_repr(py, &self.rejected.reason)
        )
    }
}

/// A repair, a coercion, or tool syntax that could not be used (also an event).
#[pyclass(frozen, module = "toolshim", name = "Warning")]
pub(crate) struct PyWarning {
    warning: Warning,
}

impl PyWarning {
    pub(crate) fn new(warning: Warning) -> PyWarning {
        PyWarning { warning }
    }

    pub(crate) fn event(&self) -> Event {
        Event::Warning(Box::new(self.warning.clone()))
    }

    fn key(&self) -> (&str, &str, Option<usize>) {
        warning_key(&self.warning)
    }
}

#[pymethods]
impl PyWarning {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "warning"
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str) {
        ("code", "message", "call_idx")
    }

    /// What happened: `repaired_json`, `truncated`, `coerced`, `malformed_call`, …
    #[getter]
    fn code(&self) -> &'static str {
        self.warning.code.as_str()
    }

    /// A human-readable explanation.
    #[getter]
    fn message(&self) -> &str {
        &self.warning.message
    }

    /// The accepted call the warning is about, or None.
    #[getter]
    fn call_idx(&self) -> Option<usize> {
        self.warning.call_idx
    }

    /// `{"type": "warning", "code": …, "message": …, "call_idx": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.event())
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.key() == other.key()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Warning(code={}, message={}, call_idx={})",
            str_repr(py, self.warning.code.as_str()),
            str_repr(py, &self.warning.message),
            self.warning.call_idx.map_or_else(|| "None".to_owned(), |idx| idx.to_string())
        )
    }
}

/// What an agent loop does next with one output (`parse(..., exit_tools=...)` or
/// `agent_outcome`).
#[pyclass(frozen, module = "toolshim", name = "Outcome")]
pub(crate) struct PyOutcome {
    outcome: Outcome,
    calls: Vec<Py<PyToolCall>>,
    exits: Vec<Py<PyToolCall>>,
}

impl PyOutcome {
    pub(crate) fn new(py: Python<'_>, outcome: Outcome) -> PyResult<PyOutcome> {
        let (calls, exits) = match &outcome {
            Outcome::Calls { calls, exits } => (wrap_calls(py, calls)?, wrap_calls(py, exits)?),
            _ => (Vec::new(), Vec::new()),
        };
        Ok(PyOutcome { outcome, calls, exits })
    }

    fn reason_of(&self) -> Option<&ToolParseError> {
        match &self.outcome {
            Outcome::Failed { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

#[pymethods]
impl PyOutcome {
    /// `"calls"` (run `calls`; `exits` end the loop), `"text"` (a plain answer) or `"failed"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.outcome {
            Outcome::Calls { .. } => "calls",
            Outcome::Text => "text",
            Outcome::Failed { .. } => "failed",
            // An outcome this build does not know yet.
            _ => "unknown",
        }
    }

    /// The calls that need a tool result.
    #[getter]
    fn calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.calls.iter().map(|call| call.clone_ref(py)))
    }

    /// The calls to exit tools.
    #[getter]
    fn exits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.exits.iter().map(|call| call.clone_ref(py)))
    }

    /// Why it failed: `"unknown_tools"` or `"no_call_parsed"`; None unless failed.
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.reason_of().map(ToolParseError::code)
    }

    /// What to tell the model when it failed; None unless failed.
    #[getter]
    fn message(&self) -> Option<String> {
        self.reason_of().map(ToolParseError::to_string)
    }

    /// The unknown tools called, in order (empty unless failed with `unknown_tools`).
    #[getter]
    fn unknown_tools(&self) -> Vec<String> {
        match self.reason_of() {
            Some(ToolParseError::UnknownTools { names }) => names.clone(),
            _ => Vec::new(),
        }
    }

    /// The model output, verbatim, when it failed; None otherwise.
    #[getter]
    fn raw(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Failed { raw, .. } => Some(raw),
            _ => None,
        }
    }

    /// The `"outcome"` object of `toolshim parse --exit-tools`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.outcome)
    }

    fn __eq__(&self, other: &Self) -> bool {
        outcome_key(&self.outcome) == outcome_key(&other.outcome)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let list = |items: PyResult<Bound<'_, PyList>>| {
            items.map_or_else(|_| "[?]".to_owned(), |list| repr(list.as_any()))
        };
        match &self.outcome {
            Outcome::Calls { .. } => format!(
                "Outcome(kind='calls', calls={}, exits={})",
                list(self.calls(py)),
                list(self.exits(py))
            ),
            Outcome::Failed { reason, .. } => {
                format!("Outcome(kind='failed', reason={})", str_repr(py, reason.code()))
            }
            _ => format!("Outcome(kind={})", str_repr(py, self.kind())),
        }
    }
}

/// The outcome as Python sees it (its JSON, which leaves spans out).
fn outcome_key(outcome: &Outcome) -> Option<String> {
    serde_json::to_string(outcome).ok()
}

fn wrap_calls(py: Python<'_>, calls: &[ToolCall]) -> PyResult<Vec<Py<PyToolCall>>> {
    calls.iter().map(|call| Py::new(py, PyToolCall::new(call.clone()))).collect()
}

/// The result of parsing one model output.
#[pyclass(frozen, module = "toolshim", name = "Parsed")]
pub(crate) struct PyParsed {
    parsed: Parsed,
    calls: Vec<Py<PyToolCall>>,
    incomplete: Vec<Py<PyToolCall>>,
    rejected: Vec<Py<PyRejected>>,
    warnings: Vec<Py<PyWarning>>,
    outcome: Option<Py<PyOutcome>>,
}

impl PyParsed {
    pub(crate) fn new(
        py: Python<'_>,
        parsed: Parsed,
        outcome: Option<Outcome>,
    ) -> PyResult<PyParsed> {
        let calls = wrap_calls(py, &parsed.calls)?;
        let incomplete = wrap_calls(py, &parsed.incomplete)?;
        let rejected = parsed
            .rejected
            .iter()
            .map(|rejected| Py::new(py, PyRejected::new(rejected.clone())))
            .collect::<PyResult<_>>()?;
        let warnings = parsed
            .warnings
            .iter()
            .map(|warning| Py::new(py, PyWarning::new(warning.clone())))
            .collect::<PyResult<_>>()?;
        let outcome =
            outcome.map(|outcome| Py::new(py, PyOutcome::new(py, outcome)?)).transpose()?;
        Ok(PyParsed { parsed, calls, incomplete, rejected, warnings, outcome })
    }

    pub(crate) fn inner(&self) -> &Parsed {
        &self.parsed
    }
}

#[pymethods]
impl PyParsed {
    /// The accepted tool calls, in order.
    #[getter]
    fn calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.calls.iter().map(|call| call.clone_ref(py)))
    }

    /// Accepted calls that do not stand (`complete` is false), in order: cut off inside
    /// their arguments (a `truncated` warning says so), or with arguments that are not JSON
    /// (a `malformed_call` warning; their text is in `content`). Never run these.
    #[getter]
    fn incomplete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.incomplete.iter().map(|call| call.clone_ref(py)))
    }

    /// The visible text: everything that is not a call, reasoning or hidden rejected call.
    #[getter]
    fn content(&self) -> &str {
        &self.parsed.content
    }

    /// The reasoning text (`<think>…</think>` and the formats' own reasoning channels).
    #[getter]
    fn reasoning(&self) -> &str {
        &self.parsed.reasoning
    }

    /// Calls to tools that are not in the tools list.
    #[getter]
    fn rejected<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.rejected.iter().map(|rejected| rejected.clone_ref(py)))
    }

    /// Repairs, coercions and problems, in input order.
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.warnings.iter().map(|warning| warning.clone_ref(py)))
    }

    /// Whether the output held tool-call syntax (an accepted, rejected or malformed call).
    #[getter]
    fn saw_tool_syntax(&self) -> bool {
        self.parsed.saw_tool_syntax
    }

    /// The agent outcome, when `exit_tools` was given; else None.
    #[getter]
    fn outcome(&self, py: Python<'_>) -> Option<Py<PyOutcome>> {
        self.outcome.as_ref().map(|outcome| outcome.clone_ref(py))
    }

    /// The object `toolshim parse` prints: calls, incomplete, content, reasoning, rejected,
    /// warnings, saw_tool_syntax, and outcome when there is one.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dict = to_python(py, &self.parsed)?;
        if let Some(outcome) = &self.outcome {
            dict.set_item("outcome", outcome.get().to_dict(py)?)?;
        }
        Ok(dict)
    }

    /// Folds streamed events (`StreamParser.feed` and `finish`) into the result `parse`
    /// gives for the same text.
    #[staticmethod]
    fn from_events(py: Python<'_>, events: &Bound<'_, PyAny>) -> PyResult<PyParsed> {
        let mut parsed = Parsed::default();
        for event in events.try_iter()? {
            parsed.push(crate::events::to_event(&event?)?);
        }
        PyParsed::new(py, parsed, None)
    }

    fn __eq__(&self, py: Python<'_>, other: &Self) -> bool {
        let (a, b) = (&self.parsed, &other.parsed);
        let outcome =
            |p: &PyParsed| p.outcome.as_ref().map(|o| outcome_key(&o.bind(py).get().outcome));
        a.calls.iter().map(call_key).eq(b.calls.iter().map(call_key))
            && a.incomplete.iter().map(call_key).eq(b.incomplete.iter().map(call_key))
            && a.content == b.content
            && a.reasoning == b.reasoning
            && a.rejected.iter().map(rejected_key).eq(b.rejected.iter().map(rejected_key))
            && a.warnings.iter().map(warning_key).eq(b.warnings.iter().map(warning_key))
            && a.saw_tool_syntax == b.saw_tool_syntax
            && outcome(self) == outcome(other)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let list = |items: PyResult<Bound<'_, PyList>>| {
            items.map_or_else(|_| "[?]".to_owned(), |list| repr(list.as_any()))
        };
        let mut text = format!(
            "Parsed(calls={}, incomplete={}, content={}, reasoning={}, rejected={}, \
             warnings={}, saw_tool_syntax={}",
            list(self.calls(py)),
            list(self.incomplete(py)),
            str_repr(py, &self.parsed.content),
            str_repr(py, &self.parsed.reasoning),
            list(self.rejected(py)),
            list(self.warnings(py)),
            if self.parsed.saw_tool_syntax { "True" } else { "False" },
        );
        if let Some(outcome) = &self.outcome {
            text.push_str(&format!(", outcome={}", outcome.get().__repr__(py)));
        }
        text.push(')');
        text
    }
}
