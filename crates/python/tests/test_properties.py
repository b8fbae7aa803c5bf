"""Property tests (hypothesis): model text never raises, whatever it is and however it is
chunked, and every chunking folds to `parse`."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolshim

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"name": "finish", "input_schema": {"type": "object", "properties": {"answer": {"type": "string"}}}},
]
# Pieces of call syntax from many formats, so generated texts open, split and break calls.
PIECES = [
    "<tool_call>", "</tool_call>", "<think>", "</think>", '{"name": "get_weather", "arguments": {',
    '"city": "Paris"', "}", "]", "[", '"', "\\", "<function=get_weather>", "<parameter=city>",
    "</parameter>", "</function>", "[TOOL_CALLS]", "<|python_tag|>", "```json\n", "```",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<|tool_call_begin|>",
    "<|start|>assistant<|channel|>commentary to=functions.finish<|message|>", "<|call|>",
    "Action: get_weather\nAction Input: ", "get_weather(city='Oslo')", "\n", " ", "e.g. ",
    "<arg_key>city</arg_key><arg_value>", "</arg_value>", "<|tool_call>call:finish{", "<|\"|>",
]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=40).map("".join)
FORMATS = [None] + [f.id for f in toolshim.formats() if f.support != "missing"]
OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "format": st.sampled_from(FORMATS),
        "reasoning_open": st.booleans(),
        "reasoning_calls": st.booleans(),
        "example_guard": st.booleans(),
        "hide_rejected": st.booleans(),
        "max_held_bytes": st.integers(1, 64),
        "max_depth": st.integers(1, 4),
    },
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:])]


@SETTINGS
@given(TEXT, OPTIONS, st.booleans(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_text_parses_and_every_chunking_folds_to_parse(text, options, with_tools, cuts):
    tools = TOOLS if with_tools else None
    parsed = toolshim.parse(text, tools, **options)
    for call in parsed.calls:
        assert json.loads(call.arguments_json) == call.arguments
    json.dumps(parsed.to_dict())
    parser = toolshim.StreamParser(tools, **options)
    events = []
    for chunk in split(text, cuts):
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    assert toolshim.Parsed.from_events(events) == parsed
    # Incomplete calls have indexes too: each call's fragments are found by its own index.
    ends = [e for e in events if isinstance(e, toolshim.CallEnd)]
    assert [e.call for e in ends if e.call.complete] == parsed.calls
    for end in ends:
        fragments = "".join(e.json for e in events if isinstance(e, toolshim.ArgsDelta) and e.call_idx == end.call_idx)
        assert fragments == end.call.arguments_json


@SETTINGS
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200), st.booleans())
def test_any_code_points_even_lone_surrogates_never_raise(text, with_tools):
    tools = TOOLS if with_tools else None
    parsed = toolshim.parse(text, tools, exit_tools=["finish"])
    assert parsed.outcome is not None
    parser = toolshim.StreamParser(tools)
    for ch in text:
        parser.feed(ch)
    parser.finish()
