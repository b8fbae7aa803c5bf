"""Speed: toolshim against vLLM's own tool parsers on the same outputs (a benchmark, not a test).

Run it with an interpreter that has the toolshim wheel and vLLM installed (.ci/run makes one,
target/vllm-venv)::

    target/vllm-venv/bin/python crates/python/bench/bench.py

Without vLLM only toolshim's rows are printed; with SGLang importable too (its
``sglang.srt.function_call`` package), a second table compares SGLang's ``FunctionCallParser``
with toolshim's (``toolshim.adapters.sglang``) on the same outputs and deltas. For each format (hermes, qwen3_coder,
deepseek_v31) it parses two outputs, a 2 KB reply with prose and two calls and a 200 KB
``write_file`` call, complete and streamed in token-sized deltas (pieces of a regex
pre-tokenizer with the format's markers whole, about 4 characters each; markers get their
vocabulary id). Every parser runs the way vLLM's server runs it: complete with
``Parser.parse``, streamed through ``ChatStreamProcessor.step`` (``Parser.parse_delta``, and
the end-of-stream flush); "toolshim" is toolshim's vLLM plugin in that same path, and
"toolshim direct" is ``toolshim.parse`` and ``StreamParser.feed`` alone. Each result is checked
against toolshim's calls, and a parser that returns other calls is marked. A last table streams
growing write_file calls through ``StreamParser`` to show the time per byte stays flat.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from collections.abc import Callable

import toolshim

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
]

PIECE = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?(?:[^\w\s]|_)+|\s+(?!\S)|\s+|.", re.DOTALL)


def file_body(size: int) -> str:
    """A text file of about `size` bytes: code-like lines with quotes, tabs and non-ASCII."""
    line = 'def greet(name):\n\treturn f"Hello, {name}! \\u00e9t\u00e9 \u2014 caf\u00e9 \u2713"  # note\n'
    return (line * (size // len(line) + 1))[:size]


class Format:
    """How one format writes a call, and its markers (whole tokens)."""

    def __init__(self, name: str, markers: list[str], call: Callable[[str, dict], str], model: str) -> None:
        self.name, self.markers, self.call, self.model = name, markers, call, model

    def reply(self) -> str:
        prose = (
            "I'll check the weather in both cities first, then write the summary file you asked for. "
            "The forecast service is sometimes slow, so this may take a moment.\n\n"
        )
        calls = self.call("get_weather", {"city": "Paris", "unit": "celsius"}) + self.call(
            "write_file", {"path": "notes/summary.md", "content": file_body(1200)}
        )
        return prose + self.wrap(calls)

    def big(self, size: int = 200_000) -> str:
        return self.wrap(self.call("write_file", {"path": "src/generated.py", "content": file_body(size)}))

    def wrap(self, calls: str) -> str:
        if self.name == "deepseek_v31":
            return "<｜tool▁calls▁begin｜>" + calls + "<｜tool▁calls▁end｜>"
        return calls


def hermes_call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>\n"


def qwen3_coder_call(name: str, args: dict) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>\n"


def deepseek_v31_call(name: str, args: dict) -> str:
    return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{json.dumps(args, ensure_ascii=False)}<｜tool▁call▁end｜>"


FORMATS = [
    Format("hermes", ["<tool_call>", "</tool_call>"], hermes_call, "NousResearch/Hermes-3-Llama-3.1-8B"),
    Format("qwen3_coder", ["<tool_call>", "</tool_call>"], qwen3_coder_call, "Qwen/Qwen3-Coder-30B-A3B-Instruct"),
    Format(
        "deepseek_v31",
        ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"],
        deepseek_v31_call,
        "deepseek-ai/DeepSeek-V3.1",
    ),
]


class Tokenizer:
    """What vLLM's parsers read of a tokenizer: a vocabulary (the markers first, then every
    piece the benchmark makes), and `decode`."""

    def __init__(self, name: str, markers: list[str]) -> None:
        self.name_or_path = name
        self.vocab: dict[str, int] = {}
        self.texts: list[str] = []
        for marker in markers:
            self.id(marker)

    def id(self, text: str) -> int:
        if text not in self.vocab:
            self.vocab[text] = len(self.texts)
            self.texts.append(text)
        return self.vocab[text]

    def get_vocab(self) -> dict[str, int]:
        return self.vocab

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.texts[i] for i in ids)


def deltas(text: str, markers: list[str], tokenizer: Tokenizer) -> list[tuple[str, list[int]]]:
    """Token-sized pieces with their ids (markers whole)."""
    out: list[tuple[str, list[int]]] = []
    parts = re.split("(" + "|".join(map(re.escape, markers)) + ")", text)
    for idx, part in enumerate(parts):
        pieces = [part] if idx % 2 else PIECE.findall(part)
        out.extend((piece, [tokenizer.id(piece)]) for piece in pieces)
    return out


CAP = [120.0]


class Stopped(Exception):
    """A streamed parse passed the --cap seconds: how far it got."""

    def __init__(self, done: int, total: int, elapsed: float) -> None:
        super().__init__(f"stopped after {done} of {total} deltas")
        self.done, self.total, self.elapsed = done, total, elapsed


def check_cap(start: float, done: int, total: int) -> None:
    if done % 256 == 0 and (elapsed := time.perf_counter() - start) > CAP[0]:
        raise Stopped(done, total, elapsed)


def timed(fn: Callable[[], object], budget: float) -> tuple[float, object]:
    """Best of the runs that fit in `budget` seconds (at least one), the garbage collector off
    while timing, as timeit does."""
    best, result, spent = float("inf"), None, 0.0
    gc.collect()
    for _ in range(1000):
        gc.disable()
        try:
            start = time.perf_counter()
            result = fn()
            took = time.perf_counter() - start
        except Stopped as stopped:
            return stopped.elapsed, stopped
        finally:
            gc.enable()
        best, spent = min(best, took), spent + took
        if spent + took > budget:
            break
    return best, result


def vllm_runner(parser_name: str, fmt: Format):
    """Complete and streamed parses through vLLM's serving path; None without vLLM."""
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
        from vllm.parser.parser_manager import ParserManager
    except ImportError:
        return None
    import toolshim.adapters.vllm  # noqa: F401 - registers "toolshim"

    markers = fmt.markers + ["<think>", "</think>"]
    tokenizer = Tokenizer(fmt.model, markers)
    parser_cls = ParserManager.get_parser(tool_parser_name=parser_name, enable_auto_tools=True, model_name=fmt.model)

    def request():
        return ChatCompletionRequest(
            model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS, tool_choice="auto"
        )

    def complete(text: str):
        req = request()
        _, _, calls = parser_cls(tokenizer, req.tools).parse(text, req, enable_auto_tools=True)
        return [(c.name, json.loads(c.arguments)) for c in calls or []]

    def streamed(pieces: list[tuple[str, list[int]]]):
        req = request()
        parser = parser_cls(tokenizer, req.tools)
        processor = ChatStreamProcessor(req, parser, enable_auto_tools=True, parser_cls=parser_cls)
        calls: dict[int, list[str]] = {}
        last = len(pieces) - 1
        start = time.perf_counter()
        for n, (text, ids) in enumerate(pieces):
            check_cap(start, n, len(pieces))
            step = processor.step(text, ids, "stop" if n == last else None, [1, 2] if n == 0 else None)
            for call in step.delta.tool_calls if step.delta is not None else ():
                slot = calls.setdefault(call.index, ["", ""])
                if call.function is not None:
                    slot[0] += call.function.name or ""
                    slot[1] += call.function.arguments or ""
        return [(name, json.loads(args) if args else None) for name, args in (calls[i] for i in sorted(calls))]

    return complete, streamed, tokenizer


