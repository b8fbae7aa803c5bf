//! Markup fields: the raw text of a parameter, a name or a key, read up to its end tag.

use std::borrow::Cow;

use crate::WarningCode;
use crate::engine::call::Cut;
use crate::engine::settle::Ctx;
use crate::engine::step::{Look, Need, Step, Took};
use crate::read::markup::Elem;
use crate::read::pair::PairRef;
use crate::read::tag::{
    AfterEnd, EndTag, ValueEnd, ValueEnds, scan_after_end, scan_until_close, scan_value,
};
use crate::read::value::{Padding, elements_json};
use crate::read::{Body, Reading};
use crate::rows::markup::says_string;
use crate::rows::native::{ArgTokens, Body as PairBody, Pair, Row, Text};
use crate::tools::ParamType;

/// A field being read, up to its end tag `close`.
#[derive(Debug)]
pub(crate) enum Field {
    /// A parameter's raw value. `string` is an explicit type flag (DSML
    /// `string="true|false"`, a `type` attribute, an `<arg_type>`).
    Param {
        key: String,
        close: Cow<'static, str>,
        text: String,
        string: Option<bool>,
        padding: Padding,
        /// Its end tag, followed by text, is at the cursor: the value ends there unless
        /// another end tag of its own follows.
        end_seen: Option<EndSeen>,
    },
    /// A container's name field: it names the container's call.
    Name { close: &'static str, text: String },
    /// `<func_name>`: the name of a new call whose parameters follow.
    CallName { close: &'static str, text: String, at: usize },
    /// An `<arg_key>`'s text: the key of the next `<arg_value>`.
    Key { text: String, close: &'static str },
    /// An `<arg_type>`'s text: the type of the next `<arg_value>`.
    KeyType { text: String, close: &'static str },
    /// A field whose text is not part of the call (MCP's `<server_name>`).
    Ignored { close: &'static str, text: String },
    /// A key between argument tokens (the pair's), up to the value token.
    TokenKey { text: String, pair: Row },
    /// A value between argument tokens, up to the end token (or, where that is missing,
    /// the next key token or an end marker of the pair).
    TokenValue { key: String, text: String, pair: Row },
    /// Free-form input up to an end marker of the pair: the value of the pair's key unless
    /// the tool says which parameter it fills; JSON object arguments when it is one.
    Freeform { text: String, pair: Row },
}

/// The argument tokens of a pair whose arguments are token pairs.
fn tokens_of(pair: &Pair) -> Option<&ArgTokens> {
    match &pair.body {
        PairBody::ArgTokens(tokens) => Some(tokens),
        _ => None,
    }
}

impl Field {
    fn close(&self) -> &str {
        match self {
            Field::Param { close, .. } => close,
            Field::Name { close, .. }
            | Field::CallName { close, .. }
            | Field::Key { close, .. }
            | Field::KeyType { close, .. }
            | Field::Ignored { close, .. } => close,
            Field::TokenKey { pair, .. } => tokens_of(pair).map_or("", |tokens| &tokens.value),
            Field::TokenValue { pair, .. } => tokens_of(pair).map_or("", |tokens| &tokens.end),
            Field::Freeform { pair, .. } => pair.ends.first().map_or("", |end| &**end),
        }
    }

    fn text(&mut self) -> &mut String {
        match self {
            Field::Param { text, .. }
            | Field::Name { text, .. }
            | Field::CallName { text, .. }
            | Field::Key { text, .. }
            | Field::KeyType { text, .. }
            | Field::Ignored { text, .. }
            | Field::TokenKey { text, .. }
            | Field::TokenValue { text, .. }
            | Field::Freeform { text, .. } => text,
        }
    }
}

/// An end tag that text follows, at the cursor, which may end the value: the scan for
/// what decides it goes on at `scanned` bytes past the cursor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EndSeen {
    tag: EndTag,
    scanned: usize,
}

/// The most end tags around a value that may end it when its own is missing.
const MAX_ENCLOSING: usize = 8;

impl Body {
    /// Reads the field's text up to its end tag.
    pub(super) fn step_field(
        &mut self,
        mut field: Field,
        rest: &str,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        match field {
            Field::Param { .. } => return self.step_value(field, rest, ctx, eof),
            Field::TokenKey { .. } | Field::TokenValue { .. } => {
                return self.step_token_field(field, rest, ctx, eof);
            }
            Field::Freeform { text, pair } => {
                return self.step_freeform(text, pair, rest, ctx, eof);
            }
            _ => {}
        }
        let upto = scan_until_close(rest, field.close(), eof);
        field.text().push_str(rest.get(..upto.text).unwrap_or_default());
        let Some(closer) = upto.closer else {
            self.reading = Reading::Field(field);
            return if upto.text == 0 { Err(Need) } else { Ok(Took::Go(upto.text)) };
        };
        self.field_done(field, closer == 0, ctx);
        Ok(Took::Go(upto.text + closer))
    }

    /// Reads a parameter's value up to its end: its end tag, or, where that is missing,
    /// an end tag of what holds it or the next parameter (left to the markup reader).
    fn step_value(
        &mut self,
        mut field: Field,
        rest: &str,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        // Only a parameter comes here (see `step_field`).
        let Field::Param { close, padding, text, end_seen, .. } = &mut field else {
            return Err(Need);
        };
        let padded = *padding == Padding::Newlines;
        let after_newline = text.is_empty() || text.ends_with('\n');
        let mut enclosing: [&'static str; MAX_ENCLOSING] = [""; MAX_ENCLOSING];
        let loose = self.markup.loose_close();
        let names =
            loose.into_iter().chain(self.markup.frames.iter().rev().filter_map(Elem::close_name));
        for (slot, name) in enclosing.iter_mut().zip(names) {
            *slot = name;
        }
        let namespace = self.namespace_token();
        let ends = ValueEnds { enclosing: &enclosing, padded, namespace: namespace.as_deref() };
        if let Some(seen) = end_seen {
            let tag = seen.tag;
            let after = scan_after_end(rest, close, ends, tag, seen.scanned, eof);
            let missing =
                format!("a `</{close}>` end tag was missing; the value ended at the next tag");
            return match (after, tag) {
                (AfterEnd::Ended | AfterEnd::EndedInElement, EndTag::Own(closer)) => {
                    self.field_done(field, false, ctx);
                    // What follows, up to the element's end tag or its next parameter, is
                    // the call's (dropped with a warning that carries it); anywhere else
                    // it is text after the call.
                    self.markup.broke_off = (after == AfterEnd::EndedInElement)
                        .then_some((self.markup.frames.len(), false));
                    Ok(Took::Go(closer))
                }
                (AfterEnd::Ended | AfterEnd::EndedInElement, EndTag::Around(_)) => {
                    // The end tag around the value is the markup reader's.
                    self.field_done(field, false, ctx);
                    if let Some(call) = self.current_call() {
                        call.extra_notes.push((WarningCode::MissingEndMarker, missing));
                    }
                    Ok(Took::Go(0))
                }
                (AfterEnd::Again(at), _) => {
                    // The end tag was text of the value, and so is what followed it.
                    *end_seen = None;
                    text.push_str(rest.get(..at).unwrap_or_default());
                    self.reading = Reading::Field(field);
                    Ok(Took::Go(at))
                }
                (AfterEnd::More(scanned), _) => {
                    seen.scanned = scanned;
                    self.reading = Reading::Field(field);
                    Err(Need)
                }
            };
        }
        let upto = scan_value(rest, close, ends, after_newline, eof);
        // Written now, while `close` is at hand (the field is changed below).
        let missing = matches!(upto.end, Some(ValueEnd::Missing)).then(|| {
            format!("a `</{close}>` end tag was missing; the value ended at the next tag")
        });
        field.text().push_str(rest.get(..upto.text).unwrap_or_default());
        match upto.end {
            None => {
                self.reading = Reading::Field(field);
                if upto.text == 0 { Err(Need) } else { Ok(Took::Go(upto.text)) }
            }
            Some(ValueEnd::Closer(len)) => {
                self.field_done(field, false, ctx);
                Ok(Took::Go(upto.text + len))
            }
            Some(ValueEnd::Missing) => {
                self.field_done(field, false, ctx);
                if let (Some(call), Some(message)) = (self.current_call(), missing) {
                    call.extra_notes.push((WarningCode::MissingEndMarker, message));
                }
                Ok(Took::Go(upto.text))
            }
            Some(ValueEnd::Cut) => {
                self.field_done(field, true, ctx);
                Ok(Took::Go(upto.text))
            }
            Some(ValueEnd::Text(tag)) => {
                // The cursor moves up to the end tag, which the next step decides on
                // (this one changed the field's state, so taking nothing is progress).
                if let Field::Param { end_seen, .. } = &mut field {
                    *end_seen = Some(EndSeen { tag, scanned: tag.len() });
                }
                self.reading = Reading::Field(field);
                Ok(Took::Go(upto.text))
            }
        }
    }

    /// A field's text is complete (`cut`: the input ended inside it).
    pub(super) fn field_done(&mut self, field: Field, cut: bool, ctx: &mut Ctx<'_, '_>) {
        match field {
            Field::Param { key, mut text, string, padding, .. } => {
                // Namespaced markup writes its token before the end tag too.
                if let Some(token) = self.namespace_token() {
                    if text.ends_with(&*token) {
                        text.truncate(text.len() - token.len());
                    }
                    // Nested elements: an object (or an array) parameter.
                    let array = self
                        .current_call()
                        .and_then(|call| call.args.tool())
                        .is_some_and(|tool| tool.param_type(&key) == ParamType::Array);
                    if let Some(json) = elements_json(&text, &token, array) {
                        text = json;
                    }
                }
                self.write_param(&key, &text, string, padding, ctx);
                if cut {
                    // The output ended inside the value.
                    if let Some(call) = self.current_call() {
                        call.cut_off(Cut::Value);
                    }
                }
            }
            Field::Key { text, .. } => {
                self.markup.key = Some(text.trim().to_owned());
                self.markup.key_string = None;
            }
            Field::KeyType { text, .. } => {
                self.markup.key_string = says_string(None, Some(text.trim()));
            }
            Field::Name { text, .. } => {
                let name = text.trim().to_owned();
                self.ensure_container_call(ctx);
                if let Some(call) = self.current_call() {
                    call.name.get_or_insert(name);
                    ctx.resolve(call);
                }
            }
            // Read by `step_token_field`, which writes a value itself.
            Field::TokenValue { key, text, .. } => {
                self.write_param(&key, &text, None, Padding::None, ctx);
            }
            Field::TokenKey { .. } | Field::Ignored { .. } => {}
            Field::Freeform { text, pair } => self.write_freeform(&pair, &text, ctx),
            Field::CallName { text, at, .. } => {
                self.close_open_calls(at, ctx);
                let mut call = ctx.open_call(at);
                call.name = Some(text.trim().to_owned());
                ctx.resolve(&mut call);
                self.markup.frames.push(Elem::Call { close: None, call: Some(call) });
            }
        }
    }

    /// The region ended inside a field: a value is written as far as it got, a call
    /// name opens its call; a key or a container's name is lost.
    pub(super) fn field_cut(&mut self, field: Field, ctx: &mut Ctx<'_, '_>) {
        match field {
            Field::Param { key, text, string, padding, end_seen, .. } => {
                self.write_param(&key, &text, string, padding, ctx);
                // A value that reached an end tag was not cut off.
                if end_seen.is_none() {
                    if let Some(call) = self.current_call() {
                        call.cut_off(Cut::Value);
                    }
                }
            }
            Field::CallName { text, at, .. } => {
                self.close_open_calls(at, ctx);
                let mut call = ctx.open_call(at);
                call.name = Some(text.trim().to_owned());
                ctx.resolve(&mut call);
                call.cut_off(Cut::Value);
                self.markup.frames.push(Elem::Call { close: None, call: Some(call) });
            }
            Field::TokenValue { key, text, .. } => {
                self.write_param(&key, &text, None, Padding::None, ctx);
                if let Some(call) = self.current_call() {
                    call.cut_off(Cut::Value);
                }
            }
            Field::Freeform { text, pair } => {
                self.write_freeform(&pair, &text, ctx);
                if let Some(call) = self.current_call() {
                    call.cut_off(Cut::Value);
                }
            }
            Field::TokenKey { .. } => {
                if let Some(call) = self.current_call() {
                    call.cut_off(Cut::Value);
                }
            }
            Field::Key { .. }
            | Field::KeyType { .. }
            | Field::Name { .. }
            | Field::Ignored { .. } => {}
        }
    }

    /// The innermost pair, when its arguments are token pairs and a call of it is open.
    fn arg_pair(&self) -> Option<&Row> {
        let pair = self.markup.frames.iter().rev().find_map(|f| match f {
            Elem::Pair(PairRef::Native(pair)) => Some(pair),
            _ => None,
        })?;
        let open_call = matches!(self.markup.frames.last(), Some(Elem::Call { call: Some(_), .. }));
        (open_call && tokens_of(pair).is_some()).then_some(pair)
    }

    /// A key token at the cursor, inside a call whose arguments are token pairs: the key
    /// follows. Its length.
    pub(super) fn arg_key(&mut self, rest: &str, eof: bool) -> Look<usize> {
        let Some(pair) = self.arg_pair() else { return Ok(None) };
        let Some(tokens) = tokens_of(pair) else { return Ok(None) };
        let key: &str = &tokens.key;
        if rest.starts_with(key) {
            let len = key.len();
            let pair = Row::clone(pair);
            self.reading = Reading::Field(Field::TokenKey { text: String::new(), pair });
            return Ok(Some(len));
        }
        if !eof && rest.len() < key.len() && key.starts_with(rest) {
            return Err(Need);
        }
        Ok(None)
    }

    /// Reads a key or a value between argument tokens up to the token that ends it.
    fn step_token_field(
        &mut self,
        field: Field,
        rest: &str,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        match field {
            Field::TokenKey { mut text, pair } => {
                let Some(tokens) = tokens_of(&pair) else { return Ok(Took::Go(0)) };
                let stops = [&tokens.value, &tokens.key].into_iter().chain(pair.ends.iter());
                let upto = find_token(rest, stops, eof);
                text.push_str(rest.get(..upto.text).unwrap_or_default());
                match upto.found {
                    Some((0, len)) => {
                        let key = text.trim().to_owned();
                        self.reading =
                            Reading::Field(Field::TokenValue { key, text: String::new(), pair });
                        Ok(Took::Go(upto.text + len))
                    }
                    Some(_) => {
                        // A key without its value: the call lost an argument.
                        let message = format!(
                            "the key {:?} had no `{}` and no value",
                            text.trim(),
                            tokens.value
                        );
                        if let Some(call) = self.current_call() {
                            call.extra_notes.push((WarningCode::MissingEndMarker, message));
                        }
                        Ok(Took::Go(upto.text))
                    }
                    None if eof => {
                        self.field_cut(Field::TokenKey { text, pair }, ctx);
                        Ok(Took::Go(upto.text))
                    }
                    None => {
                        self.reading = Reading::Field(Field::TokenKey { text, pair });
                        if upto.text == 0 { Err(Need) } else { Ok(Took::Go(upto.text)) }
                    }
                }
            }
            Field::TokenValue { key, mut text, pair } => {
                let Some(tokens) = tokens_of(&pair) else { return Ok(Took::Go(0)) };
                let stops = [&tokens.end, &tokens.key].into_iter().chain(pair.ends.iter());
                let upto = find_token(rest, stops, eof);
                text.push_str(rest.get(..upto.text).unwrap_or_default());
                match upto.found {
                    Some((idx, len)) => {
                        self.write_param(&key, &text, None, Padding::None, ctx);
                        if idx == 0 {
                            return Ok(Took::Go(upto.text + len));
                        }
                        // Its end token is missing: the next key or the call's end ends it.
                        let message = format!(
                            "a `{}` was missing; the value ended at the next token",
                            tokens.end
                        );
                        if let Some(call) = self.current_call() {
                            call.extra_notes.push((WarningCode::MissingEndMarker, message));
                        }
                        Ok(Took::Go(upto.text))
                    }
                    None if eof => {
                        self.field_cut(Field::TokenValue { key, text, pair }, ctx);
                        Ok(Took::Go(upto.text))
                    }
                    None => {
                        self.reading = Reading::Field(Field::TokenValue { key, text, pair });
                        if upto.text == 0 { Err(Need) } else { Ok(Took::Go(upto.text)) }
                    }
                }
            }
            other => {
                self.reading = Reading::Field(other);
                Err(Need)
            }
        }
    }
}

impl Body {
    /// Reads free-form input: leading whitespace, then JSON arguments (left to the JSON
    /// reader) or raw text up to an end marker of the pair, which the markup reader takes.
    fn step_freeform(
        &mut self,
        mut text: String,
        pair: Row,
        rest: &str,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        let mut ws = 0;
        if text.is_empty() {
            ws = rest.bytes().take_while(u8::is_ascii_whitespace).count();
            match rest.as_bytes().get(ws) {
                // JSON object arguments: the JSON reader takes them from here.
                Some(b'{') => return Ok(Took::Go(ws)),
                None if !eof => {
                    self.reading = Reading::Field(Field::Freeform { text, pair });
                    return if ws == 0 { Err(Need) } else { Ok(Took::Go(ws)) };
                }
                _ => {}
            }
        }
        let rest = rest.get(ws..).unwrap_or_default();
        let upto = find_token(rest, pair.ends.iter(), eof);
        text.push_str(rest.get(..upto.text).unwrap_or_default());
        match upto.found {
            Some(_) => {
                self.write_freeform(&pair, &text, ctx);
                Ok(Took::Go(ws + upto.text))
            }
            None if eof => {
                self.field_cut(Field::Freeform { text, pair }, ctx);
                Ok(Took::Go(ws + upto.text))
            }
            None => {
                let took = ws + upto.text;
                self.reading = Reading::Field(Field::Freeform { text, pair });
                if took == 0 { Err(Need) } else { Ok(Took::Go(took)) }
            }
        }
    }

    /// Writes free-form input, trimmed, as the value of the parameter it fills: the tool's
    /// one parameter, or its one required one, else `key`. Without a schema for that
    /// parameter the text is a string.
    fn write_freeform(&mut self, pair: &Pair, text: &str, ctx: &mut Ctx<'_, '_>) {
        let key = match &pair.body {
            PairBody::Freeform { key } => &**key,
            _ => "input",
        };
        let text = text.trim();
        let Some(call) = self.current_call() else { return };
        if text.is_empty() {
            return;
        }
        call.bind_tool(ctx.config());
        let tool = call.args.tool();
        let key = match tool {
            Some(tool) if tool.param_names().len() == 1 => tool.param_names().first().cloned(),
            Some(tool) if tool.required().len() == 1 => tool.required().first().cloned(),
            _ => None,
        }
        .unwrap_or_else(|| key.to_owned());
        let typed = tool.is_some_and(|tool| tool.param_type(&key) != ParamType::Any);
        self.write_param(&key, text, (!typed).then_some(true), Padding::None, ctx);
    }
}

/// How far a field between tokens goes: `text` bytes are surely its text, and `found`
/// is the index and length of the token after them, once one is.
struct TokenUpto {
    text: usize,
    found: Option<(usize, usize)>,
}

/// Looks for the first of `tokens` in `rest`, holding back a possible partial token at
/// its end (every byte that may still begin one).
fn find_token<'t>(
    rest: &str,
    tokens: impl Iterator<Item = &'t Text> + Clone,
    eof: bool,
) -> TokenUpto {
    let mut first = [false; 256];
    for token in tokens.clone() {
        if let Some(slot) = token.as_bytes().first().and_then(|b| first.get_mut(usize::from(*b))) {
            *slot = true;
        }
    }
    let bytes = rest.as_bytes();
    for (at, b) in bytes.iter().enumerate() {
        if !first.get(usize::from(*b)).copied().unwrap_or(false) {
            continue;
        }
        let tail = rest.get(at..).unwrap_or_default();
        let mut partial = false;
        for (idx, token) in tokens.clone().enumerate() {
            let token: &str = token;
            if tail.starts_with(token) {
                return TokenUpto { text: at, found: Some((idx, token.len())) };
            }
            partial |= !eof && tail.len() < token.len() && token.starts_with(tail);
        }
        if partial {
            return TokenUpto { text: at, found: None };
        }
    }
    TokenUpto { text: rest.len(), found: None }
}
