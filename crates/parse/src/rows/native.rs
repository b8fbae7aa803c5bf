//! Model-native formats as rows: special-token pairs around calls. A row says where a
//! format's calls start and end, how a call's name and id are read, what the body is,
//! which tokens carry nothing, and which pairs open inside it. The engine reads every
//! row with the same machinery (`read::pair`); adding a format whose body kind exists
//! is a row here, a `catalog` entry and corpus cases.

/// A marker that ends a name head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Consumed with the head: `[ARGS]` in `NAME[ARGS]{…}`.
    Consume(&'static str),
    /// Not consumed: it starts what follows (`{` in `call:NAME{…}`).
    Before(&'static str),
}

impl Marker {
    pub(crate) fn text(self) -> &'static str {
        match self {
            Marker::Consume(text) | Marker::Before(text) => text,
        }
    }

    /// How many bytes of the head the marker takes.
    pub(crate) fn consumed(self) -> usize {
        match self {
            Marker::Consume(text) => text.len(),
            Marker::Before(_) => 0,
        }
    }
}

/// How the name a head reads is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameForm {
    /// The name as written.
    Plain,
    /// `functions.NAME:IDX` (Kimi K2): the name is `NAME` and the whole head is the id;
    /// a name without the index or the `functions.` prefix is read as written.
    Indexed,
}

/// How a call's name (and id) is read inside the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Head {
    /// The body holds whole calls: JSON objects, markup or Python calls.
    Calls,
    /// `[PREFIX] NAME [ID_MARKER ID] END` before each call's arguments, the name written
    /// in `form`.
    Name { prefix: &'static str, ends: &'static [Marker], id: Option<&'static str>, form: NameForm },
    /// `NAME END` only addresses the message; the calls follow in the body.
    Recipient { ends: &'static [Marker] },
}

/// What the body between the markers is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// Calls as in plain text: JSON envelopes, tool-call markup, Python calls.
    Calls,
    /// JSON objects `{"NAME": {args}}`, one key each (Apertus).
    NamedObjects,
    /// JSON-like values whose strings open and close with this token and hold raw text
    /// (Gemma 4's `<|"|>`, FunctionGemma's `<escape>`); keys are unquoted.
    TokenStrings(&'static str),
    /// Markup with this token before every tag; a tag inside a call is a parameter
    /// named by the tag (MiniMax-M3's `]<]minimax[>[`).
    NamespacedMarkup(&'static str),
    /// Arguments as key/value pairs between tokens, values raw and typed by the schema.
    ArgTokens(&'static ArgTokens),
    /// Free-form input up to the end marker (Meta CWM's `<tool: NAME>\nINPUT\n</tool>`):
    /// a JSON object is the arguments; any other text, trimmed, is the value of the tool's
    /// one parameter (or its one required one), else of `key`.
    Freeform { key: &'static str },
}

/// The tokens of key/value arguments: `key KEY value VALUE end` (Solar Open 2's
/// `<|tool_arg:start|>city<|tool_arg:value|>Seoul<|tool_arg:end|>`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ArgTokens {
    pub(crate) key: &'static str,
    pub(crate) value: &'static str,
    pub(crate) end: &'static str,
}

/// The start of the output may lack the start marker, the prompt having ended in it:
/// a declared tool's `NAME` then `end`, then its JSON arguments (Functionary v3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leading {
    pub(crate) end: &'static str,
}

/// Where a pair's start marker opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Opens {
    /// Wherever it occurs.
    Anywhere,
    /// Only at the very start of the output: the prompt ended in the header this marker
    /// continues (gpt-oss's ` to=functions.NAME` after the prompt's `<|start|>assistant`).
    AtStart,
}

/// One marker pair of a model-native format.
#[derive(Debug)]
pub(crate) struct Pair {
    /// The registry id of the format's pairs (several rows may share it).
    pub(crate) id: &'static str,
    pub(crate) start: &'static str,
    /// End markers; none: the region ends at the first thing that is not a call.
    pub(crate) ends: &'static [&'static str],
    pub(crate) head: Head,
    pub(crate) body: Body,
    /// Tokens that carry nothing, inside calls too (Harmony's `<|constrain|>json`).
    pub(crate) skip: &'static [&'static str],
    /// Pairs that open inside this one (a DeepSeek call inside its calls section).
    pub(crate) inner: &'static [&'static Pair],
    pub(crate) leading: Option<Leading>,
    pub(crate) opens: Opens,
}

