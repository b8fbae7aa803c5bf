//! The element stack of tool-call markup: containers, call elements, argument fields,
//! fences and marker pairs, opened and closed by tags, with the calls they hold. What
//! each tag means comes from `rows::markup`.

use std::borrow::Cow;

use crate::WarningCode;
use crate::engine::call::{CallState, Cut};
use crate::engine::settle::{Ctx, Decision};
use crate::engine::step::{Step, Took};
use crate::read::field::Field;
use crate::read::pair::PairRef;
use crate::read::tag::{Tag, attr, same_tag, tool_name_of};
use crate::read::value::{Padding, write_typed_value};
use crate::read::{Body, Reading};
use crate::rows::markup::{
    LOOSE_CLOSERS, PARAM_KEYS, Role, STRING_FLAG, TAGS, TYPE_ATTR, VALUE_ATTR, says_string,
};
use crate::rows::native::{Body as PairBody, Text};

/// The open markup elements of a region, outermost first.
#[derive(Debug, Default)]
pub(crate) struct Markup {
    pub(super) frames: Vec<Elem>,
    /// The key of an `<arg_key>` waiting for its `<arg_value>`.
    pub(super) key: Option<String>,
    /// The string flag an `<arg_type>` gave the next `<arg_value>`.
    pub(super) key_string: Option<bool>,
    /// How many frames were open when a JSON value in them broke off (or a parameter's
    /// value ended at its end tag with text and then the element's end tag after it), and
    /// whether its call was withdrawn (its arguments are not JSON). The rest of the
    /// innermost frame, up to its end tag, belongs to that call: shown with a withdrawn
    /// call's text, dropped with a warning after a call whose arguments were whole.
    pub(super) broke_off: Option<(usize, bool)>,
}

impl Markup {
    /// Empties it, keeping its allocations.
    pub(crate) fn recycle(&mut self) {
        self.frames.clear();
        self.key = None;
        self.key_string = None;
        self.broke_off = None;
    }
}

#[derive(Debug)]
pub(super) enum Elem {
    Fence,
    /// `<tool_call>` and friends. Holds JSON envelopes or call elements, or acts as
    /// one call once a name field or a parameter shows up.
    Container {
        close: &'static str,
        at: usize,
        call: Option<Box<CallState>>,
        /// A JSON value was read in it: a bare name is no longer its call's name.
        held: bool,
    },
    /// A call whose name the markup gave. Without an end tag (`<func_name>` calls, name
    /// heads, labels) it ends at the first thing that is not its parameter or arguments.
    Call {
        close: Option<&'static str>,
        call: Option<Box<CallState>>,
    },
    /// `<arguments>`: JSON arguments of the enclosing call.
    ArgsField {
        close: &'static str,
    },
    /// A marker pair: ends at one of its end markers.
    Pair(PairRef),
}

impl Markup {
    /// The end tag that closes the innermost call as expected when it has no end tag of
    /// its own: a call opened by `<func_name>` outside any pair ends at `</func_call>`.
    pub(super) fn loose_close(&self) -> Option<&'static str> {
        let bare = matches!(self.frames.last(), Some(Elem::Call { close: None, .. }))
            && !self.frames.iter().any(|f| matches!(f, Elem::Pair(_)));
        if !bare {
            return None;
        }
        TAGS.iter().find_map(|(_, role)| match role {
            Role::CallName { closed_by } => Some(*closed_by),
            _ => None,
        })
    }
}

impl Elem {
    pub(super) fn close_name(&self) -> Option<&'static str> {
        match self {
            Elem::Fence | Elem::Pair(_) => None,
            Elem::Container { close, .. } | Elem::ArgsField { close } => Some(close),
            Elem::Call { close, .. } => *close,
        }
    }
}

impl Body {
    /// Opens a tag inside the region (or as its opener). Returns false when the
    /// tag does not belong to tool-call markup.
    pub(super) fn open_tag(&mut self, tag: &Tag<'_>, at: usize, ctx: &mut Ctx<'_, '_>) -> bool {
        let opened = self.open_element(tag, at, ctx);
        if opened {
            // Tool-call markup (inside a fence, say) settles that this is call syntax.
            ctx.markup();
            if ctx.decision() == Decision::Pending {
                ctx.set_decision(Decision::Calls);
            }
        }
        opened
    }

