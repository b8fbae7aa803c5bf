//! Model-native formats as rows: special-token pairs around calls. A row says where a
//! format's calls start and end, how a call's name and id are read, what the body is,
//! which tokens carry nothing, and which pairs open inside it. The engine reads every
//! row with the same machinery (`read::pair`); adding a format whose body kind exists
//! is a row here, a `catalog` entry and corpus cases.
//!
//! Rows are built once, at first use ([`PAIRS`]); a format file builds the same typed
//! rows at run time (`rows::file`), owned by the registry that holds them.

use std::sync::{Arc, LazyLock};

/// Text in a row.
pub(crate) type Text = Arc<str>;

/// A pair row, shared by the registries that hold it.
pub(crate) type Row = Arc<Pair>;

/// A marker that ends a name head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Consumed with the head: `[ARGS]` in `NAME[ARGS]{…}`.
    Consume(Text),
    /// Not consumed: it starts what follows (`{` in `call:NAME{…}`).
    Before(Text),
}

impl Marker {
    pub(crate) fn text(&self) -> &str {
        match self {
            Marker::Consume(text) | Marker::Before(text) => text,
        }
    }

    /// How many bytes of the head the marker takes.
    pub(crate) fn consumed(&self) -> usize {
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
    /// The name is the word the head starts with (letters, digits, `_`, `-`, `.`); what
    /// follows it up to the end marker carries nothing (a template's `(?P<name>\w+).*?`).
    Word,
}

/// How a call's name (and id) is read inside the pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Head {
    /// The body holds whole calls: JSON objects, markup or Python calls.
    Calls,
    /// `[PREFIX] NAME [ID_MARKER ID] END` before each call's arguments, the name written
    /// in `form`.
    Name { prefix: Text, ends: Box<[Marker]>, id: Option<Text>, form: NameForm },
    /// `NAME END` only addresses the message; the calls follow in the body.
    Recipient { ends: Box<[Marker]> },
}

/// What the body between the markers is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    /// Calls as in plain text: JSON envelopes, tool-call markup, Python calls.
    Calls,
    /// JSON objects `{"NAME": {args}}`, one key each (Apertus).
    NamedObjects,
    /// JSON-like values whose strings open and close with this token and hold raw text
    /// (Gemma 4's `<|"|>`, FunctionGemma's `<escape>`); keys are unquoted.
    TokenStrings(Text),
    /// Markup with this token before every tag; a tag inside a call is a parameter
    /// named by the tag (MiniMax-M3's `]<]minimax[>[`).
    NamespacedMarkup(Text),
    /// Arguments as key/value pairs between tokens, values raw and typed by the schema.
    ArgTokens(ArgTokens),
    /// Free-form input up to the end marker (Meta CWM's `<tool: NAME>\nINPUT\n</tool>`):
    /// a JSON object is the arguments; any other text, trimmed, is the value of the tool's
    /// one parameter (or its one required one), else of `key`.
    Freeform { key: Text },
}

/// The tokens of key/value arguments: `key KEY value VALUE end` (Solar Open 2's
/// `<|tool_arg:start|>city<|tool_arg:value|>Seoul<|tool_arg:end|>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgTokens {
    pub(crate) key: Text,
    pub(crate) value: Text,
    pub(crate) end: Text,
}

/// The start of the output may lack the start marker, the prompt having ended in it:
/// a declared tool's `NAME` then `end`, then its JSON arguments (Functionary v3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leading {
    pub(crate) end: Text,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pair {
    /// The registry id of the format's pairs (several rows may share it).
    pub(crate) id: Text,
    pub(crate) start: Text,
    /// End markers; none: the region ends at the first thing that is not a call.
    pub(crate) ends: Box<[Text]>,
    pub(crate) head: Head,
    pub(crate) body: Body,
    /// Tokens that carry nothing, inside calls too (Harmony's `<|constrain|>json`).
    pub(crate) skip: Box<[Text]>,
    /// Pairs that open inside this one (a DeepSeek call inside its calls section).
    pub(crate) inner: Box<[Row]>,
    pub(crate) leading: Option<Leading>,
    pub(crate) opens: Opens,
}

fn texts(list: &[&str]) -> Box<[Text]> {
    list.iter().map(|text| Text::from(*text)).collect()
}

fn consume(text: &str) -> Marker {
    Marker::Consume(text.into())
}