/// A pair with a JSON (or markup, or Python) body and no head.
const fn pair(id: &'static str, start: &'static str, ends: &'static [&'static str]) -> Pair {
    Pair {
        id,
        start,
        ends,
        head: Head::Calls,
        body: Body::Calls,
        skip: &[],
        inner: &[],
        leading: None,
        opens: Opens::Anywhere,
    }
}

/// A pair whose calls are `NAME END ARGS`.
const fn named(
    id: &'static str,
    start: &'static str,
    ends: &'static [&'static str],
    prefix: &'static str,
    name_ends: &'static [Marker],
) -> Pair {
    Pair {
        head: Head::Name { prefix, ends: name_ends, id: None, form: NameForm::Plain },
        ..pair(id, start, ends)
    }
}

/// A section pair holding call pairs.
const fn section(
    id: &'static str,
    start: &'static str,
    ends: &'static [&'static str],
    inner: &'static [&'static Pair],
) -> Pair {
    Pair { inner, ..pair(id, start, ends) }
}

static DEEPSEEK_CALL: Pair = named(
    "deepseek_v3",
    "<｜tool▁call▁begin｜>",
    &["<｜tool▁call▁end｜>"],
    "function<｜tool▁sep｜>",
    &[Marker::Consume("<｜tool▁sep｜>"), Marker::Consume("\n")],
);

static STEP3_CALL: Pair = named(
    "step3",
    "<｜tool_call_begin｜>",
    &["<｜tool_call_end｜>"],
    "function<｜tool_sep｜>",
    &[Marker::Consume("<｜tool_sep｜>"), Marker::Consume("\n")],
);

static KIMI_CALL: Pair = Pair {
    head: Head::Name {
        prefix: "",
        ends: &[Marker::Consume("<|tool_call_argument_begin|>")],
        id: None,
        form: NameForm::Indexed,
    },
    ..pair("kimi_k2", "<|tool_call_begin|>", &["<|tool_call_end|>"])
};

/// gpt-oss Harmony: `<|start|>assistant<|channel|>commentary to=functions.NAME
/// <|constrain|>json<|message|>{…}<|call|>`; the recipient may also sit in the role
/// header, the call may be on the analysis channel, and the content type may be written
/// `<|constrain|>json`, ` json` or not at all. LLM-jp-4.1 writes a space after each token
/// (`<|channel|> commentary`, `<|constrain|>  json<|message|> {…}`).
const HARMONY_SKIP: &[&str] = &[
    " ",
    "<|channel|>commentary",
    "<|channel|>analysis",
    "<|channel|> commentary",
    "<|channel|> analysis",
    "<|constrain|>json",
    "<|constrain|>",
    "json<|message|>",
    "<|message|>",
];

static HARMONY_CALL: Pair = Pair {
    skip: HARMONY_SKIP,
    ..named(
        "gpt_oss",
        "to=functions.",
        &["<|call|>"],
        "",
        &[Marker::Before(" "), Marker::Before("<|")],
    )
};

/// A Harmony call at the start of the output, whose `<|start|>assistant` the prompt
/// wrote: its header goes on with the recipient or the channel.
static HARMONY_HEAD_CALLS: [Pair; 4] = [
    Pair { start: " to=functions.", opens: Opens::AtStart, ..HARMONY_CALL },
    Pair { start: "to=functions.", opens: Opens::AtStart, ..HARMONY_CALL },
    Pair { start: "<|channel|>commentary to=functions.", ..HARMONY_CALL },
    Pair { start: "<|channel|>analysis to=functions.", ..HARMONY_CALL },
];

/// Muse Glimmer: `<|start|>assistant to=NAME<|message|><atem:function_calls>…<|eot|>`;
/// the recipient only addresses the message, the markup holds the calls.
static MUSE_MESSAGE: Pair = Pair {
    head: Head::Recipient { ends: &[Marker::Consume("<|message|>")] },
    ..pair("gpt_oss", "to=", &["<|eot|>", "<|eom|>"])
};

