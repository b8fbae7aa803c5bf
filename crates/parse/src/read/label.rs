//! Labelled calls: after `Action: NAME` + `Action Input:` (or `function.name:` +
//! `function.arguments:`), the arguments are JSON, or plain text for a tool with one
//! parameter.

use crate::WarningCode;
use crate::engine::call::{CallState, Cut};
use crate::engine::settle::{Ctx, Decision};
use crate::engine::step::{Need, Step, Took};
use crate::read::markup::Elem;
use crate::read::value::write_param_value;
use crate::read::{Body, Reading};

/// What a labelled call is reading.
#[derive(Debug)]
pub(crate) enum Label {
    /// After the arguments label: the arguments come next.
    Args { call: Box<CallState> },
    /// Plain-text arguments, read to the end of the line.
    Text { call: Box<CallState>, text: String },
}

/// The most blank lines between the arguments label and its JSON.
const MAX_GAP: usize = 64;

impl Body {
    pub(super) fn step_label(
        &mut self,
        label: Label,
        rest: &str,
        abs: usize,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        match label {
            Label::Args { mut call } => {
                let b = rest.as_bytes();
                let ws = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
                let more =
                    b.iter().skip(ws).take(MAX_GAP).take_while(|c| c.is_ascii_whitespace()).count();
                match (b.get(ws), b.get(ws + more)) {
                    (None, _) if !eof => {
                        self.reading = Reading::Label(Label::Args { call });
                        if ws > 0 { Ok(Took::Go(ws)) } else { Err(Need) }
                    }
                    // `more` stops at the limit: the byte after it decides.
                    (Some(b'\r' | b'\n'), None) if !eof => {
                        self.reading = Reading::Label(Label::Args { call });
                        Err(Need)
                    }
                    (Some(b'{'), _) | (Some(b'\r' | b'\n'), Some(b'{')) => {
                        ctx.resolve(&mut call);
                        self.markup.frames.push(Elem::Call { close: None, call: Some(call) });
                        let n = if b.get(ws) == Some(&b'{') { ws } else { ws + more };
                        Ok(Took::Go(n))
                    }
                    (None | Some(b'\r' | b'\n'), _) => {
                        self.finish_label(call, "", abs, ctx);
                        Ok(Took::End(ws))
                    }
                    _ => {
                        self.reading = Reading::Label(Label::Text { call, text: String::new() });
                        Ok(Took::Go(ws))
                    }
                }
            }
            Label::Text { call, mut text } => match memchr::memchr(b'\n', rest.as_bytes()) {
                Some(n) => {
                    text.push_str(rest.get(..n).unwrap_or_default());
                    self.finish_label(call, &text, abs + n, ctx);
                    Ok(Took::End(n))
                }
                None if eof => {
                    text.push_str(rest);
                    self.finish_label(call, &text, abs + rest.len(), ctx);
                    Ok(Took::End(rest.len()))
                }
                None => {
                    text.push_str(rest);
                    self.reading = Reading::Label(Label::Text { call, text });
                    if rest.is_empty() { Err(Need) } else { Ok(Took::Go(rest.len())) }
                }
            },
        }
    }

    /// The region ended inside the label's arguments.
    pub(super) fn label_cut(&mut self, label: Label, end: usize, ctx: &mut Ctx<'_, '_>) {
        match label {
            Label::Args { call } => self.finish_label(call, "", end, ctx),
            Label::Text { mut call, text } => {
                call.cut_off(Cut::Value);
                self.finish_label(call, &text, end, ctx);
            }
        }
    }

    /// Ends a labelled call whose arguments were plain text (or nothing).
    fn finish_label(
        &mut self,
        mut call: Box<CallState>,
        text: &str,
        end: usize,
        ctx: &mut Ctx<'_, '_>,
    ) {
        let text = text.trim();
        if !text.is_empty() {
            call.bind_tool(ctx.config());
            // The one parameter, or the one required parameter; `input` without a schema.
            let key = match (&ctx.config().tools, call.args.tool()) {
                (_, Some(tool)) if tool.param_names().len() == 1 => {
                    tool.param_names().first().cloned()
                }
                (_, Some(tool)) if tool.required().len() == 1 => tool.required().first().cloned(),
                (_, Some(tool)) if !tool.has_schema() => Some("input".to_owned()),
                (None, _) => Some("input".to_owned()),
                _ => None,
            };
            let Some(key) = key else {
                ctx.warn_unsettled(
                    WarningCode::MalformedCall,
                    format!(
                        "the input of `{}` is plain text, and the tool has no single parameter it can fill: {text:?}",
                        call.name.as_deref().unwrap_or_default()
                    ),
                    end,
                );
                ctx.set_decision(Decision::Data);
                return;
            };
            write_param_value(&mut call, &key, text);
        }
        ctx.resolve(&mut call);
        ctx.finish_call(call);
    }
}
