//! The Conversations API (issue 26; docs/responses.md) on the response store: a conversation
//! is a list of items with metadata, under the caller's key. `POST /v1/responses` with
//! `conversation` reads its items before the input and adds the turn's input and output items
//! to it (`stored::resolve`).
//!
//! `POST /v1/conversations` (`items`, `metadata`), `GET`, `POST` (new `metadata`) and `DELETE
//! /v1/conversations/{id}`, `GET` (a page) and `POST` (`items`) `/v1/conversations/{id}/items`,
//! `GET` and `DELETE /v1/conversations/{id}/items/{item_id}`.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::openai::handlers::{authorize, not_json};
use crate::api::responses::error;
use crate::api::responses::sse::response_id;
use crate::api::responses::stored::{as_item, invalid, list, page, well_formed};
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{Store, owner};

/// The most items one request may add, as the API allows.
const MAX_ITEMS: usize = 20;

/// The store and the caller's owner, the key checked first; and the conversation id checked.
fn access<'a>(
    state: &'a AppState,
    headers: &HeaderMap,
    id: Option<&str>,
) -> Result<(&'a Store, String), ApiError> {
    authorize(state, headers)?;
    let Some(store) = &state.store else {
        return Err(ApiError::NotFound(
            "Conversations are not kept here: the gateway's store is off (store.url = \"off\")."
                .into(),
        ));
    };
    if let Some(id) = id.filter(|id| !well_formed(id, "conv")) {
        return Err(invalid(
            format!("Invalid 'conversation_id': '{id}'. Expected an ID that begins with 'conv'."),
            "conversation_id",
            "invalid_value",
        ));
    }
    Ok((store, owner(crate::api::bearer(headers))))
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("Conversation with id '{id}' not found."))
}

/// A JSON object body, read under the gateway's limits (an empty body is `{}`).
async fn body_of(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let bytes = crate::api::read_body(state, headers, body).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice(&bytes).map_err(|err| not_json(&err))? {
        value @ Value::Object(_) => Ok(value),
        _ => Err(ApiError::invalid("The request body must be a JSON object.", None)),
    }
}

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
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let (store, owner) = access(&state, &headers, None)?;
        let body = body_of(&state, &headers, body).await?;
        let (items, metadata) = (items_of(&body)?, metadata_of(&body)?);
        let id = response_id("conv_");
        Ok(axum::Json(store.create_conversation(&owner, &id, &metadata, &items)?).into_response())
    };
    result.await.unwrap_or_else(error::response)
}

/// `GET /v1/conversations/{id}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let result = (|| {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        let object = store.conversation_object(&owner, &id)?.ok_or_else(|| not_found(&id))?;
        Ok(axum::Json(object).into_response())
    })();
    result.unwrap_or_else(error::response)
}

/// `POST /v1/conversations/{id}`: new metadata.
pub(crate) async fn update(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let result = async {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        let metadata = metadata_of(&body_of(&state, &headers, body).await?)?;
        let object =
            store.update_conversation(&owner, &id, &metadata)?.ok_or_else(|| not_found(&id))?;
        Ok(axum::Json(object).into_response())
    };
    result.await.unwrap_or_else(error::response)
}

/// `DELETE /v1/conversations/{id}`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let result = (|| {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        if !store.delete_conversation(&owner, &id)? {
            return Err(not_found(&id));
        }
        Ok(axum::Json(json!({"id": id, "object": "conversation.deleted", "deleted": true}))
            .into_response())
    })();
    result.unwrap_or_else(error::response)
}

/// `GET /v1/conversations/{id}/items`: a page, newest first by default.
pub(crate) async fn list_items(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let result = (|| {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        let items = store.conversation_items(&owner, &id)?.ok_or_else(|| not_found(&id))?;
        Ok(axum::Json(page(items, &query)?).into_response())
    })();
    result.unwrap_or_else(error::response)
}

/// `POST /v1/conversations/{id}/items`: the items added, as a list.
pub(crate) async fn add_items(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let result = async {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        let items = items_of(&body_of(&state, &headers, body).await?)?;
        if !store.add_items(&owner, &id, &items)? {
            return Err(not_found(&id));
        }
        Ok(axum::Json(list(items, false)).into_response())
    };
    result.await.unwrap_or_else(error::response)
}

/// `GET /v1/conversations/{id}/items/{item_id}`.
pub(crate) async fn get_item(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, item_id)): Path<(String, String)>,
) -> Response {
    let result = (|| {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        let items = store.conversation_items(&owner, &id)?.ok_or_else(|| not_found(&id))?;
        let item = items.into_iter().find(|i| i["id"] == item_id.as_str()).ok_or_else(|| {
            ApiError::NotFound(format!(
                "Item with id '{item_id}' not found in conversation '{id}'."
            ))
        })?;
        Ok(axum::Json(item).into_response())
    })();
    result.unwrap_or_else(error::response)
}

/// `DELETE /v1/conversations/{id}/items/{item_id}`: the conversation object.
pub(crate) async fn delete_item(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, item_id)): Path<(String, String)>,
) -> Response {
    let result = (|| {
        let (store, owner) = access(&state, &headers, Some(&id))?;
        if !store.delete_conversation_item(&owner, &id, &item_id)? {
            return Err(ApiError::NotFound(format!(
                "Item with id '{item_id}' not found in conversation '{id}'."
            )));
        }
        let object = store.conversation_object(&owner, &id)?.ok_or_else(|| not_found(&id))?;
        Ok(axum::Json(object).into_response())
    })();
    result.unwrap_or_else(error::response)
}
