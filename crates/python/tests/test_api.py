"""The Python API: results, options, errors and events, as docs/python.md describes them."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from conftest import CORPUS, run_cli

import toolshim

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}</tool_call>'


def test_parse_gives_calls_content_and_exact_arguments():
    parsed = toolshim.parse("Let me check.\n" + CALL, WEATHER)
    assert parsed.content == "Let me check."  # the line break before a call is the call's
    assert parsed.reasoning == ""
    assert parsed.saw_tool_syntax is True
    [call] = parsed.calls
    assert (call.id, call.name) == (None, "get_weather")
    # Coerced to the schema's integer; the dict and the exact JSON text agree.
    assert call.arguments == {"city": "Paris", "days": 3}
    assert call.arguments_json == '{"city":"Paris","days":3}'
    assert call.arguments is call.arguments  # read once
    assert [w.code for w in parsed.warnings] == ["coerced"]
    assert parsed.warnings[0].call_idx == 0
    assert parsed.outcome is None


def test_arguments_json_keeps_numbers_and_key_order_as_written():
    parsed = toolshim.parse('{"name": "f", "arguments": {"z": 1e400, "a": 123456789012345678901234567890}}')
    call = parsed.calls[0]
    assert call.arguments_json == '{"z":1e400,"a":123456789012345678901234567890}'
    assert list(call.arguments) == ["z", "a"]
    assert call.arguments["a"] == 123456789012345678901234567890


def test_to_dict_is_the_cli_object(toolshim_bin):
    text = "<think>hm</think>" + CALL + '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'
    path = CORPUS / "_tools" / "weather.json"
    tools = json.loads(path.read_text())
    expected = json.loads(run_cli(toolshim_bin, text, "--tools", str(path)))
    parsed = toolshim.parse(text, tools)
    assert parsed.to_dict() == expected
    assert list(parsed.to_dict()) == [
        "calls", "incomplete", "content", "reasoning", "rejected", "warnings", "saw_tool_syntax",
    ]
    assert parsed.reasoning == "hm"
    assert [(r.name, r.type) for r in parsed.rejected] == [("rm", "rejected")]
    assert parsed.rejected[0].to_dict() == {"type": "rejected", "name": "rm", "reason": parsed.rejected[0].reason}


def test_tools_are_read_in_every_shape():
    anthropic = [{"name": "get_weather", "input_schema": WEATHER[0]["function"]["parameters"]}]

    class Model:  # what vLLM and SGLang keep tools in
        def model_dump(self):
            return WEATHER[0]

    for tools in (WEATHER, tuple(WEATHER), {"tools": WEATHER}, json.dumps(WEATHER), anthropic, [Model()]):
        assert toolshim.parse(CALL, tools).calls[0].arguments == {"city": "Paris", "days": 3}, tools
    assert toolshim.check_tools(WEATHER) == ["get_weather"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"name": "a"}, {"name": "a"}], "tool `a` is declared twice; give each tool a distinct name"),
        ({"x": 1}, "expected a JSON array of tools, or an object with a `tools` array"),
        ([{"type": "function", "function": 3}], "tool 0: `function` must be an object"),
        ("[{", None),
        ([{"name": "f", "parameters": {"x": float("nan")}}], "tools: NaN is not a JSON number"),
        ([{"name": "f", "parameters": {1: 2}}], "tools: a dict key of type `int` is not a str"),
        ([object()], "tools: a value of type `object` is not JSON"),
    ],
)
def test_a_bad_tools_list_raises_value_error_with_the_parsers_message(tools, message, toolshim_bin, tmp_path):
    with pytest.raises(ValueError) as raised:
        toolshim.parse("text", tools)
    if message is not None:
        assert str(raised.value).startswith(message)
    if isinstance(tools, (list, dict, str)) and message is not None and not message.startswith("tools:"):
        # The same words as `toolshim parse --tools FILE`, which prefixes the file.
        path = tmp_path / "tools.json"
        path.write_text(tools if isinstance(tools, str) else json.dumps(tools))
        done = subprocess.run(
            [str(toolshim_bin), "parse", "--tools", str(path)], input=b"x", capture_output=True, check=False
        )
        assert done.returncode == 2
        assert done.stderr.decode().strip().endswith(str(raised.value))
    with pytest.raises(ValueError):
        toolshim.StreamParser(tools)


def test_options_mirror_the_cli():
    think = "<think>" + CALL + "</think>done"
    assert toolshim.parse(think).calls == []
    assert [w.code for w in toolshim.parse(think).warnings] == ["call_in_reasoning"]
    assert toolshim.parse(think, reasoning_calls=True).calls[0].name == "get_weather"
    assert toolshim.parse("plan</think>ok", reasoning_open=True).reasoning == "plan"
    assert toolshim.parse("{" + CALL[12:-12], dialects=["markup"]).calls == []
    assert toolshim.parse('<my>{"name": "f", "arguments": {}}</my>', tag_pairs=[("<my>", "</my>")]).calls[0].name == "f"
    example = 'For example:\n```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'
    assert toolshim.parse(example).calls == []
    assert toolshim.parse(example, example_guard=False).calls[0].name == "get_weather"
    rejected = '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'
    assert toolshim.parse(rejected, WEATHER).content == rejected
    assert toolshim.parse(rejected, WEATHER, hide_rejected=True).content == ""
    assert toolshim.parse("call get_weather with city Paris", WEATHER, free_text=True).calls[0].name == "get_weather"
    qwen3_coder = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    assert toolshim.parse(qwen3_coder, model="Qwen/Qwen3-Coder-30B-A3B-Instruct").calls[0].arguments == {"city": "Paris"}
    assert toolshim.parse(CALL, format="mistral").calls == []
    assert toolshim.parse(CALL, format="F1").calls[0].name == "get_weather"
    assert toolshim.parse(CALL, model="no-such-model").calls[0].name == "get_weather"
    assert toolshim.parse(CALL, max_held_bytes=4096, max_depth=8).calls[0].name == "get_weather"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"bogus": 1}, TypeError, "parse() got an unexpected keyword argument 'bogus'"),
        ({"format": "nope"}, ValueError, "format: unknown format `nope`; known: hermes,"),
        ({"format": "hermes", "model": "qwen"}, ValueError, "format: give format alone"),
        ({"model": "qwen", "dialects": ["json"]}, ValueError, "model: give model or dialects"),
        ({"dialects": ["nope"]}, ValueError, "dialects: unknown dialect `nope`; known: markup,"),
        ({"free_text": True}, ValueError, "free_text needs tools"),
        ({"exit_tools": ["finish", " "]}, ValueError, "exit_tools: a tool name is empty"),
        ({"max_depth": 0}, ValueError, "max_depth: must be at least 1"),
        ({"free_text": "yes"}, TypeError, ""),
        ({"dialects": "json"}, TypeError, ""),
    ],
)
def test_misuse_raises(kwargs, error, message):
    with pytest.raises(error) as raised:
        toolshim.parse("text", **kwargs)
    assert str(raised.value).startswith(message)


def test_stream_parser_events_are_typed_and_fold_to_parse():
    text = "Hi <think>hm</think>" + CALL + " bye"
    parser = toolshim.StreamParser(WEATHER)
    events = []
    for ch in text:
        events.extend(parser.feed(ch))
    assert not parser.finished
    events.extend(parser.finish())
    assert parser.finished and parser.finish() == []
    kinds = [event.type for event in events]
    assert kinds[0] == "text" and "reasoning" in kinds and "call_start" in kinds and "call_end" in kinds
    assert "".join(e.json for e in events if isinstance(e, toolshim.ArgsDelta)) == '{"city":"Paris","days":3}'
    end = next(e for e in events if isinstance(e, toolshim.CallEnd))
    assert end.to_dict() == {
        "type": "call_end",
        "call_idx": 0,
        "call": {"id": None, "name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
        "complete": True,
    }
    match events[0]:
        case toolshim.Text(text=first):
            assert first == "Hi"  # the space before a reasoning marker goes with it
    assert toolshim.Parsed.from_events(events) == toolshim.parse(text, WEATHER)
    with pytest.raises(RuntimeError, match="finished"):
        parser.feed("more")
    with pytest.raises(TypeError):
        toolshim.Parsed.from_events([1])
    with pytest.raises(TypeError):
        toolshim.StreamParser(exit_tools=["finish"])


def test_reprs_read_like_python():
    parsed = toolshim.parse("a\u0001" + CALL, WEATHER)
    assert repr(parsed).startswith("Parsed(calls=[ToolCall(id=None, name='get_weather', arguments_json='{")
    assert "content='a\\x01'" in repr(parsed)
    assert repr(toolshim.StreamParser()) == "<toolshim.StreamParser open>"
    assert repr(toolshim.formats()[0]).startswith("Format(id='hermes', catalog='F1', support='full'")


def test_agent_outcome():
    tools = WEATHER + [{"name": "finish", "parameters": {"type": "object", "properties": {}}}]
    finish = '<tool_call>{"name": "finish", "arguments": {}}</tool_call>'
    parsed = toolshim.parse(CALL + finish, WEATHER, exit_tools=["finish"])
    assert parsed.outcome.kind == "calls"
    assert [c.name for c in parsed.outcome.calls] == ["get_weather"]
    assert [c.name for c in parsed.outcome.exits] == ["finish"]
    plain = toolshim.parse("just text", WEATHER, exit_tools=["finish"])
    assert plain.outcome.to_dict() == {"kind": "text"}
    raw = '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'
    outcome = toolshim.agent_outcome(toolshim.parse(raw, tools), raw, exit_tools=["finish"], tools=tools)
    assert (outcome.kind, outcome.reason, outcome.unknown_tools, outcome.raw) == ("failed", "unknown_tools", ["rm"], raw)
    assert outcome.message.startswith("the output calls unknown tools: `rm`")
    broken = "<tool_call>{nope</tool_call>"
    outcome = toolshim.agent_outcome(toolshim.parse(broken), broken, exit_tools=["finish"])
    assert (outcome.kind, outcome.reason) == ("failed", "no_call_parsed")


def test_formats_and_models():
    formats = {f.id: f for f in toolshim.formats()}
    assert formats["deepseek_v31"].catalog == "F25"
    assert formats["phi4_mini_json"].support == "partial" and formats["phi4_mini_json"].note
    assert ("qwen3-coder", "qwen3_coder") in toolshim.models()
    assert toolshim.format_for_model("deepseek-ai/DeepSeek-V3.1") == "deepseek_v31"
    assert toolshim.format_for_model("unknown") is None


def test_model_text_never_raises_on_surrogates_or_nul():
    for text in ("a\ud800b", "\x00<tool_call>\udfff", "\ud83d\ude00"):
        parsed = toolshim.parse(text)
        assert isinstance(parsed.content, str)
        parser = toolshim.StreamParser()
        parser.feed(text)
        parser.finish()


def test_large_inputs_parse_with_the_gil_released_in_threads():
    big = "x" * toolshim.DETACH_BYTES
    text = "start " + big + CALL
    expected = toolshim.parse(text, WEATHER)
    assert expected.content == "start " + big
    results = [None] * 4

    def work(i):
        parser = toolshim.StreamParser(WEATHER)
        events = parser.feed(text) + parser.finish()
        results[i] = (toolshim.parse(text, WEATHER), toolshim.Parsed.from_events(events))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for complete, streamed in results:
        assert complete == expected and streamed == expected


def test_the_package_is_typed():
    import importlib.resources

    root = importlib.resources.files("toolshim")
    assert root.joinpath("py.typed").is_file()
    assert root.joinpath("_toolshim.pyi").is_file()
    assert toolshim.__version__ == "0.1.0"
    assert "Warning" not in toolshim.__all__ and toolshim.Warning is not Warning


TEMPLATES = CORPUS.parent / "templates"
GEMMA_OUT = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|>'


def test_format_file_reads_a_template_by_path_or_as_a_dict():
    path = TEMPLATES / "gemma4.json"
    for source in (path, str(path), json.loads(path.read_text())):
        parsed = toolshim.parse(GEMMA_OUT, WEATHER, format_file=source)
        assert [(c.name, c.arguments) for c in parsed.calls] == [("get_weather", {"city": "Paris", "days": 2})]
    stream = toolshim.StreamParser(WEATHER, format_file=path)
    events = [e for chunk in GEMMA_OUT for e in stream.feed(chunk)] + stream.finish()
    assert toolshim.Parsed.from_events(events).calls == toolshim.parse(GEMMA_OUT, WEATHER, format_file=path).calls


def test_format_file_errors_name_the_field(tmp_path):
    bad = {"fields": {"tool_calls": {"open": "<c>", "content": "kv-lines"}}}
    with pytest.raises(ValueError, match="fields.tool_calls.content"):
        toolshim.parse("x", format_file=bad)
    with pytest.raises(ValueError, match="cannot read"):
        toolshim.parse("x", format_file=tmp_path / "missing.json")
    with pytest.raises(ValueError, match="format_file alone"):
        toolshim.parse("x", format="hermes", format_file=TEMPLATES / "gemma4.json")