fn before(text: &str) -> Marker {
    Marker::Before(text.into())
}

/// A pair with a JSON (or markup, or Python) body and no head.
fn pair(id: &str, start: &str, ends: &[&str]) -> Pair {
    Pair {
        id: id.into(),
        start: start.into(),
        ends: texts(ends),
        head: Head::Calls,
        body: Body::Calls,
        skip: Box::new([]),
        inner: Box::new([]),
        leading: None,
        opens: Opens::Anywhere,
    }
}

/// A pair whose calls are `NAME END ARGS`.
fn named(id: &str, start: &str, ends: &[&str], prefix: &str, name_ends: Vec<Marker>) -> Pair {
    Pair {
        head: Head::Name {
            prefix: prefix.into(),
            ends: name_ends.into(),
            id: None,
            form: NameForm::Plain,
        },
        ..pair(id, start, ends)
    }
}

/// A section pair holding call pairs.
fn section(id: &str, start: &str, ends: &[&str], inner: &[&Row]) -> Pair {
    Pair { inner: inner.iter().map(|row| Arc::clone(row)).collect(), ..pair(id, start, ends) }
}

/// Every native pair, in the order the registry tries them.
pub(crate) static PAIRS: LazyLock<Box<[Row]>> = LazyLock::new(table);

/// The table of native pairs.
fn table() -> Box<[Row]> {
    let deepseek_call = Arc::new(named(
        "deepseek_v3",
        "<｜tool▁call▁begin｜>",
        &["<｜tool▁call▁end｜>"],
        "function<｜tool▁sep｜>",
        vec![consume("<｜tool▁sep｜>"), consume("\n")],
    ));
    let step3_call = Arc::new(named(
        "step3",
        "<｜tool_call_begin｜>",
        &["<｜tool_call_end｜>"],
        "function<｜tool_sep｜>",
        vec![consume("<｜tool_sep｜>"), consume("\n")],
    ));
    let kimi_call = Arc::new(Pair {
        head: Head::Name {
            prefix: "".into(),
            ends: Box::new([consume("<|tool_call_argument_begin|>")]),
            id: None,
            form: NameForm::Indexed,
        },
        ..pair("kimi_k2", "<|tool_call_begin|>", &["<|tool_call_end|>"])
    });

    // gpt-oss Harmony: `<|start|>assistant<|channel|>commentary to=functions.NAME
    // <|constrain|>json<|message|>{…}<|call|>`; the recipient may also sit in the role
    // header, the call may be on the analysis channel, and the content type may be written
    // `<|constrain|>json`, ` json` or not at all. LLM-jp-4.1 writes a space after each
    // token (`<|channel|> commentary`, `<|constrain|>  json<|message|> {…}`).
    let harmony_call = Pair {
        skip: texts(&[
            " ",
            "<|channel|>commentary",
            "<|channel|>analysis",
            "<|channel|> commentary",
            "<|channel|> analysis",
            "<|constrain|>json",
            "<|constrain|>",
            "json<|message|>",
            "<|message|>",
        ]),
        ..named("gpt_oss", "to=functions.", &["<|call|>"], "", vec![before(" "), before("<|")])
    };
    let with_start = |pair: &Pair, start: &str, opens: Opens| -> Row {
        Arc::new(Pair { start: start.into(), opens, ..pair.clone() })
    };
    // A Harmony call at the start of the output, whose `<|start|>assistant` the prompt
    // wrote: its header goes on with the recipient or the channel.
    let harmony_head_calls = [
        with_start(&harmony_call, " to=functions.", Opens::AtStart),
        with_start(&harmony_call, "to=functions.", Opens::AtStart),
        with_start(&harmony_call, "<|channel|>commentary to=functions.", Opens::Anywhere),
        with_start(&harmony_call, "<|channel|>analysis to=functions.", Opens::Anywhere),
    ];
    // Muse Glimmer: `<|start|>assistant to=NAME<|message|><atem:function_calls>…<|eot|>`;
    // the recipient only addresses the message, the markup holds the calls.
    let muse_message = Arc::new(Pair {
        head: Head::Recipient { ends: Box::new([consume("<|message|>")]) },
        ..pair("gpt_oss", "to=", &["<|eot|>", "<|eom|>"])
    });
    // LLM-jp-4.1: Harmony with a space after each special token, `<|start|> assistant
    // to=functions.NAME<|channel|> commentary <|constrain|>  json<|message|> {…}`; every
    // call but the last ends with `<|end|>` (the last one's `<|call|>` stops the generation).
    let llm_jp_call = Pair {
        id: "llm_jp4".into(),
        ends: texts(&["<|call|>", "<|end|>"]),
        ..harmony_call.clone()
    };
    let llm_jp_call_row = Arc::new(llm_jp_call.clone());
    let llm_jp = Pair {
        skip: texts(&[" ", "<|channel|> commentary", "<|channel|> analysis"]),
        ..section("llm_jp4", "<|start|> assistant", &[], &[&llm_jp_call_row])
    };
    let harmony_call = Arc::new(harmony_call);
    let harmony = Pair {
        skip: texts(&[" ", "<|channel|>commentary", "<|channel|>analysis"]),
        ..section("gpt_oss", "<|start|>assistant", &[], &[&harmony_call, &muse_message])
    };
    let mistral = Pair {
        head: Head::Name {
            prefix: "".into(),
            ends: Box::new([consume("[ARGS]"), before("{")]),
            id: Some("[CALL_ID]".into()),
            form: NameForm::Plain,
        },
        ..pair("mistral", "[TOOL_CALLS]", &[])
    };
    // PLaMo 3: `<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>NAME
    // <|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>` (then, as engines
    // constrain it, `<|plamo:constrain|>json<|plamo:msg|>`) `{json}<|plamo:end_tool_arguments:plamo|>
    // <|plamo:end_tool_request:plamo|>`, inside `<|plamo:begin_tool_requests:plamo|>`.
    let plamo_call = Arc::new(Pair {
        skip: texts(&[
            "<|plamo:begin_tool_arguments:plamo|>",
            "<|plamo:constrain|>json",
            "<|plamo:msg|>",
            "<|plamo:end_tool_arguments:plamo|>",
        ]),
        ..named(
            "plamo3",
            "<|plamo:begin_tool_request:plamo|>",
            &["<|plamo:end_tool_request:plamo|>"],
            "<|plamo:begin_tool_name:plamo|>",
            vec![consume("<|plamo:end_tool_name:plamo|>")],
        )
    });
    // HyperCLOVAX-SEED-Think-14B: the assistant turn's header ` -> tool/function_call\n`,
    // then a JSON list of calls, then `<|im_end|>`; a reply that began as text ends that
    // turn and opens a new one for the calls.
    let hyperclovax = pair("hyperclovax", "-> tool/function_call\n", &["<|im_end|>"]);

    let rows = vec![
        pair("longcat", "<longcat_tool_call>", &["</longcat_tool_call>"]).into(),
        // Step-Audio 2: `<tool_call>function\nNAME\n{json}</tool_call>` (before the markup
        // reader's `<tool_call>`, which the registry tries after every pair).
        named("step_audio2", "<tool_call>function\n", &["</tool_call>"], "", vec![consume("\n")])
            .into(),
        mistral.into(),
        pair("llama3_json", "<|python_tag|>", &["<|eom_id|>", "<|eot_id|>"]).into(),
        pair("llama4_pythonic", "<|python_start|>", &["<|python_end|>"]).into(),
        pair("lfm2", "<|tool_call_start|>", &["<|tool_call_end|>"]).into(),
        pair("granite", "<|tool_call|>", &[]).into(),
        pair("nemotron_nano_v2", "<TOOLCALL>", &["</TOOLCALL>"]).into(),
        pair("internlm", "<|action_start|><|plugin|>", &["<|action_end|>"]).into(),
        pair("internlm", "<|action_start|> <|plugin|>", &["<|action_end|>"]).into(),
        pair("cohere", "<|START_ACTION|>", &["<|END_ACTION|>"]).into(),
        harmony.into(),
        Arc::clone(&harmony_head_calls[0]),
        Arc::clone(&harmony_head_calls[1]),
        Arc::clone(&harmony_head_calls[2]),
        Arc::clone(&harmony_head_calls[3]),
        llm_jp.into(),
        with_start(&llm_jp_call, "<|channel|> commentary to=functions.", Opens::Anywhere),
        Pair {
            body: Body::NamedObjects,
            ..pair("apertus", "<|tools_prefix|>", &["<|tools_suffix|>"])
        }
        .into(),
        pair("gigachat3", "<|function_call|>", &[]).into(),
        Pair {
            body: Body::NamespacedMarkup("]<]minimax[>[".into()),
            ..pair("minimax_m3", "]<]minimax[>[<tool_call>", &["]<]minimax[>[</tool_call>"])
        }
        .into(),
        // Functionary v3.2: `>>>NAME\n{json}`; `>>>all\n` ends the calls (text follows).
        Pair {
            leading: Some(Leading { end: "\n".into() }),
            ..named("functionary_v3_2", ">>>", &[">>>all\n"], "", vec![consume("\n")])
        }
        .into(),
        // Inkling: `<|message_model|>NAME<|content_invoke_tool_json|>{json}<|end_message|>`.
        Pair {
            head: Head::Recipient { ends: Box::new([consume("<|content_invoke_tool_json|>")]) },
            ..pair("inkling", "<|message_model|>", &["<|end_message|>"])
        }
        .into(),
        // Gemma 4 and FunctionGemma: `START call:NAME{key:TOKENtextTOKEN,n:1} END`.
        Pair {
            body: Body::TokenStrings("<|\"|>".into()),
            ..named("gemma4", "<|tool_call>", &["<tool_call|>"], "call:", vec![before("{")])
        }
        .into(),
        Pair {
            body: Body::TokenStrings("<escape>".into()),
            ..named(
                "functiongemma",
                "<start_function_call>",
                &["<end_function_call>"],
                "call:",
                vec![before("{")],
            )
        }
        .into(),
        // Solar Open 2: `<|tool_call:start|>NAME\n` then `<|tool_arg:start|>KEY<|tool_arg:value|>
        // VALUE<|tool_arg:end|>` per argument, then `<|tool_call:end|>`.
        Pair {
            body: Body::ArgTokens(ArgTokens {
                key: "<|tool_arg:start|>".into(),
                value: "<|tool_arg:value|>".into(),
                end: "<|tool_arg:end|>".into(),
            }),
            ..named(
                "solar_open2",
                "<|tool_call:start|>",
                &["<|tool_call:end|>"],
                "",
                vec![consume("\n"), before("<|tool_arg:start|>"), before("<|tool_call:end|>")],
            )
        }
        .into(),
        section(
            "deepseek_v3",
            "<｜tool▁calls▁begin｜>",
            &["<｜tool▁calls▁end｜>"],
            &[&deepseek_call],
        )
        .into(),
        Arc::clone(&deepseek_call),
        section("step3", "<｜tool_calls_begin｜>", &["<｜tool_calls_end｜>"], &[&step3_call])
            .into(),
        Arc::clone(&step3_call),
        section(
            "kimi_k2",
            "<|tool_calls_section_begin|>",
            &["<|tool_calls_section_end|>"],
            &[&kimi_call],
        )
        .into(),
        section(
            "kimi_k2",
            "<|tool_call_section_begin|>",
            &["<|tool_call_section_end|>"],
            &[&kimi_call],
        )
        .into(),
        Arc::clone(&kimi_call),
        // Meta CWM: `<tool: NAME>\nINPUT\n</tool>`, the input free-form.
        Pair {
            body: Body::Freeform { key: "command".into() },
            ..named("cwm", "<tool:", &["</tool>"], "", vec![consume(">")])
        }
        .into(),
        with_start(
            &hyperclovax,
            "<|im_end|>\n<|im_start|>assistant -> tool/function_call\n",
            Opens::Anywhere,
        ),
        with_start(&hyperclovax, "<|im_start|>assistant -> tool/function_call\n", Opens::Anywhere),
        with_start(&hyperclovax, " -> tool/function_call\n", Opens::AtStart),
        hyperclovax.into(),
        // openPangu: `[unused11][{json}, …][unused12]` (its `<|tool_call_start|>` form is LFM2's).
        pair("openpangu", "[unused11]", &["[unused12]"]).into(),
        // RWKV: a `**Tool Call:**` line before a ```json fence holding the call.
        pair("rwkv", "**Tool Call:**", &[]).into(),
        section(
            "plamo3",
            "<|plamo:begin_tool_requests:plamo|>",
            &["<|plamo:end_tool_requests:plamo|>"],
            &[&plamo_call],
        )
        .into(),
        plamo_call,
    ];
    rows.into()
}
