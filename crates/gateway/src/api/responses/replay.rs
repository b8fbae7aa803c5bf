//! A stored response streamed again (`GET /v1/responses/{id}?stream=true`): the events a
//! stream of it would have had, from `response.created` to its final event, with the stored
//! ids, one delta per text, arguments or input; `starting_after` skips the events up to that
//! sequence number.

use bytes::Bytes;
use serde_json::{Value, json};

/// The events of `response`, framed as SSE, those after `starting_after`.
pub(crate) fn events(response: &Value, starting_after: Option<u64>) -> Vec<Bytes> {
    let mut replay = Replay { frames: Vec::new(), sequence: 0, after: starting_after };
    let mut opening = response.clone();
    opening["status"] = json!("in_progress");
    opening["output"] = json!([]);
    opening["usage"] = Value::Null;
    replay.emit("response.created", json!({"response": opening}));
    replay.emit("response.in_progress", json!({"response": opening}));
    let output = response["output"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (index, item) in output.iter().enumerate() {
        replay.item(index, item);
    }
    let last = match response["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    replay.emit(last, json!({"response": response}));
    replay.frames
}

struct Replay {
    frames: Vec<Bytes>,
    sequence: u64,
    after: Option<u64>,
}

impl Replay {
    fn emit(&mut self, kind: &str, mut data: Value) {
        if self.after.is_none_or(|after| self.sequence > after) {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(self.sequence);
            self.frames.push(Bytes::from(format!("event: {kind}\ndata: {data}\n\n")));
        }
        self.sequence += 1;
    }

    /// One output item: added (in progress, empty), its deltas and their ends, done.
    fn item(&mut self, index: usize, item: &Value) {
        let id = item["id"].clone();
        let mut opening = item.clone();
        opening["status"] = json!("in_progress");
        match item["type"].as_str() {
            Some("message") => opening["content"] = json!([]),
            Some("reasoning") => opening["content"] = json!([]),
            Some("function_call") => opening["arguments"] = json!(""),
            Some("custom_tool_call") => opening["input"] = json!(""),
            _ => {}
        }
        self.emit("response.output_item.added", json!({"output_index": index, "item": opening}));
        let at = |extra: Value| {
            let mut data = json!({"item_id": id, "output_index": index});
            if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
                data.extend(extra);
            }
            data
        };
        match item["type"].as_str() {
            Some("message") => {
                let parts = item["content"].as_array().map(Vec::as_slice).unwrap_or_default();
                for (n, part) in parts.iter().enumerate() {
                    let text = part["text"].as_str().unwrap_or_default();
                    let mut empty = part.clone();
                    empty["text"] = json!("");
                    self.emit(
                        "response.content_part.added",
                        at(json!({"content_index": n, "part": empty})),
                    );
                    self.emit(
                        "response.output_text.delta",
                        at(json!({"content_index": n, "delta": text, "logprobs": []})),
                    );
                    self.emit(
                        "response.output_text.done",
                        at(json!({"content_index": n, "text": text, "logprobs": []})),
                    );
                    self.emit(
                        "response.content_part.done",
                        at(json!({"content_index": n, "part": part})),
                    );
                }
            }
            Some("reasoning") => {
                let parts = item["content"].as_array().map(Vec::as_slice).unwrap_or_default();
                for (n, part) in parts.iter().enumerate() {
                    let text = part["text"].as_str().unwrap_or_default();
                    self.emit(
                        "response.reasoning_text.delta",
                        at(json!({"content_index": n, "delta": text})),
                    );
                    self.emit(
                        "response.reasoning_text.done",
                        at(json!({"content_index": n, "text": text})),
                    );
                }
            }
            Some("function_call") => {
                let arguments = item["arguments"].as_str().unwrap_or_default();
                self.emit(
                    "response.function_call_arguments.delta",
                    at(json!({"delta": arguments})),
                );
                self.emit(
                    "response.function_call_arguments.done",
                    at(json!({"name": item["name"], "arguments": arguments})),
                );
            }
            Some("custom_tool_call") => {
                let input = item["input"].as_str().unwrap_or_default();
                if !input.is_empty() {
                    self.emit("response.custom_tool_call_input.delta", at(json!({"delta": input})));
                }
                self.emit("response.custom_tool_call_input.done", at(json!({"input": input})));
            }
            _ => {}
        }
        self.emit("response.output_item.done", json!({"output_index": index, "item": item}));
    }
}
