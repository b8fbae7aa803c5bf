//! One call being assembled, and the output it goes to.

use std::ops::Range;

use crate::{Config, Event, Warning, WarningCode};

/// Shows a range of the input (absolute offsets) as text.
pub(crate) type Show<'s> = dyn FnMut(&mut Out<'_>, Range<usize>) + 's;

/// Where dialects send what they find. Owned by the engine.
pub(crate) struct Out<'a> {
    pub(crate) events: &'a mut Vec<Event>,
    pub(crate) config: &'a Config,
    pub(crate) n_calls: &'a mut usize,
    /// `events[..first]` were there before this call into the parser; they are never changed.
    pub(crate) first: usize,
    /// Inside reasoning: text goes out as [`Event::Reasoning`].
    pub(crate) think: bool,
    /// What the recent visible text looked like.
    pub(crate) tail: &'a mut Tail,
}

/// The end of the visible text so far, for the example guard. It is computed from
/// the text as it goes out, which is the same for every chunking.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    /// The last few hundred bytes of text.
    pub(crate) recent: String,
    /// All the text (up to a limit), kept only when free-text calls are on.
    pub(crate) prose: Option<String>,
}

/// The most prose kept for free-text calls.
const MAX_PROSE: usize = 1 << 20;

const TAIL_KEEP: usize = 256;

impl Tail {
    fn track(&mut self, text: &str) {
        if let Some(prose) = self.prose.as_mut().filter(|p| p.len() < MAX_PROSE) {
            prose.push_str(text);
        }
        self.recent.push_str(text);
        if self.recent.len() > 2 * TAIL_KEEP {
            let mut cut = self.recent.len() - TAIL_KEEP;
            while !self.recent.is_char_boundary(cut) {
                cut += 1;
            }
            self.recent.drain(..cut);
        }
    }

    /// The text ends with one backtick that follows other text on its line: what
    /// comes next is inline code quoted in a sentence.
    pub(crate) fn in_quoted_code(&self) -> bool {
        let Some(before) = self.recent.strip_suffix('`') else { return false };
        if before.ends_with('`') {
            return false;
        }
        match before.rfind('\n') {
            Some(nl) => before.get(nl..).is_some_and(|line| !line.trim().is_empty()),
            // The line is longer than what is kept, so it has text.
            None => !before.trim().is_empty() || self.recent.len() >= TAIL_KEEP,
        }
    }

    /// The last sentence of the last line of text that is not blank.
    pub(crate) fn intro(&self) -> &str {
        // Only the last bytes every chunking keeps (`recent` holds between `TAIL_KEEP`
        // and twice that, depending on where chunks ended).
        let mut from = self.recent.len().saturating_sub(TAIL_KEEP - 4);
        while !self.recent.is_char_boundary(from) {
            from += 1;
        }
        let text = self.recent.get(from..).unwrap_or_default().trim_end();
        let line = text.rsplit('\n').next().unwrap_or_default().trim();
        last_sentence(line)
    }
}

/// The text after the last sentence end (`. `, `! `, `? `, `。`…) of `line`; "e.g."
/// and "i.e." do not end a sentence.
fn last_sentence(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut cut = 0;
    for (i, c) in line.char_indices() {
        let ends = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => {
                let next_space = bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
                let before = line.get(..i).unwrap_or_default().to_ascii_lowercase();
                let abbreviation = before.ends_with("e.g") || before.ends_with("i.e");
                next_space && !abbreviation && bytes.get(i + 1).is_some()
            }
            _ => false,
        };
        if ends {
            cut = i + c.len_utf8();
        }
    }
    line.get(cut..).unwrap_or_default().trim()
}

/// The warning for JSON nested deeper than `max_depth`.
pub(crate) fn too_deep_message(max_depth: usize) -> String {
    format!(
        "JSON nested deeper than max_depth ({max_depth}); what was open was closed there \
         (raise `Config::max_depth` to read deeper)"
    )
}

impl Out<'_> {
    /// Pushes text, merged into the previous text event when this same call pushed it.
    /// Inside reasoning it is reasoning text.
    pub(crate) fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.think {
            self.reasoning(text);
            return;
        }
        self.tail.track(text);
        if self.events.len() > self.first {
            if let Some(Event::Text(last)) = self.events.last_mut() {
                last.push_str(text);
                return;
            }
        }
        self.events.push(Event::Text(text.to_owned()));
    }

    /// Pushes reasoning text, merged like [`Out::text`].
    pub(crate) fn reasoning(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.events.len() > self.first {
            if let Some(Event::Reasoning(last)) = self.events.last_mut() {
                last.push_str(text);
                return;
            }
        }
        self.events.push(Event::Reasoning(text.to_owned()));
    }

    pub(crate) fn warn(
        &mut self,
        code: WarningCode,
        message: String,
        call_idx: Option<usize>,
        span: Range<usize>,
    ) {
        self.events.push(Event::Warning(Warning { code, message, call_idx, span }));
    }
}