    fn open_element(&mut self, tag: &Tag<'_>, at: usize, ctx: &mut Ctx<'_, '_>) -> bool {
        let in_call = self.call_frame().is_some();
        let in_container = self.container_can_call();
        let row = crate::rows::markup::tag(tag.name);
        let role = row.map(|(_, role)| role);
        match row {
            Some((close, Role::CallName { .. })) => {
                self.reading = Reading::Field(Field::CallName { close, text: String::new(), at });
                return true;
            }
            Some((close, Role::Param)) if in_call || in_container => {
                self.open_param(tag, close, ctx);
                return true;
            }
            Some((close, role @ (Role::Key | Role::KeyType | Role::Value | Role::Separator)))
                if in_container || in_call =>
            {
                if !tag.self_closing {
                    self.open_key_value(close, role);
                }
                return true;
            }
            Some((close, Role::Ignored)) if in_container || in_call => {
                if !tag.self_closing {
                    self.reading = Reading::Field(Field::Ignored { close, text: String::new() });
                }
                return true;
            }
            Some((close, Role::NameField)) if in_container => {
                self.reading = Reading::Field(Field::Name { close, text: String::new() });
                return true;
            }
            Some((close, Role::ArgsField)) if in_container || in_call => {
                self.ensure_container_call(ctx);
                self.markup.frames.push(Elem::ArgsField { close });
                return true;
            }
            Some((close, Role::Call { id, unnamed_holds_calls, .. })) => {
                match tool_name_of(tag, role) {
                    Some(name) => {
                        let id = id.and_then(|key| attr(tag.attrs, key));
                        self.open_call_element(tag, close, name, id, at, ctx);
                        return true;
                    }
                    None if unnamed_holds_calls => {
                        self.open_container(close, at, ctx);
                        return true;
                    }
                    None => {}
                }
            }
            Some((close, Role::Container { .. })) => {
                match tool_name_of(tag, role) {
                    Some(name) => self.open_call_element(tag, close, name, None, at, ctx),
                    None => self.open_container(close, at, ctx),
                }
                return true;
            }
            _ => {}
        }
        // In namespaced markup, any other tag inside a call is a parameter named by the tag.
        if self.namespace_token().is_some() && !tag.self_closing && in_call {
            self.reading = Reading::Field(Field::Param {
                key: tag.name.to_owned(),
                close: Cow::Owned(tag.name.to_owned()),
                text: String::new(),
                string: None,
                padding: Padding::None,
                end_seen: None,
            });
            return true;
        }
        false
    }

    /// `<parameter name="KEY">`, `<param name="KEY" value="V"/>`, `<parameter=KEY>`.
    fn open_param(&mut self, tag: &Tag<'_>, close: &'static str, ctx: &mut Ctx<'_, '_>) {
        let key = tag
            .eq
            .map(str::to_owned)
            .or_else(|| PARAM_KEYS.iter().find_map(|key| attr(tag.attrs, key)))
            .unwrap_or_default();
        let string = says_string(
            attr(tag.attrs, STRING_FLAG).as_deref(),
            attr(tag.attrs, TYPE_ATTR).as_deref(),
        );
        if let Some(value) = attr(tag.attrs, VALUE_ATTR).filter(|_| tag.self_closing) {
            self.write_param(&key, &value, string, Padding::None, ctx);
            return;
        }
        if tag.self_closing {
            return;
        }
        // `<parameter=KEY>` is Qwen3-Coder's form, whose template pads the value with
        // line breaks; attribute forms (DSML, MiniMax) write the value as it is.
        let padding = if tag.eq.is_some() { Padding::Newlines } else { Padding::None };
        self.reading = Reading::Field(Field::Param {
            key,
            close: close.into(),
            text: String::new(),
            string,
            padding,
            end_seen: None,
        });
    }

    /// `<arg_key>`, `<arg_type>`, `<arg_value>` (the separator carries nothing).
    fn open_key_value(&mut self, close: &'static str, role: Role) {
        self.reading = match role {
            Role::Key => Reading::Field(Field::Key { text: String::new(), close }),
            Role::KeyType => Reading::Field(Field::KeyType { text: String::new(), close }),
            Role::Value => Reading::Field(Field::Param {
                key: self.markup.key.take().unwrap_or_default(),
                close: close.into(),
                text: String::new(),
                string: self.markup.key_string.take(),
                padding: Padding::None,
                end_seen: None,
            }),
            _ => return,
        };
    }

    /// A call element (or a container with a name): a call whose name the tag gives.
    fn open_call_element(
        &mut self,
        tag: &Tag<'_>,
        close: &'static str,
        name: String,
        id: Option<String>,
        at: usize,
        ctx: &mut Ctx<'_, '_>,
    ) {
        self.close_open_calls(at, ctx);
        let mut call = ctx.open_call(at);
        call.name = Some(name);
        call.id = id;
        ctx.resolve(&mut call);
        if tag.self_closing {
            ctx.finish_call(call);
            return;
        }
        self.markup.frames.push(Elem::Call { close: Some(close), call: Some(call) });
    }

