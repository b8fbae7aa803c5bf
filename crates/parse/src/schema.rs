//! A tool's parameters schema, compiled once (when the tool is made) into a graph the
//! argument writer walks as it writes: for every value at every depth, the type to coerce
//! it to, found in constant time per level (a hash lookup of the key, or an index).
//!
//! What is followed: `type` (a name or a list; `null` in it only allows null),
//! `properties` and an `additionalProperties` schema, `items` (one schema, or a list by
//! position as `prefixItems` and draft-4 tuples with `additionalItems` are), local `$ref`s
//! (`#`, `#/$defs/…`, `#/definitions/…`, any JSON pointer into the same schema), `allOf`
//! (every part applies), and `anyOf`/`oneOf` (the types of the alternatives that are not
//! `null`; an object or array value takes the members or items of the one alternative it
//! can be). What cannot be resolved (a remote `$ref`, alternatives of different types, a
//! cycle of `$ref`s, nesting past [`MAX_NESTING`]) is [`ParamType::Any`]: left unchanged.
//!
//! Each schema value is compiled once (a `$ref` to it reuses its node), so compiling is
//! linear in the size of the schema, and a recursive schema is a graph with a cycle.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::tools::ParamType;

/// How deep subschemas are followed while compiling (properties, items, `$ref`, `allOf`,
/// `anyOf` each count one); anything deeper is [`ParamType::Any`].
const MAX_NESTING: usize = 64;

/// The JSON types a value may have, as bits. `number` is `INTEGER | FRACTION`.
const STRING: u8 = 1;
const INTEGER: u8 = 1 << 1;
/// Numbers that are not whole.
const FRACTION: u8 = 1 << 2;
const BOOLEAN: u8 = 1 << 3;
const ARRAY: u8 = 1 << 4;
const OBJECT: u8 = 1 << 5;
const NULL: u8 = 1 << 6;
const ALL: u8 = (1 << 7) - 1;

/// A node of a compiled [`Schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct NodeId(usize);

/// What the schema says about one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Node {
    /// The type a value is coerced to.
    pub(crate) ty: ParamType,
    /// `ty` is [`ParamType::Number`] and `integer` is not among the types: a whole number
    /// is written with a fraction (`12.0`).
    pub(crate) fraction: bool,
    /// The allowed types (bits), [`ALL`] when unconstrained.
    types: u8,
    /// `integer` is named among the types somewhere.
    names_integer: bool,
    /// The object's members (an index into `Schema::objects`).
    object: Option<usize>,
    /// The array's items (an index into `Schema::arrays`).
    array: Option<usize>,
}

impl Node {
    const ANY: Node = Node {
        ty: ParamType::Any,
        fraction: false,
        types: ALL,
        names_integer: false,
        object: None,
        array: None,
    };

    /// Both apply (`allOf`, `$ref` beside other keywords).
    fn and(self, other: Node) -> Node {
        Node {
            types: self.types & other.types,
            names_integer: self.names_integer || other.names_integer,
            object: self.object.or(other.object),
            array: self.array.or(other.array),
            ..Node::ANY
        }
    }

    /// Either applies (`anyOf`, `oneOf`): an object takes the members of the one
    /// alternative that may be an object, and none when several may.
    fn or(self, other: Node) -> Node {
        let pick = |bit: u8, mine: Option<usize>, theirs: Option<usize>| match (
            self.types & bit != 0,
            other.types & bit != 0,
        ) {
            (true, false) => mine,
            (false, true) => theirs,
            (true, true) | (false, false) => None,
        };
        Node {
            types: self.types | other.types,
            names_integer: self.names_integer || other.names_integer,
            object: pick(OBJECT, self.object, other.object),
            array: pick(ARRAY, self.array, other.array),
            ..Node::ANY
        }
    }

    /// Sets `ty` and `fraction` from the types.
    fn settle(&mut self) {
        let types = self.types & !NULL;
        self.ty = match types {
            STRING => ParamType::String,
            INTEGER => ParamType::Integer,
            BOOLEAN => ParamType::Boolean,
            ARRAY => ParamType::Array,
            OBJECT => ParamType::Object,
            _ if types != 0 && types & !(INTEGER | FRACTION) == 0 => ParamType::Number,
            _ => ParamType::Any,
        };
        self.fraction = self.ty == ParamType::Number && !self.names_integer;
    }
}

