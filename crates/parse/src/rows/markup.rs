//! The markup vocabulary: what each tag name means, the tag syntaxes, the namespace
//! prefixes models put inside `<`, and the fence labels. Formats written in markup
//! (Hermes, Qwen3-Coder, GLM, iQuest Coder, DeepSeek's DSML, MiniMax, Kimi K3…) are these
//! rows.

/// What a tag means in tool-call markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Holds calls (JSON envelopes or call elements), or acts as one call once a name
    /// field or a parameter shows up. With a name attribute, it is a call itself.
    Container {
        /// It opens a region in plain text (not only inside markup).
        in_text: bool,
    },
    /// A call whose name an attribute (or `=NAME`) gives.
    Call {
        /// It opens a region in plain text (with a name).
        in_text: bool,
        /// Attributes that give the name, in order (`=NAME` comes first).
        names: &'static [&'static str],
        /// The attribute that gives the call's id.
        id: Option<&'static str>,
        /// Without a name, it is a container (else not markup at all).
        unnamed_holds_calls: bool,
    },
    /// `<func_name>NAME</func_name>`: the name of a call whose parameters follow; the call
    /// ends at the first thing that is not a parameter.
    CallName {
        /// An end tag that closes such calls as expected (no warning).
        closed_by: &'static str,
    },
    /// A parameter, keyed by an attribute (`name`, `key`) or `=KEY`.
    Param,
    /// Key/value pairs: the key, its type, its value, and a separator after the name
    /// (GLM, Hunyuan, K2 Horizon).
    Key,
    KeyType,
    Value,
    Separator,
    /// The enclosing container's call name.
    NameField,
    /// The enclosing call's arguments, as JSON.
    ArgsField,
    /// A field whose text is not part of the call (MCP's `<server_name>`).
    Ignored,
}

const NAME: &[&str] = &["name"];

const fn container(in_text: bool) -> Role {
    Role::Container { in_text }
}

const fn call(in_text: bool, unnamed_holds_calls: bool) -> Role {
    Role::Call { in_text, names: NAME, id: None, unnamed_holds_calls }
}

/// Every tag the markup reader knows.
pub(crate) static TAGS: [(&str, Role); 35] = [
    ("calls", container(true)),
    ("dots_function_call", container(true)),
    ("tool_call", container(true)),
    // iQuest Coder: GLM's key/value calls in its own containers.
    ("iquest_tool_call", container(true)),
    ("iquestcoder_tool_call", container(true)),
    ("toolcall", container(true)),
    ("tool_calls", container(true)),
    ("function_call", container(true)),
    ("function_calls", container(true)),
    ("tools", container(true)),
    ("tool_use", container(false)),
    // Cline's and MiroThinker's MCP calls: `<use_mcp_tool><server_name>S</server_name>
    // <tool_name>NAME</tool_name><arguments>{json}</arguments></use_mcp_tool>`.
    ("use_mcp_tool", container(true)),
    ("server_name", Role::Ignored),
    ("invoke", call(true, false)),
    ("func_call", call(true, false)),
    ("function", call(true, true)),
    ("tool", call(false, false)),
    // Kimi K3: `<|open|>call tool="NAME" index="1"<|sep|>`.
    (
        "call",
        Role::Call {
            in_text: false,
            names: &["name", "tool"],
            id: Some("index"),
            unnamed_holds_calls: false,
        },
    ),
    ("func_name", Role::CallName { closed_by: "func_call" }),
    ("parameter", Role::Param),
    ("param", Role::Param),
    ("arg", Role::Param),
    ("argument", Role::Param),
    ("arg_key", Role::Key),
    ("arg_type", Role::KeyType),
    ("arg_value", Role::Value),
    ("tool_sep", Role::Separator),
    ("name", Role::NameField),
    ("tool_name", Role::NameField),
    ("function_name", Role::NameField),
    ("arguments", Role::ArgsField),
    ("parameters", Role::ArgsField),
    ("args", Role::ArgsField),
    ("input", Role::ArgsField),
    ("params", Role::ArgsField),
];

