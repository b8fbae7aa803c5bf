//! The Conversations API (issue 26; docs/responses.md) on the response store: a conversation
//! is a list of items with metadata, under the caller's key. `POST /v1/responses` with
//! `conversation` reads its items before the input and adds the turn's input and output items
//! to it (`stored::resolve`).
//!
//! `POST /v1/conversations` (`items`, `metadata`), `GET`, `POST` (new `metadata`) and `DELETE
//! /v1/conversations/{id}`, `GET` (a page) and `POST` (`items`) `/v1/conversations/{id}/items`,
//! `GET` and `DELETE /v1/conversations/{id}/items/{item_id}`.

use std::collections::HashMap;

use axum::extract::Query;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::api::responses::kept::{Answer, Kept, Object, invalid, list, page};
use crate::api::responses::sse::response_id;
use crate::api::responses::stored::as_item;
use crate::error::ApiError;

/// The most items one request may add, as the API allows.
const MAX_ITEMS: usize = 20;

/// A request to a conversation (or, without an id, to the Conversations API).
type Conversation = Kept<true>;

/// The `items` of a body as the API lists them, at most [`MAX_ITEMS`].
fn items_of(body: &Value) -> Result<Vec<Value>, ApiError> {
    let items = match body.get("items") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(invalid(
                format!("Invalid type for 'items': expected an array, but got {other} instead."),
                "items",
                "invalid_type",
            ));
        }
    };
    if items.len() > MAX_ITEMS {
        return Err(invalid(
            format!("Invalid 'items': at most {MAX_ITEMS} items at a time, got {}.", items.len()),
            "items",
            "array_above_max_length",
        ));
    }
    for (i, item) in items.iter().enumerate() {
        if !item.is_object() || item["type"] == "item_reference" {
            return Err(invalid(
                format!("Invalid 'items[{i}]': expected an input item."),
                &format!("items[{i}]"),
                "invalid_value",
            ));
        }
    }
    Ok(items.iter().cloned().map(as_item).collect())
}

fn metadata_of(body: &Value) -> Result<Value, ApiError> {
    match body.get("metadata") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(metadata @ Value::Object(map)) if map.values().all(Value::is_string) => {
            Ok(metadata.clone())
        }
        Some(_) => Err(invalid(
            "Invalid 'metadata': expected an object of strings.".into(),
            "metadata",
            "invalid_type",
        )),
    }
}

/// `POST /v1/conversations`.
pub(crate) async fn create(at: Conversation, Object(body): Object) -> Answer {
    let (items, metadata) = (items_of(&body)?, metadata_of(&body)?);
    let id = response_id("conv_");
    let object = at.store.new_conversation(&at.owner, &id, &metadata)?;
    if !items.is_empty() {
        at.store.add_items(&at.owner, &id, &items)?;
    }
    Ok(axum::Json(object).into_response())
}

/// `GET /v1/conversations/{id}`.
pub(crate) async fn get(at: Conversation) -> Answer {
    let object = at.store.conversation_object(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    Ok(axum::Json(object).into_response())
}

/// `POST /v1/conversations/{id}`: new metadata.
pub(crate) async fn update(at: Conversation, Object(body): Object) -> Answer {
    let metadata = metadata_of(&body)?;
    let object = at.store.update_conversation(&at.owner, &at.id, &metadata)?;
    Ok(axum::Json(object.ok_or_else(|| at.not_found())?).into_response())
}

/// `DELETE /v1/conversations/{id}`.
pub(crate) async fn delete(at: Conversation) -> Answer {
    if !at.store.delete_conversation(&at.owner, &at.id)? {
        return Err(at.not_found().into());
    }
    let deleted = json!({"id": at.id, "object": "conversation.deleted", "deleted": true});
    Ok(axum::Json(deleted).into_response())
}

/// `GET /v1/conversations/{id}/items`: a page, newest first by default.
pub(crate) async fn list_items(
    at: Conversation,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let items = at.store.conversation_items(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    Ok(axum::Json(page(items, &query)?).into_response())
}

/// `POST /v1/conversations/{id}/items`: the items added, as a list.
pub(crate) async fn add_items(at: Conversation, Object(body): Object) -> Answer {
    let items = items_of(&body)?;
    if !at.store.add_items(&at.owner, &at.id, &items)? {
        return Err(at.not_found().into());
    }
    Ok(axum::Json(list(items, false)).into_response())
}

/// `GET /v1/conversations/{id}/items/{item_id}`.
pub(crate) async fn get_item(at: Conversation) -> Answer {
    let items = at.store.conversation_items(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    let item = items.into_iter().find(|i| i["id"] == at.item_id.as_str());
    Ok(axum::Json(item.ok_or_else(|| at.item_not_found())?).into_response())
}

/// `DELETE /v1/conversations/{id}/items/{item_id}`: the conversation object.
pub(crate) async fn delete_item(at: Conversation) -> Answer {
    if !at.store.delete_conversation_item(&at.owner, &at.id, &at.item_id)? {
        return Err(at.item_not_found().into());
    }
    let object = at.store.conversation_object(&at.owner, &at.id)?.ok_or_else(|| at.not_found())?;
    Ok(axum::Json(object).into_response())
}
