//! The public catalog of model-native tool-call formats: [`Format`], [`formats`],
//! [`MODELS`]. Each entry names the registry entries (dialect ids) that read it; the
//! marker pairs themselves are rows in `rows::native`, the markup vocabulary in
//! `rows::markup`.

use crate::dialect::Dialects;

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

/// A model-native tool-call format (ids as in the catalog `F1`–`F38`, `L1`–`L20`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    ("qwen3.8", "qwen3_coder"),
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
    ("step-audio-2", "step_audio2"),
    ("solar-open2", "solar_open2"),
    ("solar-open-2", "solar_open2"),
    ("plamo-3", "plamo3"),
    ("plamo3", "plamo3"),
    ("llm-jp-4", "llm_jp4"),
    ("iquest", "iquest_coder"),
    ("mirothinker", "mirothinker"),
    ("cwm", "cwm"),
    ("hy-v4", "hunyuan_v4"),
    ("hyperclovax", "hyperclovax"),
    ("pangu", "openpangu"),
    ("rwkv", "rwkv"),
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
    ("gpt-oss", "gpt_oss"),
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
    full(
        "L10",
        "step_audio2",
        &["step_audio2"],
        "StepFun Step-Audio 2",
        "native pair <tool_call>function\\nNAME\\n{json}</tool_call>",
    ),
    full(
        "L11",
        "solar_open2",
        &["solar_open2"],
        "Upstage Solar Open 2",
        "native pair <|tool_call:start|>NAME + <|tool_arg:start|>KEY<|tool_arg:value|>VALUE<|tool_arg:end|>; values typed by the schema",
    ),
    full(
        "L12",
        "plamo3",
        &["plamo3"],
        "PFN PLaMo 3",
        "native pairs <|plamo:begin_tool_requests:plamo|> + <|plamo:begin_tool_request:plamo|>, the name between tool_name tokens, JSON arguments",
    ),
    full(
        "L13",
        "llm_jp4",
        &["llm_jp4", "gpt_oss"],
        "LLM-jp-4.1",
        "native pairs <|start|> assistant + to=functions.NAME (Harmony with a space after each special token); calls end at <|end|> or <|call|>; spaced analysis channel as reasoning",
    ),
    full(
        "L14",
        "iquest_coder",
        &["markup"],
        "iQuest Coder (Q1, V2)",
        "markup <iquest_tool_call>/<iquestcoder_tool_call>NAME<arg_key>…<arg_value>… (GLM's key/value body)",
    ),
    Format {
        catalog: "L15",
        id: "mirothinker",
        dialects: &["markup"],
        models: "MiroThinker v1, Cline-style MCP prompts",
        read_by: "markup <use_mcp_tool><server_name>…<tool_name>NAME<arguments>{json}",
        support: Support::Partial(
            "the call's name is the tool name; the server name is dropped, so a tool declared as SERVER-TOOL is not matched",
        ),
    },
    Format {
        catalog: "L16",
        id: "cwm",
        dialects: &["cwm", "json"],
        models: "Meta CWM (Code World Model)",
        read_by: "native pair <tool: NAME> … </tool> with free-form input: a JSON object is the arguments, other text the tool's one parameter (else `command`)",
        support: Support::Partial(
            "the name is the tag's label, as Meta's prompting guide writes it (vLLM's cwm parser reads it from the first word of the body instead)",
        ),
    },
    full(
        "L17",
        "hyperclovax",
        &["hyperclovax", "json"],
        "NAVER HyperCLOVAX-SEED-Think-14B",
        "native pairs ` -> tool/function_call\\n` (and <|im_start|>assistant before it) + JSON list, to <|im_end|>",
    ),
    full(
        "L18",
        "openpangu",
        &["openpangu", "lfm2", "json"],
        "Huawei openPangu",
        "native pair [unused11] + JSON list + [unused12] (or <|tool_call_start|>)",
    ),
    full(
        "L19",
        "rwkv",
        &["rwkv", "fenced", "json"],
        "RWKV tool-calling fine-tunes",
        "native pair **Tool Call:** before a ```json fence",
    ),
    Format {
        catalog: "L20",
        id: "hunyuan_v4",
        dialects: &["markup"],
        models: "Tencent Hunyuan HY-V4",
        read_by: "markup <tool_calls:SUFFIX><tool_call:SUFFIX>NAME<arg_key:SUFFIX>…<arg_value:SUFFIX>… (the per-checkpoint hex suffix on every tag is dropped)",
        support: Support::Partial(
            "its suffixed reasoning tags (<think:SUFFIX>) stay text: reasoning markers are literals",
        ),
    },
];

/// Every catalogued model-native format (`F1`–`F38`, `L1`–`L20`) and how far toolshim
/// reads it.
pub fn formats() -> &'static [Format] {
    FORMATS
}
