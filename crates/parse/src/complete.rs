//! Complete parsing: the streaming engine fed all at once.

use crate::{Config, Parsed, StreamParser};

/// Parses a whole model output. Never fails: malformed calls become text and warnings.
///
/// It is [`StreamParser::feed`] with the whole input, then [`StreamParser::finish`],
/// folded into a [`Parsed`]; the input is read in place and no events are built.
pub fn parse(input: &str, config: &Config) -> Parsed {
    StreamParser::new(config).parse(input)
}