SGLANG_NAMES = {"hermes": "hermes", "qwen3_coder": "qwen3_coder", "deepseek_v31": "deepseekv31"}


def sglang_runners(fmt: Format):
    """SGLang's own FunctionCallParser and toolshim's, complete and streamed; None without
    SGLang."""
    try:
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.function_call.function_call_parser import FunctionCallParser as SglangParser
    except ImportError:
        return None
    from toolshim.adapters.sglang import FunctionCallParser as ToolshimParser

    tools = [Tool(**tool) for tool in TOOLS]

    def runner(make):
        def complete(text: str):
            _, calls = make().parse_non_stream(text)
            return [(c.name, json.loads(c.parameters)) for c in calls]

        def streamed(pieces: list[tuple[str, list[int]]]):
            parser = make()
            calls: dict[int, list[str]] = {}
            results = []
            start = time.perf_counter()
            for n, (text, _) in enumerate(pieces):
                check_cap(start, n, len(pieces))
                results.append(parser.parse_stream_chunk(text))
            end = getattr(parser, "parse_stream_end", None)
            if end is not None:
                results.append(end())
            for _, items in results:
                for item in items:
                    slot = calls.setdefault(item.tool_index, ["", ""])
                    slot[0] += item.name or ""
                    slot[1] += item.parameters or ""
            return [(n, json.loads(a) if a else None) for n, a in (calls[i] for i in sorted(calls))]

        return complete, streamed

    name = SGLANG_NAMES[fmt.name]
    return runner(lambda: SglangParser(tools, name)), runner(lambda: ToolshimParser(tools, name))


