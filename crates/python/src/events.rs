//! `StreamParser` and its events: [`PyText`], [`PyReasoning`], [`PyCallStart`],
//! [`PyArgsDelta`], [`PyCallEnd`], and the [`PyRejected`] and [`PyWarning`] that `Parsed`
//! lists too. Each event class has a `type` class attribute and a `to_dict()` that is the
//! line `toolshim parse --events` prints for it.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use toolshim_parse::{Event, StreamParser};

use crate::DETACH_BYTES;
use crate::options::Options;
use crate::results::{PyRejected, PyToolCall, PyWarning, opt_repr, repr, str_repr, to_python};

/// Visible text, in input order.
#[pyclass(frozen, module = "toolshim", name = "Text")]
pub(crate) struct PyText {
    /// The text.
    #[pyo3(get)]
    text: String,
}

/// Reasoning text, in input order.
#[pyclass(frozen, module = "toolshim", name = "Reasoning")]
pub(crate) struct PyReasoning {
    /// The text.
    #[pyo3(get)]
    text: String,
}

/// A tool call begins; its name is final.
#[pyclass(frozen, module = "toolshim", name = "CallStart")]
pub(crate) struct PyCallStart {
    /// The call's index among the accepted calls of this output, from 0.
    #[pyo3(get)]
    call_idx: usize,
    /// The id the model wrote before the arguments, or None.
    #[pyo3(get)]
    id: Option<String>,
    /// The tool's name.
    #[pyo3(get)]
    name: String,
}

/// A fragment of a call's arguments as JSON text; a call's fragments join to its
/// `arguments_json`, and every prefix of that is a prefix of valid JSON.
#[pyclass(frozen, module = "toolshim", name = "ArgsDelta")]
pub(crate) struct PyArgsDelta {
    /// The call the fragment belongs to.
    #[pyo3(get)]
    call_idx: usize,
    /// The fragment.
    #[pyo3(get)]
    json: String,
}

/// A tool call ended: `call.complete` says whether it stands (false: cut off, or its
/// arguments were not JSON; never run it).
#[pyclass(frozen, module = "toolshim", name = "CallEnd")]
pub(crate) struct PyCallEnd {
    /// The call that ended.
    #[pyo3(get)]
    call_idx: usize,
    /// The finished call.
    #[pyo3(get)]
    call: Py<PyToolCall>,
}

#[pymethods]
impl PyText {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "text"
    }

    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("text",)
    }

    /// `{"type": "text", "text": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &Event::Text(self.text.as_str().into()))
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.text == other.text
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Text({})", str_repr(py, &self.text))
    }
}

#[pymethods]
impl PyReasoning {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "reasoning"
    }

    #[classattr]
    fn __match_args__() -> (&'static str,) {
        ("text",)
    }

    /// `{"type": "reasoning", "text": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &Event::Reasoning(self.text.as_str().into()))
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.text == other.text
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Reasoning({})", str_repr(py, &self.text))
    }
}

#[pymethods]
impl PyCallStart {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "call_start"
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str) {
        ("call_idx", "id", "name")
    }

    /// `{"type": "call_start", "call_idx": …, "id": …, "name": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.event())
    }

    fn __eq__(&self, other: &Self) -> bool {
        (self.call_idx, &self.id, &self.name) == (other.call_idx, &other.id, &other.name)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "CallStart(call_idx={}, id={}, name={})",
            self.call_idx,
            opt_repr(py, self.id.as_deref()),
            str_repr(py, &self.name)
        )
    }
}

impl PyCallStart {
    fn event(&self) -> Event {
        Event::CallStart { call_idx: self.call_idx, id: self.id.clone(), name: self.name.clone() }
    }
}

#[pymethods]
impl PyArgsDelta {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "args_delta"
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("call_idx", "json")
    }

    /// `{"type": "args_delta", "call_idx": …, "json": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.event())
    }

    fn __eq__(&self, other: &Self) -> bool {
        (self.call_idx, &self.json) == (other.call_idx, &other.json)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("ArgsDelta(call_idx={}, json={})", self.call_idx, str_repr(py, &self.json))
    }
}

impl PyArgsDelta {
    fn event(&self) -> Event {
        Event::ArgsDelta { call_idx: self.call_idx, json: self.json.as_str().into() }
    }
}

#[pymethods]
impl PyCallEnd {
    #[classattr]
    #[pyo3(name = "type")]
    fn kind() -> &'static str {
        "call_end"
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("call_idx", "call")
    }

    /// `{"type": "call_end", "call_idx": …, "call": {"id": …, "name": …, "arguments": {…}},
    /// "complete": …}`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.event())
    }

    fn __eq__(&self, py: Python<'_>, other: &Self) -> bool {
        self.call_idx == other.call_idx && self.call.get().key() == other.call.bind(py).get().key()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("CallEnd(call_idx={}, call={})", self.call_idx, self.call.get().__repr__(py))
    }
}

