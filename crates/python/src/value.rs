//! Python values as JSON values, for tools lists given as Python objects.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// The deepest nesting read (the depth `serde_json` accepts in text).
const MAX_DEPTH: usize = 128;

/// `value` as JSON: None, bools, ints, floats, strs, lists, tuples and dicts with str keys,
/// and objects with a pydantic `model_dump()` (what vLLM and SGLang keep tools in). The error
/// says what could not be read.
pub(crate) fn to_json(value: &Bound<'_, PyAny>, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("the value nests deeper than {MAX_DEPTH} levels"));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Value::String(text.to_string_lossy().into_owned()));
    }
    if let Ok(int) = value.cast::<PyInt>() {
        if let Ok(n) = int.extract::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = int.extract::<u64>() {
            return Ok(Value::from(n));
        }
        return float(int.extract::<f64>().map_err(|err| err.to_string())?);
    }
    if let Ok(real) = value.cast::<PyFloat>() {
        return float(real.value());
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| format!("a dict key of type {} is not a str", type_name(&key)))?;
            map.insert(key.to_string_lossy().into_owned(), to_json(&item, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = value.cast::<PyList>() {
        return list.iter().map(|item| to_json(&item, depth + 1)).collect();
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return tuple.iter().map(|item| to_json(&item, depth + 1)).collect();
    }
    if let Ok(dump) = value.getattr("model_dump") {
        let dumped = dump.call0().map_err(|err| format!("model_dump() failed: {err}"))?;
        return to_json(&dumped, depth + 1);
    }
    Err(format!(
        "a value of type {} is not JSON; give dicts, lists, strs, numbers, bools and None \
         (or the JSON text)",
        type_name(value)
    ))
}

fn float(n: f64) -> Result<Value, String> {
    Number::from_f64(n).map(Value::Number).ok_or_else(|| format!("{n} is not a JSON number"))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "value of unknown type".to_owned(), |name| format!("`{name}`"))
}
