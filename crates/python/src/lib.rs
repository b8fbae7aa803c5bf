//! The extension module `toolshim._toolshim`: toolshim-parse for Python.
//!
//! The Python package `toolshim` (crates/python/python/toolshim) re-exports what this module
//! defines; its stubs (`_toolshim.pyi`) are the typed API. Model text never raises here: only
//! misuse does (a tools list that is not one, an unknown option or format, feeding a finished
//! parser), as `ValueError`, `TypeError` or `RuntimeError`.
//!
//! - `parse` and `StreamParser` take the options of `toolshim parse` (`options.rs`).
//! - Results and events are frozen classes (`results.rs`, `events.rs`); their `to_dict()` is the
//!   JSON `toolshim parse` prints, produced by the same `serde` code.
//! - Inputs of at least `DETACH_BYTES` are parsed with the interpreter detached, so other
//!   Python threads run meanwhile.

mod events;
mod options;
mod results;
mod value;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use toolshim_parse::{AgentTools, Format, MODELS, Support, Tool};

use crate::events::{PyArgsDelta, PyCallEnd, PyCallStart, PyReasoning, PyStreamParser, PyText};
use crate::options::{Options, exit_names, tools_from_py};
use crate::results::{PyOutcome, PyParsed, PyRejected, PyToolCall, PyWarning, str_repr};

/// Inputs (and chunks) at least this long are parsed with the interpreter detached.
pub(crate) const DETACH_BYTES: usize = 16 * 1024;

/// Parse one model output: its tool calls, visible text, reasoning, rejected calls and warnings.
///
/// `tools` is an OpenAI or Anthropic tools list (a list of dicts, a dict with a "tools" key,
/// or its JSON text); without it every call name is accepted as written. `format` pins one
/// model-native format (`formats()` lists the ids); `model` picks the format a model writes
/// (`Qwen/Qwen3-Coder-30B` reads qwen3_coder; an unknown model keeps auto-detection). The
/// other options are those of `toolshim parse`: `dialects`, `tag_pairs`, `free_text`,
/// `reasoning_open`, `reasoning_calls`, `example_guard`, `hide_rejected`, `exit_tools` (adds
/// an `outcome`), `max_held_bytes` and `max_depth`.
///
/// Model text never raises. A bad tools list or option raises ValueError (with the parser's
/// own message for the tools), an unknown option TypeError.
#[pyfunction]
#[pyo3(signature = (text, tools=None, *, format=None, model=None, **options))]
fn parse(
    py: Python<'_>,
    text: &Bound<'_, PyString>,
    tools: Option<&Bound<'_, PyAny>>,
    format: Option<&str>,
    model: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyParsed> {
    let built = Options::read("parse", tools, format, model, options, true)?.build()?;
    let text = text.to_string_lossy();
    let text: &str = &text;
    let config = &built.config;
    let parsed = if text.len() >= DETACH_BYTES {
        py.detach(|| toolshim_parse::parse(text, config))
    } else {
        toolshim_parse::parse(text, config)
    };
    let outcome = built.agent.map(|agent| toolshim_parse::agent_outcome(&parsed, text, &agent));
    PyParsed::new(py, parsed, outcome)
}

/// What an agent loop does next with one parsed output: run its calls, stop, or fail.
///
/// `exit_tools` are the tools whose calls end the loop (`finish`, `give_up`); the normal tools
/// are those of `tools` (a tools list, as for `parse`), or every other name without it. `raw`
/// is the model output `parsed` came from; a failed outcome keeps it verbatim.
#[pyfunction]
#[pyo3(signature = (parsed, raw, *, exit_tools, tools=None))]
fn agent_outcome(
    py: Python<'_>,
    parsed: &PyParsed,
    raw: &Bound<'_, PyString>,
    exit_tools: Vec<String>,
    tools: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyOutcome> {
    let exit = exit_names(&exit_tools)?;
    let agent = match tools {
        Some(tools) => AgentTools::new(tools_from_py(tools)?.tools().iter().map(Tool::name), exit),
        None => AgentTools::any_normal(exit),
    };
    let outcome = toolshim_parse::agent_outcome(parsed.inner(), &raw.to_string_lossy(), &agent);
    PyOutcome::new(py, outcome)
}

/// A model-native tool-call format and how far toolshim reads it.
#[pyclass(frozen, module = "toolshim", name = "Format")]
struct PyFormat {
    /// The format's id, as serving stacks call it: `deepseek_v3`.
    #[pyo3(get)]
    id: &'static str,
    /// The catalog id: `F24`.
    #[pyo3(get)]
    catalog: &'static str,
    /// The model families that write it.
    #[pyo3(get)]
    models: &'static str,
    /// Which part of toolshim reads it.
    #[pyo3(get)]
    read_by: &'static str,
    /// `"full"`, `"partial"` or `"missing"`.
    #[pyo3(get)]
    support: &'static str,
    /// What is not read, for partial and missing support.
    #[pyo3(get)]
    note: Option<&'static str>,
}

#[pymethods]
impl PyFormat {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Format(id={}, catalog={}, support={})",
            str_repr(py, self.id),
            str_repr(py, self.catalog),
            str_repr(py, self.support)
        )
    }
}

impl PyFormat {
    fn new(format: &'static Format) -> PyFormat {
        let (support, note) = match format.support {
            Support::Full => ("full", None),
            Support::Partial(note) => ("partial", Some(note)),
            Support::Missing(note) => ("missing", Some(note)),
            // A kind of support this build does not know yet.
            _ => ("unknown", None),
        };
        PyFormat {
            id: format.id,
            catalog: format.catalog,
            models: format.models,
            read_by: format.read_by,
            support,
            note,
        }
    }
}

/// Every catalogued model-native format (the table of `toolshim parse --list-formats`).
#[pyfunction]
fn formats() -> Vec<PyFormat> {
    toolshim_parse::formats().iter().map(PyFormat::new).collect()
}

/// The model table: (lowercase substring of a model id, format id), most specific first.
#[pyfunction]
fn models() -> Vec<(&'static str, &'static str)> {
    MODELS.to_vec()
}

/// The id of the format the model with this id writes (as `model=` picks it), or None.
#[pyfunction]
fn format_for_model(model: &str) -> Option<&'static str> {
    Format::for_model(model).filter(|format| format.dialects().is_some()).map(|format| format.id)
}

/// Checks a tools list as `parse` reads it; raises ValueError with the parser's message.
#[pyfunction]
fn check_tools(tools: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let set = tools_from_py(tools)?;
    Ok(set.tools().iter().map(|tool| tool.name().to_owned()).collect())
}

#[pymodule]
fn _toolshim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DETACH_BYTES", DETACH_BYTES)?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(agent_outcome, m)?)?;
    m.add_function(wrap_pyfunction!(formats, m)?)?;
    m.add_function(wrap_pyfunction!(models, m)?)?;
    m.add_function(wrap_pyfunction!(format_for_model, m)?)?;
    m.add_function(wrap_pyfunction!(check_tools, m)?)?;
    m.add_class::<PyStreamParser>()?;
    m.add_class::<PyParsed>()?;
    m.add_class::<PyToolCall>()?;
    m.add_class::<PyOutcome>()?;
    m.add_class::<PyFormat>()?;
    m.add_class::<PyText>()?;
    m.add_class::<PyReasoning>()?;
    m.add_class::<PyCallStart>()?;
    m.add_class::<PyArgsDelta>()?;
    m.add_class::<PyCallEnd>()?;
    m.add_class::<PyRejected>()?;
    m.add_class::<PyWarning>()?;
    Ok(())
}

/// A misuse, as Python's ValueError.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}
