//! The options of `parse` and `StreamParser`, read from Python and turned into a [`Config`]
//! the way `toolshim parse` turns its flags into one (crates/cli/src/cmd/parse.rs), in the
//! same order: tools, exit tools, hide_rejected, dialects, format, model, free_text,
//! tag_pairs, reasoning, example guard.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use toolshim_parse::{
    AgentTools, Builtin, Config, Dialects, ExampleGuard, Format, ReasoningCalls, RejectedText,
    Support, TagPair, Tool, ToolSet,
};

use crate::value::to_json;
use crate::value_error;

/// The keyword options besides `tools`, `format` and `model`, as `toolshim parse` has them.
const KNOWN: &[&str] = &[
    "format_file",
    "dialects",
    "tag_pairs",
    "free_text",
    "reasoning_open",
    "reasoning_calls",
    "example_guard",
    "hide_rejected",
    "exit_tools",
    "max_held_bytes",
    "max_depth",
];

/// The options as given.
#[derive(Default)]
pub(crate) struct Options {
    tools: Option<ToolSet>,
    format: Option<String>,
    model: Option<String>,
    /// The text of a format file: read from a path, or a template given as a dict.
    format_file: Option<String>,
    dialects: Option<Vec<String>>,
    tag_pairs: Vec<(String, String)>,
    free_text: bool,
    reasoning_open: bool,
    reasoning_calls: bool,
    example_guard: bool,
    hide_rejected: bool,
    exit_tools: Option<Vec<String>>,
    max_held_bytes: Option<usize>,
    max_depth: Option<usize>,
}

/// What the options give: the parser settings, and the agent tools when `exit_tools` asks for
/// an outcome.
pub(crate) struct Built {
    pub(crate) config: Config,
    pub(crate) agent: Option<AgentTools>,
}

impl Options {
    /// Reads the options of `function`; `exit_tools` is one of them only where `outcome` is.
    pub(crate) fn read(
        function: &str,
        tools: Option<&Bound<'_, PyAny>>,
        format: Option<&str>,
        model: Option<&str>,
        options: Option<&Bound<'_, PyDict>>,
        outcome: bool,
    ) -> PyResult<Options> {
        let mut read = Options {
            tools: tools.filter(|tools| !tools.is_none()).map(tools_from_py).transpose()?,
            format: format.map(str::to_owned),
            model: model.map(str::to_owned),
            example_guard: true,
            ..Options::default()
        };
        let Some(options) = options else { return Ok(read) };
        for (key, value) in options.iter() {
            let key: String = key.extract()?;
            if value.is_none() {
                continue;
            }
            match key.as_str() {
                "format_file" => read.format_file = Some(format_file_text(&value)?),
                "dialects" => read.dialects = Some(value.extract()?),
                "tag_pairs" => read.tag_pairs = value.extract()?,
                "free_text" => read.free_text = value.extract()?,
                "reasoning_open" => read.reasoning_open = value.extract()?,
                "reasoning_calls" => read.reasoning_calls = value.extract()?,
                "example_guard" => read.example_guard = value.extract()?,
                "hide_rejected" => read.hide_rejected = value.extract()?,
                "exit_tools" if outcome => read.exit_tools = Some(value.extract()?),
                "max_held_bytes" => read.max_held_bytes = Some(positive(&key, &value)?),
                "max_depth" => read.max_depth = Some(positive(&key, &value)?),
                _ => {
                    let known: Vec<&str> = KNOWN
                        .iter()
                        .copied()
                        .filter(|name| outcome || *name != "exit_tools")
                        .collect();
                    return Err(PyTypeError::new_err(format!(
                        "{function}() got an unexpected keyword argument '{key}'; \
                         the options are tools, format, model, {}",
                        known.join(", ")
                    )));
                }
            }
        }
        Ok(read)
    }

