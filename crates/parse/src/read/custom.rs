//! Custom dialects ([`crate::Dialect`]): the body between the markers is held until the
//! end marker, then the dialect reads it and the engine takes the calls it returns.

use std::sync::Arc;

use crate::WarningCode;
use crate::dialect::Dialect;
use crate::engine::call::Cut;
use crate::engine::settle::{Ctx, Decision};
use crate::engine::step::{Need, Step, Took};
use crate::json::args::ArgsWriter;
use crate::json::reader::{Reader, Status};
use crate::read::{Body, Reading};

/// The body of a custom dialect, read until its end marker.
#[derive(Debug)]
pub(crate) struct Custom {
    pub(crate) dialect: Arc<dyn Dialect>,
    pub(crate) body: String,
    /// Where the dialect's start marker began.
    pub(crate) at: usize,
}

impl Body {
    pub(super) fn step_custom(
        &mut self,
        mut custom: Custom,
        rest: &str,
        abs: usize,
        ctx: &mut Ctx<'_, '_>,
        eof: bool,
    ) -> Step {
        let dialect = Arc::clone(&custom.dialect);
        let end_marker = if dialect.end().is_empty() { "\n" } else { dialect.end() };
        let consume_end = !dialect.end().is_empty();
        match memchr::memmem::find(rest.as_bytes(), end_marker.as_bytes()) {
            Some(k) => {
                custom.body.push_str(rest.get(..k).unwrap_or_default());
                let n = if consume_end { k + end_marker.len() } else { k };
                self.custom_calls(&custom, abs + n, false, ctx);
                Ok(Took::End(n))
            }
            None if eof => {
                custom.body.push_str(rest);
                self.custom_calls(&custom, abs + rest.len(), true, ctx);
                Ok(Took::End(rest.len()))
            }
            None => {
                // Hold a tail that may be the start of the end marker.
                let mut keep = (1..end_marker.len())
                    .rev()
                    .find(|&k| {
                        k <= rest.len() && rest.ends_with(end_marker.get(..k).unwrap_or_default())
                    })
                    .unwrap_or(0);
                while !rest.is_char_boundary(rest.len() - keep) {
                    keep += 1;
                }
                let n = rest.len() - keep;
                custom.body.push_str(rest.get(..n).unwrap_or_default());
                self.reading = Reading::Custom(custom);
                if n == 0 { Err(Need) } else { Ok(Took::Go(n)) }
            }
        }
    }

    /// Turns the body of a custom dialect into calls.
    pub(super) fn custom_calls(
        &mut self,
        custom: &Custom,
        end: usize,
        truncated: bool,
        ctx: &mut Ctx<'_, '_>,
    ) {
        let Custom { dialect, body, at } = custom;
        let at = *at;
        let calls = match dialect.read(body) {
            Ok(calls) if !calls.is_empty() => calls,
            Ok(_) => {
                ctx.set_decision(Decision::Data);
                return;
            }
            Err(message) => {
                ctx.warn(
                    WarningCode::MalformedCall,
                    format!("`{}` could not read its call ({message}): {body:?}", dialect.id()),
                    at..end,
                );
                ctx.set_decision(Decision::Data);
                return;
            }
        };
        for text in calls {
            let mut call = ctx.open_call(at);
            call.name = Some(text.name);
            call.id = text.id;
            if truncated {
                call.cut_off(Cut::Value);
            }
            call.bind_tool(ctx.config());
            let arguments = text.arguments.trim();
            if !arguments.is_empty() {
                let mut reader = Reader::new(ctx.config().max_depth);
                let status = reader.feed(arguments, 0, &mut call.args);
                reader.finish(0, &mut call.args);
                let object = call.args.canon.out.starts_with('{');
                if !object || matches!(status, Status::Invalid(_)) {
                    call.extra_notes.push((
                        WarningCode::InvalidArguments,
                        format!("the arguments are not a JSON object: {arguments:?}"),
                    ));
                    if !object {
                        call.args = ArgsWriter::new(ctx.config().max_depth);
                        call.bind_tool(ctx.config());
                    }
                }
            }
            call.args_seen = true;
            ctx.resolve(&mut call);
            ctx.finish_call(call);
        }
    }
}