/// The row of a tag name: its name as a `'static` str, and its role.
pub(crate) fn tag(name: &str) -> Option<(&'static str, Role)> {
    let first = name.as_bytes().first();
    TAGS.iter()
        .find(|(known, _)| {
            known.len() == name.len() && known.as_bytes().first() == first && *known == name
        })
        .copied()
}

/// Attributes of a parameter: what keys it, and what says its value's type.
pub(crate) const PARAM_KEYS: &[&str] = &["name", "key"];
/// `string="true|false"` (DeepSeek's DSML).
pub(crate) const STRING_FLAG: &str = "string";
/// `type="string"` (Kimi K3, MiniCPM5), and `<arg_type>string</arg_type>`.
pub(crate) const TYPE_ATTR: &str = "type";
/// The type names that mean "the raw text is the value".
pub(crate) const STRING_TYPES: &[&str] = &["string", "str"];
/// `<param name="k" value="v"/>`.
pub(crate) const VALUE_ATTR: &str = "value";

/// Whether a type flag (`string="true"`) or type name (`type="str"`) says "string".
pub(crate) fn says_string(flag: Option<&str>, type_name: Option<&str>) -> Option<bool> {
    match (flag, type_name) {
        (Some(flag), _) => Some(flag == "true"),
        (None, Some(kind)) => Some(STRING_TYPES.contains(&kind)),
        (None, None) => None,
    }
}

/// Tags written with tokens instead of angle brackets: `OPEN name attrs END` and
/// `CLOSE name END`.
#[derive(Debug)]
pub(crate) struct TokenTags {
    pub(crate) open: &'static str,
    pub(crate) close: &'static str,
    pub(crate) end: &'static str,
}

/// Kimi K3's XTML: `<|open|>NAME attrs<|sep|>` … `<|close|>NAME<|sep|>`.
pub(crate) static TOKEN_TAGS: TokenTags =
    TokenTags { open: "<|open|>", close: "<|close|>", end: "<|sep|>" };

/// Namespace-like prefixes some models put inside `<`: DeepSeek's `｜DSML｜` (with a
/// space after it in V4.1), GigaChat's `｜GCML｜` and K2 Horizon's `ifm|`.
pub(crate) static TAG_PREFIXES: [&str; 4] = ["｜DSML｜ ", "｜DSML｜", "｜GCML｜", "ifm|"];

/// What a fence's label says its body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceBody {
    /// JSON calls or markup.
    Calls,
    /// Python calls, each possibly wrapped in a call to `wrapper` (`print(…)`).
    Python { wrapper: Option<&'static str> },
}

/// Fence labels (lowercase) and what they hold.
pub(crate) static FENCES: [(&str, FenceBody); 14] = [
    ("", FenceBody::Calls),
    ("json", FenceBody::Calls),
    ("json5", FenceBody::Calls),
    ("jsonc", FenceBody::Calls),
    ("xml", FenceBody::Calls),
    ("tool_call", FenceBody::Calls),
    ("tool_calls", FenceBody::Calls),
    ("function_call", FenceBody::Calls),
    ("tools", FenceBody::Calls),
    ("action", FenceBody::Calls),
    ("python", FenceBody::Python { wrapper: None }),
    ("py", FenceBody::Python { wrapper: None }),
    ("python3", FenceBody::Python { wrapper: None }),
    // Gemma's tool_code blocks: `print(default_api.get_weather(…))`.
    ("tool_code", FenceBody::Python { wrapper: Some("print") }),
];

/// A second word after a fence label: "```json action".
pub(crate) const FENCE_SECOND_WORD: &str = "action";

/// Parts of an end tag's name that make it close what is open when it matches no open
/// element (`</toolcall>` for `<tool_call>`).
pub(crate) const LOOSE_CLOSERS: &[&str] = &["call", "tool", "function"];