/// LLM-jp-4.1: Harmony with a space after each special token, `<|start|> assistant
/// to=functions.NAME<|channel|> commentary <|constrain|>  json<|message|> {…}`; every call
/// but the last ends with `<|end|>` (the last one's `<|call|>` stops the generation).
static LLM_JP_CALL: Pair = Pair { id: "llm_jp4", ends: &["<|call|>", "<|end|>"], ..HARMONY_CALL };

static LLM_JP: Pair = Pair {
    skip: &[" ", "<|channel|> commentary", "<|channel|> analysis"],
    inner: &[&LLM_JP_CALL],
    ..pair("llm_jp4", "<|start|> assistant", &[])
};

static HARMONY: Pair = Pair {
    skip: &[" ", "<|channel|>commentary", "<|channel|>analysis"],
    inner: &[&HARMONY_CALL, &MUSE_MESSAGE],
    ..pair("gpt_oss", "<|start|>assistant", &[])
};

static MISTRAL: Pair = Pair {
    head: Head::Name {
        prefix: "",
        ends: &[Marker::Consume("[ARGS]"), Marker::Before("{")],
        id: Some("[CALL_ID]"),
        form: NameForm::Plain,
    },
    ..pair("mistral", "[TOOL_CALLS]", &[])
};

const MINIMAX_TOKEN: &str = "]<]minimax[>[";

/// PLaMo 3: `<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>NAME
/// <|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>` (then, as engines
/// constrain it, `<|plamo:constrain|>json<|plamo:msg|>`) `{json}<|plamo:end_tool_arguments:plamo|>
/// <|plamo:end_tool_request:plamo|>`, inside `<|plamo:begin_tool_requests:plamo|>`.
static PLAMO_CALL: Pair = Pair {
    skip: &[
        "<|plamo:begin_tool_arguments:plamo|>",
        "<|plamo:constrain|>json",
        "<|plamo:msg|>",
        "<|plamo:end_tool_arguments:plamo|>",
    ],
    ..named(
        "plamo3",
        "<|plamo:begin_tool_request:plamo|>",
        &["<|plamo:end_tool_request:plamo|>"],
        "<|plamo:begin_tool_name:plamo|>",
        &[Marker::Consume("<|plamo:end_tool_name:plamo|>")],
    )
};

static SOLAR_ARGS: ArgTokens =
    ArgTokens { key: "<|tool_arg:start|>", value: "<|tool_arg:value|>", end: "<|tool_arg:end|>" };

/// HyperCLOVAX-SEED-Think-14B: the assistant turn's header ` -> tool/function_call\n`,
/// then a JSON list of calls, then `<|im_end|>`; a reply that began as text ends that turn
/// and opens a new one for the calls.
static HYPERCLOVAX: Pair = pair("hyperclovax", "-> tool/function_call\n", &["<|im_end|>"]);