    fn open_container(&mut self, close: &'static str, at: usize, ctx: &mut Ctx<'_, '_>) {
        self.close_open_calls(at, ctx);
        self.markup.frames.push(Elem::Container { close, at, call: None, held: false });
    }

    /// The namespace token of the innermost pair with namespaced markup: tags inside its
    /// calls are parameters.
    pub(super) fn namespace_token(&self) -> Option<Text> {
        self.markup.frames.iter().rev().find_map(|f| match f {
            Elem::Pair(pair) => match pair.body() {
                PairBody::NamespacedMarkup(token) => Some(Text::clone(token)),
                _ => None,
            },
            _ => None,
        })
    }

    /// Calls do not nest: a call that begins while another is open ends that one
    /// (its end tag was missing).
    pub(super) fn close_open_calls(&mut self, at: usize, ctx: &mut Ctx<'_, '_>) {
        let first = self.markup.frames.iter().position(|f| {
            matches!(f, Elem::Call { call: Some(_), .. } | Elem::Container { call: Some(_), .. })
        });
        let Some(first) = first else { return };
        for frame in self.markup.frames.iter_mut().skip(first) {
            let (close, call) = match frame {
                Elem::Call { close: Some(close), call: Some(call) }
                | Elem::Container { close, call: Some(call), .. } => (*close, call),
                _ => continue,
            };
            call.extra_notes.push((
                WarningCode::MissingEndMarker,
                format!("the end tag `</{close}>` is missing before the next call"),
            ));
        }
        let _ = at;
        self.close_frames(first, ctx);
    }

    /// The innermost call element, if the innermost frame is one.
    pub(super) fn call_frame(&mut self) -> Option<&mut CallState> {
        match self.markup.frames.last_mut() {
            Some(Elem::Call { call, .. }) => call.as_deref_mut(),
            _ => None,
        }
    }

    /// Whether the innermost frame is a container that may act as a call.
    pub(super) fn container_can_call(&self) -> bool {
        matches!(self.markup.frames.last(), Some(Elem::Container { .. }))
    }

    /// Makes the innermost container a call, if it is not one yet (a name field or a
    /// parameter showed up in it).
    pub(super) fn ensure_container_call(&mut self, ctx: &mut Ctx<'_, '_>) {
        if let Some(Elem::Container { at, call: None, .. }) = self.markup.frames.last() {
            let call = ctx.open_call(*at);
            if let Some(Elem::Container { call: slot, .. }) = self.markup.frames.last_mut() {
                *slot = Some(call);
            }
        }
    }

    /// The call that fields and parameters of the innermost frames belong to.
    pub(super) fn current_call(&mut self) -> Option<&mut CallState> {
        for frame in self.markup.frames.iter_mut().rev() {
            match frame {
                Elem::Call { call, .. } | Elem::Container { call, .. } => {
                    return call.as_deref_mut();
                }
                Elem::ArgsField { .. } => continue,
                Elem::Fence | Elem::Pair(_) => return None,
            }
        }
        None
    }

    /// Writes one parameter into the current call and sends what it adds.
    pub(super) fn write_param(
        &mut self,
        key: &str,
        raw: &str,
        string: Option<bool>,
        padding: Padding,
        ctx: &mut Ctx<'_, '_>,
    ) {
        self.ensure_container_call(ctx);
        let Some(call) = self.current_call() else { return };
        write_typed_value(call, key, raw, string, padding);
        ctx.flush(call);
    }

    /// Takes the innermost call out of its frame (looking through fences, argument
    /// fields and pairs), to lend it to a JSON body.
    pub(super) fn lend_call(&mut self) -> Option<Box<CallState>> {
        for frame in self.markup.frames.iter_mut().rev() {
            match frame {
                Elem::Fence | Elem::ArgsField { .. } | Elem::Pair(_) => continue,
                Elem::Call { call, .. } | Elem::Container { call, .. } => return call.take(),
            }
        }
        None
    }

    /// Gives a call lent to the JSON envelope back to its frame.
    pub(super) fn put_back(&mut self, call: Box<CallState>) {
        let slot = self.markup.frames.iter_mut().rev().find_map(|frame| match frame {
            Elem::Call { call: slot, .. } | Elem::Container { call: slot, .. } => Some(slot),
            Elem::Fence | Elem::ArgsField { .. } | Elem::Pair(_) => None,
        });
        match slot {
            Some(slot) if slot.is_none() => *slot = Some(call),
            // No frame to take it: a lent call is never dropped, so this does not happen.
            _ => debug_assert!(false, "a lent call had no frame to return to"),
        }
    }