    /// The parser settings, checked as `toolshim parse` checks its flags.
    pub(crate) fn build(self) -> PyResult<Built> {
        if self.format.is_some() && (self.dialects.is_some() || self.model.is_some()) {
            return Err(value_error("format: give format alone, without dialects or model"));
        }
        if self.model.is_some() && self.dialects.is_some() {
            return Err(value_error("model: give model or dialects, not both"));
        }
        if self.format_file.is_some()
            && (self.format.is_some() || self.dialects.is_some() || self.model.is_some())
        {
            return Err(value_error(
                "format_file: give format_file alone, without format, dialects or model",
            ));
        }
        let agent = match &self.exit_tools {
            None => None,
            Some(exit) => {
                let exit = exit_names(exit)?;
                Some(match &self.tools {
                    Some(tools) => AgentTools::new(tools.tools().iter().map(Tool::name), exit),
                    None => AgentTools::any_normal(exit),
                })
            }
        };
        let tools = match (self.tools, &agent) {
            (Some(tools), Some(agent)) => Some(
                agent
                    .declare_exit_tools(&tools)
                    .map_err(|err| value_error(format!("exit_tools: {err}")))?,
            ),
            (tools, _) => tools,
        };
        let has_tools = tools.is_some();
        let mut config = match tools {
            Some(tools) => Config::with_tools(tools),
            None => Config::default(),
        };
        if self.hide_rejected {
            config.rejected_text = RejectedText::Hide;
        }
        if let Some(ids) = &self.dialects {
            config.dialects = dialects(ids)?;
        }
        if let Some(id) = &self.format {
            config.dialects = format_dialects(id)?;
        }
        let mut reasoning_open = self.reasoning_open;
        if let Some(text) = &self.format_file {
            let loaded = Config::format_from_template(text)
                .map_err(|err| value_error(format!("format_file: {err}")))?;
            config.dialects = loaded.dialects;
            reasoning_open |= loaded.reasoning_open;
        }
        if let Some(dialects) =
            self.model.as_deref().and_then(Format::for_model).and_then(Format::dialects)
        {
            config.dialects = dialects;
        }
        if self.free_text {
            if !has_tools {
                return Err(value_error(
                    "free_text needs tools: calls are guessed only for declared tools",
                ));
            }
            config.dialects.add(Builtin::FreeText);
        }
        for (start, end) in self.tag_pairs {
            config.dialects.add_pair(TagPair::new(start, end));
        }
        config.reasoning_open = reasoning_open;
        if self.reasoning_calls {
            config.reasoning_calls = ReasoningCalls::Allow;
        }
        if !self.example_guard {
            config.example_guard = ExampleGuard::off();
        }
        if let Some(bytes) = self.max_held_bytes {
            config.max_held_bytes = bytes;
        }
        if let Some(depth) = self.max_depth {
            config.max_depth = depth;
        }
        Ok(Built { config, agent })
    }
}

/// A format file: the text of the file at a path (`str` or `os.PathLike`), or a template
/// given as a dict (a `response_template` already read, as vLLM's tokenizers hold it).
fn format_file_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if value.is_instance_of::<PyDict>() {
        let json = to_json(value, 0).map_err(|why| value_error(format!("format_file: {why}")))?;
        return Ok(json.to_string());
    }
    let path: std::path::PathBuf = value.extract().map_err(|_| {
        PyTypeError::new_err("format_file: expected a path (str or os.PathLike) or a dict")
    })?;
    std::fs::read_to_string(&path)
        .map_err(|err| value_error(format!("format_file: cannot read {}: {err}", path.display())))
}

/// A tools list from Python: its JSON text, or lists, dicts and scalars (objects with a
/// pydantic `model_dump()` too), read by [`ToolSet::from_json`]. The errors are the parser's.
pub(crate) fn tools_from_py(tools: &Bound<'_, PyAny>) -> PyResult<ToolSet> {
    let set = if let Ok(text) = tools.cast::<PyString>() {
        ToolSet::from_json_str(&text.to_string_lossy())
    } else {
        let value = to_json(tools, 0).map_err(|why| value_error(format!("tools: {why}")))?;
        ToolSet::from_json(&value)
    };
    set.map_err(|err| value_error(err.to_string()))
}

/// The exit tool names, trimmed; an empty one is a mistake.
pub(crate) fn exit_names(names: &[String]) -> PyResult<Vec<String>> {
    let names: Vec<String> = names.iter().map(|name| name.trim().to_owned()).collect();
    if names.iter().any(String::is_empty) {
        return Err(value_error(
            "exit_tools: a tool name is empty; give names such as [\"finish\", \"give_up\"]",
        ));
    }
    Ok(names)
}

fn positive(key: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let n: usize = value.extract()?;
    if n == 0 {
        return Err(value_error(format!("{key}: must be at least 1")));
    }
    Ok(n)
}

fn dialects(ids: &[String]) -> PyResult<Dialects> {
    let mut dialects = Dialects::none();
    for id in ids {
        let builtin = Builtin::from_id(id.trim()).ok_or_else(|| {
            let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.id()).collect();
            value_error(format!(
                "dialects: unknown dialect `{}`; known: {}",
                id.trim(),
                known.join(", ")
            ))
        })?;
        dialects.add(builtin);
    }
    Ok(dialects)
}

fn format_dialects(id: &str) -> PyResult<Dialects> {
    let format = Format::find(id).ok_or_else(|| {
        let ids: Vec<&str> = toolshim_parse::formats().iter().map(|f| f.id).collect();
        value_error(format!("format: unknown format `{id}`; known: {}", ids.join(", ")))
    })?;
    format.dialects().ok_or_else(|| {
        let why = match format.support {
            Support::Missing(why) | Support::Partial(why) => why,
            _ => "",
        };
        value_error(format!(
            "format: `{}` ({}) is not read yet: {why}; leave format out to detect formats",
            format.id, format.catalog
        ))
    })
}
