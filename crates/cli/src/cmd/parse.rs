//! `toolshim parse`: one model output in, one JSON object (or JSON event lines) out.
//!
//! The JSON shapes are a contract other tools depend on: the `serde` shapes of
//! `toolshim_parse` (keys in a fixed order, arguments verbatim), written by
//! [`render_parsed`] and [`render_event`] and nowhere else.

use std::{
    io::{self, BufWriter, Read, Write},
    num::NonZeroUsize,
    path::Path,
};

use anyhow::Context;
use serde::Serialize;
use toolshim_parse::{
    AgentTools, Builtin, Config, Dialects, Event, ExampleGuard, Format, MODELS, Outcome, Parsed,
    ReasoningCalls, RejectedText, StreamParser, Support, TagPair, Tool, ToolSet, agent_outcome,
    formats,
};

use crate::{args::ParseArgs, cmd::UsageError};

mod json;
#[cfg(test)]
mod tests;

use self::json::Layout;

pub(crate) fn run(args: &ParseArgs) -> anyhow::Result<()> {
    if args.list_formats {
        let mut stdout = io::stdout().lock();
        return stdout
            .write_all(list_formats().as_bytes())
            .and_then(|()| stdout.flush())
            .context("cannot write the output");
    }
    if let Some(id) = &args.export_format {
        let mut text = export_format(id)?;
        text.push('\n');
        let mut stdout = io::stdout().lock();
        return stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .context("cannot write the output");
    }
    // The tools come first: a bad --tools file is reported before we block on stdin.
    let (config, agent) = config(args)?;
    let input = read_input(args.input.as_deref())?;
    let mut stdout = io::stdout().lock();
    if args.events {
        let mut out = BufWriter::new(stdout);
        write_events(&input, &config, args.chunk_size, &mut out)?;
        return out.flush().context("cannot write the output");
    }
    let parsed = match args.chunk_size {
        None => toolshim_parse::parse(&input, &config),
        Some(size) => parse_in_chunks(&input, &config, size),
    };
    let outcome = agent.map(|agent| agent_outcome(&parsed, &input, &agent));
    let layout = if args.pretty { Layout::Pretty } else { Layout::Compact };
    let mut text = render_parsed(&parsed, outcome.as_ref(), layout)?;
    text.push('\n');
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the output")
}

/// The parser settings, and the agent tools when --exit-tools asks for an outcome.
fn config(args: &ParseArgs) -> anyhow::Result<(Config, Option<AgentTools>)> {
    let tools = args.tools.as_deref().map(read_tools).transpose()?;
    let agent = agent_tools(&args.exit_tools, tools.as_ref())?;
    let tools = match (tools, &agent) {
        (Some(tools), Some(agent)) => Some(
            agent
                .declare_exit_tools(&tools)
                .map_err(|err| UsageError::new(format!("--exit-tools: {err}")))?,
        ),
        (tools, _) => tools,
    };
    let mut config = match tools {
        Some(tools) => Config::with_tools(tools),
        None => Config::default(),
    };
    if args.hide_rejected {
        config.rejected_text = RejectedText::Hide;
    }
    if !args.dialects.is_empty() {
        let mut dialects = Dialects::none();
        for id in &args.dialects {
            let builtin = Builtin::from_id(id.trim()).ok_or_else(|| {
                let known: Vec<&str> = Builtin::ALL.iter().map(|b| b.id()).collect();
                UsageError::new(format!(
                    "--dialects: unknown dialect `{}`; known: {}",
                    id.trim(),
                    known.join(", ")
                ))
            })?;
            dialects.add(builtin);
        }
        config.dialects = dialects;
    }
    if let Some(path) = &args.format_file {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|err| {
            UsageError::new(format!("--format-file {shown}: cannot read the file: {err}"))
        })?;
        let loaded = Config::format_from_template(&text)
            .map_err(|err| UsageError::new(format!("--format-file {shown}: {err}")))?;
        config.dialects = loaded.dialects;
        config.reasoning_open |= loaded.reasoning_open;
    }
    if let Some(id) = &args.format {
        let format = Format::find(id).ok_or_else(|| {
            let ids: Vec<&str> = formats().iter().map(|f| f.id).collect();
            UsageError::new(format!("--format: unknown format `{id}`; known: {}", ids.join(", ")))
        })?;
        config.dialects = format.dialects().ok_or_else(|| {
            let why = match format.support {
                Support::Missing(why) | Support::Partial(why) => why,
                _ => "",
            };
            UsageError::new(format!(
                "--format: `{}` ({}) is not read yet: {why}; leave --format out to detect formats",
                format.id, format.catalog
            ))
        })?;
    }
    if let Some(model) = &args.model {
        if let Some(dialects) = Format::for_model(model).and_then(Format::dialects) {
            config.dialects = dialects;
        }
    }
    if args.free_text {
        if config.tools.is_none() {
            return Err(UsageError::new(
                "--free-text needs --tools: calls are guessed only for declared tools",
            )
            .into());
        }
        config.dialects.add(Builtin::FreeText);
    }
    for pair in args.tag_pair.chunks(2) {
        if let [start, end] = pair {
            config.dialects.add_pair(TagPair::new(start.as_str(), end.as_str()));
        }
    }
    config.reasoning_open = args.reasoning_open;
    if args.reasoning_calls {
        config.reasoning_calls = ReasoningCalls::Allow;
    }
    if args.no_example_guard {
        config.example_guard = ExampleGuard::off();
    }
    Ok((config, agent))
}

