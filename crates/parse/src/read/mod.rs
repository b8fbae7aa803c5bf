//! Readers: how call syntax is recognized and read.
//!
//! A reader sees the unread input as a `&str` and its absolute offset, and answers
//! with how much it consumed ([`crate::engine::step`]). What it finds (a call begins,
//! a name, arguments, a call ends, the bytes are data) it reports to the engine
//! through [`Ctx`]; it never touches the engine's buffer, settle mark or output.
//!
//! `envelope` reads JSON call objects (and lists and wrappers of them); `markup`
//! reads tags and fences and hands JSON bodies to `envelope`; `python` reads Python
//! calls; `line` decides what a line starts; `free_text` guesses a call from prose.

pub(crate) mod envelope;
pub(crate) mod free_text;
pub(crate) mod line;
pub(crate) mod markup;
pub(crate) mod native;
pub(crate) mod python;

use crate::engine::call::CallState;
use crate::engine::settle::Ctx;
use crate::json::reader::Reader;

use self::envelope::Envelope;
use self::markup::Markup;
pub(crate) use self::markup::{Opener, open};
use self::python::PyGroup;

/// Where a region ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// When its markup closes (or at the first thing that is not a call).
    Markup,
    /// After one value: a labelled call's arguments.
    Value,
}

/// The readers of one region: the JSON envelope, the open markup, and the value or
/// Python group being read.
#[derive(Debug)]
pub(crate) struct Body {
    pub(crate) env: Envelope,
    pub(crate) markup: Markup,
    /// A JSON value being read, if any.
    pub(crate) json: Option<Reader>,
    /// The last reader, kept for its allocations.
    pub(crate) spare: Option<Reader>,
    /// A group of Python calls being read, if any.
    pub(crate) python: Option<Box<PyGroup>>,
    pub(crate) until: Until,
    /// The end marker of the reasoning the region is in: the region ends before it.
    pub(crate) stop: Option<&'static str>,
}

impl Body {
    pub(crate) fn new(max_depth: usize) -> Body {
        Body {
            env: Envelope::new(max_depth),
            markup: Markup::default(),
            json: None,
            spare: None,
            python: None,
            until: Until::Markup,
            stop: None,
        }
    }

    /// Makes these readers new ones, keeping their allocations.
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.env.recycle(max_depth);
        self.markup.recycle();
        if let Some(reader) = self.json.take() {
            self.spare = Some(reader);
        }
        self.python = None;
        self.until = Until::Markup;
        self.stop = None;
    }

    pub(crate) fn set_stop(&mut self, stop: Option<&'static str>) {
        self.stop = stop;
    }

    /// A Python group decides its bytes only when it ends.
    pub(crate) fn holds_group(&self) -> bool {
        self.python.is_some()
    }

    /// The innermost call a JSON body is reading.
    pub(crate) fn open_json_call(&self) -> Option<&CallState> {
        self.env.open_call()
    }

    /// Sends the arguments of the call being read, written so far.
    pub(crate) fn flush(&mut self, ctx: &mut Ctx<'_, '_>) {
        self.env.flush(ctx);
    }
}
