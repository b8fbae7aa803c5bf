//! A call's arguments, written through [`Canon`] and coerced to the tool's schema at every
//! depth as they arrive.
//!
//! The writer keeps, per open container, its node in the tool's compiled [`Schema`], the
//! last key (and its member's node) or the number of items begun, so the schema of each
//! value is found in constant time from its container's. A string the schema wants as
//! another type is held until it ends and written once converted; a number or boolean
//! where a string is declared is written as a string; a whole number where a `number`
//! (not an `integer`) is declared gets a fraction, and a zero fraction is dropped where an
//! `integer` is. Scalars arrive whole, so `canon.out` stays a valid JSON prefix.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::json::canon::{Canon, Canonical, canonical_json};
use crate::json::reader::{Frame, Reader, Sink};
use crate::json::scalar::{decode_escaped, is_json_number};
use crate::schema::{Node, NodeId, Schema};
use crate::tools::{ParamType, Tool, ToolRef};

/// How a value was coerced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Coercion {
    /// A string became the type the schema declares.
    FromString,
    /// A number or boolean became a string.
    ToString,
    /// A whole number got a fraction (`12` → `12.0`): the schema declares a number.
    Fraction,
    /// A zero fraction was dropped (`5.0` → `5`): the schema declares an integer.
    Whole,
}

/// A note from the argument writer, turned into a warning by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgsNote {
    Repaired(&'static str),
    /// The value stopped at a bracket nested deeper than this `max_depth`.
    TooDeep(usize),
    /// The JSON in the string value at `path` nests deeper than `max_depth`: the string
    /// was kept as it is.
    KeptAsString {
        path: String,
        max_depth: usize,
    },
    /// The value at `path` (`key`, `key[2].field`) was coerced to `to`, and `more` values
    /// after it that have the same schema were coerced the same way.
    Coerced {
        path: String,
        to: ParamType,
        how: Coercion,
        more: usize,
        node: NodeId,
    },
}

/// A string value held back because the schema declares another type.
#[derive(Debug)]
struct Held {
    node: NodeId,
    to: ParamType,
    fraction: bool,
    text: String,
}

/// An open container's place in the schema.
#[derive(Debug)]
struct Level {
    frame: Frame,
    /// The container's schema; `None`: not known, so nothing in it is coerced.
    node: Option<NodeId>,
    /// Object: the key given last, and its member's schema.
    key: String,
    member: Option<NodeId>,
    /// Array: how many items have begun.
    items: usize,
}

/// Writes a call's arguments object, coercing values at every depth to the types the
/// tool's schema declares. Everything but a held value is in `canon.out` at once.
#[derive(Debug)]
pub(crate) struct ArgsWriter {
    pub(crate) canon: Canon,
    /// While the tool has a schema: `levels[i]` is the place of the container open at
    /// depth `i + 1` (entries past `canon.depth()` are kept for their allocations).
    levels: Vec<Level>,
    held: Option<Held>,
    pub(crate) notes: Vec<ArgsNote>,
    /// The index in `notes` of the note for each schema node and kind of coercion, so a
    /// repeat is counted there instead of noted again.
    noted: HashMap<(NodeId, Coercion), usize>,
    tool: Option<ToolRef>,
    /// The deepest nesting read from the text of a value ([`crate::Config::max_depth`]).
    max_depth: usize,
}

/// The schema of a tool that has one.
fn schema_of(tool: Option<&ToolRef>) -> Option<&Schema> {
    tool.and_then(ToolRef::get).map(Tool::schema).filter(|schema| schema.root().is_some())
}

/// `json` is a number written without a fraction or an exponent.
fn is_whole(json: &str) -> bool {
    is_json_number(json) && !json.contains(['.', 'e', 'E'])
}

