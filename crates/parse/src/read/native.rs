//! Model-native formats built from marker pairs: special tokens around JSON, Python
//! or markup bodies (`[TOOL_CALLS]`, `<|tool_call_start|>`, DeepSeek's and Kimi's
//! sections of calls), and the name-then-arguments calls some of them hold
//! (`get_weather[ARGS]{…}`, `functions.get_weather:0<|tool_call_argument_begin|>{…}`).
//!
//! Each format is a [`TagPair`] the registry holds by default; the engine reads the
//! body with the same machinery as every other region.

use std::sync::{Arc, LazyLock};

use crate::dialect::{Dialects, TagPair};

/// How far toolshim reads a model-native format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Support {
    /// Calls, markers and reasoning come out as the model meant them.
    Full,
    /// Calls come out; the note says what does not.
    Partial(&'static str),
    /// Not read yet; the note says what is missing.
    Missing(&'static str),
}

/// A model-native tool-call format (ids as in the catalog `F1`–`F38`, `L1`–`L9`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The catalog id: `F24`.
    pub catalog: &'static str,
    /// The format's name, as serving stacks call it: `deepseek_v3`.
    pub id: &'static str,
    /// The registry entries (dialect ids) that read it; [`Format::dialects`] builds a
    /// registry of just these.
    pub(crate) dialects: &'static [&'static str],
    /// The model families that write it.
    pub models: &'static str,
    /// Which part of toolshim reads it.
    pub read_by: &'static str,
    /// How far it is read.
    pub support: Support,
}

const fn full(
    catalog: &'static str,
    id: &'static str,
    dialects: &'static [&'static str],
    models: &'static str,
    read_by: &'static str,
) -> Format {
    Format { catalog, id, dialects, models, read_by, support: Support::Full }
}

impl Format {
    /// The format with this id (`deepseek_v3`) or catalog id (`F24`).
    pub fn find(id: &str) -> Option<&'static Format> {
        FORMATS.iter().find(|f| f.id == id || f.catalog.eq_ignore_ascii_case(id))
    }

    /// A registry that reads this format only (`None` for a format toolshim does not
    /// read yet). Pinning a format turns auto-detection off.
    pub fn dialects(&self) -> Option<Dialects> {
        if self.dialects.is_empty() {
            return None;
        }
        let all = Dialects::default();
        let mut pinned = Dialects::none();
        pinned.keep_from(&all, self.dialects);
        Some(pinned)
    }

    /// The format the model with this id writes, from [`MODELS`] (matched as a
    /// case-insensitive substring; the first match wins).
    pub fn for_model(model: &str) -> Option<&'static Format> {
        let model = model.to_ascii_lowercase();
        MODELS
            .iter()
            .find(|(pattern, _)| model.contains(pattern))
            .and_then(|(_, id)| Format::find(id))
    }
}

/// Model ids (lowercase substrings, most specific first) and the format each writes.
pub const MODELS: &[(&str, &str)] = &[
    ("qwen3-coder", "qwen3_coder"),
    ("qwen3.5", "qwen3_coder"),
    ("qwen3.6", "qwen3_coder"),
    ("qwen", "hermes"),
    ("qwq", "hermes"),
    ("hermes", "hermes"),
    ("deepseek-v3.2", "deepseek_v32"),
    ("deepseek-v4.1", "deepseek_v41"),
    ("deepseek-v4", "deepseek_v32"),
    ("deepseek-v3.1", "deepseek_v31"),
    ("deepseek", "deepseek_v3"),
    ("kimi-k2", "kimi_k2"),
    ("glm-4", "glm45"),
    ("glm-5", "glm45"),
    ("magistral", "mistral_v11"),
    ("devstral", "mistral_v11"),
    ("ministral", "mistral_v11"),
    ("mistral-small-3.2", "mistral_v11"),
    ("mistral", "mistral"),
    ("llama-4", "pythonic"),
    ("llama-3", "llama3_json"),
    ("llama3", "llama3_json"),
    ("phi-4", "phi4_mini_json"),
    ("granite-20b-functioncalling", "granite_20b_fc"),
    ("granite-3", "granite"),
    ("granite", "hermes"),
    ("lfm2", "lfm2"),
    ("olmo-3", "olmo3"),
    ("xlam", "xlam"),
    ("jamba", "jamba"),
    ("minimax-m2", "minimax_m2"),
    ("minimax-m1", "minimax_m1"),
    ("nemotron-nano-9b-v2", "nemotron_nano_v2"),
    ("internlm", "internlm"),
    ("command-r7b", "cohere"),
    ("command-a", "cohere"),
    ("command-r", "command_r"),
    ("gigachat", "gigachat3"),
    ("functionary-small-v3.2", "functionary_v3_2"),
    ("functionary-medium-v3.2", "functionary_v3_2"),
    ("functionary", "functionary_v3_1"),
    ("seed-oss", "seed_oss"),
    ("step3", "step3"),
    ("longcat", "longcat"),
    ("minicpm", "minicpm5"),
    ("dots", "dots"),
    ("functiongemma", "functiongemma"),
    ("gemma-4", "gemma4"),
    ("gemma4", "gemma4"),
    ("kimi-k3", "kimi_k3"),
    ("minimax-m3", "minimax_m3"),
    ("k2-horizon", "k2_horizon"),
    ("muse", "muse"),
];