/// An object's members.
#[derive(Debug, Clone, Default)]
struct Members {
    named: HashMap<String, NodeId>,
    /// `additionalProperties`, when it is a schema.
    other: Option<NodeId>,
}

/// An array's items.
#[derive(Debug, Clone, Default)]
struct Items {
    /// `prefixItems` (or a list `items`), by position.
    by_position: Vec<NodeId>,
    /// The items after those.
    rest: Option<NodeId>,
}

/// A compiled parameters schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    nodes: Vec<Node>,
    objects: Vec<Members>,
    arrays: Vec<Items>,
}

impl Schema {
    /// Compiles `parameters`; its node is [`Schema::root`].
    pub(crate) fn compile(parameters: &Value) -> Schema {
        let mut build = Build {
            root: parameters,
            seen: HashMap::new(),
            schema: Schema::default(),
            combine: Vec::new(),
            state: Vec::new(),
        };
        build.node(parameters, 0);
        for id in 0..build.schema.nodes.len() {
            build.resolve(NodeId(id), 0);
        }
        for node in &mut build.schema.nodes {
            node.settle();
        }
        build.schema
    }

    /// The node of the whole arguments value; `None` when nothing was compiled.
    pub(crate) fn root(&self) -> Option<NodeId> {
        (!self.nodes.is_empty()).then_some(NodeId(0))
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        self.nodes.get(id.0).unwrap_or(&Node::ANY)
    }

    /// The schema of the member `key` of an object whose schema is `id`.
    pub(crate) fn member(&self, id: NodeId, key: &str) -> Option<NodeId> {
        let members = self.objects.get(self.node(id).object?)?;
        members.named.get(key).copied().or(members.other)
    }

    /// The schema of item `index` of an array whose schema is `id`.
    pub(crate) fn item(&self, id: NodeId, index: usize) -> Option<NodeId> {
        let items = self.arrays.get(self.node(id).array?)?;
        items.by_position.get(index).copied().or(items.rest)
    }

    /// The type a member of the top-level object is coerced to.
    pub(crate) fn member_type(&self, key: &str) -> ParamType {
        self.root()
            .and_then(|root| self.member(root, key))
            .map_or(ParamType::Any, |id| self.node(id).ty)
    }
}

/// What a node takes from other nodes once they are resolved: `all` apply (`$ref`,
/// `allOf`), and one alternative of each of `any` does (`anyOf`, `oneOf`).
#[derive(Debug, Default)]
struct Combine {
    all: Vec<NodeId>,
    any: Vec<Vec<NodeId>>,
}

/// Where a node is in [`Build::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Own,
    Resolving,
    Resolved,
}

/// How long a chain of `$ref`, `allOf` and `anyOf` is followed when resolving.
const MAX_CHAIN: usize = 64;

/// A compilation under way. First every schema value gets a node with what its own
/// keywords say (members and items point at nodes, so a recursive schema is a cycle);
/// then each node takes in what its `$ref`, `allOf` and `anyOf`/`oneOf` nodes say, once
/// those are resolved themselves.
struct Build<'a> {
    /// The whole schema, which `$ref`s point into.
    root: &'a Value,
    /// The node of each schema value compiled so far, by address (stable: `root` is
    /// borrowed for the whole build).
    seen: HashMap<*const Value, NodeId>,
    schema: Schema,
    /// Per node, what it takes from others.
    combine: Vec<Combine>,
    state: Vec<State>,
}

impl<'a> Build<'a> {
    /// The node of `schema`, compiled now unless it was before.
    fn node(&mut self, schema: &'a Value, nesting: usize) -> NodeId {
        let at = std::ptr::from_ref(schema);
        if let Some(&id) = self.seen.get(&at) {
            return id;
        }
        let id = NodeId(self.schema.nodes.len());
        self.schema.nodes.push(Node::ANY);
        self.combine.push(Combine::default());
        self.state.push(State::Own);
        if nesting > MAX_NESTING {
            return id;
        }
        self.seen.insert(at, id);
        // `true`, `false` and anything else but an object: no constraint to coerce to.
        if let Value::Object(map) = schema {
            let (node, combine) = self.read(map, nesting);
            if let Some(slot) = self.schema.nodes.get_mut(id.0) {
                *slot = node;
            }
            if let Some(slot) = self.combine.get_mut(id.0) {
                *slot = combine;
            }
        }
        id
    }

