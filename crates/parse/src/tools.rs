//! The tool list: name matching, and each tool's schema compiled for coercion.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::{Error, ErrorKind, offset_of};
use crate::schema::Schema;

/// The JSON type a parameter's schema asks for, as far as coercion cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    /// No single type (absent, several, or `null` only): values pass unchanged.
    Any,
}

/// Whether a parameter's schema allows `null`: `"type": "null"`, `null` among its types,
/// or an `anyOf`/`oneOf` alternative that does.
fn allows_null(schema: &Value) -> bool {
    let null_type = |schema: &Value| match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some("null")),
        _ => false,
    };
    null_type(schema)
        || ["anyOf", "oneOf"].iter().any(|key| {
            schema
                .get(*key)
                .and_then(Value::as_array)
                .is_some_and(|alts| alts.iter().any(null_type))
        })
}

impl ParamType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
            ParamType::Any => "any",
        }
    }
}

/// One declared tool.
#[derive(Debug, Clone)]
pub struct Tool {
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
    /// The parameters schema, compiled for coercion at every depth.
    schema: Schema,
    /// The names `properties` declares.
    params: HashSet<String>,
    /// Parameters whose schema allows `null` besides their type (`["string", "null"]`,
    /// `anyOf` with `{"type": "null"}`).
    nullable: Vec<String>,
    declared: bool,
    required: Vec<String>,
    /// The declared parameter names, in schema order.
    order: Vec<String>,
}

impl Tool {
    /// A tool with a name and an optional JSON Schema for its parameters.
    pub fn new(name: impl Into<String>, parameters: Option<Value>) -> Tool {
        let parameters = parameters.filter(|p| !p.is_null());
        let mut params = HashSet::new();
        let mut nullable = Vec::new();
        let mut declared = false;
        let mut required = Vec::new();
        let mut order = Vec::new();
        if let Some(schema) = &parameters {
            if let Some(Value::Object(props)) = schema.get("properties") {
                declared = true;
                for (key, prop) in props {
                    params.insert(key.clone());
                    if allows_null(prop) {
                        nullable.push(key.clone());
                    }
                    order.push(key.clone());
                }
            }
            if let Some(Value::Array(names)) = schema.get("required") {
                required = names.iter().filter_map(Value::as_str).map(str::to_owned).collect();
            }
        }
        let schema = parameters.as_ref().map(Schema::compile).unwrap_or_default();
        Tool {
            name: name.into(),
            description: None,
            parameters,
            schema,
            params,
            nullable,
            declared,
            required,
            order,
        }
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Tool {
        self.description = Some(description.into());
        self
    }

    /// The declared name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description, if one was given.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The JSON Schema of the parameters, if one was given.
    pub fn parameters(&self) -> Option<&Value> {
        self.parameters.as_ref()
    }

    /// The type a top-level parameter is coerced to.
    pub(crate) fn param_type(&self, key: &str) -> ParamType {
        self.schema.member_type(key)
    }

    /// The compiled parameters schema, for coercion at every depth.
    pub(crate) fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Whether the parameter's schema allows `null`.
    pub(crate) fn param_nullable(&self, key: &str) -> bool {
        self.nullable.iter().any(|name| name == key)
    }

    /// Whether the schema lists its properties (so an unlisted key is unknown).
    pub(crate) fn declares(&self, key: &str) -> bool {
        !self.declared || self.params.contains(key)
    }

    /// Whether the schema says anything the end-of-call checks use.
    pub(crate) fn has_schema(&self) -> bool {
        self.declared || !self.required.is_empty()
    }

    /// The declared parameter names, in the order the schema lists them.
    pub(crate) fn param_names(&self) -> &[String] {
        &self.order
    }

    pub(crate) fn required(&self) -> &[String] {
        &self.required
    }
}

/// A tool of a shared [`ToolSet`], cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct ToolRef {
    set: std::sync::Arc<ToolSet>,
    idx: usize,
}

impl ToolRef {
    pub(crate) fn get(&self) -> Option<&Tool> {
        self.set.tools.get(self.idx)
    }

    /// The same tool of the same set.
    pub(crate) fn same(&self, other: &ToolRef) -> bool {
        std::sync::Arc::ptr_eq(&self.set, &other.set) && self.idx == other.idx
    }
}

/// A set of tools, with name matching that forgives the ways models misspell names.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: Vec<Tool>,
    exact: HashMap<String, usize>,
    folded: HashMap<String, Option<usize>>,
    loose: HashMap<String, Option<usize>>,
}

impl ToolSet {
    /// A tool set from tools with distinct names.
    pub fn new(tools: Vec<Tool>) -> Result<ToolSet, Error> {
        let mut set = ToolSet::default();
        for (idx, tool) in tools.iter().enumerate() {
            if tool.name.is_empty() {
                return Err(Error::new(ErrorKind::InvalidTools, "a tool has an empty name"));
            }
            if set.exact.insert(tool.name.clone(), idx).is_some() {
                return Err(Error::new(
                    ErrorKind::DuplicateTool,
                    format!(
                        "tool `{}` is declared twice; give each tool a distinct name",
                        tool.name
                    ),
                ));
            }
            insert_unique(&mut set.folded, tool.name.to_lowercase(), idx);
            insert_unique(&mut set.loose, loose_key(&tool.name), idx);
        }
        set.tools = tools;
        Ok(set)
    }