/// Every catalogued format, and how toolshim reads it.
pub(crate) const FORMATS: &[Format] = &[
    full(
        "F1",
        "hermes",
        &["markup", "fenced", "json"],
        "Hermes 2 Pro/3, Qwen2.5/3, QwQ, Granite 4, many fine-tunes",
        "markup: <tool_call> + JSON",
    ),
    full("F2", "longcat", &["longcat"], "Meituan LongCat-Flash", "native pair <longcat_tool_call>"),
    full(
        "F3",
        "mistral",
        &["mistral"],
        "Mistral 7B v0.3, Nemo, Small 3.0/3.1, Codestral",
        "native pair [TOOL_CALLS] + JSON array",
    ),
    full(
        "F4",
        "mistral_v11",
        &["mistral"],
        "Magistral, Devstral, Ministral 3, Mistral Small 3.2",
        "native pair [TOOL_CALLS] name[CALL_ID]id[ARGS]{…}",
    ),
    full(
        "F5",
        "llama3_json",
        &["llama3_json", "json"],
        "Llama 3.1/3.2/3.3, Llama 4 JSON",
        "native pair <|python_tag|> + `;`-separated JSON",
    ),
    Format {
        catalog: "F6",
        id: "llama3_builtin",
        dialects: &["llama3_json", "python"],
        models: "Llama 3.1 built-in tools",
        read_by: "native pair <|python_tag|> + Python call",
        support: Support::Full,
    },
    full(
        "F7",
        "pythonic",
        &["python", "llama4_pythonic"],
        "Llama 3.2/4 pythonic, ToolACE",
        "python list, <|python_start|> pair",
    ),
    full(
        "F8",
        "olmo3",
        &["markup", "python"],
        "AllenAI OLMo 3",
        "markup <function_calls> + Python calls",
    ),
    full(
        "F9",
        "lfm2",
        &["lfm2", "python"],
        "Liquid LFM2/LFM2.5",
        "native pair <|tool_call_start|> + Python or JSON list",
    ),
    full(
        "F10",
        "granite",
        &["granite", "markup"],
        "IBM Granite 3.0/3.1",
        "native pair <|tool_call|> or <tool_call> + JSON array",
    ),
    full(
        "F11",
        "granite_20b_fc",
        &["markup"],
        "granite-20b-functioncalling",
        "markup <function_call> + JSON",
    ),
    Format {
        catalog: "F12",
        id: "phi4_mini_json",
        dialects: &["json"],
        models: "Phi-4-mini, FireFunction v2",
        read_by: "json: the array after functools",
        support: Support::Partial("the `functools` prefix stays text"),
    },
    full("F13", "xlam", &["json", "fenced"], "Salesforce xLAM", "json: bare array"),
    full(
        "F14",
        "jamba",
        &["markup"],
        "AI21 Jamba, Hunyuan-A13B, Apriel 1.5",
        "markup <tool_calls> + JSON array",
    ),
    full(
        "F15",
        "minimax_m1",
        &["markup"],
        "MiniMax-M1",
        "markup <tool_calls> + one JSON object per line",
    ),
    full(
        "F16",
        "nemotron_nano_v2",
        &["nemotron_nano_v2"],
        "NVIDIA Nemotron Nano v2",
        "native pair <TOOLCALL>",
    ),
    full(
        "F17",
        "internlm",
        &["internlm"],
        "InternLM2/2.5, Intern-S1",
        "native pair <|action_start|><|plugin|>",
    ),
    Format {
        catalog: "F18",
        id: "cohere",
        dialects: &["cohere"],
        models: "Command R7B, Command A, Cohere2 MoE",
        read_by: "native pair <|START_ACTION|>; tool_call_id as id; <|START_THINKING|> is reasoning",
        support: Support::Full,
    },
    Format {
        catalog: "F19",
        id: "command_r",
        dialects: &["fenced"],
        models: "Command R/R+ (2024)",
        read_by: "fenced: Action: + json fence",
        support: Support::Partial("the `Action:` line stays text"),
    },
    Format {
        catalog: "F20",
        id: "apertus",
        dialects: &["apertus"],
        models: "Swiss AI Apertus",
        read_by: "native pair <|tools_prefix|>; single-key objects {\"NAME\": {args}}",
        support: Support::Full,
    },
    Format {
        catalog: "F21",
        id: "gigachat3",
        dialects: &["gigachat3", "json"],
        models: "GigaChat 3/3.1",
        read_by: "native pair <|function_call|>; JSON",
        support: Support::Partial("v3 `function call<|role_sep|>` stays text around the call"),
    },
    full(
        "F22",
        "functionary_v3_1",
        &["markup"],
        "Functionary v3.1",
        "markup <function=NAME> + JSON",
    ),
    Format {
        catalog: "F23",
        id: "functionary_v3_2",
        dialects: &["functionary_v3_2", "json"],
        models: "Functionary v3.2",
        read_by: "native pair >>>NAME\\n{json}; a declared tool's NAME\\n{json} at the start of the output; >>>all is text",
        support: Support::Partial("a leading `all` recipient line stays text"),
    },
    full(
        "F24",
        "deepseek_v3",
        &["deepseek_v3"],
        "DeepSeek V3, V3-0324, R1, R1-0528",
        "native pairs <｜tool▁calls▁begin｜>/<｜tool▁call▁begin｜>, fenced JSON",
    ),
    full(
        "F25",
        "deepseek_v31",
        &["deepseek_v3"],
        "DeepSeek V3.1",
        "native pairs, NAME<｜tool▁sep｜>{json}",
    ),
    full(
        "F26",
        "deepseek_v32",
        &["markup"],
        "DeepSeek V3.2 (DSML), V4",
        "markup with the ｜DSML｜ prefix; string=\"true|false\"",
    ),
    full(
        "F27",
        "kimi_k2",
        &["kimi_k2"],
        "Kimi K2, K2-Thinking, K2.5",
        "native pairs; functions.NAME:IDX as id",
    ),
    full(
        "F28",
        "glm45",
        &["markup"],
        "GLM-4.5/4.6/4.7/5, Ling 3, Spark 2.5",
        "markup <tool_call>NAME<arg_key>…<arg_value>…",
    ),
    full(
        "F29",
        "qwen3_coder",
        &["markup"],
        "Qwen3-Coder, Qwen3.5/3.6, Nemotron 3 Nano, Step-3.5",
        "markup <function=NAME><parameter=KEY>",
    ),
    Format {
        catalog: "F30",
        id: "seed_oss",
        dialects: &["markup"],
        models: "ByteDance Seed-OSS",
        read_by: "markup <seed:tool_call> (namespace dropped); <seed:think> is reasoning",
        support: Support::Full,
    },
    full(
        "F31",
        "minimax_m2",
        &["markup"],
        "MiniMax-M2/M2.1/M2.5",
        "markup <minimax:tool_call> + invoke/parameter",
    ),
    full(
        "F32",
        "step3",
        &["step3", "markup"],
        "StepFun Step3",
        "native pairs + <steptml:invoke> markup",
    ),
    Format {
        catalog: "F33",
        id: "gpt_oss",
        dialects: &["gpt_oss"],
        models: "OpenAI gpt-oss (Harmony)",
        read_by: "native pairs <|start|>assistant … to=functions.NAME … <|call|>; analysis channel as reasoning; final channel markers removed",
        support: Support::Full,
    },
    full(
        "F34",
        "gemma4",
        &["gemma4"],
        "Google Gemma 4",
        "native pair <|tool_call>call:NAME{…}; <|\"|> strings; <|channel>thought is reasoning",
    ),
    full(
        "F35",
        "functiongemma",
        &["functiongemma"],
        "Google FunctionGemma",
        "native pair <start_function_call>call:NAME{…}; <escape> strings",
    ),
    full(
        "F36",
        "hunyuan_v3",
        &["markup"],
        "Tencent Hunyuan HY-V3",
        "markup <tool_calls><tool_call>NAME<tool_sep><arg_key>…",
    ),
    full(
        "F37",
        "generic",
        &["json"],
        "llama.cpp generic envelope",
        "json: {\"tool_call\"…}/{\"tool_calls\"…}",
    ),
    full(
        "F38",
        "required_array",
        &["json"],
        "tool_choice=required arrays (vLLM, SGLang)",
        "json: array of {name, parameters}",
    ),
    full(
        "L1",
        "kimi_k3",
        &["markup"],
        "Kimi K3",
        "markup in XTML tags <|open|>NAME …<|sep|>; index as id; type flags; think/response channels",
    ),
    full(
        "L2",
        "minimax_m3",
        &["minimax_m3"],
        "MiniMax-M3",
        "native pair ]<]minimax[>[<tool_call> + invoke markup; tags named by the parameter; <mm:think> is reasoning",
    ),
    full("L3", "deepseek_v41", &["markup"], "DeepSeek V4.1", "markup with the `｜DSML｜ ` prefix"),
    full("L4", "gigachat35", &["markup"], "GigaChat 3.5", "markup with the ｜GCML｜ prefix"),
    full(
        "L5",
        "minicpm5",
        &["markup"],
        "OpenBMB MiniCPM5",
        "markup <function name> + <param name>",
    ),
    full(
        "L6",
        "k2_horizon",
        &["markup"],
        "K2 Horizon (IFM)",
        "markup with the ifm| prefix; <arg_key>/<arg_type>/<arg_value>, or JSON",
    ),
    full(
        "L7",
        "inkling",
        &["inkling", "json"],
        "Inkling",
        "native pair <|message_model|>NAME<|content_invoke_tool_json|>{json}<|end_message|>",
    ),
    full(
        "L8",
        "dots",
        &["markup"],
        "rednote dots",
        "markup <dots_function_call> + invoke/parameter",
    ),
    Format {
        catalog: "L9",
        id: "muse",
        dialects: &["gpt_oss", "markup"],
        models: "Muse Glimmer",
        read_by: "native pairs <|start|>assistant + to=NAME<|message|> around <atem:…> markup; to=self is reasoning",
        support: Support::Partial(
            "a recipient header at the very start of the output other than to=self/to=user stays text",
        ),
    },
];

