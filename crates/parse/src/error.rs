//! Errors for misuse and configuration. Model output never produces an [`Error`].

use std::fmt;

/// A configuration or usage error.
///
/// ```
/// use toolshim_parse::{ErrorKind, ToolSet};
///
/// let err = ToolSet::from_json_str("[{\"name\": \"f\"},\n {\"name\": }]").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidTools);
/// // The byte of the tool list where it stopped being valid JSON.
/// assert_eq!(err.offset(), Some(26));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    /// The byte of the input (a tool list's text) the error is about, when there is one.
    offset: Option<usize>,
    /// The field of a format file the error is about, when there is one.
    field: Option<String>,
    message: String,
}

/// What kind of [`Error`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A tool list is not an OpenAI or Anthropic `tools` array.
    InvalidTools,
    /// Two tools have the same name.
    DuplicateTool,
    /// A configuration value is out of range.
    InvalidConfig,
    /// A format file (toolshim's rows, or a `response_template`) is malformed, or asks for
    /// something the parser cannot read; [`Error::field`] names the field.
    InvalidFormat,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, offset: None, field: None, message: message.into() }
    }

    /// The error is about this field of a format file.
    pub(crate) fn with_field(mut self, field: &str) -> Error {
        self.field = Some(field.to_owned());
        self
    }

    /// The error is about this byte of the input.
    pub(crate) fn at(mut self, offset: usize) -> Error {
        self.offset = Some(offset);
        self
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The byte offset in the input (the text of a tool list) that the error is about,
    /// when it is about one; compute a line and column from the input when you need them.
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }

    /// The field of a format file the error is about (`fields.tool_calls.open_pattern`,
    /// `dialects[2].pair.head`), when it is about one.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The byte offset of a 1-based `line` and `column` (in characters) of `text`.
pub(crate) fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2).map_or(text.len(), |(at, _)| at + 1)
    };
    let rest = text.get(line_start..).unwrap_or_default();
    let in_line =
        rest.char_indices().nth(column.saturating_sub(1)).map_or(rest.len(), |(at, _)| at);
    line_start + in_line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_bytes_from_lines_and_columns() {
        let text = "ab\ncé\nx";
        assert_eq!(offset_of(text, 1, 1), 0);
        assert_eq!(offset_of(text, 2, 2), 4);
        assert_eq!(offset_of(text, 3, 1), 7);
        assert_eq!(offset_of(text, 9, 9), text.len());
    }
}
