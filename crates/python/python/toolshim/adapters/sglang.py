"""An SGLang-shaped ``FunctionCallParser`` backed by toolshim.

The class has the methods SGLang's serving code calls on its own ``FunctionCallParser``
(``sglang.srt.function_call.function_call_parser``): ``has_tool_call``, ``parse_non_stream``,
``parse_stream_chunk`` and ``parse_stream_end``, returning ``(normal_text, calls)`` with calls
as SGLang's ``ToolCallItem`` (``tool_index``, ``name``, ``parameters`` as JSON text) when SGLang
is installed, else a small class with the same fields::

    from toolshim.adapters.sglang import FunctionCallParser

    parser = FunctionCallParser(tools, "qwen3_coder")      # one per request
    text, calls = parser.parse_stream_chunk(delta)         # for each delta
    text, calls = parser.parse_stream_end()                # at the end

As in SGLang, a streamed call comes as one item with its name (``parameters == ""``), then
items with fragments of its arguments; ``tool_index`` is the call's index in the output. In
``parse_non_stream`` it is the tool's index in ``tools`` (-1 for a tool not in it), as SGLang
sets it. ``tool_call_parser`` is SGLang's parser name (``qwen25``, ``deepseekv31``, …), a
toolshim format id, ``"toolshim"`` (every format), or a path to a format file (a
``response_template``, a ``tokenizer_config.json`` holding one, or toolshim's rows; a name
ending in ``.json`` or ``.toml``), as is ``format_file=PATH``. Reasoning the parser sees stays in the
normal text as ``<think>…</think>``, as with SGLang's detectors (its reasoning parser runs
first). Only the standard library and toolshim are imported; SGLang only for ``ToolCallItem``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import toolshim
from toolshim.adapters._text import ReasoningAsText, complete, tools_list

__all__ = ["SGLANG_PARSERS", "FunctionCallParser", "ToolCallItem"]

#: SGLang's ``--tool-call-parser`` names and the toolshim format each reads.
SGLANG_PARSERS: dict[str, str] = {
    "qwen": "hermes",
    "qwen25": "hermes",
    "hermes": "hermes",
    "qwen3_coder": "qwen3_coder",
    "step3p5": "qwen3_coder",
    "nanbeige": "qwen3_coder",
    "deepseekv3": "deepseek_v3",
    "deepseekv31": "deepseek_v31",
    "deepseekv32": "deepseek_v32",
    "deepseekv4": "deepseek_v32",
    "deepseekv41": "deepseek_v41",
    "kimi_k2": "kimi_k2",
    "kimi_k3": "kimi_k3",
    "glm": "glm45",
    "glm45": "glm45",
    "glm47": "glm45",
    "gpt-oss": "gpt_oss",
    "llama3": "llama3_json",
    "pythonic": "pythonic",
    "mistral": "mistral",
    "gemma4": "gemma4",
    "lfm2": "lfm2",
    "step3": "step3",
    "minimax-m2": "minimax_m2",
    "minimax-m3": "minimax_m3",
    "interns1": "internlm",
    "gigachat3": "gigachat3",
    "gigachat35": "gigachat35",
    "dots": "dots",
    "minicpm5": "minicpm5",
    "inkling": "inkling",
    "k2_horizon": "k2_horizon",
    "muse": "muse",
    "apertus2509": "apertus",
    "cohere_command4": "cohere",
    "hunyuan": "hunyuan_v3",
    "iquest_q1": "iquest_coder",
    # Formats SGLang has no detector for: their toolshim ids.
    "step_audio2": "step_audio2",
    "solar_open2": "solar_open2",
    "plamo3": "plamo3",
    "llm_jp4": "llm_jp4",
    "iquest_coder": "iquest_coder",
    "mirothinker": "mirothinker",
    "cwm": "cwm",
    "hyperclovax": "hyperclovax",
    "openpangu": "openpangu",
    "rwkv": "rwkv",
    "hunyuan_v4": "hunyuan_v4",
}


@dataclass
class ToolCallItem:
    """SGLang's ``ToolCallItem`` fields, for when SGLang is not installed."""

    tool_index: int
    name: str | None = None
    parameters: str = ""


def _item_class() -> Any:
    try:
        from sglang.srt.function_call.core_types import ToolCallItem as SglangItem
    except ImportError:
        return ToolCallItem
    return SglangItem


class FunctionCallParser:
    """toolshim behind SGLang's ``FunctionCallParser`` methods; one per request."""

    def __init__(
        self,
        tools: Any,
        tool_call_parser: str | None = "toolshim",
        tokenizer: Any = None,
        tool_choice: Any = None,
        **options: Any,
    ) -> None:
        self.tools = tools
        self._tools = tools_list(tools)
        self._options = dict(options)
        if tool_call_parser and tool_call_parser.endswith((".json", ".toml")):
            self._options.setdefault("format_file", tool_call_parser)
        elif tool_call_parser and tool_call_parser != "toolshim" and "format_file" not in options:
            fid = SGLANG_PARSERS.get(tool_call_parser, tool_call_parser)
            self._options.setdefault("format", fid)
        # The tools list is checked now: a bad one raises ValueError here, not mid-stream.
        names = toolshim.check_tools(self._tools) if self._tools is not None else []
        self._tool_index = {name: idx for idx, name in enumerate(names)}
        self._item = _item_class()
        self._stream: toolshim.StreamParser | None = None
        self._text = ReasoningAsText()

    def has_tool_call(self, text: str) -> bool:
        """Whether ``text`` holds tool-call syntax (a call, a call to an unknown tool, or a
        malformed one)."""
        return toolshim.parse(text, self._tools, **self._options).saw_tool_syntax

    def parse_non_stream(self, full_text: str, *, preserve_incomplete: bool = False) -> tuple[str, list[Any]]:
        """Parses a whole output: ``(normal_text, calls)``. Calls the output cut off (or whose
        arguments were not JSON) are left out unless ``preserve_incomplete``; their arguments
        are then closed JSON."""
        text, calls = complete(full_text, self._tools, self._options, keep_incomplete=preserve_incomplete)
        items = [
            self._item(tool_index=self._tool_index.get(call.name, -1), name=call.name, parameters=call.arguments_json)
            for call in calls
        ]
        return text, items

    def parse_stream_chunk(self, chunk_text: str) -> tuple[str, list[Any]]:
        """Feeds the next chunk: ``(normal_text, calls)`` settled by it."""
        if self._stream is None:
            self._stream = toolshim.StreamParser(self._tools, **self._options)
        if self._stream.finished:
            return "", []
        return self._fold(self._stream.feed(chunk_text))

    def parse_stream_end(self) -> tuple[str, list[Any]]:
        """Ends the stream: what the parser still held."""
        if self._stream is None or self._stream.finished:
            return "", []
        text, calls = self._fold(self._stream.finish())
        return text + self._text.close(), calls

    def _fold(self, events: list[Any]) -> tuple[str, list[Any]]:
        text: list[str] = []
        items: list[Any] = []
        for event in events:
            text.append(self._text.text(event))
            if isinstance(event, toolshim.CallStart):
                items.append(self._item(tool_index=event.call_idx, name=event.name, parameters=""))
            elif isinstance(event, toolshim.ArgsDelta):
                last = items[-1] if items else None
                if last is not None and last.tool_index == event.call_idx and last.name is None:
                    last.parameters += event.json
                else:
                    items.append(self._item(tool_index=event.call_idx, name=None, parameters=event.json))
        return "".join(text), items