fn pair(start: &str, ends: &[&str]) -> TagPair {
    let mut pair = TagPair::new(start, "");
    pair.ends = ends.iter().map(|end| (*end).to_owned()).collect();
    pair
}

fn named(mut pair: TagPair, prefix: &str, name_ends: &[&str]) -> TagPair {
    pair.name_prefix = prefix.to_owned();
    pair.name_ends = name_ends.iter().map(|end| (*end).to_owned()).collect();
    pair
}

fn with_inner(mut pair: TagPair, inner: TagPair) -> TagPair {
    pair.inner.push(Arc::new(inner));
    pair
}

/// gpt-oss Harmony: `<|start|>assistant<|channel|>commentary to=functions.NAME
/// <|constrain|>json<|message|>{…}<|call|>`; the recipient may also sit in the role
/// header, and the call may be on the analysis channel. Muse Glimmer's messages share
/// the role header.
fn harmony() -> TagPair {
    let tokens = |list: &[&str]| list.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
    let mut call = named(pair("to=functions.", &["<|call|>"]), "", &["? ", "?<|"]);
    call.skip = tokens(&[
        " ",
        "<|channel|>commentary",
        "<|channel|>analysis",
        "<|constrain|>json",
        "<|constrain|>",
        "<|message|>",
    ]);
    // Muse Glimmer: `<|start|>assistant to=NAME<|message|><atem:function_calls>…<|eot|>`;
    // the recipient only addresses the message, the markup holds the calls.
    let mut muse = named(pair("to=", &["<|eot|>", "<|eom|>"]), "", &["<|message|>"]);
    muse.header_only = true;
    let mut message = with_inner(with_inner(pair("<|start|>assistant", &[]), call), muse);
    message.skip = tokens(&[" ", "<|channel|>commentary", "<|channel|>analysis"]);
    message
}