def direct_runner(fmt: Format):
    def complete(text: str):
        return [(c.name, c.arguments) for c in toolshim.parse(text, TOOLS, format=fmt.name).calls]

    def streamed(pieces: list[tuple[str, list[int]]]):
        parser = toolshim.StreamParser(TOOLS, format=fmt.name)
        calls = []
        for text, _ in pieces:
            for event in parser.feed(text):
                if isinstance(event, toolshim.CallEnd):
                    calls.append((event.call.name, event.call.arguments))
        for event in parser.finish():
            if isinstance(event, toolshim.CallEnd):
                calls.append((event.call.name, event.call.arguments))
        return calls

    return complete, streamed


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}" if seconds < 10 else f"{seconds * 1000:,.0f}"


def cell(c) -> str:
    """(seconds, right calls, Stopped or None) as a table cell."""
    if c is None:
        return "n/a"
    took, right, stopped = c
    if stopped is not None:
        return f"> {ms(took)} (stopped at {stopped.done / stopped.total:.0%} of the deltas)"
    return ms(took) + ("" if right else " (other calls)")


def ratio(c, ours: float) -> str:
    """How many times faster `ours` is than the cell `c` (a lower bound when it was stopped)."""
    r = c[0] / ours
    text = f"{r:,.1f}×" if r < 10 else f"{r:,.0f}×"
    return ("> " + text) if c[2] is not None else text


