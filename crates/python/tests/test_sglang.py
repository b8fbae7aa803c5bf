"""The SGLang-shaped FunctionCallParser (toolshim.adapters.sglang)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toolshim
from toolshim.adapters.sglang import SGLANG_PARSERS, FunctionCallParser

TOOLS = [
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}},
]
TEXT = (
    "<think>Weather first.</think>Checking.\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
    '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
)


def stream(parser, text, size):
    normal, calls = [], {}
    for i in range(0, len(text), size):
        got_text, items = parser.parse_stream_chunk(text[i : i + size])
        normal.append(got_text)
        for item in items:
            name, args = calls.get(item.tool_index, ("", ""))
            calls[item.tool_index] = (name + (item.name or ""), args + item.parameters)
    got_text, items = parser.parse_stream_end()
    normal.append(got_text)
    for item in items:
        name, args = calls.get(item.tool_index, ("", ""))
        calls[item.tool_index] = (name + (item.name or ""), args + item.parameters)
    return "".join(normal), [calls[i] for i in sorted(calls)]


def test_non_stream_gives_text_and_calls_with_the_tools_index():
    parser = FunctionCallParser(TOOLS, "qwen25")
    assert parser.has_tool_call(TEXT)
    assert not parser.has_tool_call("no calls here")
    text, calls = parser.parse_non_stream(TEXT)
    # The line breaks before and between the calls belong to them.
    assert text == "<think>Weather first.</think>Checking."
    assert [(c.tool_index, c.name, json.loads(c.parameters)) for c in calls] == [
        (1, "get_weather", {"city": "Paris"}),
        (0, "get_time", {}),
    ]


def test_non_stream_leaves_out_incomplete_calls_unless_preserved():
    parser = FunctionCallParser(TOOLS, "qwen25")
    cut = 'Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    text, calls = parser.parse_non_stream(cut)
    assert (text, calls) == ("Checking.", [])
    text, calls = parser.parse_non_stream(cut, preserve_incomplete=True)
    assert [(c.name, json.loads(c.parameters)) for c in calls] == [("get_weather", {"city": "Par"})]
    # Arguments that are not JSON: no call, and the call's text is the content.
    broken = '<tool_call>{"name": "get_weather", "arguments": {city = Paris}}</tool_call>'
    assert parser.parse_non_stream(broken) == (broken, [])


@pytest.mark.parametrize("size", [1, 3, 8, 1000])
def test_streamed_chunks_fold_to_the_non_stream_result(size):
    text, calls = stream(FunctionCallParser(TOOLS, "hermes"), TEXT, size)
    expected_text, expected = FunctionCallParser(TOOLS, "hermes").parse_non_stream(TEXT)
    assert text == expected_text
    assert calls == [(c.name, c.parameters) for c in expected]


def test_a_streamed_call_starts_with_its_name_then_sends_argument_fragments():
    parser = FunctionCallParser(TOOLS, "toolshim")
    _, items = parser.parse_stream_chunk('<tool_call>{"name": "get_weather", "arguments": {"city": "Pa')
    assert (items[0].tool_index, items[0].name, items[0].parameters) == (0, "get_weather", "")
    assert all(item.name is None for item in items[1:])
    text, rest = parser.parse_stream_end()
    assert text == "" and all(item.name is None for item in rest)
    assert parser.parse_stream_end() == ("", [])


def test_parser_names_map_to_formats():
    ids = {f.id for f in toolshim.formats()}
    assert set(SGLANG_PARSERS.values()) <= ids
    xml = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
    _, calls = FunctionCallParser(TOOLS, "qwen3_coder").parse_non_stream(xml)
    assert [(c.name, c.parameters) for c in calls] == [("get_weather", '{"city":"Oslo"}')]
    ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    _, calls = FunctionCallParser(TOOLS, "deepseekv31").parse_non_stream(ds)
    assert [c.name for c in calls] == ["get_time"]
    # A toolshim format id works as the parser name too.
    _, calls = FunctionCallParser(TOOLS, "deepseek_v31").parse_non_stream(ds)
    assert [c.name for c in calls] == ["get_time"]


def test_a_bad_tools_list_raises_when_the_parser_is_made():
    with pytest.raises(ValueError, match="declared twice"):
        FunctionCallParser([{"name": "a"}, {"name": "a"}], "hermes")


def test_a_format_file_path_is_a_parser_name_and_an_option():
    template = str(Path(__file__).resolve().parents[2] / "parse" / "tests" / "templates" / "gemma4.json")
    out = '<|tool_call>call:get_time{timezone:<|"|>UTC<|"|>}<tool_call|>'
    for parser in (FunctionCallParser(TOOLS, template), FunctionCallParser(TOOLS, "toolshim", format_file=template)):
        _, calls = parser.parse_non_stream(out)
        assert [(c.name, c.parameters) for c in calls] == [("get_time", '{"timezone":"UTC"}')]