/// Gemma 4 and FunctionGemma: `START call:NAME{key:TOKENtextTOKEN,n:1} END`.
fn gemma(start: &str, end: &str, token: &'static str) -> TagPair {
    let mut call = named(pair(start, &[end]), "call:", &["{"]);
    call.string_token = Some(token);
    call
}

/// Every native pair, in the order the registry tries them.
pub(crate) static PAIRS: LazyLock<Vec<(&'static str, Arc<TagPair>)>> = LazyLock::new(|| {
    let deepseek_call = named(
        pair("<｜tool▁call▁begin｜>", &["<｜tool▁call▁end｜>"]),
        "function<｜tool▁sep｜>",
        &["<｜tool▁sep｜>", "\n"],
    );
    let step3_call = named(
        pair("<｜tool_call_begin｜>", &["<｜tool_call_end｜>"]),
        "function<｜tool_sep｜>",
        &["<｜tool_sep｜>", "\n"],
    );
    let kimi_call = named(
        pair("<|tool_call_begin|>", &["<|tool_call_end|>"]),
        "",
        &["<|tool_call_argument_begin|>"],
    );
    let mut mistral = named(pair("[TOOL_CALLS]", &[]), "", &["[ARGS]", "{"]);
    mistral.id_marker = "[CALL_ID]".to_owned();
    let list: Vec<(&'static str, TagPair)> = vec![
        ("longcat", pair("<longcat_tool_call>", &["</longcat_tool_call>"])),
        ("mistral", mistral),
        ("llama3_json", pair("<|python_tag|>", &["<|eom_id|>", "<|eot_id|>"])),
        ("llama4_pythonic", pair("<|python_start|>", &["<|python_end|>"])),
        ("lfm2", pair("<|tool_call_start|>", &["<|tool_call_end|>"])),
        ("granite", pair("<|tool_call|>", &[])),
        ("nemotron_nano_v2", pair("<TOOLCALL>", &["</TOOLCALL>"])),
        ("internlm", pair("<|action_start|><|plugin|>", &["<|action_end|>"])),
        ("internlm", pair("<|action_start|> <|plugin|>", &["<|action_end|>"])),
        ("cohere", pair("<|START_ACTION|>", &["<|END_ACTION|>"])),
        ("gpt_oss", harmony()),
        ("apertus", {
            let mut apertus = pair("<|tools_prefix|>", &["<|tools_suffix|>"]);
            apertus.single_key_calls = true;
            apertus
        }),
        ("gigachat3", pair("<|function_call|>", &[])),
        ("minimax_m3", {
            let token = "]<]minimax[>[";
            let mut m3 = pair("]<]minimax[>[<tool_call>", &["]<]minimax[>[</tool_call>"]);
            m3.skip = vec![token.to_owned()];
            m3.namespace_token = Some(token);
            m3
        }),
        ("functionary_v3_2", {
            let mut functionary = named(pair(">>>", &[">>>all\n"]), "", &["\n"]);
            functionary.skip = vec![">>>".to_owned()];
            functionary
        }),
        ("inkling", {
            let mut inkling = named(
                pair("<|message_model|>", &["<|end_message|>"]),
                "",
                &["<|content_invoke_tool_json|>"],
            );
            inkling.header_only = true;
            inkling
        }),
        ("gemma4", gemma("<|tool_call>", "<tool_call|>", "<|\"|>")),
        ("functiongemma", gemma("<start_function_call>", "<end_function_call>", "<escape>")),
        (
            "deepseek_v3",
            with_inner(
                pair("<｜tool▁calls▁begin｜>", &["<｜tool▁calls▁end｜>"]),
                deepseek_call.clone(),
            ),
        ),
        ("deepseek_v3", deepseek_call),
        (
            "step3",
            with_inner(
                pair("<｜tool_calls_begin｜>", &["<｜tool_calls_end｜>"]),
                step3_call.clone(),
            ),
        ),
        ("step3", step3_call),
        (
            "kimi_k2",
            with_inner(
                pair("<|tool_calls_section_begin|>", &["<|tool_calls_section_end|>"]),
                kimi_call.clone(),
            ),
        ),
        (
            "kimi_k2",
            with_inner(
                pair("<|tool_call_section_begin|>", &["<|tool_call_section_end|>"]),
                kimi_call.clone(),
            ),
        ),
        ("kimi_k2", kimi_call),
    ];
    list.into_iter()
        .map(|(id, mut pair)| {
            pair.id = format!("native:{id}:{}", pair.start);
            (id, Arc::new(pair))
        })
        .collect()
});

