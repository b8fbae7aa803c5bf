//! Complete parsing: the streaming engine fed all at once.

use crate::{Config, Parsed, StreamParser};

/// Parses a whole model output. Never fails: malformed calls become text and warnings.
pub fn parse(input: &str, config: &Config) -> Parsed {
    let mut parser = StreamParser::new(config);
    let mut events = Vec::new();
    parser.feed(input, &mut events);
    parser.finish(&mut events);
    Parsed::from_events(events)
}
