"""A canitoolcall engine adapter: the conformance suite replayed through toolshim, in process.

Run the suite with it (the interpreter must have toolshim and canitoolcall installed)::

    canitoolcall run --engine toolshim.adapters.canitoolcall:ToolshimAdapter \\
        --python "$(command -v python)" --out results/

``ToolshimAdapter`` reads each fixture in the format its family and model write
(:func:`format_for`: qwen3-hermes is ``hermes``, qwen3-xml ``qwen3_coder``, gpt-oss
``gpt_oss``, glm ``glm45``, gemma4 ``gemma4``; deepseek, kimi, llama and mistral by the
model, from toolshim's model table: Llama 3 ``llama3_json``, Llama 4 ``pythonic``). ``ToolshimAutoAdapter`` pins nothing: every
format toolshim knows is detected from the text.

**Units are text pieces, not token ids.** canitoolcall groups an engine's output token ids
into stream deltas, and an engine turns them back into text with its tokenizer. toolshim has
no tokenizer (and none can be downloaded here), so :meth:`ToolshimAdapter.units` splits
``raw_output`` into pieces with a regex that approximates BPE pre-tokenization (words with
their leading space, runs of up to three digits, runs of punctuation, whitespace), keeping
each marker of the family (``family.json`` ``markers``: ``<tool_call>``, ``<|im_end|>``, …)
whole, and returns their indices. The ``special`` strategy splits at those markers. Pieces are
about as many as tokens, and deterministic; they are not the model's tokens, so a stream here
is a realistic chunking, not the engine's own.

A generation prompt that ends inside reasoning (``…<think>``, Kimi K3's
``<|open|>think<|sep|>``) sets ``reasoning_open``: the output starts inside the reasoning,
and any family's end marker (or a marker that opens the answer) closes it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar

import toolshim
from canitoolcall.adapters.base import Adapter, ReplayInput, Support, ToolSpec
from canitoolcall.fixtures import load_family
from canitoolcall.results import ParsedToolCall, ParseResult, StreamAccumulator

__all__ = ["FAMILY_FORMATS", "ToolshimAdapter", "ToolshimAutoAdapter", "format_for", "pieces"]

#: canitoolcall family -> toolshim format id; None: by the model (toolshim.format_for_model).
FAMILY_FORMATS: dict[str, str | None] = {
    "qwen3-hermes": "hermes",
    "qwen3-xml": "qwen3_coder",
    "gpt-oss": "gpt_oss",
    "glm": "glm45",
    "llama": None,
    "gemma4": "gemma4",
    "deepseek": None,
    "kimi": None,
    "mistral": None,
}

#: Generation-prompt endings that open reasoning (Qwen3's `<think>`, Kimi K3's think
#: channel): the output starts inside it, which `reasoning_open` tells the parser.
PROMPT_OPENERS: tuple[str, ...] = ("<think>", "<|open|>think<|sep|>")

_PIECE = re.compile(
    r"'(?:[sdmt]|ll|ve|re)"  # English contractions
    r"| ?[^\W\d_]+"  # letters, with a leading space
    r"| ?\d{1,3}"  # up to three digits
    r"| ?(?:[^\w\s]|_)+"  # punctuation and symbols
    r"|\s+(?!\S)|\s+"  # whitespace, the last space left for the next word
    r"|.",  # anything else, one character at a time
    re.DOTALL,
)


def format_for(family: str, model: str) -> str | None:
    """The toolshim format id for a fixture's family and reference model (None: unknown)."""
    if family not in FAMILY_FORMATS:
        return None
    return FAMILY_FORMATS[family] or toolshim.format_for_model(model)