    /// An end tag: closes the element it ends (a misspelled or loose one too).
    pub(super) fn close_tag(&mut self, tag: &Tag<'_>, ctx: &mut Ctx<'_, '_>) -> Step {
        let target = self
            .markup
            .frames
            .iter()
            .rposition(|f| f.close_name().is_some_and(|c| same_tag(c, tag.name)));
        let Some(target) = target else {
            // A closer of calls without end tags (`</func_call>` after `<func_name>`
            // calls), or a typo like `</toolcall>` for the outermost container: close
            // what is open.
            let loose = LOOSE_CLOSERS.iter().any(|part| tag.name.contains(part));
            if loose && !self.markup.frames.is_empty() {
                let expected = TAGS.iter().any(
                    |(_, role)| matches!(role, Role::CallName { closed_by } if *closed_by == tag.name),
                );
                if !expected {
                    if let Some(call) = self.current_call() {
                        call.extra_notes.push((
                            WarningCode::MissingEndMarker,
                            format!(
                                "the end tag `</{}>` did not match its start tag; taken as its end",
                                tag.name
                            ),
                        ));
                    }
                }
                self.close_frames(0, ctx);
                return Ok(Took::End(tag.len));
            }
            return Ok(Took::End(0));
        };
        let exact = self.markup.frames.get(target).and_then(Elem::close_name) == Some(tag.name);
        if !exact || tag.unfinished {
            if let Some(call) = self.current_call() {
                call.extra_notes.push((
                    WarningCode::MissingEndMarker,
                    format!("the end tag `</{}>` was misspelled or unfinished", tag.name),
                ));
            }
        }
        self.close_frames(target, ctx);
        if self.markup.frames.is_empty() {
            return Ok(Took::End(tag.len));
        }
        Ok(Took::Go(tag.len))
    }

    /// Closes frames from the innermost down to index `keep` (inclusive).
    pub(super) fn close_frames(&mut self, keep: usize, ctx: &mut Ctx<'_, '_>) {
        while self.markup.frames.len() > keep {
            let Some(frame) = self.markup.frames.pop() else { break };
            match frame {
                Elem::Call { call: Some(call), .. } | Elem::Container { call: Some(call), .. } => {
                    ctx.finish_call(call);
                }
                _ => {}
            }
        }
        // The element whose JSON broke off is closed: a later one at its depth is another.
        if self.markup.broke_off.is_some_and(|(depth, _)| depth > self.markup.frames.len()) {
            self.markup.broke_off = None;
        }
    }

    /// Notes the end tags still missing when the region ends, and closes everything.
    /// `eof`: the output ended there; a call that had not begun its arguments was cut off
    /// in its head (`to=functions.NAME<|channel|>commentary` and no message).
    pub(super) fn close_all(&mut self, end: usize, eof: bool, ctx: &mut Ctx<'_, '_>) {
        // A key whose value never came (`<arg_key>unit</arg_key>` and then the end).
        if self.markup.key.take().is_some() {
            if let Some(call) = self.current_call() {
                call.cut_off(Cut::Value);
            }
        }
        for frame in &mut self.markup.frames {
            if let Elem::Call { call: Some(call), .. } = frame {
                if eof && !call.args_seen && !call.args.started() {
                    call.cut_off(Cut::Value);
                }
            }
            let (close, call) = match frame {
                Elem::Call { close: Some(close), call: Some(call) }
                | Elem::Container { close, call: Some(call), .. } => (*close, call),
                _ => continue,
            };
            if call.cut == Cut::No {
                call.extra_notes.push((
                    WarningCode::MissingEndMarker,
                    format!("the end tag `</{close}>` is missing"),
                ));
            }
        }
        let _ = end;
        self.close_frames(0, ctx);
    }
}

/// A bare call name right after a container's start tag, then (after optional
/// whitespace) a tag: `<tool_call>get_weather<arg_key>…` (GLM, Hunyuan). Its length.
pub(super) fn bare_name(rest: &str, eof: bool) -> crate::engine::step::Look<usize> {
    use crate::engine::step::Need;
    use crate::read::open::MAX_FENCE_GAP;
    use crate::read::tag::{MAX_EQ, is_name_byte};
    let b = rest.as_bytes();
    let len = b.iter().take(MAX_EQ + 1).take_while(|&&c| is_name_byte(c)).count();
    if len > MAX_EQ {
        return Ok(None);
    }
    let ws = b.iter().skip(len).take(MAX_FENCE_GAP).take_while(|c| c.is_ascii_whitespace()).count();
    match b.get(len + ws) {
        Some(b'<') => Ok(Some(len)),
        // `ws` stops at the limit: the byte after it decides, so wait for it.
        None if !eof => Err(Need),
        _ => Ok(None),
    }
}