impl PyCallEnd {
    fn event(&self) -> Event {
        Event::CallEnd { call_idx: self.call_idx, call: Box::new(self.call.get().call().clone()) }
    }
}

/// The parser's event for one of the event objects (for `Parsed.from_events`).
pub(crate) fn to_event(event: &Bound<'_, PyAny>) -> PyResult<Event> {
    if let Ok(text) = event.cast::<PyText>() {
        return Ok(Event::Text(text.get().text.as_str().into()));
    }
    if let Ok(text) = event.cast::<PyReasoning>() {
        return Ok(Event::Reasoning(text.get().text.as_str().into()));
    }
    if let Ok(start) = event.cast::<PyCallStart>() {
        return Ok(start.get().event());
    }
    if let Ok(delta) = event.cast::<PyArgsDelta>() {
        return Ok(delta.get().event());
    }
    if let Ok(end) = event.cast::<PyCallEnd>() {
        return Ok(end.get().event());
    }
    if let Ok(rejected) = event.cast::<PyRejected>() {
        return Ok(rejected.get().event());
    }
    if let Ok(warning) = event.cast::<PyWarning>() {
        return Ok(warning.get().event());
    }
    Err(PyTypeError::new_err(format!(
        "expected a toolshim event (Text, Reasoning, CallStart, ArgsDelta, CallEnd, Rejected \
         or Warning), got {}",
        repr(event)
    )))
}

/// The Python object for one event.
fn event_object(py: Python<'_>, event: Event) -> PyResult<Option<Py<PyAny>>> {
    let object = match event {
        Event::Text(text) => Py::new(py, PyText { text: text.into_string() })?.into_any(),
        Event::Reasoning(text) => Py::new(py, PyReasoning { text: text.into_string() })?.into_any(),
        Event::CallStart { call_idx, id, name } => {
            Py::new(py, PyCallStart { call_idx, id, name })?.into_any()
        }
        Event::ArgsDelta { call_idx, json } => {
            Py::new(py, PyArgsDelta { call_idx, json: json.into_string() })?.into_any()
        }
        Event::CallEnd { call_idx, call } => {
            let call = Py::new(py, PyToolCall::new(*call))?;
            Py::new(py, PyCallEnd { call_idx, call })?.into_any()
        }
        Event::Rejected(rejected) => Py::new(py, PyRejected::new(*rejected))?.into_any(),
        Event::Warning(warning) => Py::new(py, PyWarning::new(*warning))?.into_any(),
        // An event this build does not know yet: `Parsed` folds it on the Rust side only.
        _ => return Ok(None),
    };
    Ok(Some(object))
}

/// Incremental parser for one model output: `feed` chunks as they arrive, then `finish`.
///
/// Takes the options of `parse` except `exit_tools`. For every chunking of a text, the events
/// fold (`Parsed.from_events`) to exactly what `parse` returns. Model text never raises; a
/// parser that is finished raises RuntimeError when fed again.
#[pyclass(module = "toolshim", name = "StreamParser")]
pub(crate) struct PyStreamParser {
    /// None once finished.
    parser: Option<StreamParser>,
    /// The events of the current call, kept for their allocation.
    events: Vec<Event>,
}

#[pymethods]
impl PyStreamParser {
    #[new]
    #[pyo3(signature = (tools=None, *, format=None, model=None, **options))]
    fn new(
        tools: Option<&Bound<'_, PyAny>>,
        format: Option<&str>,
        model: Option<&str>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyStreamParser> {
        let built = Options::read("StreamParser", tools, format, model, options, false)?.build()?;
        Ok(PyStreamParser { parser: Some(StreamParser::new(&built.config)), events: Vec::new() })
    }

    /// Feeds the next chunk of text; returns the events it settles (text that may still
    /// start a marker is held until the next chunk decides).
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyList>> {
        let Some(parser) = self.parser.as_mut() else {
            return Err(PyRuntimeError::new_err(
                "this StreamParser is finished; make a new one for the next output",
            ));
        };
        let text = text.to_string_lossy();
        let text: &str = &text;
        let events = &mut self.events;
        if text.len() >= DETACH_BYTES {
            py.detach(|| parser.feed(text, events));
        } else {
            parser.feed(text, events);
        }
        self.take_events(py)
    }

    /// Ends the output: returns the events still held (a call cut off is closed, with a
    /// warning). The parser is finished after it; `finish` again returns [].
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if let Some(parser) = self.parser.take() {
            parser.finish(&mut self.events);
        }
        self.take_events(py)
    }

    /// Whether `finish` was called.
    #[getter]
    fn finished(&self) -> bool {
        self.parser.is_none()
    }

    fn __repr__(&self) -> String {
        let state = if self.parser.is_some() { "open" } else { "finished" };
        format!("<toolshim.StreamParser {state}>")
    }
}

impl PyStreamParser {
    fn take_events<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for event in self.events.drain(..) {
            if let Some(object) = event_object(py, event)? {
                list.append(object)?;
            }
        }
        Ok(list)
    }
}