/// [`is_whole`] for a scalar a reader passed on, which is canonical JSON already (a number,
/// `true`, `false` or `null`): only digits and a minus sign.
fn is_whole_scalar(json: &str) -> bool {
    !json.is_empty() && json.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

/// The schema of the next value written in the container open at `depth` (the arguments
/// themselves at depth 0), counted in its array if it is in one.
fn take_next(levels: &mut [Level], depth: usize, schema: &Schema) -> Option<NodeId> {
    let Some(top) = depth.checked_sub(1) else { return schema.root() };
    let level = levels.get_mut(top)?;
    match level.frame {
        Frame::Object => level.member,
        Frame::Array => {
            let index = level.items;
            level.items += 1;
            schema.item(level.node?, index)
        }
    }
}

/// The integer part of a number whose fraction is all zeros (`5.0`, `-2.00`).
fn zero_fraction(json: &str) -> Option<&str> {
    let (whole, fraction) = json.split_once('.')?;
    let zeros = !fraction.is_empty() && fraction.bytes().all(|b| b == b'0');
    (zeros && is_json_number(json)).then_some(whole)
}

impl ArgsWriter {
    pub(crate) fn new(max_depth: usize) -> ArgsWriter {
        ArgsWriter {
            canon: Canon::default(),
            levels: Vec::new(),
            held: None,
            notes: Vec::new(),
            noted: HashMap::new(),
            tool: None,
            max_depth,
        }
    }

    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Makes this writer a new one, keeping the allocations it still has (not `canon.out`,
    /// which went into a call).
    pub(crate) fn recycle(&mut self, max_depth: usize) {
        self.max_depth = max_depth;
        self.canon.clear();
        self.held = None;
        self.notes.clear();
        self.noted.clear();
        self.tool = None;
    }

    pub(crate) fn set_tool(&mut self, tool: ToolRef) {
        if self.tool.as_ref().is_some_and(|known| known.same(&tool)) {
            // Named again (bound, then accepted): where the writer is stays known.
            return;
        }
        self.tool = Some(tool);
        // Containers already open (the name came after some arguments): the outermost is
        // the arguments object; where the others are in the schema is not known.
        let root = schema_of(self.tool.as_ref()).and_then(Schema::root);
        self.levels.clear();
        for (depth, frame) in self.canon.frames().enumerate() {
            let node = if depth == 0 { root } else { None };
            self.levels.push(Level { frame, node, key: String::new(), member: None, items: 0 });
        }
    }

    pub(crate) fn tool(&self) -> Option<&Tool> {
        self.tool.as_ref().and_then(ToolRef::get)
    }

    pub(crate) fn started(&self) -> bool {
        !self.canon.out.is_empty()
    }

    /// Closes what is open; returns the finished arguments object text.
    pub(crate) fn finish(&mut self) -> &str {
        if let Some(held) = self.held.take() {
            self.release(held);
        }
        if !self.canon.started_object() {
            self.canon.out.clear();
            self.canon.out.push_str("{}");
        }
        self.canon.close_all();
        &self.canon.out
    }

    /// The schema of the next value written at the current place.
    fn next_node(&self, schema: &Schema) -> Option<NodeId> {
        let Some(top) = self.canon.depth().checked_sub(1) else { return schema.root() };
        let level = self.levels.get(top)?;
        match level.frame {
            Frame::Object => level.member,
            Frame::Array => schema.item(level.node?, level.items),
        }
    }

    /// The next value begins (an array counts it).
    fn advance(&mut self) {
        let Some(top) = self.canon.depth().checked_sub(1) else { return };
        if let Some(level) = self.levels.get_mut(top) {
            if level.frame == Frame::Array {
                level.items += 1;
            }
        }
    }

    /// Where the value goes: `key`, `key[2]`, `key[2].field`. `begun`: the value has been
    /// counted in its array already.
    fn path(&self, begun: bool) -> String {
        let depth = self.canon.depth();
        let mut path = String::new();
        for (i, level) in self.levels.iter().take(depth).enumerate() {
            match level.frame {
                Frame::Object => {
                    if i > 0 {
                        path.push('.');
                    }
                    path.push_str(&level.key);
                }
                Frame::Array => {
                    // An outer array's current item has begun.
                    let index = if i + 1 == depth && !begun {
                        level.items
                    } else {
                        level.items.saturating_sub(1)
                    };
                    let _ = write!(path, "[{index}]");
                }
            }
        }
        path
    }

    /// Notes a coercion of the value (`begun` as for [`ArgsWriter::path`]), or counts it
    /// with the first one like it.
    #[inline]
    fn note(&mut self, node: NodeId, to: ParamType, how: Coercion, begun: bool) {
        // The common repeat (every item of an array of numbers) first.
        if let Some(ArgsNote::Coerced { node: n, how: h, more, .. }) = self.notes.last_mut() {
            if *n == node && *h == how {
                *more += 1;
                return;
            }
        }
        self.note_again_or_new(node, to, how, begun);
    }

    fn note_again_or_new(&mut self, node: NodeId, to: ParamType, how: Coercion, begun: bool) {
        let same = |note: &ArgsNote| matches!(note, ArgsNote::Coerced { node: n, how: h, .. } if *n == node && *h == how);
        let found = match self.noted.get(&(node, how)) {
            Some(&at) if self.notes.get(at).is_some_and(same) => Some(at),
            // Notes were taken out since (`notes.retain`): it is looked for.
            Some(_) => {
                let at = self.notes.iter().rposition(same);
                if let Some(at) = at {
                    self.noted.insert((node, how), at);
                }
                at
            }
            None => None,
        };
        if let Some(ArgsNote::Coerced { more, .. }) = found.and_then(|at| self.notes.get_mut(at)) {
            *more += 1;
            return;
        }
        let path = self.path(begun);
        self.noted.insert((node, how), self.notes.len());
        self.notes.push(ArgsNote::Coerced { path, to, how, more: 0, node });
    }

    /// Writes a held string as the type its schema declares, or as a string.
    fn release(&mut self, held: Held) {
        let trimmed = held.text.trim();
        let number = trimmed.strip_prefix('+').unwrap_or(trimmed);
        let converted: Option<String> = match held.to {
            ParamType::Integer if is_whole(number) => Some(number.to_owned()),
            ParamType::Integer => zero_fraction(number).map(str::to_owned),
            ParamType::Number if held.fraction && is_whole(number) => Some(format!("{number}.0")),
            ParamType::Number => is_json_number(number).then(|| number.to_owned()),
            ParamType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Some("true".to_owned()),
                "false" => Some("false".to_owned()),
                _ => None,
            },
            ParamType::Array | ParamType::Object => {
                // The value's own depth counts toward the limit (as at the top level).
                let bound = (self.max_depth + 1).saturating_sub(self.canon.depth()).max(1);
                match canonical_json(trimmed, bound) {
                    Canonical::Json(json)
                        if json.starts_with(if held.to == ParamType::Array {
                            '['
                        } else {
                            '{'
                        }) =>
                    {
                        // Read again into this writer, so the values in it are coerced too.
                        self.note(held.node, held.to, Coercion::FromString, false);
                        let _ = Reader::new(bound).feed(&json, 0, self);
                        return;
                    }
                    Canonical::TooDeep => {
                        let path = self.path(false);
                        self.notes.push(ArgsNote::KeptAsString { path, max_depth: self.max_depth });
                        None
                    }
                    Canonical::Json(_) | Canonical::Not => None,
                }
            }
            ParamType::String | ParamType::Any => None,
        };
        match converted {
            Some(json) => {
                self.note(held.node, held.to, Coercion::FromString, false);
                self.advance();
                self.canon.scalar(&json);
            }
            None => {
                self.advance();
                self.canon.str_start();
                self.canon.str_part(&held.text, false);
                self.canon.str_end();
            }
        }
    }
}

impl Sink for ArgsWriter {
    fn open(&mut self, frame: Frame, at: usize) {
        let place = schema_of(self.tool.as_ref())
            .map(|schema| take_next(&mut self.levels, self.canon.depth(), schema));
        self.canon.open(frame, at);
        let Some(node) = place else { return };
        let depth = self.canon.depth();
        while self.levels.len() < depth {
            let filler = Level { frame, node: None, key: String::new(), member: None, items: 0 };
            self.levels.push(filler);
        }
        if let Some(level) = depth.checked_sub(1).and_then(|top| self.levels.get_mut(top)) {
            level.frame = frame;
            level.node = node;
            level.key.clear();
            level.member = None;
            level.items = 0;
        }
    }

    fn close(&mut self, end: usize) {
        self.canon.close(end);
    }

    fn key(&mut self, key: &str) {
        if let Some(schema) = schema_of(self.tool.as_ref()) {
            if let Some(top) = self.canon.depth().checked_sub(1) {
                let container = self.levels.get(top).and_then(|level| level.node);
                let member = container.and_then(|node| schema.member(node, key));
                if let Some(level) = self.levels.get_mut(top) {
                    level.key.clear();
                    level.key.push_str(key);
                    level.member = member;
                }
            }
        }
        self.canon.key(key);
    }

    fn str_start(&mut self) {
        // The arguments themselves (depth 0) are never converted here.
        let schema = schema_of(self.tool.as_ref()).filter(|_| self.canon.depth() > 0);
        if let Some(schema) = schema {
            if let Some(node) = self.next_node(schema) {
                let Node { ty, fraction, .. } = *schema.node(node);
                if matches!(
                    ty,
                    ParamType::Integer
                        | ParamType::Number
                        | ParamType::Boolean
                        | ParamType::Array
                        | ParamType::Object
                ) {
                    self.held = Some(Held { node, to: ty, fraction, text: String::new() });
                    return;
                }
            }
            self.advance();
        }
        self.canon.str_start();
    }

    fn str_part(&mut self, text: &str, clean: bool) {
        match &mut self.held {
            Some(held) => held.text.push_str(text),
            None => self.canon.str_part(text, clean),
        }
    }

    fn str_escaped(&mut self, json: &str) {
        match &mut self.held {
            Some(held) => held.text.push_str(&decode_escaped(json)),
            None => self.canon.str_escaped(json),
        }
    }

    fn str_end(&mut self) {
        match self.held.take() {
            Some(held) => self.release(held),
            None => self.canon.str_end(),
        }
    }

    fn scalar(&mut self, json: &str) {
        let place = match schema_of(self.tool.as_ref()) {
            // The arguments themselves (depth 0) are never converted here.
            Some(schema) if self.canon.depth() > 0 => {
                take_next(&mut self.levels, self.canon.depth(), schema)
                    .map(|node| (node, *schema.node(node)))
            }
            Some(_) | None => None,
        };
        let Some((node, Node { ty, fraction, .. })) = place else {
            self.canon.scalar(json);
            return;
        };
        let how = match ty {
            ParamType::String if json != "null" => Some(Coercion::ToString),
            ParamType::Number if fraction && is_whole_scalar(json) => Some(Coercion::Fraction),
            ParamType::Integer if zero_fraction(json).is_some() => Some(Coercion::Whole),
            _ => None,
        };
        let Some(how) = how else {
            self.canon.scalar(json);
            return;
        };
        self.note(node, ty, how, true);
        match how {
            Coercion::ToString => {
                self.canon.str_start();
                self.canon.str_part(json, true);
                self.canon.str_end();
            }
            Coercion::Fraction => {
                self.canon.scalar(json);
                self.canon.out.push_str(".0");
            }
            Coercion::Whole => self.canon.scalar(zero_fraction(json).unwrap_or(json)),
            Coercion::FromString => self.canon.scalar(json),
        }
    }

    fn repaired(&mut self, what: &'static str) {
        self.notes.push(ArgsNote::Repaired(what));
    }

    fn too_deep(&mut self, max_depth: usize) {
        self.notes.push(ArgsNote::TooDeep(max_depth));
    }
}

#[cfg(test)]
mod tests;