@functools.lru_cache(maxsize=64)
def _markers(family: str) -> tuple[str, ...]:
    try:
        markers = load_family(family).markers
    except Exception:  # noqa: BLE001 - an unknown family has no markers
        return ()
    return tuple(sorted({m for m in markers if m}, key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def pieces(text: str, markers: tuple[str, ...]) -> tuple[tuple[str, ...], frozenset[int]]:
    """``text`` as pre-tokenizer pieces that join to it, and the indices of the marker pieces."""
    out: list[str] = []
    special: set[int] = set()
    parts = re.split("(" + "|".join(map(re.escape, markers)) + ")", text) if markers else [text]
    for idx, part in enumerate(parts):
        if not part:
            continue
        if idx % 2 == 1:
            special.add(len(out))
            out.append(part)
        else:
            out.extend(_PIECE.findall(part))
    return tuple(out), frozenset(special)


class ToolshimAdapter(Adapter):
    """canitoolcall ``Adapter`` for toolshim, each family read in its model's format."""

    name: ClassVar[str] = "toolshim"
    pinned_version: ClassVar[str] = toolshim.__version__
    supports_text_deltas: ClassVar[bool] = True
    tokens_per_step = "many"
    #: Detect the format from the text instead of pinning the family's.
    auto_detect: ClassVar[bool] = False

    def version(self) -> str:
        return toolshim.__version__

    def engine_details(self) -> dict[str, Any]:
        return {
            "formats": "auto" if self.auto_detect else "pinned per family and model",
            "units": "regex pre-tokenizer pieces of raw_output with the family markers whole "
            "(no tokenizer): not the model's token ids",
        }

    def supports(self, family: str, model: str) -> Support:
        if self.auto_detect or format_for(family, model) is not None:
            return Support(True)
        return Support(False, f"no toolshim format for family {family!r} and model {model!r}")

    def _options(self, raw: ReplayInput) -> dict[str, Any]:
        """The parser options for a fixture."""
        options: dict[str, Any] = {}
        if not self.auto_detect:
            fid = format_for(raw.family, raw.model)
            if fid is not None:
                options["format"] = fid
        prompt = (raw.generation_prompt or "").rstrip()
        if any(prompt.endswith(opener) for opener in PROMPT_OPENERS):
            options["reasoning_open"] = True
        return options

    def parser_config(self, raw: ReplayInput) -> dict[str, Any]:
        return {"toolshim": toolshim.__version__, "options": self._options(raw)}

    def _pieces(self, raw: ReplayInput) -> tuple[tuple[str, ...], frozenset[int]]:
        return pieces(raw.text, _markers(raw.family))

    def units(self, raw: ReplayInput) -> list[int]:
        return list(range(len(self._pieces(raw)[0])))

    def special_token_ids(self, raw: ReplayInput) -> Collection[int] | None:
        return self._pieces(raw)[1]

    def parse(self, raw: ReplayInput, tools: Sequence[ToolSpec]) -> ParseResult:
        options = self._options(raw)
        try:
            parsed = toolshim.parse(raw.text, _tools(tools), **options)
        except ValueError as err:
            return ParseResult(exception=f"ValueError: {err}")
        return ParseResult(
            content=parsed.content or None,
            reasoning_content=parsed.reasoning or None,
            tool_calls=tuple(ParsedToolCall(call.name, call.arguments_json) for call in parsed.calls),
        )

    def parse_stream(self, raw: ReplayInput, chunks: Sequence[Sequence[int]], tools: Sequence[ToolSpec]) -> ParseResult:
        text = self._pieces(raw)[0]
        return self._stream(raw, ["".join(text[i] for i in chunk) for chunk in chunks], tools)

    def parse_stream_text(self, raw: ReplayInput, deltas: Sequence[str], tools: Sequence[ToolSpec]) -> ParseResult:
        return self._stream(raw, deltas, tools)

    def _stream(self, raw: ReplayInput, deltas: Sequence[str], tools: Sequence[ToolSpec]) -> ParseResult:
        options = self._options(raw)
        try:
            parser = toolshim.StreamParser(_tools(tools), **options)
        except ValueError as err:
            return ParseResult(exception=f"ValueError: {err}")
        acc = StreamAccumulator()
        for delta in deltas:
            _accumulate(acc, parser.feed(delta))
        _accumulate(acc, parser.finish())
        return acc.result()


class ToolshimAutoAdapter(ToolshimAdapter):
    """Like :class:`ToolshimAdapter`, with every format detected from the text."""

    auto_detect = True


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
    return list(tools) or None


def _accumulate(acc: StreamAccumulator, events: list[Any]) -> None:
    """Text and reasoning go out as they come; a call goes out when its ``CallEnd`` says it is
    complete (a server's choice: one that streams argument deltas as they come, as toolshim's
    gateway does, shows a cut-off call's deltas and then ends with ``length``)."""
    for event in events:
        if isinstance(event, toolshim.Text):
            acc.add_content(event.text)
        elif isinstance(event, toolshim.Reasoning):
            acc.add_reasoning(event.text)
        elif isinstance(event, toolshim.CallEnd) and event.call.complete:
            acc.add_tool_call(event.call_idx, name=event.call.name)
            acc.add_tool_call(event.call_idx, arguments=event.call.arguments_json)