def sglang_table(args) -> None:
    """SGLang's FunctionCallParser against toolshim's (toolshim.adapters.sglang)."""
    try:
        import sglang

        version = getattr(sglang, "__version__", "?")
    except ImportError:
        print()
        print("SGLang is not installed: no SGLang rows.")
        return
    print()
    print(f"SGLang {version}: its FunctionCallParser against toolshim's (toolshim.adapters.sglang):")
    print()
    print("| format | output | mode | deltas | SGLang's parser (ms) | toolshim (ms) | faster |")
    print("|---|---|---|---:|---:|---:|---:|")
    for fmt in FORMATS:
        runners = sglang_runners(fmt)
        if runners is None:
            return
        theirs, ours = runners
        tokenizer = Tokenizer(fmt.model, fmt.markers)
        reply, big = fmt.reply(), fmt.big(args.big)
        outputs = ((f"{len(reply.encode()) / 1000:.1f} KB reply", reply), (f"{len(big.encode()) // 1000} KB write_file", big))
        for label, text in outputs:
            pieces = deltas(text, fmt.markers, tokenizer)
            expected = direct_runner(fmt)[0](text)
            for mode, idx, arg in (("complete", 0, text), ("streamed", 1, pieces)):
                took_theirs, got = timed(lambda: theirs[idx](arg), args.budget)
                took_ours, got_ours = timed(lambda: ours[idx](arg), args.budget)
                assert got_ours == expected, (fmt.name, label, mode)
                c = (took_theirs, got == expected, got if isinstance(got, Stopped) else None)
                n = 1 if mode == "complete" else len(pieces)
                print(
                    f"| {fmt.name} | {label} | {mode} | {n:,} | {cell(c)} | {ms(took_ours)} | {ratio(c, took_ours)} |",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per measurement (best of the runs in it)")
    ap.add_argument("--big", type=int, default=200_000, help="size of the write_file content in bytes")
    ap.add_argument("--cap", type=float, default=120.0, help="stop a streamed parse after this many seconds")
    args = ap.parse_args()
    CAP[0] = args.cap

    try:
        import vllm

        vllm_version = vllm.__version__
    except ImportError:
        vllm_version = None
    gc.collect()
    gc.freeze()  # vLLM's and torch's objects: never scanned again
    print(f"toolshim {toolshim.__version__}, vLLM {vllm_version or 'not installed'}, Python {sys.version.split()[0]}")
    print()
    print(
        "| format | output | mode | deltas | vLLM's parser (ms) | toolshim in vLLM (ms) | toolshim direct (ms) "
        "| faster in vLLM | faster direct |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for fmt in FORMATS:
        vllm_own = vllm_runner(fmt.name, fmt)
        ours = vllm_runner("toolshim", fmt)
        direct = direct_runner(fmt)
        tokenizer = vllm_own[2] if vllm_own else Tokenizer(fmt.model, fmt.markers)
        reply, big = fmt.reply(), fmt.big(args.big)
        outputs = ((f"{len(reply.encode()) / 1000:.1f} KB reply", reply), (f"{len(big.encode()) // 1000} KB write_file", big))
        for label, text in outputs:
            pieces = deltas(text, fmt.markers, tokenizer)
            expected = direct[0](text)
            assert direct[1](pieces) == expected, (fmt.name, label)
            for mode, idx, arg in (("complete", 0, text), ("streamed", 1, pieces)):
                cells = []
                for runner in (vllm_own, ours):
                    if runner is None:
                        cells.append(None)
                        continue
                    took, got = timed(lambda runner=runner: runner[idx](arg), args.budget)
                    cells.append((took, got == expected, got if isinstance(got, Stopped) else None))
                took_direct, _ = timed(lambda: direct[idx](arg), args.budget)

                in_vllm = ratio(cells[0], cells[1][0]) if cells[0] and cells[1] else "n/a"
                direct_ratio = ratio(cells[0], took_direct) if cells[0] else "n/a"
                n = 1 if mode == "complete" else len(pieces)
                print(
                    f"| {fmt.name} | {label} | {mode} | {n:,} | {cell(cells[0])} | {cell(cells[1])} "
                    f"| {ms(took_direct)} | {in_vllm} | {direct_ratio} |",
                    flush=True,
                )
    sglang_table(args)
    print()
    print("toolshim StreamParser, write_file streamed in token-sized deltas:")
    print()
    print("| content | deltas | ms | ns per byte |")
    print("|---:|---:|---:|---:|")
    fmt = FORMATS[0]
    direct = direct_runner(fmt)
    for size in (20_000, 200_000, 2_000_000):
        text = fmt.big(size)
        pieces = deltas(text, fmt.markers, Tokenizer(fmt.model, fmt.markers))
        took, _ = timed(lambda: direct[1](pieces), args.budget)
        print(f"| {size // 1000:,} KB | {len(pieces):,} | {ms(took)} | {took * 1e9 / len(text):,.0f} |")


if __name__ == "__main__":
    main()
