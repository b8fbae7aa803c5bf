//! Field walkers shared by the API families: every field an API defines is type-checked
//! against a table (`Fields`), and a mistake is worded by the family (`Walker::error`), with
//! paths in the family's style (`messages[0].content` or `messages.0.content`).

use serde_json::Value;

use crate::error::ApiError;

/// A JSON type a request field may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl JsonType {
    fn matches(self, value: &Value) -> bool {
        match self {
            JsonType::String => value.is_string(),
            JsonType::Integer => value.is_i64() || value.is_u64(),
            JsonType::Number => value.is_number(),
            JsonType::Boolean => value.is_boolean(),
            JsonType::Array => value.is_array(),
            JsonType::Object => value.is_object(),
        }
    }

    /// The type of a value; `None` for `null`.
    pub(crate) fn of(value: &Value) -> Option<JsonType> {
        match value {
            Value::Null => None,
            Value::Bool(_) => Some(JsonType::Boolean),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(JsonType::Integer),
            Value::Number(_) => Some(JsonType::Number),
            Value::String(_) => Some(JsonType::String),
            Value::Array(_) => Some(JsonType::Array),
            Value::Object(_) => Some(JsonType::Object),
        }
    }
}

/// The fields an API defines on one object, each with the types it may have.
pub(crate) type Fields = &'static [(&'static str, &'static [JsonType])];

/// A [`Fields`] table, written `name: Type | Type, …` with the types in scope where it is
/// used (each family names them `Str`, `Int`, `Num`, `Bool`, `Arr`, `Obj`).
macro_rules! fields {
    ($($name:ident: $first:ident $(| $more:ident)*),* $(,)?) => {
        &[$((stringify!($name), &[$first $(, $more)*])),*]
    };
}
pub(crate) use fields;

/// The first field of `object` listed in `fields` whose value has none of its types, with
/// those types and the value. `null` counts as absent: required fields are checked where
/// they are read.
pub(crate) fn mistyped(
    object: &serde_json::Map<String, Value>,
    fields: Fields,
) -> Option<(&'static str, &'static [JsonType], &Value)> {
    fields.iter().find_map(|&(key, types)| {
        let value = object.get(key).filter(|v| !v.is_null())?;
        (!types.iter().any(|t| t.matches(value))).then_some((key, types, value))
    })
}

/// The items of an array field, with their indices (none when it is absent or not an array).
pub(crate) fn items<'a>(
    object: &'a serde_json::Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Value)> {
    object.get(key).and_then(Value::as_array).into_iter().flatten().enumerate()
}

/// How one API family walks a request: how it words a type mistake (the path, the allowed
/// types, the value found).
#[derive(Clone, Copy)]
pub(crate) struct Walker {
    pub(crate) error: fn(&str, &[JsonType], &Value) -> ApiError,
}

impl Walker {
    /// `value` must be an object; then its fields are checked.
    pub(crate) fn object<'a>(
        &self,
        path: &str,
        value: &'a Value,
        defined: Fields,
    ) -> Result<&'a serde_json::Map<String, Value>, ApiError> {
        let Value::Object(object) = value else {
            return Err((self.error)(path, &[JsonType::Object], value));
        };
        self.fields(path, object, defined)?;
        Ok(object)
    }

    /// The fields of the object `key` inside `object` (at `path`), when it is one.
    pub(crate) fn inner(
        &self,
        path: &str,
        object: &serde_json::Map<String, Value>,
        key: &str,
        defined: Fields,
    ) -> Result<(), ApiError> {
        match object.get(key) {
            Some(Value::Object(inner)) if path.is_empty() => self.fields(key, inner, defined),
            Some(Value::Object(inner)) => self.fields(&format!("{path}.{key}"), inner, defined),
            _ => Ok(()),
        }
    }

    /// The fields of `object` listed in `defined` have one of their types.
    pub(crate) fn fields(
        &self,
        path: &str,
        object: &serde_json::Map<String, Value>,
        defined: Fields,
    ) -> Result<(), ApiError> {
        match mistyped(object, defined) {
            None => Ok(()),
            Some((key, types, value)) if path.is_empty() => Err((self.error)(key, types, value)),
            Some((key, types, value)) => Err((self.error)(&format!("{path}.{key}"), types, value)),
        }
    }
}
