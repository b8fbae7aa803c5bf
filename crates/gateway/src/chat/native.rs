//! A native reply, repaired: the upstream took the request's `tools` itself, and its reply
//! is folded into chat events. Its own calls pass as they are; its text goes through the
//! shaper, so call syntax the upstream's parser missed (a small model that writes its calls
//! as fenced or bare JSON instead of its template's tags) becomes calls too, under the same
//! policy as emulated ones. Nothing is asked for again here.

use crate::chat::shaper::{DeclaredTools, Shaper, new_call_id};
use crate::chat::types::{ChatEvent, ChatRequest, Finish, Outcome, ToolChoice, Usage};
use crate::config::ReasoningCalls;
use crate::upstream::{CallDelta, FinishReason, UpstreamEvent};

/// A native call as its pieces arrive.
#[derive(Debug, Default)]
struct NativeCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The fold of one native reply.
pub(crate) struct NativeReply {
    shaper: Shaper,
    declared: DeclaredTools,
    show_reasoning: bool,
    forced: bool,
    /// Native calls by the upstream's index, in the order they began.
    calls: Vec<(usize, NativeCall)>,
    finish: Option<FinishReason>,
    usage: Usage,
}

impl NativeReply {
    pub(crate) fn new(
        req: &ChatRequest,
        declared: &DeclaredTools,
        reasoning_calls: ReasoningCalls,
    ) -> NativeReply {
        let engaged = !req.tools.is_empty() && req.tool_choice != ToolChoice::None;
        // A model answering natively has its own parser upstream: the calls it leaves in the
        // text are read in every format.
        let mut shaper = Shaper::new(req, declared, engaged, reasoning_calls, None);
        // No retry: a repaired call that breaks its schema goes out as written, except to a
        // strict tool.
        shaper.check_arguments(false);
        NativeReply {
            shaper,
            declared: declared.clone(),
            show_reasoning: req.show_reasoning,
            forced: matches!(req.tool_choice, ToolChoice::Named(_)),
            calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
        }
    }

    pub(crate) fn feed(&mut self, event: UpstreamEvent, out: &mut Vec<ChatEvent>) {
        match event {
            UpstreamEvent::Text(text) => self.shaper.feed(&text, out),
            UpstreamEvent::Reasoning(text) => {
                if self.show_reasoning {
                    out.push(ChatEvent::Reasoning(text));
                }
            }
            UpstreamEvent::Call(delta) => self.call(delta),
            UpstreamEvent::Finish(reason) => self.finish = Some(reason),
            UpstreamEvent::Usage(usage) => self.usage = usage,
        }
    }

    fn call(&mut self, delta: CallDelta) {
        let at = match self.calls.iter().position(|(index, _)| *index == delta.index) {
            Some(at) => at,
            None => {
                self.calls.push((delta.index, NativeCall::default()));
                self.calls.len() - 1
            }
        };
        if let Some((_, call)) = self.calls.get_mut(at) {
            if delta.id.is_some() {
                call.id = delta.id;
            }
            if let Some(name) = delta.name {
                call.name.push_str(&name);
            }
            call.arguments.push_str(&delta.arguments);
        }
    }

