//! The Responses API's stored state (issue 26; docs/responses.md): a request's
//! `previous_response_id` and `item_reference` items resolved from the store into the whole
//! conversation (the upstream still gets all of it), its response kept when it asks (`store`,
//! true unless the client says false), and kept responses read back or deleted:
//! `GET /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`, `DELETE /v1/responses/{id}`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::responses::kept::{Answer, Kept, invalid, page, well_formed};
use crate::api::responses::sse::response_id;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{Store, owner};

/// How a response is kept: in which store, for which owner, with which own input items, and
/// after which response.
pub(crate) struct Keep {
    store: Arc<Store>,
    owner: String,
    previous: Option<String>,
    input: Vec<Value>,
    /// The response itself is kept (`store`).
    response: bool,
    /// The conversation its input and output items are added to.
    conversation: Option<String>,
}

impl Keep {
    /// Keeps a finished response, and adds its items to its conversation. A store that fails
    /// is logged; the client still gets the response it waited for (a later reference to it
    /// is then a 400 that says so).
    pub(crate) fn put(&self, response: &Value) {
        let mut result = Ok(());
        if self.response {
            result = self.store.put(&self.owner, self.previous.as_deref(), &self.input, response);
        }
        if let (Ok(()), Some(conversation)) = (&result, &self.conversation) {
            let output = response["output"].as_array().map(Vec::as_slice).unwrap_or_default();
            let items: Vec<Value> = self.input.iter().chain(output).cloned().collect();
            result = self.store.add_items(&self.owner, conversation, &items).map(|_| ());
        }
        if let Err(err) = result {
            tracing::warn!(store = %self.store.shown, error = %err.0, id = %response["id"], "the response could not be stored");
        }
    }
}

/// What resolving a request's references came to.
pub(crate) struct Resolved {
    /// How its response is kept (`None`: it is not).
    pub(crate) keep: Option<Keep>,
    /// The response it follows.
    pub(crate) previous: Option<String>,
    /// The conversation it belongs to.
    pub(crate) conversation: Option<String>,
}

/// The request's own input as items, each with an id (a message without one gets one, as the
/// API gives them), its item references replaced by the items they name.
fn own_input(store: &Store, owner: &str, input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let items = match input {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![json!({
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}],
        })],
        Some(Value::Array(items)) => items.clone(),
        // Anything else is for `from_wire` to refuse in the API's words.
        Some(_) => return Ok(Vec::new()),
    };
    let mut own = Vec::with_capacity(items.len());
    for (i, mut item) in items.into_iter().enumerate() {
        if item["type"] == "item_reference" {
            let id = item["id"].as_str().unwrap_or_default();
            item = store.item(owner, id)?.ok_or_else(|| {
                invalid(
                    format!("Item with id '{id}' not found: it expired, was deleted, or was stored under another key. Send the item itself in 'input'."),
                    &format!("input[{i}]"),
                    "item_not_found",
                )
            })?;
        } else {
            item = as_item(item);
        }
        own.push(item);
    }
    Ok(own)
}

/// An input item as the API lists it: with an id (`msg_…` for a message), a message with its
/// `type`, `status` and its text as content parts (`input_text`, or `output_text` for the
/// assistant's).
pub(crate) fn as_item(mut item: Value) -> Value {
    let Value::Object(object) = &mut item else { return item };
    if object.contains_key("role") && !object.contains_key("type") {
        object.insert("type".into(), json!("message"));
    }
    let message = object.get("type") == Some(&json!("message"));
    if !object.contains_key("id") {
        object.insert("id".into(), json!(response_id(if message { "msg_" } else { "item_" })));
    }
    if message {
        object.entry("status").or_insert_with(|| json!("completed"));
        if let Some(Value::String(text)) = object.get("content") {
            let part = if object.get("role") == Some(&json!("assistant")) {
                json!({"type": "output_text", "text": text, "annotations": []})
            } else {
                json!({"type": "input_text", "text": text})
            };
            object.insert("content".into(), json!([part]));
        }
    }
    item
}

