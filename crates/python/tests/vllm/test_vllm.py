"""The vLLM tool parser (toolshim.adapters.vllm) inside vLLM 0.33.0's own serving code: the
plugin registration, vLLM's Parser composition (ParserManager.get_parser), non-streamed
replies (Parser.parse) and streamed ones (ChatStreamProcessor.step, which calls
Parser.parse_delta and flushes at the end). Runs in a venv with vLLM (.ci/run installs
vllm==0.33.0 into target/vllm-venv); no GPU or model is needed."""

from __future__ import annotations

import json

import pytest

vllm = pytest.importorskip("vllm", reason="run these in a venv with vLLM (see .ci/run)")

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager  # noqa: E402

import toolshim  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
]
HERMES = (
    "Let me check.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "2"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "x\\ny"}}\n</tool_call>'
)
#: The text around the calls: the sentence, and the newline between the two blocks.
HERMES_CONTENT = "Let me check."  # the line breaks before and between calls are theirs
QWEN3_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)


class Tokenizer:
    """What the tool parser reads of a tokenizer: its model name (no vocabulary is needed)."""

    def __init__(self, name: str) -> None:
        self.name_or_path = name

    def get_vocab(self) -> dict[str, int]:
        return {}


def request(**extra) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice="auto", **extra
    )


def parser(name: str = "toolshim", model: str = "Qwen/Qwen3-8B"):
    import toolshim.adapters.vllm  # noqa: F401 - registers the parsers, as --tool-parser-plugin does

    parser_cls = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True, model_name=model)
    req = request()
    return parser_cls(Tokenizer(model), req.tools), req


def stream(text: str, size: int, name: str = "toolshim", model: str = "Qwen/Qwen3-8B"):
    """Streams `text` in deltas of `size` characters through vLLM's ChatStreamProcessor and
    folds the deltas as an OpenAI client does."""
    p, req = parser(name, model)
    processor = ChatStreamProcessor(req, p, enable_auto_tools=True, parser_cls=type(p))
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    content, reasoning, calls, ids = [], [], {}, {}
    for n, piece in enumerate(pieces):
        last = n == len(pieces) - 1
        step = processor.step(piece, [n], "stop" if last else None, [1, 2, 3] if n == 0 else None)
        delta = step.delta
        if delta is None:
            continue
        content.append(delta.content or "")
        reasoning.append(delta.reasoning or "")
        for call in delta.tool_calls:
            name_, args = calls.get(call.index, ("", ""))
            if call.id:
                assert call.index not in ids, "an id is sent once, with the name"
                ids[call.index] = call.id
            fn = call.function
            calls[call.index] = (name_ + ((fn.name if fn else None) or ""), args + ((fn.arguments if fn else None) or ""))
    return "".join(content), "".join(reasoning), [calls[i] for i in sorted(calls)], ids


def test_the_plugin_registers_toolshim_and_one_name_per_format():
    ToolParserManager.import_tool_parser("toolshim.adapters.vllm")
    registered = set(ToolParserManager.list_registered())
    assert {"toolshim", "toolshim_hermes", "toolshim_qwen3_coder", "toolshim_deepseek_v31"} <= registered
    cls = ToolParserManager.get_tool_parser("toolshim")
    assert issubclass(cls, ToolParser) and cls.engine_based_streaming
    assert ToolParserManager.get_tool_parser("toolshim_qwen3_coder").toolshim_format == "qwen3_coder"


def test_a_non_streamed_reply_has_vllms_tool_calls():
    p, req = parser()
    reasoning, content, calls = p.parse(HERMES, req, enable_auto_tools=True)
    assert reasoning is None
    assert content == HERMES_CONTENT
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", '{"city":"Paris","days":2}'),
        ("write_file", '{"path":"a.txt","content":"x\\ny"}'),
    ]
    assert all(c.id.startswith("chatcmpl-tool-") for c in calls)
    info = ToolParserManager.get_tool_parser("toolshim")(Tokenizer("m"), req.tools).extract_tool_calls(HERMES, req)
    assert info.tools_called and info.tool_calls[0].function.name == "get_weather"
    assert type(info).__module__.startswith("vllm.")


