"""What the serving adapters (vLLM, SGLang) share: reasoning handed back as text.

A serving engine runs its own reasoning parser before the tool parser, so a tool parser that
sees ``<think>`` does so because none is configured; the engines' own tool parsers then leave
the reasoning in the content. toolshim separates it, so these adapters wrap it back in
``<think>…</think>`` where it was, and the content stays whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import toolshim

OPEN = "<think>"
CLOSE = "</think>"


class ReasoningAsText:
    """Folds ``Text`` and ``Reasoning`` events into one text, in order."""

    def __init__(self) -> None:
        self._open = False

    def text(self, event: Any) -> str:
        """The text one event adds (``""`` for calls and warnings, which close reasoning)."""
        if isinstance(event, toolshim.Reasoning):
            if self._open:
                return event.text
            self._open = True
            return OPEN + event.text
        closing = self.close()
        if isinstance(event, toolshim.Text):
            return closing + event.text
        return closing

    def close(self) -> str:
        """Closes reasoning that is open (before a call, or at the end of the output)."""
        if self._open:
            self._open = False
            return CLOSE
        return ""


def fold(events: Iterable[Any], keep_incomplete: bool = False) -> tuple[str, list[toolshim.ToolCall]]:
    """The whole text (reasoning wrapped) and the finished calls of a complete output.
    Incomplete calls (cut off, or withdrawn because their arguments were not JSON, their
    text then being in the content) are left out unless ``keep_incomplete``."""
    folder = ReasoningAsText()
    parts: list[str] = []
    calls: list[toolshim.ToolCall] = []
    for event in events:
        parts.append(folder.text(event))
        if isinstance(event, toolshim.CallEnd) and (event.call.complete or keep_incomplete):
            calls.append(event.call)
    parts.append(folder.close())
    return "".join(parts), calls


def complete(
    text: str, tools: Any, options: dict[str, Any], keep_incomplete: bool = False
) -> tuple[str, list[toolshim.ToolCall]]:
    """Parses a whole output (one chunk through the streaming parser, so reasoning keeps its
    place in the text)."""
    parser = toolshim.StreamParser(tools, **options)
    events = parser.feed(text)
    events.extend(parser.finish())
    return fold(events, keep_incomplete)


def tools_list(tools: Any) -> Any:
    """A tools list toolshim reads, from the engine's tool objects (pydantic models are read
    through ``model_dump``); None for no tools."""
    if not tools:
        return None
    return [tool.model_dump() if hasattr(tool, "model_dump") else tool for tool in tools]
