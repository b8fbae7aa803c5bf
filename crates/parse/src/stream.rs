//! The one engine: `StreamParser` (placeholder until the engine lands).

use crate::{Config, Event};

/// Incremental parser: feed chunks, then finish.
#[derive(Debug)]
pub struct StreamParser {
    config: Config,
}

impl StreamParser {
    /// A parser for one model output.
    pub fn new(config: &Config) -> StreamParser {
        StreamParser { config: config.clone() }
    }

    /// Feeds the next chunk; pushes the events it settles.
    pub fn feed(&mut self, chunk: &str, out: &mut Vec<Event>) {
        let _ = &self.config;
        if !chunk.is_empty() {
            out.push(Event::Text(chunk.to_owned()));
        }
    }

    /// Ends the input; pushes the remaining events.
    pub fn finish(self, out: &mut Vec<Event>) {
        let _ = out;
    }
}
