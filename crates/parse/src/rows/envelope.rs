//! The keys of JSON call envelopes: which key names the tool, holds the arguments, the
//! id, or a list of calls (`{"name": …, "arguments": …}`, `{"tool_calls": […]}`,
//! LangChain's `{"action": …, "action_input": …}`, the OpenAI `function` object).

/// What a key of a call object holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// The OpenAI `function` object (or a name).
    Function,
    Name,
    Arguments,
    Id,
    /// A list of calls.
    Calls,
    /// A key that carries nothing (`type`).
    Ignore,
}

/// The meaning of a call object's key; `None`: a key toolshim does not use.
pub(crate) fn key(key: &str) -> Option<Key> {
    Some(match key {
        "function" => Key::Function,
        "name" | "tool" | "tool_name" | "function_name" | "toolName" | "action"
        | "recipient_name" => Key::Name,
        "arguments" | "parameters" | "input" | "params" | "args" | "action_input"
        | "tool_input" => Key::Arguments,
        "id" | "call_id" | "tool_call_id" => Key::Id,
        "tool_calls" | "calls" | "function_calls" | "tool_uses" => Key::Calls,
        "type" => Key::Ignore,
        _ => return None,
    })
}
