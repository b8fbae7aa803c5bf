"""A vLLM tool parser backed by toolshim: one ``StreamParser`` per request, linear in the output.

Start vLLM with it as a plugin::

    vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --enable-auto-tool-choice \\
        --tool-parser-plugin toolshim.adapters.vllm --tool-call-parser toolshim

Importing this module imports vLLM and registers, with vLLM's ``ToolParserManager``:

- ``toolshim``: the format the served model writes (from its tokenizer's name, as
  ``toolshim.format_for_model`` reads it), or every format toolshim knows when the name is not
  in its model table;
- ``toolshim_<format>`` for each format toolshim reads (``toolshim_hermes``,
  ``toolshim_qwen3_coder``, ``toolshim_deepseek_v31``, …): that format only;
- ``toolshim_template``: the format a format file describes: the file at the path in
  ``TOOLSHIM_FORMAT_FILE`` (a ``response_template``, a ``tokenizer_config.json`` holding one,
  or toolshim's rows), else the ``response_template`` the checkpoint's tokenizer ships.

The parser answers with vLLM's own types (``ExtractedToolCallInformation``, ``DeltaMessage``,
``DeltaToolCall``, ``DeltaFunctionCall``, ``ToolCall``, ``FunctionCall``). Streaming feeds only
``delta_text`` to the request's parser, and the text it holds back (a marker split across
deltas) comes out when vLLM ends the stream: the class sets ``engine_based_streaming`` so
vLLM calls ``finish_streaming()`` then. Reasoning is best left to vLLM's ``--reasoning-parser``;
reasoning the tool parser sees anyway stays in the content as ``<think>…</think>``, as with
vLLM's own tool parsers. Written and tested against vLLM 0.33.0.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import toolshim
from toolshim.adapters._text import ReasoningAsText, complete, tools_list

try:  # vLLM 0.12 and later
    from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager
except ImportError:  # older vLLM
    from vllm.entrypoints.openai.tool_parsers.abstract_tool_parser import (  # type: ignore[no-redef]
        ToolParser,
        ToolParserManager,
    )

try:  # vLLM 0.30 and later
    from vllm.entrypoints.generate.base.protocol import (
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
except ImportError:  # older vLLM
    from vllm.entrypoints.openai.protocol import (  # type: ignore[no-redef]
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )

__all__ = ["ToolshimToolParser", "parser_names"]


def _call_id(model_id: str | None) -> str:
    """The id the model wrote for the call, else a new one in vLLM's shape."""
    return model_id or f"chatcmpl-tool-{uuid.uuid4().hex}"