/// What a pair region's text at the cursor is, as far as the pair can tell.
pub(crate) enum PairStep {
    None,
    NeedMore,
    /// The pair's own start marker again, or a separator between calls: skip it.
    Skip(usize),
    /// A token that carries nothing (inside a call, too): skip it.
    Ignore(usize),
    /// An inner pair opens.
    Inner(Arc<TagPair>),
    /// A name-then-arguments call may begin here.
    Name,
}

/// Whether `rest` starts with an end marker of `pair`: its length, or `NeedMore` when
/// it may, or `None`.
pub(crate) fn end_of(pair: &TagPair, rest: &str, eof: bool) -> Option<Result<usize, ()>> {
    for end in pair.ends.iter().filter(|end| !end.is_empty()) {
        if rest.starts_with(end.as_str()) {
            return Some(Ok(end.len()));
        }
        if !eof && rest.len() < end.len() && end.starts_with(rest) {
            return Some(Err(()));
        }
    }
    None
}

/// What the innermost pair makes of `rest` (its end markers are checked apart).
pub(crate) fn pair_step(pair: &TagPair, rest: &str, eof: bool) -> PairStep {
    let markers = std::iter::once(pair.start.as_str())
        .chain(pair.inner.iter().map(|inner| inner.start.as_str()));
    for (i, marker) in markers.enumerate() {
        if marker.is_empty() {
            continue;
        }
        if rest.starts_with(marker) {
            return match i.checked_sub(1).and_then(|k| pair.inner.get(k)) {
                Some(inner) => PairStep::Inner(Arc::clone(inner)),
                None => PairStep::Skip(marker.len()),
            };
        }
        if !eof && rest.len() < marker.len() && marker.starts_with(rest) {
            return PairStep::NeedMore;
        }
    }
    let prefix = pair.name_prefix.as_str();
    if !prefix.is_empty() && rest.starts_with(prefix) {
        // Step3 puts markup after the prefix: `function<｜tool_sep｜><steptml:invoke …>`.
        match rest.as_bytes().get(prefix.len()) {
            Some(b'<') => return PairStep::Skip(prefix.len()),
            None if !eof => return PairStep::NeedMore,
            _ => {}
        }
    }
    if !eof && !prefix.is_empty() && rest.len() < prefix.len() && prefix.starts_with(rest) {
        return PairStep::NeedMore;
    }
    for token in &pair.skip {
        if rest.starts_with(token.as_str()) {
            return PairStep::Ignore(token.len());
        }
        if !eof && rest.len() < token.len() && token.starts_with(rest) {
            return PairStep::NeedMore;
        }
    }
    match rest.as_bytes().first() {
        Some(b';') => PairStep::Skip(1),
        Some(&b) if !pair.name_ends.is_empty() && (b.is_ascii_alphabetic() || b == b'_') => {
            PairStep::Name
        }
        Some(_) if !pair.name_prefix.is_empty() && rest.starts_with(pair.name_prefix.as_str()) => {
            PairStep::Name
        }
        Some(_) if !eof && !pair.name_prefix.is_empty() && pair.name_prefix.starts_with(rest) => {
            PairStep::NeedMore
        }
        _ => PairStep::None,
    }
}