    /// What the shaper still holds, the native calls (whole, after the repaired ones), and
    /// how the reply ended.
    pub(crate) fn finish(mut self, out: &mut Vec<ChatEvent>) {
        self.shaper.finish(out);
        let mut n_calls = self.shaper.n_calls();
        for (_, call) in std::mem::take(&mut self.calls) {
            if !self.declared.declares(&call.name) {
                tracing::warn!(tool = %call.name, "dropped a native call to a tool the request did not declare");
                continue;
            }
            let index = n_calls;
            n_calls += 1;
            out.push(ChatEvent::CallStart {
                index,
                id: call.id.unwrap_or_else(new_call_id),
                name: call.name,
            });
            let arguments =
                if call.arguments.trim().is_empty() { "{}".to_owned() } else { call.arguments };
            out.push(ChatEvent::CallArgs { index, json: arguments });
            out.push(ChatEvent::CallEnd { index, complete: true });
        }
        let finish = if n_calls > 0 && !self.shaper.incomplete_call() {
            Finish::ToolCalls { forced: self.forced }
        } else if self.finish == Some(FinishReason::Length) || self.shaper.incomplete_call() {
            Finish::Length
        } else {
            Finish::Stop
        };
        tracing::info!(calls = n_calls, repaired = self.shaper.n_calls(), "native reply finished");
        out.push(ChatEvent::Done(Outcome { finish, usage: self.usage, retried: Usage::default() }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::types::{Message, ToolSpec};

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![Message::User("Weather in Paris?".into())],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: None,
                parameters: Some(
                    serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
                ),
                strict: false,
            }],
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            sampling: serde_json::Map::new(),
            show_reasoning: false,
            output: None,
        }
    }

    fn fold(events: Vec<UpstreamEvent>) -> Vec<ChatEvent> {
        let req = request();
        let declared = DeclaredTools::new(&req.tools).unwrap();
        let mut reply = NativeReply::new(&req, &declared, ReasoningCalls::Ignore);
        let mut out = Vec::new();
        for event in events {
            reply.feed(event, &mut out);
        }
        reply.finish(&mut out);
        out
    }

    fn text(events: &[ChatEvent]) -> String {
        events
            .iter()
            .filter_map(|e| if let ChatEvent::Text(t) = e { Some(t.as_str()) } else { None })
            .collect()
    }

    #[test]
    fn issue_24_a_call_the_upstream_left_in_its_text_becomes_a_call() {
        let reply =
            "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```";
        let mut events: Vec<UpstreamEvent> = reply
            .as_bytes()
            .chunks(5)
            .map(|c| UpstreamEvent::Text(String::from_utf8_lossy(c).into()))
            .collect();
        events.push(UpstreamEvent::Finish(FinishReason::Stop));
        let out = fold(events);
        assert!(
            matches!(&out[0], ChatEvent::CallStart { index: 0, name, .. } if name == "get_weather"),
            "{out:?}"
        );
        let args: String = out
            .iter()
            .filter_map(|e| {
                if let ChatEvent::CallArgs { json, .. } = e { Some(json.as_str()) } else { None }
            })
            .collect();
        assert_eq!(args, r#"{"city":"Paris"}"#);
        assert_eq!(text(&out), "");
        assert!(matches!(
            out.last(),
            Some(ChatEvent::Done(Outcome { finish: Finish::ToolCalls { .. }, .. }))
        ));
    }

    #[test]
    fn native_calls_pass_and_plain_text_stays_text() {
        let out = fold(vec![
            UpstreamEvent::Text("Let me check.".into()),
            UpstreamEvent::Call(CallDelta {
                index: 0,
                id: Some("call_x".into()),
                name: Some("get_weather".into()),
                arguments: "{\"ci".into(),
            }),
            UpstreamEvent::Call(CallDelta {
                index: 0,
                id: None,
                name: None,
                arguments: "ty\":\"Oslo\"}".into(),
            }),
            UpstreamEvent::Call(CallDelta {
                index: 1,
                id: None,
                name: Some("rm_rf".into()),
                arguments: "{}".into(),
            }),
            UpstreamEvent::Finish(FinishReason::Other),
        ]);
        assert_eq!(text(&out), "Let me check.");
        assert!(
            out.contains(&ChatEvent::CallStart {
                index: 0,
                id: "call_x".into(),
                name: "get_weather".into()
            }),
            "{out:?}"
        );
        assert!(
            out.contains(&ChatEvent::CallArgs { index: 0, json: r#"{"city":"Oslo"}"#.into() }),
            "{out:?}"
        );
        assert_eq!(
            out.iter().filter(|e| matches!(e, ChatEvent::CallStart { .. })).count(),
            1,
            "undeclared dropped"
        );

        let out = fold(vec![
            UpstreamEvent::Text("Paris is sunny.".into()),
            UpstreamEvent::Finish(FinishReason::Length),
        ]);
        assert_eq!(text(&out), "Paris is sunny.");
        assert!(matches!(
            out.last(),
            Some(ChatEvent::Done(Outcome { finish: Finish::Length, .. }))
        ));
    }
}
