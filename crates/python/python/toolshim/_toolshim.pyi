"""Type stubs of the extension module (the Rust crate crates/python)."""

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, final

__version__: str
#: Texts (and chunks) at least this many UTF-8 bytes long are parsed with the GIL released.
DETACH_BYTES: int

#: A tools list: OpenAI ``[{"type": "function", "function": {...}}]``, Anthropic
#: ``[{"name": ..., "input_schema": {...}}]``, legacy ``[{"name": ..., "parameters": {...}}]``,
#: a dict with a ``"tools"`` or ``"functions"`` list, or the JSON text of one. Objects with a
#: pydantic ``model_dump()`` are read through it.
Tools = str | Sequence[Any] | Mapping[str, Any]

@final
class ToolCall:
    """A finished tool call."""

    @property
    def id(self) -> str | None:
        """The id the model gave the call, or None."""
    @property
    def name(self) -> str:
        """The tool's name (as declared in the tools list, when there is one)."""
    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments as a dict (``json.loads(arguments_json)``, read once)."""
    @property
    def arguments_json(self) -> str:
        """The arguments as the exact JSON text: compact, keys in the model's order."""
    @property
    def complete(self) -> bool:
        """Whether the model finished the call; False when the output cut it off inside its
        arguments, or its arguments were not JSON (its text is then content, and its span
        empty); it is then in ``Parsed.incomplete``, never in ``Parsed.calls``."""
    def to_dict(self) -> dict[str, Any]:
        """``{"id": ..., "name": ..., "arguments": {...}}``, as ``toolshim parse`` prints it."""
    def __eq__(self, other: object) -> bool: ...

@final
class Rejected:
    """A call to a tool that is not in the tools list (an item of ``Parsed.rejected`` and an
    event)."""

    type: ClassVar[Literal["rejected"]]
    __match_args__: ClassVar[tuple[str, str]]
    @property
    def name(self) -> str:
        """The name as the model wrote it."""
    @property
    def reason(self) -> str:
        """Why it was rejected."""
    def to_dict(self) -> dict[str, Any]:
        """``{"type": "rejected", "name": ..., "reason": ...}``."""
    def __eq__(self, other: object) -> bool: ...

@final
class Warning:  # noqa: A001 - the parser's name for it
    """A repair, a coercion, or tool syntax that could not be used (an item of
    ``Parsed.warnings`` and an event)."""

    type: ClassVar[Literal["warning"]]
    __match_args__: ClassVar[tuple[str, str, str]]
    @property
    def code(self) -> str:
        """``repaired_json``, ``truncated``, ``missing_end_marker``, ``coerced``,
        ``missing_required``, ``unknown_parameter``, ``invalid_arguments``, ``ignored_field``,
        ``malformed_call``, ``limit_reached``, ``example``, ``call_in_reasoning``,
        ``stray_reasoning_end``, ``empty_call_markup``, ``ignored_text`` or ``free_text``."""
    @property
    def message(self) -> str:
        """A human-readable explanation."""
    @property
    def call_idx(self) -> int | None:
        """The accepted call the warning is about, or None."""
    def to_dict(self) -> dict[str, Any]:
        """``{"type": "warning", "code": ..., "message": ..., "call_idx": ...}``."""
    def __eq__(self, other: object) -> bool: ...

@final
class Outcome:
    """What an agent loop does next with one output."""

    @property
    def kind(self) -> Literal["calls", "text", "failed"]:
        """``calls``: run ``calls`` (``exits`` end the loop); ``text``: a plain answer;
        ``failed``: unknown tools, or tool syntax that gave no call."""
    @property
    def calls(self) -> list[ToolCall]: ...
    @property
    def exits(self) -> list[ToolCall]: ...
    @property
    def reason(self) -> Literal["unknown_tools", "no_call_parsed"] | None: ...
    @property
    def message(self) -> str | None:
        """What to tell the model when it failed."""
    @property
    def unknown_tools(self) -> list[str]: ...
    @property
    def raw(self) -> str | None:
        """The model output, verbatim, when it failed."""
    def to_dict(self) -> dict[str, Any]:
        """The ``"outcome"`` object of ``toolshim parse --exit-tools``."""
    def __eq__(self, other: object) -> bool: ...

@final
class Parsed:
    """The result of parsing one model output."""

    @property
    def calls(self) -> list[ToolCall]:
        """The accepted tool calls, in order: the calls to run."""
    @property
    def incomplete(self) -> list[ToolCall]:
        """Accepted calls the output cut off inside their arguments (a ``truncated`` warning
        says so), or whose arguments were not JSON (a ``malformed_call`` warning; their text
        is in ``content``), in order. Never run these."""
    @property
    def content(self) -> str:
        """The visible text: everything that is not a call, reasoning or hidden rejected call."""
    @property
    def reasoning(self) -> str:
        """The reasoning text."""
    @property
    def rejected(self) -> list[Rejected]:
        """Calls to tools that are not in the tools list."""
    @property
    def warnings(self) -> list[Warning]:
        """Repairs, coercions and problems, in input order."""
    @property
    def saw_tool_syntax(self) -> bool:
        """Whether the output held tool-call syntax (an accepted, rejected or malformed call)."""
    @property
    def outcome(self) -> Outcome | None:
        """The agent outcome, when ``exit_tools`` was given."""
    def to_dict(self) -> dict[str, Any]:
        """The object ``toolshim parse`` prints (keys calls, incomplete, content, reasoning,
        rejected, warnings, saw_tool_syntax, and outcome when there is one)."""
    @staticmethod
    def from_events(events: Iterable[Event]) -> Parsed:
        """Folds streamed events into the result ``parse`` gives for the same text."""
    def __eq__(self, other: object) -> bool: ...

