"""Tool calls out of language-model text, complete or streaming: toolshim's parser for Python.

>>> import toolshim
>>> parsed = toolshim.parse('Sure.<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>')
>>> parsed.content, parsed.calls[0].name, parsed.calls[0].arguments
('Sure.', 'get_time', {'tz': 'UTC'})

The parser is the Rust crate toolshim-parse: linear in its input, the same result for any
chunking of a stream, and model text never raises. See docs/python.md in the repository.
Adapters for vLLM, SGLang and canitoolcall are in ``toolshim.adapters``.
"""

from typing import Union

from ._toolshim import (
    DETACH_BYTES,
    ArgsDelta,
    CallEnd,
    CallStart,
    Format,
    Outcome,
    Parsed,
    Reasoning,
    Rejected,
    StreamParser,
    Text,
    ToolCall,
    Warning,  # noqa: A004 - the parser's name; not in __all__, so `import *` keeps the builtin
    __version__,
    agent_outcome,
    check_tools,
    format_for_model,
    formats,
    models,
    parse,
)

#: One event of :class:`StreamParser`: every class has a ``type`` class attribute
#: (``"text"``, ``"reasoning"``, ``"call_start"``, ``"args_delta"``, ``"call_end"``,
#: ``"rejected"``, ``"warning"``) and ``to_dict()``.
Event = Union[Text, Reasoning, CallStart, ArgsDelta, CallEnd, Rejected, Warning]

__all__ = [
    "DETACH_BYTES",
    "ArgsDelta",
    "CallEnd",
    "CallStart",
    "Event",
    "Format",
    "Outcome",
    "Parsed",
    "Reasoning",
    "Rejected",
    "StreamParser",
    "Text",
    "ToolCall",
    "__version__",
    "agent_outcome",
    "check_tools",
    "format_for_model",
    "formats",
    "models",
    "parse",
]
