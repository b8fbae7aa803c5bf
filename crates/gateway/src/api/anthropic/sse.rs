//! Encodes `ChatEvent`s as Anthropic stream events, and folds them into one
//! message for non-streaming requests.

use bytes::Bytes;
use serde_json::json;
use serde_json::value::RawValue;

use crate::api::anthropic::wire::{Block, MessageResponse, usage};
use crate::chat::reply::{Part, Reply};
use crate::chat::{ChatEvent, Finish, Outcome};

pub(crate) fn stop_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "end_turn",
        Finish::Length => "max_tokens",
        Finish::ToolCalls { .. } => "tool_use",
    }
}

/// `prefix` + 22 base58 characters, the shape of Anthropic ids.
pub(crate) fn anthropic_id(prefix: &str) -> String {
    const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let mut id = String::from(prefix);
    id.extend(
        std::iter::repeat_with(|| {
            BASE58.get(fastrand::usize(..BASE58.len())).map_or('1', |b| char::from(*b))
        })
        .take(22),
    );
    id
}

fn frame(kind: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

pub(crate) fn ping() -> Bytes {
    Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Thinking,
    Text,
    Tool,
}

/// The signature on thinking blocks: clients require one and send it back in history; the
/// gateway never checks it.
const THINKING_SIGNATURE: &str = "toolshim-emulated";

/// Writes the events of one streamed message.
pub(crate) struct Encoder {
    id: String,
    model: String,
    input_tokens: u64,
    /// Text is dropped when the choice forced a tool (the real API pre-fills the turn).
    drop_text: bool,
    started: bool,
    pinged: bool,
    next_index: usize,
    open: Open,
}

impl Encoder {
    pub(crate) fn new(model: String, input_tokens: u64, drop_text: bool) -> Encoder {
        Encoder {
            id: anthropic_id("msg_01"),
            model,
            input_tokens,
            drop_text,
            started: false,
            pinged: false,
            next_index: 0,
            open: Open::None,
        }
    }

    fn start(&mut self, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage(self.input_tokens, 0, 1)}});
        out.push(frame("message_start", &message));
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if self.open != Open::None {
            let index = self.next_index - 1;
            if self.open == Open::Thinking {
                out.push(frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": THINKING_SIGNATURE}}),
                ));
            }
            out.push(frame(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
            self.open = Open::None;
        }
    }

    fn open_block(&mut self, block: serde_json::Value, kind: Open, out: &mut Vec<Bytes>) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = kind;
        out.push(frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        if !self.pinged {
            self.pinged = true;
            out.push(ping());
        }
    }

    pub(crate) fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        self.start(out);
        match event {
            ChatEvent::Reasoning(text) => {
                if self.open != Open::Thinking {
                    let block = json!({"type": "thinking", "thinking": "", "signature": ""});
                    self.open_block(block, Open::Thinking, out);
                }
                let index = self.next_index - 1;
                out.push(frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": text}}),
                ));
            }
            ChatEvent::Text(text) => {
                if self.drop_text {
                    return;
                }
                if self.open != Open::Text {
                    self.open_block(json!({"type": "text", "text": ""}), Open::Text, out);
                }
                let index = self.next_index - 1;
                out.push(frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
                ));
            }
            ChatEvent::CallStart { name, .. } => {
                let block = json!({"type": "tool_use", "id": anthropic_id("toolu_01"), "name": name, "input": {}});
                self.open_block(block, Open::Tool, out);
            }
            ChatEvent::CallArgs { json, .. } => {
                let index = self.next_index.saturating_sub(1);
                out.push(frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": json}}),
                ));
            }
            ChatEvent::CallEnd { .. } => self.close(out),
            ChatEvent::Done(outcome) => {
                self.close(out);
                let output_tokens = outcome.usage.completion_tokens.max(1);
                let usage = usage(
                    prompt_tokens(self.input_tokens, outcome),
                    outcome.usage.cached_tokens,
                    output_tokens,
                );
                out.push(frame(
                    "message_delta",
                    &json!({"type": "message_delta",
                        "delta": {"stop_reason": stop_reason(outcome.finish), "stop_sequence": null},
                        "usage": {"input_tokens": usage.input_tokens, "cache_creation_input_tokens": 0,
                                  "cache_read_input_tokens": usage.cache_read_input_tokens,
                                  "output_tokens": output_tokens}}),
                ));
                out.push(frame("message_stop", &json!({"type": "message_stop"})));
            }
        }
    }
}

impl crate::api::StreamEncoder for Encoder {
    type Event = ChatEvent;

    fn encode(&mut self, event: &ChatEvent, out: &mut Vec<Bytes>) {
        Encoder::encode(self, event, out);
    }

    fn error(&mut self, err: &crate::error::ApiError) -> Bytes {
        crate::api::anthropic::error::event(err)
    }

    fn keepalive(&self) -> Bytes {
        ping()
    }

    /// A stream whose head goes out before its first event starts as Anthropic's do: with
    /// `message_start` (a `ping` before it would break the event grammar clients check).
    /// The first content block still gets its `ping` after it, as Anthropic's does.
    fn open(&mut self, out: &mut Vec<Bytes>) {
        self.start(out);
        out.push(ping());
    }
}

/// A whole reply as one message: thinking first, then its text and `tool_use` blocks in
/// order (text dropped when the choice forced a call and one came).
pub(crate) fn message(
    reply: Reply,
    model: String,
    input_tokens: u64,
    drop_text: bool,
) -> MessageResponse {
    let outcome = reply.outcome;
    let has_calls = reply.calls().next().is_some();
    let thinking = (!reply.reasoning.is_empty()).then(|| Block::Thinking {
        thinking: reply.reasoning,
        signature: THINKING_SIGNATURE.to_owned(),
    });
    let blocks = reply.parts.into_iter().filter_map(|part| match part {
        Part::Text(_) if drop_text && has_calls => None,
        Part::Text(text) => Some(Block::Text { text }),
        Part::Call(call) => {
            let body = if call.arguments.is_empty() { "{}".to_owned() } else { call.arguments };
            // The parser's arguments are always a JSON object; the fallback never runs.
            let input = RawValue::from_string(body).unwrap_or_else(|_| empty_object());
            Some(Block::ToolUse { id: anthropic_id("toolu_01"), name: call.name, input })
        }
    });
    MessageResponse {
        id: anthropic_id("msg_01"),
        kind: "message",
        role: "assistant",
        model,
        content: thinking.into_iter().chain(blocks).collect(),
        stop_reason: Some(stop_reason(outcome.finish)),
        stop_sequence: None,
        usage: usage(
            prompt_tokens(input_tokens, &outcome),
            outcome.usage.cached_tokens,
            outcome.usage.completion_tokens,
        ),
    }
}

/// The prompt's tokens, as the reply's usage counts them: the same count as `message_start`
/// and `count_tokens` (one rendering, `estimated`) plus what the emulation's retries cost;
/// but the upstream's own count when it reported cached tokens, which are part of it.
fn prompt_tokens(estimated: u64, outcome: &Outcome) -> u64 {
    if outcome.usage.cached_tokens > 0 {
        outcome.usage.prompt_tokens
    } else {
        estimated + outcome.retried.prompt_tokens
    }
}

fn empty_object() -> Box<RawValue> {
    serde_json::from_str("{}").unwrap_or_else(|_| Box::<RawValue>::default())
}