/// The result of reading a name-then-arguments call's head.
pub(crate) enum NameStep {
    NeedMore,
    Fail,
    /// The call's name and id, and the length of its head (prefix, name, id, markers).
    Done {
        name: String,
        id: Option<String>,
        len: usize,
    },
}

const MAX_HEAD: usize = 512;

/// Reads `[prefix] NAME [id_marker ID] name_end` at the start of `rest`.
pub(crate) fn read_name(pair: &TagPair, rest: &str, eof: bool) -> NameStep {
    let prefix = pair.name_prefix.as_str();
    let mut at = 0;
    if !prefix.is_empty() && rest.starts_with(prefix) {
        at = prefix.len();
    }
    let head = rest.get(at..).unwrap_or_default();
    // The first name end (or id marker) that occurs.
    let markers = pair.name_ends.iter().chain(std::iter::once(&pair.id_marker));
    let Some((found, marker)) = earliest(head, markers) else {
        return undecided(head, eof);
    };
    let raw = head.get(..found).unwrap_or_default().trim();
    if raw.is_empty()
        || raw.contains(['<', '>', '"', '{', '}'])
        || raw.contains(char::is_whitespace)
    {
        return NameStep::Fail;
    }
    let mut len = at + found;
    let mut id = None;
    if marker == pair.id_marker {
        // `NAME[CALL_ID]ID[ARGS]`: the id runs to the next name end.
        let after = head.get(found + marker.len()..).unwrap_or_default();
        let end = earliest(after, pair.name_ends.iter());
        let Some((k, name_end)) = end else {
            return undecided(after, eof);
        };
        id = Some(after.get(..k).unwrap_or_default().trim().to_owned());
        len += marker.len() + k + consumed_len(name_end);
    } else {
        len += consumed_len(marker);
    }
    let (name, split_id) = split_name(raw);
    NameStep::Done { name, id: id.or(split_id), len }
}