@final
class Text:
    """Visible text, in input order."""

    type: ClassVar[Literal["text"]]
    __match_args__: ClassVar[tuple[str]]
    @property
    def text(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

@final
class Reasoning:
    """Reasoning text, in input order."""

    type: ClassVar[Literal["reasoning"]]
    __match_args__: ClassVar[tuple[str]]
    @property
    def text(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

@final
class CallStart:
    """A tool call begins; its name is final."""

    type: ClassVar[Literal["call_start"]]
    __match_args__: ClassVar[tuple[str, str, str]]
    @property
    def call_idx(self) -> int: ...
    @property
    def id(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

@final
class ArgsDelta:
    """A fragment of a call's arguments JSON; the fragments join to ``arguments_json``."""

    type: ClassVar[Literal["args_delta"]]
    __match_args__: ClassVar[tuple[str, str]]
    @property
    def call_idx(self) -> int: ...
    @property
    def json(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

@final
class CallEnd:
    """A tool call ended: ``call.complete`` says whether it stands (false: cut off, or its
    arguments were not JSON; never run it)."""

    type: ClassVar[Literal["call_end"]]
    __match_args__: ClassVar[tuple[str, str]]
    @property
    def call_idx(self) -> int: ...
    @property
    def call(self) -> ToolCall: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

Event = Text | Reasoning | CallStart | ArgsDelta | CallEnd | Rejected | Warning

@final
class Format:
    """A model-native tool-call format and how far toolshim reads it."""

    @property
    def id(self) -> str: ...
    @property
    def catalog(self) -> str: ...
    @property
    def models(self) -> str: ...
    @property
    def read_by(self) -> str: ...
    @property
    def support(self) -> Literal["full", "partial", "missing"]: ...
    @property
    def note(self) -> str | None: ...

def parse(
    text: str,
    tools: Tools | None = None,
    *,
    format: str | None = None,
    model: str | None = None,
    format_file: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    dialects: Sequence[str] | None = None,
    tag_pairs: Sequence[tuple[str, str]] | None = None,
    free_text: bool = False,
    reasoning_open: bool = False,
    reasoning_calls: bool = False,
    example_guard: bool = True,
    hide_rejected: bool = False,
    exit_tools: Sequence[str] | None = None,
    max_held_bytes: int | None = None,
    max_depth: int | None = None,
) -> Parsed:
    """Parse one model output: its tool calls, visible text, reasoning, rejected calls and
    warnings.

    The options are those of ``toolshim parse``: ``format`` pins a model-native format
    (``formats()``), ``model`` picks the one a model writes, ``format_file`` reads the one a
    format file describes (a path to a Hugging Face ``response_template``, the
    ``tokenizer_config.json`` holding one, or toolshim's rows as JSON or TOML; or a template
    as a dict; what toolshim cannot read raises ValueError naming the field), ``dialects`` picks the generic
    dialects (markup, fenced, python, keyvalue, react, json, free_text), ``tag_pairs`` adds
    custom markers with a JSON body, ``free_text`` guesses a call from prose (needs tools),
    ``reasoning_open`` starts inside ``<think>``, ``reasoning_calls`` uses calls written in
    reasoning, ``example_guard=False`` reads calls shown as examples, ``hide_rejected``
    removes calls to unknown tools from the content, ``exit_tools`` adds an ``outcome``.

    Model text never raises. A bad tools list raises ValueError with the parser's message.
    """

class StreamParser:
    """Incremental parser for one model output: ``feed`` chunks, then ``finish``.

    For every chunking of a text the events fold (``Parsed.from_events``) to exactly what
    ``parse`` returns. Takes ``parse``'s options except ``exit_tools``.
    """

    def __init__(
        self,
        tools: Tools | None = None,
        *,
        format: str | None = None,
        model: str | None = None,
        format_file: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        dialects: Sequence[str] | None = None,
        tag_pairs: Sequence[tuple[str, str]] | None = None,
        free_text: bool = False,
        reasoning_open: bool = False,
        reasoning_calls: bool = False,
        example_guard: bool = True,
        hide_rejected: bool = False,
        max_held_bytes: int | None = None,
        max_depth: int | None = None,
    ) -> None: ...
    def feed(self, text: str) -> list[Event]:
        """Feeds the next chunk; returns the events it settles."""
    def finish(self) -> list[Event]:
        """Ends the output; returns the events still held. ``feed`` raises RuntimeError after."""
    @property
    def finished(self) -> bool: ...

def agent_outcome(
    parsed: Parsed, raw: str, *, exit_tools: Sequence[str], tools: Tools | None = None
) -> Outcome:
    """What an agent loop does next with ``parsed``: ``exit_tools`` end the loop, the tools
    of ``tools`` (or any other name without it) are run, anything else fails."""

def formats() -> list[Format]:
    """Every catalogued model-native format (``toolshim parse --list-formats``)."""

def models() -> list[tuple[str, str]]:
    """The model table: (lowercase substring of a model id, format id), most specific first."""

def format_for_model(model: str) -> str | None:
    """The format id ``model=`` would pick for this model id, or None (auto-detection)."""

def check_tools(tools: Tools) -> list[str]:
    """The tool names of a tools list; raises ValueError with the parser's message if it is not
    one."""