    /// Reads an OpenAI `tools` array (`[{"type":"function","function":{…}}]`), an
    /// Anthropic `tools` array (`[{"name":…,"input_schema":{…}}]`) or a legacy
    /// OpenAI `functions` array (`[{"name":…,"parameters":{…}}]`). An object with a
    /// `tools` or `functions` key holding such an array is accepted too.
    pub fn from_json(value: &Value) -> Result<ToolSet, Error> {
        let list = match value {
            Value::Array(list) => list,
            Value::Object(map) => match map.get("tools").or_else(|| map.get("functions")) {
                Some(Value::Array(list)) => list,
                _ => {
                    return Err(invalid_tools(
                        "expected a JSON array of tools, or an object with a `tools` array",
                    ));
                }
            },
            _ => return Err(invalid_tools("expected a JSON array of tools")),
        };
        let mut tools = Vec::with_capacity(list.len());
        for (idx, entry) in list.iter().enumerate() {
            tools.push(tool_from_json(idx, entry)?);
        }
        ToolSet::new(tools)
    }

    /// Like [`ToolSet::from_json`], from JSON text.
    /// A text that is not JSON gives an [`Error`] with the [offset](Error::offset) where
    /// it stopped being JSON.
    pub fn from_json_str(text: &str) -> Result<ToolSet, Error> {
        let value: Value = serde_json::from_str(text).map_err(|err| {
            let offset = offset_of(text, err.line(), err.column());
            invalid_tools(format!("the tools are not valid JSON ({err})")).at(offset)
        })?;
        ToolSet::from_json(&value)
    }

    /// The tools, in declaration order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Finds the tool a model meant: the exact name, then the name ignoring case,
    /// then the part after a namespace (`functions.get_weather`), then the name
    /// with only letters and digits compared (`get-weather`). An ambiguous match
    /// at any step matches nothing.
    pub fn resolve(&self, name: &str) -> Option<&Tool> {
        self.resolve_index(name).and_then(|idx| self.tools.get(idx))
    }

    fn resolve_index(&self, name: &str) -> Option<usize> {
        let name = name.trim();
        if let Some(&idx) = self.exact.get(name) {
            return Some(idx);
        }
        let candidates = [Some(name), name.rsplit(['.', ':', '/']).next().filter(|t| *t != name)];
        for candidate in candidates.into_iter().flatten() {
            if let Some(&idx) = self.exact.get(candidate) {
                return Some(idx);
            }
            if let Some(found) = self.folded.get(&candidate.to_lowercase()) {
                return *found;
            }
            if let Some(found) = self.loose.get(&loose_key(candidate)) {
                return *found;
            }
        }
        None
    }

    /// Like [`ToolSet::resolve`], as a shared handle.
    pub(crate) fn resolve_shared(set: &std::sync::Arc<ToolSet>, name: &str) -> Option<ToolRef> {
        set.resolve_index(name).map(|idx| ToolRef { set: std::sync::Arc::clone(set), idx })
    }
}

fn insert_unique(map: &mut HashMap<String, Option<usize>>, key: String, idx: usize) {
    map.entry(key).and_modify(|slot| *slot = None).or_insert(Some(idx));
}

fn loose_key(name: &str) -> String {
    name.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

fn invalid_tools(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidTools, message)
}

fn tool_from_json(idx: usize, entry: &Value) -> Result<Tool, Error> {
    let Value::Object(map) = entry else {
        return Err(invalid_tools(format!("tool {idx} is not a JSON object")));
    };
    // OpenAI: {"type":"function","function":{"name","description","parameters"}}
    let (body, schema_key) = match map.get("function") {
        Some(Value::Object(function)) => (function, "parameters"),
        Some(_) => {
            return Err(invalid_tools(format!("tool {idx}: `function` must be an object")));
        }
        None if map.contains_key("input_schema") => (map, "input_schema"),
        None => (map, "parameters"),
    };
    let name = match body.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => {
            return Err(invalid_tools(format!(
                "tool {idx} has no `name`; expected an OpenAI tool \
                 ({{\"type\":\"function\",\"function\":{{\"name\":…}}}}) or an Anthropic tool \
                 ({{\"name\":…,\"input_schema\":{{…}}}})"
            )));
        }
    };
    let schema = body.get(schema_key).cloned();
    if let Some(schema) = &schema {
        if !schema.is_object() && !schema.is_null() {
            return Err(invalid_tools(format!(
                "tool `{name}`: `{schema_key}` must be a JSON Schema object"
            )));
        }
    }
    let mut tool = Tool::new(name.clone(), schema);
    if let Some(Value::String(description)) = body.get("description") {
        tool = tool.with_description(description.clone());
    }
    Ok(tool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> ToolSet {
        ToolSet::from_json(&json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
                "required": ["city"]}}},
            {"name": "Read_File", "input_schema": {"type": "object", "properties": {}}}
        ]))
        .unwrap()
    }

    #[test]
    fn names_match_exact_case_namespace_and_loose() {
        let set = set();
        assert_eq!(set.resolve("get_weather").unwrap().name(), "get_weather");
        assert_eq!(set.resolve("GET_WEATHER").unwrap().name(), "get_weather");
        assert_eq!(set.resolve("functions.get_weather").unwrap().name(), "get_weather");
        assert_eq!(set.resolve("get-weather").unwrap().name(), "get_weather");
        assert_eq!(set.resolve("read_file").unwrap().name(), "Read_File");
        assert!(set.resolve("get_time").is_none());
    }

    #[test]
    fn schema_types_are_read() {
        let set = set();
        let tool = set.resolve("get_weather").unwrap();
        assert_eq!(tool.param_type("days"), ParamType::Integer);
        assert_eq!(tool.param_type("city"), ParamType::String);
        assert_eq!(tool.required(), ["city".to_owned()]);
        assert!(!tool.declares("zip"));
    }

    #[test]
    fn bad_tools_are_explained() {
        let err = ToolSet::from_json(&json!({"x": 1})).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidTools);
        let err = ToolSet::from_json(&json!([{"name": "a"}, {"name": "a"}])).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::DuplicateTool);
    }
}