    /// What a schema's own keywords say, and which nodes it combines with.
    fn read(&mut self, map: &'a Map<String, Value>, nesting: usize) -> (Node, Combine) {
        let mut node = Node::ANY;
        match map.get("type") {
            Some(Value::String(name)) => {
                node.types = type_bits(name);
                node.names_integer = name == "integer";
            }
            Some(Value::Array(names)) => {
                let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
                let types = names.iter().fold(0, |types, name| types | type_bits(name));
                node.types = if types == 0 { ALL } else { types };
                node.names_integer = names.contains(&"integer");
            }
            _ if map.contains_key("properties") => node.types = OBJECT,
            _ if map.contains_key("items") || map.contains_key("prefixItems") => {
                node.types = ARRAY;
            }
            _ => {}
        }
        node.object = self.members(map, nesting);
        node.array = self.items(map, nesting);
        let mut combine = Combine::default();
        if let Some(Value::String(reference)) = map.get("$ref") {
            if let Some(target) = local_ref(self.root, reference) {
                combine.all.push(self.node(target, nesting + 1));
            }
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            for part in parts {
                combine.all.push(self.node(part, nesting + 1));
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alternatives)) = map.get(key) {
                let alternatives = alternatives.iter().map(|alt| self.node(alt, nesting + 1));
                combine.any.push(alternatives.collect());
            }
        }
        (node, combine)
    }

    /// Makes `id`'s node take in what it combines with; `chain` is how many nodes led here.
    /// A node met again while it is resolved (a cycle of `$ref`s) adds nothing.
    fn resolve(&mut self, id: NodeId, chain: usize) -> Node {
        let own = *self.schema.node(id);
        match self.state.get(id.0) {
            Some(State::Resolved) => return own,
            Some(State::Resolving) | None => return Node::ANY,
            Some(State::Own) => {}
        }
        let combine = match self.combine.get_mut(id.0) {
            Some(combine) if combine.all.is_empty() && combine.any.is_empty() => None,
            // Too long a chain: left for the loop over every node to resolve.
            Some(_) if chain > MAX_CHAIN => return Node::ANY,
            Some(combine) => Some(std::mem::take(combine)),
            None => None,
        };
        let Some(combine) = combine else {
            self.set_state(id, State::Resolved);
            return own;
        };
        self.set_state(id, State::Resolving);
        let mut node = own;
        for part in combine.all {
            node = node.and(self.resolve(part, chain + 1));
        }
        for alternatives in combine.any {
            let mut either: Option<Node> = None;
            for alternative in alternatives {
                let alternative = self.resolve(alternative, chain + 1);
                if alternative.types == NULL {
                    continue;
                }
                either = Some(match either {
                    None => alternative,
                    Some(so_far) => so_far.or(alternative),
                });
            }
            if let Some(either) = either {
                node = node.and(either);
            }
        }
        if let Some(slot) = self.schema.nodes.get_mut(id.0) {
            *slot = node;
        }
        self.set_state(id, State::Resolved);
        node
    }

    fn set_state(&mut self, id: NodeId, state: State) {
        if let Some(slot) = self.state.get_mut(id.0) {
            *slot = state;
        }
    }

    fn members(&mut self, map: &'a Map<String, Value>, nesting: usize) -> Option<usize> {
        let named = match map.get("properties") {
            Some(Value::Object(properties)) => Some(properties),
            _ => None,
        };
        let other = match map.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(self.node(schema, nesting + 1)),
            _ => None,
        };
        if named.is_none() && other.is_none() {
            return None;
        }
        let mut members = Members { named: HashMap::new(), other };
        for (key, schema) in named.into_iter().flatten() {
            let id = self.node(schema, nesting + 1);
            members.named.insert(key.clone(), id);
        }
        self.schema.objects.push(members);
        Some(self.schema.objects.len() - 1)
    }

    fn items(&mut self, map: &'a Map<String, Value>, nesting: usize) -> Option<usize> {
        let (by_position, rest) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), items) => (prefix.as_slice(), items),
            (_, Some(Value::Array(tuple))) => (tuple.as_slice(), map.get("additionalItems")),
            (_, items) => (&[][..], items),
        };
        let rest = match rest {
            Some(schema @ Value::Object(_)) => Some(self.node(schema, nesting + 1)),
            _ => None,
        };
        if by_position.is_empty() && rest.is_none() {
            return None;
        }
        let by_position = by_position.iter().map(|schema| self.node(schema, nesting + 1)).collect();
        self.schema.arrays.push(Items { by_position, rest });
        Some(self.schema.arrays.len() - 1)
    }
}