/// The agent tools for `--exit-tools` (`None` without the flag): the exit tools given, and
/// the tools of the --tools file as normal tools, or any name without one.
fn agent_tools(
    exit_tools: &[String],
    tools: Option<&ToolSet>,
) -> Result<Option<AgentTools>, UsageError> {
    if exit_tools.is_empty() {
        return Ok(None);
    }
    let exit: Vec<&str> = exit_tools.iter().map(|name| name.trim()).collect();
    if exit.iter().any(|name| name.is_empty()) {
        return Err(UsageError::new(
            "--exit-tools: a tool name is empty; \
             give names separated by commas, e.g. --exit-tools finish,give_up",
        ));
    }
    Ok(Some(match tools {
        Some(tools) => AgentTools::new(tools.tools().iter().map(Tool::name), exit),
        None => AgentTools::any_normal(exit),
    }))
}

fn read_tools(path: &Path) -> Result<ToolSet, UsageError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|err| UsageError::new(format!("--tools {shown}: cannot read the file: {err}")))?;
    ToolSet::from_json_str(&text).map_err(|err| UsageError::new(format!("--tools {shown}: {err}")))
}

/// Reads the whole model output from `path`, or from stdin when `path` is `None` or `-`.
fn read_input(path: Option<&Path>) -> Result<String, UsageError> {
    let mut bytes = Vec::new();
    let source = match path.filter(|path| *path != Path::new("-")) {
        Some(path) => {
            let shown = path.display();
            bytes = std::fs::read(path).map_err(|err| {
                UsageError::new(format!("cannot read the input file {shown}: {err}"))
            })?;
            format!("the input file {shown}")
        }
        None => {
            io::stdin().lock().read_to_end(&mut bytes).map_err(|err| {
                UsageError::new(format!("cannot read the input from standard input: {err}"))
            })?;
            "the input from standard input".to_owned()
        }
    };
    String::from_utf8(bytes).map_err(|err| {
        let offset = err.utf8_error().valid_up_to();
        UsageError::new(format!(
            "{source} is not UTF-8 text (invalid byte at offset {offset}); \
             convert it to UTF-8 first, e.g. with `iconv -t UTF-8`"
        ))
    })
}