@pytest.mark.parametrize("size", [1, 3, 17, 10_000])
def test_a_streamed_reply_folds_to_the_non_streamed_one(size):
    content, reasoning, calls, ids = stream(HERMES, size)
    assert (content, reasoning) == (HERMES_CONTENT, "")
    assert calls == [
        ("get_weather", '{"city":"Paris","days":2}'),
        ("write_file", '{"path":"a.txt","content":"x\\ny"}'),
    ]
    assert sorted(ids) == [0, 1]


def test_the_model_name_picks_the_format_and_names_pin_one():
    p, req = parser(model="Qwen/Qwen3-Coder-30B-A3B-Instruct")
    _, _, calls = p.parse(QWEN3_CODER, req, enable_auto_tools=True)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Oslo", "days": 3})]
    assert stream(QWEN3_CODER, 2, model="Qwen/Qwen3-Coder-30B-A3B-Instruct")[2] == [
        ("get_weather", '{"city":"Oslo","days":3}')
    ]
    p, req = parser("toolshim_mistral")
    _, content, calls = p.parse(HERMES, req, enable_auto_tools=True)
    assert not calls and content == HERMES
    ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Rome\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    assert stream(ds, 3, name="toolshim_deepseek_v31")[2] == [("get_weather", '{"city":"Rome"}')]


def test_text_held_at_the_end_comes_out_when_vllm_ends_the_stream():
    # "<tool" could start a marker until the stream ends: finish_streaming releases it.
    content, _, calls, _ = stream("Done. <tool", 2)
    assert (content, calls) == ("Done. <tool", [])
    # A call cut off by max_tokens is closed.
    content, _, calls, _ = stream('<tool_call>{"name": "get_weather", "arguments": {"city": "Par', 4)
    assert calls == [("get_weather", '{"city":"Par"}')]


def test_reasoning_without_a_reasoning_parser_stays_in_the_content():
    text = "<think>Paris first.</think>" + HERMES
    p, req = parser()
    _, content, calls = p.parse(text, req, enable_auto_tools=True)
    assert content == "<think>Paris first.</think>" + HERMES_CONTENT and len(calls) == 2
    assert stream(text, 5)[0] == content


def test_with_vllms_reasoning_parser_the_tool_parser_sees_the_answer_only():
    import toolshim.adapters.vllm  # noqa: F401

    parser_cls = ParserManager.get_parser(
        tool_parser_name="toolshim", reasoning_parser_name="deepseek_r1", enable_auto_tools=True, model_name="m"
    )

    class ThinkTokenizer(Tokenizer):
        def get_vocab(self):
            return {"<think>": 7, "</think>": 8}

    req = request()
    p = parser_cls(ThinkTokenizer("Qwen/Qwen3-8B"), req.tools)
    reasoning, content, calls = p.parse("<think>Paris.</think>" + HERMES, req, enable_auto_tools=True)
    assert reasoning == "Paris."
    assert content == HERMES_CONTENT and [c.name for c in calls] == ["get_weather", "write_file"]


def test_adjust_request_keeps_special_tokens_for_markers():
    p = ToolParserManager.get_tool_parser("toolshim")(Tokenizer("m"), request().tools)
    assert p.adjust_request(request()).skip_special_tokens is False
    plain = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    assert p.adjust_request(plain).skip_special_tokens is not False


def test_a_big_write_file_call_streams_in_token_sized_deltas():
    body = "line of text with some words\n" * 2000
    text = '<tool_call>{"name": "write_file", "arguments": {"path": "big.txt", "content": ' + json.dumps(body) + "}}</tool_call>"
    _, _, calls, _ = stream(text, 4)
    assert json.loads(calls[0][1]) == {"path": "big.txt", "content": body}
    assert toolshim.parse(text, TOOLS).calls[0].arguments_json == calls[0][1]