/// Every native pair, in the order the registry tries them.
pub(crate) static PAIRS: [&Pair; 42] = [
    &pair("longcat", "<longcat_tool_call>", &["</longcat_tool_call>"]),
    // Step-Audio 2: `<tool_call>function\nNAME\n{json}</tool_call>` (before the markup
    // reader's `<tool_call>`, which the registry tries after every pair).
    &named("step_audio2", "<tool_call>function\n", &["</tool_call>"], "", &[Marker::Consume("\n")]),
    &MISTRAL,
    &pair("llama3_json", "<|python_tag|>", &["<|eom_id|>", "<|eot_id|>"]),
    &pair("llama4_pythonic", "<|python_start|>", &["<|python_end|>"]),
    &pair("lfm2", "<|tool_call_start|>", &["<|tool_call_end|>"]),
    &pair("granite", "<|tool_call|>", &[]),
    &pair("nemotron_nano_v2", "<TOOLCALL>", &["</TOOLCALL>"]),
    &pair("internlm", "<|action_start|><|plugin|>", &["<|action_end|>"]),
    &pair("internlm", "<|action_start|> <|plugin|>", &["<|action_end|>"]),
    &pair("cohere", "<|START_ACTION|>", &["<|END_ACTION|>"]),
    &HARMONY,
    &HARMONY_HEAD_CALLS[0],
    &HARMONY_HEAD_CALLS[1],
    &HARMONY_HEAD_CALLS[2],
    &HARMONY_HEAD_CALLS[3],
    &LLM_JP,
    &Pair { start: "<|channel|> commentary to=functions.", ..LLM_JP_CALL },
    &Pair {
        body: Body::NamedObjects,
        ..pair("apertus", "<|tools_prefix|>", &["<|tools_suffix|>"])
    },
    &pair("gigachat3", "<|function_call|>", &[]),
    &Pair {
        body: Body::NamespacedMarkup(MINIMAX_TOKEN),
        ..pair("minimax_m3", "]<]minimax[>[<tool_call>", &["]<]minimax[>[</tool_call>"])
    },
    // Functionary v3.2: `>>>NAME\n{json}`; `>>>all\n` ends the calls (text follows).
    &Pair {
        leading: Some(Leading { end: "\n" }),
        ..named("functionary_v3_2", ">>>", &[">>>all\n"], "", &[Marker::Consume("\n")])
    },
    // Inkling: `<|message_model|>NAME<|content_invoke_tool_json|>{json}<|end_message|>`.
    &Pair {
        head: Head::Recipient { ends: &[Marker::Consume("<|content_invoke_tool_json|>")] },
        ..pair("inkling", "<|message_model|>", &["<|end_message|>"])
    },
    // Gemma 4 and FunctionGemma: `START call:NAME{key:TOKENtextTOKEN,n:1} END`.
    &Pair {
        body: Body::TokenStrings("<|\"|>"),
        ..named("gemma4", "<|tool_call>", &["<tool_call|>"], "call:", &[Marker::Before("{")])
    },
    &Pair {
        body: Body::TokenStrings("<escape>"),
        ..named(
            "functiongemma",
            "<start_function_call>",
            &["<end_function_call>"],
            "call:",
            &[Marker::Before("{")],
        )
    },
    // Solar Open 2: `<|tool_call:start|>NAME\n` then `<|tool_arg:start|>KEY<|tool_arg:value|>
    // VALUE<|tool_arg:end|>` per argument, then `<|tool_call:end|>`.
    &Pair {
        body: Body::ArgTokens(&SOLAR_ARGS),
        ..named(
            "solar_open2",
            "<|tool_call:start|>",
            &["<|tool_call:end|>"],
            "",
            &[
                Marker::Consume("\n"),
                Marker::Before("<|tool_arg:start|>"),
                Marker::Before("<|tool_call:end|>"),
            ],
        )
    },
    &section("deepseek_v3", "<｜tool▁calls▁begin｜>", &["<｜tool▁calls▁end｜>"], &[&DEEPSEEK_CALL]),
    &DEEPSEEK_CALL,
    &section("step3", "<｜tool_calls_begin｜>", &["<｜tool_calls_end｜>"], &[&STEP3_CALL]),
    &STEP3_CALL,
    &section(
        "kimi_k2",
        "<|tool_calls_section_begin|>",
        &["<|tool_calls_section_end|>"],
        &[&KIMI_CALL],
    ),
    &section(
        "kimi_k2",
        "<|tool_call_section_begin|>",
        &["<|tool_call_section_end|>"],
        &[&KIMI_CALL],
    ),
    &KIMI_CALL,
    // Meta CWM: `<tool: NAME>\nINPUT\n</tool>`, the input free-form.
    &Pair {
        body: Body::Freeform { key: "command" },
        ..named("cwm", "<tool:", &["</tool>"], "", &[Marker::Consume(">")])
    },
    &Pair { start: "<|im_end|>\n<|im_start|>assistant -> tool/function_call\n", ..HYPERCLOVAX },
    &Pair { start: "<|im_start|>assistant -> tool/function_call\n", ..HYPERCLOVAX },
    &Pair { start: " -> tool/function_call\n", opens: Opens::AtStart, ..HYPERCLOVAX },
    &HYPERCLOVAX,
    // openPangu: `[unused11][{json}, …][unused12]` (its `<|tool_call_start|>` form is LFM2's).
    &pair("openpangu", "[unused11]", &["[unused12]"]),
    // RWKV: a `**Tool Call:**` line before a ```json fence holding the call.
    &pair("rwkv", "**Tool Call:**", &[]),
    &section(
        "plamo3",
        "<|plamo:begin_tool_requests:plamo|>",
        &["<|plamo:end_tool_requests:plamo|>"],
        &[&PLAMO_CALL],
    ),
    &PLAMO_CALL,
];