/// Splits `input` into chunks of `size` characters (the last may be shorter).
fn char_chunks(input: &str, size: NonZeroUsize) -> impl Iterator<Item = &str> {
    let mut rest = input;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(size.get()).map_or(rest.len(), |(idx, _)| idx);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

/// Streams `input` through a [`StreamParser`] in chunks of `size` characters and folds the events.
fn parse_in_chunks(input: &str, config: &Config, size: NonZeroUsize) -> Parsed {
    let mut parser = StreamParser::new(config);
    let mut parsed = Parsed::default();
    let mut events = Vec::new();
    for chunk in char_chunks(input, size) {
        parser.feed(chunk, &mut events);
        parsed.extend(events.drain(..));
    }
    parser.finish(&mut events);
    parsed.extend(events.drain(..));
    parsed
}

/// Streams `input` through a [`StreamParser`], in chunks of `size` characters or as one chunk,
/// writing each event as one JSON line as soon as the parser settles it.
fn write_events(
    input: &str,
    config: &Config,
    size: Option<NonZeroUsize>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    let chunks: Box<dyn Iterator<Item = &str>> = match size {
        Some(size) => Box::new(char_chunks(input, size)),
        None => Box::new(std::iter::once(input)),
    };
    for chunk in chunks {
        parser.feed(chunk, &mut events);
        write_event_lines(&mut events, out)?;
    }
    parser.finish(&mut events);
    write_event_lines(&mut events, out)
}

fn write_event_lines(events: &mut Vec<Event>, out: &mut impl Write) -> anyhow::Result<()> {
    for event in events.drain(..) {
        let mut line = render_event(&event)?;
        line.push('\n');
        out.write_all(line.as_bytes()).context("cannot write the output")?;
    }
    Ok(())
}

/// The output object: `{"calls":[…],"content":…,"reasoning":…,"rejected":[…],"warnings":[…],
/// "saw_tool_syntax":…}`, keys in that order, then `"outcome":{…}` when there is an outcome.
/// The shapes are `toolshim_parse`'s `serde` ones (arguments embedded verbatim).
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    parsed: &'a Parsed,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a Outcome>,
}

/// Renders the output object. Fails only if a call's arguments are not valid JSON, which
/// the parser guarantees never happens.
fn render_parsed(
    parsed: &Parsed,
    outcome: Option<&Outcome>,
    layout: Layout,
) -> anyhow::Result<String> {
    let compact = serde_json::to_string(&Output { parsed, outcome })?;
    Ok(match layout {
        Layout::Compact => compact,
        Layout::Pretty => json::pretty(&compact),
    })
}

/// One event as a compact JSON object with a `"type"` key first.
fn render_event(event: &Event) -> anyhow::Result<String> {
    Ok(serde_json::to_string(event)?)
}

/// `--export-format ID`: the format's registry as a format file.
fn export_format(id: &str) -> anyhow::Result<String> {
    let dialects = match id {
        "default" => Some(Dialects::default()),
        _ => {
            let format = Format::find(id).ok_or_else(|| {
                let ids: Vec<&str> = formats().iter().map(|f| f.id).collect();
                UsageError::new(format!(
                    "--export-format: unknown format `{id}`; known: default, {}",
                    ids.join(", ")
                ))
            })?;
            format.dialects()
        }
    };
    let dialects = dialects.ok_or_else(|| {
        UsageError::new(format!("--export-format: `{id}` is not read yet, so it has no rows"))
    })?;
    Ok(dialects.to_format_file()?)
}

/// The `--list-formats` table: every catalogued format, then the model table.
fn list_formats() -> String {
    let mut text = String::from("format               catalog  support  models\n");
    for format in formats() {
        let support = match format.support {
            Support::Full => "full".to_owned(),
            Support::Partial(note) => format!("partial ({note})"),
            Support::Missing(note) => format!("missing ({note})"),
            _ => "unknown".to_owned(),
        };
        let line =
            format!("{:<20} {:<8} {}  {}\n", format.id, format.catalog, support, format.models);
        text.push_str(&line);
    }
    text.push_str("\nmodel ids (case-insensitive substring, first match) -> format\n");
    for (pattern, id) in MODELS {
        text.push_str(&format!("{pattern:<28} {id}\n"));
    }
    text
}
