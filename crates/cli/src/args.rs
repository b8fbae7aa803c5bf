//! The command line: one `clap` derive tree, no behaviour.

use std::{num::NonZeroUsize, path::PathBuf};

use clap::{Args, Parser, Subcommand};

/// Turns the tool calls that language models write as text into exact JSON calls.
#[derive(Debug, Parser)]
#[command(name = "toolshim", version, subcommand_required = true, arg_required_else_help = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// One variant per subcommand; `cmd::run` dispatches on it.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    Parse(ParseArgs),
}

/// Print the tool calls, text and warnings in one model output as JSON
///
/// Reads one model output (the raw text a language model produced) from FILE or standard
/// input, finds the tool calls in it in whatever syntax the model used (`<tool_call>` tags,
/// bare JSON, fenced blocks, …), and prints one JSON object: the calls with their arguments as
/// canonical JSON, the remaining visible text, the reasoning, calls to tools that are not in
/// the tool list, and warnings about anything repaired or left unused. Model output never
/// makes this command fail: text that is not a usable call stays in "content".
#[derive(Debug, Args)]
#[command(after_help = PARSE_AFTER_HELP)]
pub(crate) struct ParseArgs {
    /// File holding the model output; `-` or no FILE reads standard input
    #[arg(value_name = "FILE")]
    pub(crate) input: Option<PathBuf>,

    /// The tools the model was offered: an OpenAI or Anthropic `tools` array
    ///
    /// A JSON file holding an OpenAI `tools` array (`[{"type":"function","function":{…}}]`) or
    /// an Anthropic `tools` array (`[{"name":…,"input_schema":{…}}]`); the kind is detected.
    /// Call names are matched to these tools (forgiving case, `functions.` prefixes and
    /// `-`/`_` slips), arguments are coerced to their schema types, and calls to any other tool
    /// are listed under "rejected". Without --tools every name is accepted as written.
    #[arg(long, value_name = "FILE")]
    pub(crate) tools: Option<PathBuf>,

    /// Feed the input to the streaming parser N characters at a time
    ///
    /// Splits the input into chunks of N characters (never inside a character), feeds them to
    /// the streaming parser one by one as a live stream would arrive, and prints the object
    /// folded from its events. The result is the same as without --chunk-size; use it to
    /// check streaming. With --events, each chunk's events are printed as they come.
    #[arg(long, value_name = "N", value_parser = chunk_size)]
    pub(crate) chunk_size: Option<NonZeroUsize>,

    /// Print the streaming parser's events as JSON lines instead of the object
    ///
    /// One event per line, each with a "type": "text", "reasoning", "call_start",
    /// "args_delta" (a fragment of the call's arguments JSON), "call_end" (the finished call),
    /// "rejected" or "warning". The whole input is one chunk unless --chunk-size is given.
    #[arg(long)]
    pub(crate) events: bool,

    /// Pretty-print the object with 2-space indentation (event lines stay one per line)
    #[arg(long)]
    pub(crate) pretty: bool,

    /// Remove the text of calls to unknown tools from "content"
    ///
    /// By default the text of a call to a tool that is not in --tools stays in "content", so
    /// nothing is lost; with --hide-rejected it is removed and only listed under "rejected".
    #[arg(long)]
    pub(crate) hide_rejected: bool,
}

const PARSE_AFTER_HELP: &str = "\
Output (one line, keys always in this order):
  {\"calls\":[{\"id\":null|\"…\",\"name\":\"…\",\"arguments\":{…}}],\"content\":\"…\",\"reasoning\":\"…\",
   \"rejected\":[{\"name\":\"…\",\"reason\":\"…\"}],\"warnings\":[{\"code\":\"…\",\"message\":\"…\"}],
   \"saw_tool_syntax\":true|false}

Examples:
  toolshim parse examples/hermes.txt --tools examples/tools.json
  echo '<tool_call>{\"name\":\"get_time\",\"arguments\":{\"timezone\":\"UTC\"}}</tool_call>' |
    toolshim parse --chunk-size 3 --events

Exit codes:
  0  success, whatever the model wrote (model output never fails)
  1  the output could not be written (or an internal error)
  2  usage error: a bad flag, --chunk-size 0, an unreadable or non-UTF-8 input, or an unreadable
     or invalid --tools file; the message says what to fix
  A closed standard output (`toolshim parse … | head`) exits 0 quietly.";

fn chunk_size(text: &str) -> Result<NonZeroUsize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| "expected a whole number of characters per chunk, at least 1".to_owned())?;
    NonZeroUsize::new(n).ok_or_else(|| "must be at least 1 character per chunk".to_owned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn chunk_size_must_be_a_positive_whole_number() {
        assert_eq!(chunk_size("3"), Ok(NonZeroUsize::new(3).unwrap()));
        assert!(chunk_size("0").unwrap_err().contains("at least 1"));
        assert!(chunk_size("-1").unwrap_err().contains("whole number"));
        assert!(chunk_size("x").unwrap_err().contains("whole number"));
    }
}