/// Longer than any marker a head search looks for.
const MARKER_SLACK: usize = 64;

/// No marker starts within the head limit of `text` yet: the head fails once no marker
/// can still start there (`MAX_HEAD + MARKER_SLACK` bytes are in, or the output ended),
/// so streaming decides at the same point whatever the chunking, and as `parse` does.
fn undecided(text: &str, eof: bool) -> NameStep {
    if eof || text.len() >= MAX_HEAD + MARKER_SLACK { NameStep::Fail } else { NameStep::NeedMore }
}

/// The first of `markers` that starts within the head limit of `text`: where, and which.
/// A marker written `?…` is found without its `?`.
fn earliest<'m>(text: &str, markers: impl Iterator<Item = &'m String>) -> Option<(usize, &'m str)> {
    let mut window = text.len().min(MAX_HEAD + MARKER_SLACK);
    while !text.is_char_boundary(window) {
        window -= 1;
    }
    let text = text.get(..window).unwrap_or_default();
    let mut best: Option<(usize, &str)> = None;
    for marker in markers.filter(|m| !m.is_empty()) {
        let pattern = marker.strip_prefix('?').unwrap_or(marker);
        if let Some(found) = text.find(pattern) {
            if best.is_none_or(|(b, _)| found < b) {
                best = Some((found, marker.as_str()));
            }
        }
    }
    best.filter(|&(found, _)| found <= MAX_HEAD)
}

/// A `{` (or a marker written `?…`) ends a name without being part of the head: it
/// starts what follows.
fn consumed_len(marker: &str) -> usize {
    if marker == "{" || marker.starts_with('?') { 0 } else { marker.len() }
}

/// `functions.get_weather:0` → (`get_weather`, id `functions.get_weather:0`).
fn split_name(raw: &str) -> (String, Option<String>) {
    let (base, id) = match raw.rsplit_once(':') {
        Some((base, index)) if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) => {
            (base, Some(raw.to_owned()))
        }
        _ => (raw, None),
    };
    let name = base.strip_prefix("functions.").unwrap_or(base);
    (name.to_owned(), id)
}

/// Every catalogued model-native format (`F1`–`F38`, `L1`–`L9`) and how far toolshim
/// reads it.
pub fn formats() -> &'static [Format] {
    FORMATS
}