fn type_bits(name: &str) -> u8 {
    match name {
        "string" => STRING,
        "integer" => INTEGER,
        "number" => INTEGER | FRACTION,
        "boolean" => BOOLEAN,
        "array" => ARRAY,
        "object" => OBJECT,
        "null" => NULL,
        _ => ALL,
    }
}

/// The schema a local `$ref` (`#`, `#/$defs/Name`, any JSON pointer) points at.
fn local_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    match reference.strip_prefix('#')? {
        "" => Some(root),
        pointer => root.pointer(pointer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The type at `path` (keys, and `#N` for item N), with its `fraction` flag; `None`
    /// when the path leaves what the schema describes.
    fn at(schema: &Value, path: &[&str]) -> Option<(ParamType, bool)> {
        let schema = Schema::compile(schema);
        let mut id = schema.root()?;
        for step in path {
            id = match step.strip_prefix('#').and_then(|n| n.parse().ok()) {
                Some(index) => schema.item(id, index)?,
                None => schema.member(id, step)?,
            };
        }
        let node = schema.node(id);
        Some((node.ty, node.fraction))
    }

    fn ty(schema: &Value, path: &[&str]) -> ParamType {
        at(schema, path).map_or(ParamType::Any, |(ty, _)| ty)
    }

    #[test]
    fn nested_properties_and_items_resolve() {
        let schema = json!({"type": "object", "properties": {
            "numbers": {"type": "array", "items": {"type": "number"}},
            "conditions": {"type": "array", "items": {"type": "object", "properties": {
                "field": {"type": "string"}, "value": {"type": "string"},
                "limit": {"type": "integer"}, "strict": {"type": "boolean"}}}}}});
        assert_eq!(at(&schema, &["numbers"]), Some((ParamType::Array, false)));
        assert_eq!(at(&schema, &["numbers", "#0"]), Some((ParamType::Number, true)));
        assert_eq!(at(&schema, &["numbers", "#41"]), Some((ParamType::Number, true)));
        assert_eq!(ty(&schema, &["conditions", "#3", "value"]), ParamType::String);
        assert_eq!(ty(&schema, &["conditions", "#0", "limit"]), ParamType::Integer);
        assert_eq!(ty(&schema, &["conditions", "#0", "strict"]), ParamType::Boolean);
        // What the schema does not describe is left alone.
        assert_eq!(at(&schema, &["conditions", "#0", "other"]), None);
        assert_eq!(at(&schema, &["numbers", "x"]), None);
        assert_eq!(at(&schema, &["unknown"]), None);
    }

    #[test]
    fn a_number_that_may_be_an_integer_keeps_whole_numbers_whole() {
        let schema = json!({"properties": {
            "a": {"type": ["integer", "number"]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "null"}]},
            "c": {"type": ["number", "null"]},
            "d": {"type": "integer"}}});
        assert_eq!(at(&schema, &["a"]), Some((ParamType::Number, false)));
        assert_eq!(at(&schema, &["b"]), Some((ParamType::Number, false)));
        assert_eq!(at(&schema, &["c"]), Some((ParamType::Number, true)));
        assert_eq!(at(&schema, &["d"]), Some((ParamType::Integer, false)));
    }

    #[test]
    fn local_refs_resolve_and_recursive_schemas_resolve_at_any_depth() {
        let schema = json!({
            "type": "object",
            "properties": {
                "conditions": {"type": "array", "items": {"$ref": "#/$defs/Condition"}},
                "old": {"$ref": "#/definitions/Old"},
                "tree": {"$ref": "#/$defs/Node"},
                "again": {"$ref": "#"}},
            "$defs": {
                "Condition": {"type": "object", "properties": {"value": {"type": "string"}}},
                "Node": {"type": "object", "properties": {
                    "weight": {"type": "number"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
            "definitions": {"Old": {"type": "integer"}}});
        assert_eq!(ty(&schema, &["conditions", "#2", "value"]), ParamType::String);
        assert_eq!(ty(&schema, &["old"]), ParamType::Integer);
        let deep = ["tree", "children", "#0", "children", "#5", "children", "#1", "weight"];
        assert_eq!(at(&schema, &deep), Some((ParamType::Number, true)));
        assert_eq!(ty(&schema, &["again", "again", "old"]), ParamType::Integer);
    }

    #[test]
    fn any_of_with_null_and_all_of_resolve() {
        let schema = json!({"properties": {
            "maybe": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
            "list": {"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "number"}}]},
            "or_string": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
            "both": {"allOf": [{"$ref": "#/$defs/Point"}, {"description": "where"}]},
            "optional": {"type": ["integer", "null"]}},
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}});
        assert_eq!(ty(&schema, &["maybe"]), ParamType::Object);
        assert_eq!(at(&schema, &["maybe", "x"]), Some((ParamType::Number, true)));
        assert_eq!(ty(&schema, &["list"]), ParamType::Array);
        assert_eq!(ty(&schema, &["list", "#0"]), ParamType::Number);
        // String or array: no one type, but an array value can only be the array.
        assert_eq!(ty(&schema, &["or_string"]), ParamType::Any);
        assert_eq!(ty(&schema, &["or_string", "#0"]), ParamType::Integer);
        assert_eq!(ty(&schema, &["both", "x"]), ParamType::Number);
        assert_eq!(ty(&schema, &["optional"]), ParamType::Integer);
    }

    #[test]
    fn additional_properties_and_tuples_resolve() {
        let schema = json!({"properties": {
            "scores": {"type": "object", "additionalProperties": {"type": "number"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                     "items": {"type": "boolean"}},
            "old_pair": {"type": "array", "items": [{"type": "integer"}],
                         "additionalItems": {"type": "string"}},
            "named": {"properties": {"a": {"type": "string"}},
                      "additionalProperties": {"type": "integer"}}}});
        assert_eq!(ty(&schema, &["scores", "anything"]), ParamType::Number);
        assert_eq!(ty(&schema, &["pair", "#0"]), ParamType::String);
        assert_eq!(ty(&schema, &["pair", "#1"]), ParamType::Integer);
        assert_eq!(ty(&schema, &["pair", "#2"]), ParamType::Boolean);
        assert_eq!(ty(&schema, &["old_pair", "#0"]), ParamType::Integer);
        assert_eq!(ty(&schema, &["old_pair", "#1"]), ParamType::String);
        assert_eq!(ty(&schema, &["named", "a"]), ParamType::String);
        assert_eq!(ty(&schema, &["named", "b"]), ParamType::Integer);
    }

    #[test]
    fn what_cannot_be_resolved_is_any() {
        let schema = json!({"properties": {
            "remote": {"$ref": "https://example.com/schema.json"},
            "missing": {"$ref": "#/$defs/Nothing"},
            "cycle": {"$ref": "#/$defs/A"},
            "mixed": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "typeless": {"anyOf": [{"type": "integer"}, {"description": "anything"}]},
            "contradiction": {"type": "string", "allOf": [{"type": "integer"}]},
            "two_objects": {"anyOf": [
                {"type": "object", "properties": {"n": {"type": "integer"}}},
                {"type": "object", "properties": {"n": {"type": "string"}}}]},
            "free": true},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}});
        for key in ["remote", "missing", "cycle", "mixed", "typeless", "contradiction", "free"] {
            assert_eq!(ty(&schema, &[key]), ParamType::Any, "{key}");
        }
        assert_eq!(ty(&schema, &["two_objects"]), ParamType::Object);
        assert_eq!(at(&schema, &["two_objects", "n"]), None);
        assert_eq!(ty(&json!(true), &["x"]), ParamType::Any);
        assert_eq!(ty(&json!({"type": "object"}), &["x"]), ParamType::Any);
    }

    #[test]
    fn nesting_past_the_limit_is_any() {
        let mut schema = json!({"type": "integer"});
        for _ in 0..MAX_NESTING + 10 {
            schema = json!({"type": "array", "items": schema});
        }
        let path = vec!["#0"; MAX_NESTING + 10];
        assert_eq!(ty(&schema, &path), ParamType::Any);
        assert_eq!(ty(&schema, &path[..MAX_NESTING / 2]), ParamType::Array);
    }
}