/// Resolves `body`'s `previous_response_id` and item references from the store: `input`
/// becomes the whole conversation. Without a store both are left for `from_wire`, which
/// refuses them. `store` in the body says what the response will be: kept or not.
pub(crate) fn resolve(
    state: &AppState,
    headers: &HeaderMap,
    body: &mut Value,
) -> Result<Resolved, ApiError> {
    let Some(store) = &state.store else {
        if let Value::Object(object) = body {
            object.insert("store".into(), json!(false));
        }
        return Ok(Resolved { keep: None, previous: None, conversation: None });
    };
    let Value::Object(object) = body else {
        return Ok(Resolved { keep: None, previous: None, conversation: None });
    };
    let owner = owner(crate::api::bearer(headers));
    let previous = match object.remove("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => {
            return Err(invalid(
                format!(
                    "Invalid type for 'previous_response_id': expected a string, but got {other} instead."
                ),
                "previous_response_id",
                "invalid_type",
            ));
        }
    };
    if previous.is_some() && object.get("conversation").is_some_and(|c| !c.is_null()) {
        return Err(invalid(
            "Mutually exclusive parameters: 'previous_response_id' and 'conversation'. Send one of them.".into(),
            "conversation",
            "mutually_exclusive_parameters",
        ));
    }
    let mut history = Vec::new();
    if let Some(id) = &previous {
        if !well_formed(id, "resp") {
            return Err(invalid(
                format!(
                    "Invalid 'previous_response_id': '{id}'. Expected an ID that begins with 'resp'."
                ),
                "previous_response_id",
                "invalid_value",
            ));
        }
        history = store.conversation(&owner, id)?.ok_or_else(|| {
            invalid(
                format!("Previous response with id '{id}' not found: it expired, was deleted, was stored under another key, or was made with store: false."),
                "previous_response_id",
                "previous_response_not_found",
            )
        })?;
    }
    let conversation = match object.remove("conversation") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(Value::Object(c)) if c.get("id").is_some_and(Value::is_string) => {
            c.get("id").and_then(Value::as_str).map(str::to_owned)
        }
        Some(other) => {
            return Err(invalid(
                format!(
                    "Invalid 'conversation': expected a conversation id or {{\"id\": …}}, but got {other} instead."
                ),
                "conversation",
                "invalid_type",
            ));
        }
    };
    if let Some(id) = &conversation {
        history = store
            .conversation_items(&owner, id)?
            .ok_or_else(|| ApiError::NotFound(format!("Conversation with id '{id}' not found.")))?;
    }
    let references = match object.get("input") {
        Some(Value::Array(items)) => items.iter().filter(|i| i["type"] == "item_reference").count(),
        _ => 0,
    };
    let kept = object.get("store").and_then(Value::as_bool) != Some(false);
    object.insert("store".into(), json!(kept));
    if !kept && previous.is_none() && conversation.is_none() && references == 0 {
        // Nothing to read from the store or to keep: the input stays as it came.
        return Ok(Resolved { keep: None, previous: None, conversation: None });
    }
    let own = own_input(store, &owner, object.get("input"))?;
    if previous.is_some() || references > 0 {
        tracing::info!(previous = ?previous, items = history.len(), references, "resolved from the store");
    }
    // An input of another type is left for `from_wire` to refuse in the API's words.
    let readable = match object.get("input") {
        Some(Value::String(_) | Value::Array(_)) => true,
        None | Some(Value::Null) => previous.is_some() || conversation.is_some(),
        Some(_) => false,
    };
    // The input is rewritten only where it changes: a history before it, or references in it.
    if readable && (previous.is_some() || conversation.is_some() || references > 0) {
        history.extend(own.iter().cloned());
        object.insert("input".into(), Value::Array(history));
    }
    let keep = (kept || conversation.is_some()).then(|| Keep {
        store: Arc::clone(store),
        owner,
        previous: previous.clone(),
        input: own,
        response: kept,
        conversation: conversation.clone(),
    });
    Ok(Resolved { keep, previous, conversation })
}

/// `GET /v1/responses/{id}`: the kept response as it was returned; with `stream=true`, the
/// events of its stream (after `starting_after`, a sequence number).
pub(crate) async fn get(at: Kept<false>, Query(query): Query<HashMap<String, String>>) -> Answer {
    let stream = query.get("stream").is_some_and(|s| s == "true");
    let after = match query.get("starting_after").map(|n| n.parse::<u64>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            let message = "Invalid 'starting_after': expected a sequence number.".into();
            return Err(invalid(message, "starting_after", "invalid_value").into());
        }
    };
    let kept = at.store.get(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    if !stream {
        return Ok(axum::Json(kept.response).into_response());
    }
    // The stream it would have had, all at once: it is finished.
    let frames = crate::api::responses::replay::events(&kept.response, after);
    let mut response = Response::new(axum::body::Body::from(frames.concat()));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    Ok(response)
}

/// `DELETE /v1/responses/{id}`.
pub(crate) async fn delete(at: Kept<false>) -> Answer {
    if !at.store.delete(&at.owner, &at.id)? {
        return Err(at.not_found().into());
    }
    Ok(axum::Json(json!({"id": at.id, "object": "response", "deleted": true})).into_response())
}

/// `GET /v1/responses/{id}/input_items`: the items the response was made from (those of the
/// responses before it included), a page at a time: `limit` (1 to 100, 20), `order` (`asc`,
/// or `desc`, the default), `after` (an item id).
pub(crate) async fn input_items_of(
    at: Kept<false>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let kept = at.store.get(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    let mut items = match &kept.previous {
        Some(previous) => at.store.conversation(&at.owner, previous)?.unwrap_or_default(),
        None => Vec::new(),
    };
    items.extend(kept.input);
    Ok(axum::Json(page(items, &query)?).into_response())
}
