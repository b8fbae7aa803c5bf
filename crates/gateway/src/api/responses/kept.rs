//! What the endpoints of kept objects share (stored responses, conversations; issue 26): one
//! extractor checks the key, the store and the id before anything else is read, one body
//! reader takes a JSON object under the gateway's limits, and every failure is answered in
//! the Responses API's error shape.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::openai::handlers::{authorize, not_json};
use crate::api::responses::error;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{Store, owner};

/// An error answered in the Responses API's shape.
pub(crate) struct Failure(pub(crate) ApiError);

impl From<ApiError> for Failure {
    fn from(err: ApiError) -> Failure {
        Failure(err)
    }
}

impl From<crate::store::StoreError> for Failure {
    fn from(err: crate::store::StoreError) -> Failure {
        Failure(err.into())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        error::response(self.0)
    }
}

/// What a kept-object endpoint answers.
pub(crate) type Answer = Result<Response, Failure>;

/// A request to a kept object, a conversation when `CONVERSATION`, else a stored response:
/// the key checked, the store on, and the route's `{id}` (empty on a route without one) well
/// formed; `{item_id}` as given.
pub(crate) struct Kept<const CONVERSATION: bool> {
    pub(crate) store: Arc<Store>,
    pub(crate) owner: String,
    pub(crate) id: String,
    pub(crate) item_id: String,
}

impl<const CONVERSATION: bool> Kept<CONVERSATION> {
    /// How its ids begin, the parameter that names one, and its name in messages.
    const KIND: (&'static str, &'static str, &'static str) = if CONVERSATION {
        ("conv", "conversation_id", "Conversation")
    } else {
        ("resp", "response_id", "Response")
    };

    /// The 404 for this object, with the reasons it may be gone.
    pub(crate) fn not_found(&self) -> ApiError {
        let (id, name) = (&self.id, Self::KIND.2);
        let why = if CONVERSATION {
            ""
        } else {
            ": it expired, was deleted, was stored under another key, or was made with store: false"
        };
        ApiError::NotFound(format!("{name} with id '{id}' not found{why}."))
    }

    /// The 404 for an item of this object.
    pub(crate) fn item_not_found(&self) -> ApiError {
        let (id, item_id) = (&self.id, &self.item_id);
        ApiError::NotFound(format!("Item with id '{item_id}' not found in conversation '{id}'."))
    }
}

impl<const CONVERSATION: bool> FromRequestParts<AppState> for Kept<CONVERSATION> {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Failure> {
        authorize(state, &parts.headers)?;
        let (mut id, mut item_id) = (String::new(), String::new());
        if let Ok(params) = RawPathParams::from_request_parts(parts, state).await {
            for (name, value) in &params {
                match name {
                    "id" => id = value.to_owned(),
                    "item_id" => item_id = value.to_owned(),
                    _ => {}
                }
            }
        }
        let Some(store) = &state.store else {
            return Err(ApiError::NotFound(if CONVERSATION {
                "Conversations are not kept here: the gateway's store is off (store.url = \"off\").".into()
            } else {
                format!("Response with id '{id}' not found. This gateway keeps no responses (store.url = \"off\"): send the whole conversation with each request.")
            })
            .into());
        };
        let (prefix, param, _) = Self::KIND;
        if !id.is_empty() && !well_formed(&id, prefix) {
            return Err(invalid(
                format!("Invalid '{param}': '{id}'. Expected an ID that begins with '{prefix}'."),
                param,
                "invalid_value",
            )
            .into());
        }
        let owner = owner(crate::api::bearer(&parts.headers));
        Ok(Kept { store: Arc::clone(store), owner, id, item_id })
    }
}

/// A request body that is a JSON object, read under the gateway's limits (an empty body is
/// `{}`).
pub(crate) struct Object(pub(crate) Value);

impl FromRequest<AppState> for Object {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Failure> {
        let (parts, body) = request.into_parts();
        let bytes = crate::api::read_body(state, &parts.headers, body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Object(json!({})));
        }
        match serde_json::from_slice(&bytes).map_err(|err| not_json(&err))? {
            value @ Value::Object(_) => Ok(Object(value)),
            _ => Err(ApiError::invalid("The request body must be a JSON object.", None).into()),
        }
    }
}

/// Whether `id` has the shape of an id that begins with `prefix`.
pub(crate) fn well_formed(id: &str, prefix: &str) -> bool {
    id.len() <= 256
        && id.starts_with(prefix)
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A 400 naming the parameter at fault.
pub(crate) fn invalid(message: String, param: &str, code: &str) -> ApiError {
    ApiError::InvalidRequest { message, param: Some(param.into()), code: Some(code.into()) }
}

/// One page of `items` (oldest first) as the API lists them: `limit` (1 to 100, 20), `order`
/// (`desc`, the default, or `asc`), `after` (an item id); with `first_id`, `last_id` and
/// `has_more`.
pub(crate) fn page(
    mut items: Vec<Value>,
    query: &HashMap<String, String>,
) -> Result<Value, ApiError> {
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return Err(invalid(
                "Invalid 'limit': it must be an integer from 1 to 100.".into(),
                "limit",
                "invalid_value",
            ));
        }
    };
    match query.get("order").map(String::as_str) {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => {
            return Err(invalid(
                format!("Invalid 'order': '{other}'. Expected 'asc' or 'desc'."),
                "order",
                "invalid_value",
            ));
        }
    }
    let start = match query.get("after") {
        Some(after) => items.iter().position(|i| i["id"] == after.as_str()).map_or(0, |at| at + 1),
        None => 0,
    };
    let rest = items.get(start..).unwrap_or_default();
    Ok(list(rest.iter().take(limit).cloned().collect(), rest.len() > limit))
}

/// Items as the API lists them: `data`, `first_id`, `last_id`, `has_more`.
pub(crate) fn list(items: Vec<Value>, has_more: bool) -> Value {
    let (first, last) =
        (items.first().map(|i| i["id"].clone()), items.last().map(|i| i["id"].clone()));
    json!({"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": has_more})
}