class ToolshimToolParser(ToolParser):
    """vLLM ``ToolParser`` reading tool calls with toolshim (registered as ``toolshim``)."""

    #: vLLM calls ``finish_streaming()`` at the end of a stream only for these parsers.
    engine_based_streaming = True
    #: The toolshim format id this class reads; None picks it from the model's name.
    toolshim_format: str | None = None
    #: Read the format a format file describes (``toolshim_template``).
    toolshim_template: bool = False

    def __init__(self, tokenizer: Any, tools: Any = None) -> None:
        super().__init__(tokenizer, tools)
        self._tools = tools_list(tools)
        self._model: str | None = getattr(tokenizer, "name_or_path", None) or None
        self._stream: toolshim.StreamParser | None = None
        self._text = ReasoningAsText()
        self._format_file: Any = _format_file(tokenizer) if self.toolshim_template else None

    # -- settings

    def _options(self, request: Any) -> tuple[Any, dict[str, Any]]:
        tools = self._tools if self._tools is not None else tools_list(getattr(request, "tools", None))
        if self._format_file is not None:
            return tools, {"format_file": self._format_file}
        if self.toolshim_format is not None:
            return tools, {"format": self.toolshim_format}
        model = self._model
        if model is None or toolshim.format_for_model(model) is None:
            model = getattr(request, "model", None) or model
        return tools, ({"model": model} if model else {})

    def adjust_request(self, request: Any) -> Any:
        """vLLM's adjustments, and special tokens kept in the text: many formats' markers are
        special tokens, which the detokenizer drops by default."""
        request = super().adjust_request(request)
        if getattr(request, "tools", None) and getattr(request, "tool_choice", None) != "none":
            if hasattr(request, "skip_special_tokens"):
                request.skip_special_tokens = False
        return request

    # -- complete output

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        """Parses a whole output (non-streamed responses)."""
        tools, options = self._options(request)
        content, calls = complete(model_output, tools, options)
        tool_calls = [
            ToolCall(
                id=_call_id(call.id),
                type="function",
                function=FunctionCall(name=call.name, arguments=call.arguments_json),
            )
            for call in calls
        ]
        return ExtractedToolCallInformation(
            tools_called=bool(tool_calls), tool_calls=tool_calls, content=content or None
        )

    # -- streaming

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        """Feeds ``delta_text`` to this request's parser; returns what it settled, or None."""
        if self._stream is None:
            tools, options = self._options(request)
            self._stream = toolshim.StreamParser(tools, **options)
        if self._stream.finished:
            return None
        return self._delta(self._stream.feed(delta_text))

    def finish_streaming(self) -> DeltaMessage | None:
        """The end of the stream: what the parser still held (a call cut off is closed)."""
        if self._stream is None or self._stream.finished:
            return None
        message = self._delta(self._stream.finish())
        closing = self._text.close()
        if closing:
            message = message or DeltaMessage()
            message.content = (message.content or "") + closing
        return message

    def _delta(self, events: list[Any]) -> DeltaMessage | None:
        if not events:
            return None
        content: list[str] = []
        calls: list[Any] = []
        for event in events:
            if isinstance(event, toolshim.ArgsDelta):  # the most frequent event
                idx = event.call_idx
                last = calls[-1] if calls else None
                if last is not None and last.index == idx:
                    last.function.arguments = (last.function.arguments or "") + event.json
                else:
                    calls.append(DeltaToolCall(index=idx, function=DeltaFunctionCall(arguments=event.json)))
                continue
            content.append(self._text.text(event))
            if isinstance(event, toolshim.CallStart):
                self.current_tool_id = event.call_idx
                self.prev_tool_call_arr.append({"name": event.name, "arguments": ""})
                self.streamed_args_for_tool.append("")
                function = DeltaFunctionCall(name=event.name)
                calls.append(DeltaToolCall(index=event.call_idx, id=_call_id(event.id), type="function", function=function))
            elif isinstance(event, toolshim.CallEnd):
                # vLLM compares these two at the end (get_remaining_unstreamed_args): equal,
                # they leave nothing to add. The fragments streamed join to exactly
                # `arguments_json`, so they are set once here, not grown per delta (a
                # string grown in a list is copied whole each time).
                if event.call_idx < len(self.streamed_args_for_tool):
                    arguments = event.call.arguments_json
                    self.streamed_args_for_tool[event.call_idx] = arguments
                    self.prev_tool_call_arr[event.call_idx]["arguments"] = arguments
        text = "".join(content)
        if not text and not calls:
            return None
        return DeltaMessage(content=text or None, tool_calls=calls)


def _format_file(tokenizer: Any) -> Any:
    """The format file of ``toolshim_template``: ``TOOLSHIM_FORMAT_FILE``'s path, else the
    tokenizer's ``response_template`` (as vLLM's own response_template parser finds it)."""
    path = os.environ.get("TOOLSHIM_FORMAT_FILE")
    if path:
        return path
    template = getattr(tokenizer, "response_template", None)
    if not isinstance(template, dict):
        template = (getattr(tokenizer, "init_kwargs", None) or {}).get("response_template")
    if not isinstance(template, dict):
        raise ValueError(
            "toolshim_template: set TOOLSHIM_FORMAT_FILE to a format file, or serve a model "
            "whose tokenizer_config.json has a response_template"
        )
    return template


def parser_names() -> list[str]:
    """The names this module registers: ``toolshim``, ``toolshim_template`` and
    ``toolshim_<format>``."""
    readable = [f.id for f in toolshim.formats() if f.support != "missing"]
    return ["toolshim", "toolshim_template", *(f"toolshim_{fid}" for fid in readable)]


def _register() -> None:
    ToolParserManager.register_module(name="toolshim", module=ToolshimToolParser)
    template = type("ToolshimTemplateToolParser", (ToolshimToolParser,), {"toolshim_template": True})
    ToolParserManager.register_module(name="toolshim_template", module=template)
    for name in parser_names()[2:]:
        fid = name.removeprefix("toolshim_")
        cls = type(f"ToolshimToolParser_{fid}", (ToolshimToolParser,), {"toolshim_format": fid})
        ToolParserManager.register_module(name=name, module=cls)


_register()
