#!/usr/bin/env python3
"""BFCL accuracy of tool calling through toolshim, against the engine's own, in one run.

Each arm (see `arms.py`) answers the same seeded sample of BFCL v4 cases: the engine's own
tool calling (llama.cpp's `llama-server --jinja`) and `toolshim serve` in front of the same
engine in each configuration. The cases, the tool conversion and the checkers are BFCL's
(`bfcl-eval`, see `cases.py` and `score.py`); requests use temperature 0.

    bench/bfcl/run.py --engine http://127.0.0.1:PORT/v1 --arms engine,auto,emulate --limit 40

Without --engine it uses the Qwen2.5-Coder-0.5B server `scripts/local-model` runs (starting
it if needed). It writes, under --out (default target/bfcl/<date>-seed<seed>):
results.json (every request), table.md (the table below), and chart.png with --chart; and,
as it goes, results.jsonl (a case a line), from which --resume goes on with a run that was
cut short. --merge DIR... sends nothing: it makes one table (and chart) of several runs, such
as a full run made a category at a time. --log keeps each gateway arm's log (gateway-ARM.log,
a `===== ID` line before each case's lines).
With --floor FILE it exits 1 when an arm's accuracy on a category is below the floor the file
gives (CI's regression check). docs/accuracy.md has the figures and how they were made.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from arms import ARMS, ROOT, Arm, Gateway  # noqa: E402
from cases import CATEGORIES, Case, load, sample  # noqa: E402
from client import Reply, chat, counters  # noqa: E402
from report import chart, summarize, table  # noqa: E402
from score import as_execution, check_multi_turn, check_single, execute  # noqa: E402

# BFCL's limit on steps in one multi-turn turn.
MAX_STEPS = 20
# Each case's result, a line each, written as the run goes (what --resume reads).
PARTIAL = "results.jsonl"


@dataclass
class Request:
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    calls: int
    retries: int
    continuations: int = 0
    error: str = ""


@dataclass
class Result:
    arm: str
    category: str
    id: str
    valid: bool
    reason: str
    requests: list[Request] = field(default_factory=list)
    # What the model answered (the last reply of each step for multi-turn cases).
    replies: list[dict[str, Any]] = field(default_factory=list)


class Target:
    """Where an arm's requests go, and how its retries are counted."""

    def __init__(self, arm: Arm, engine_url: str, log: Path | None = None):
        self.gateway = (Gateway(engine_url.removesuffix("/v1"), arm.flags, arm.config, log)
                        if arm.flags is not None else None)
        self.base_url = self.gateway.root + "/v1" if self.gateway else engine_url
        self.counted = counters(self.gateway.root) if self.gateway else {"retries": 0, "continuations": 0}

    def ask(self, args: argparse.Namespace, messages: list[dict], tools: list[dict]) -> tuple[Reply, Request]:
        reply = chat(self.base_url, args.model, messages, tools, max_tokens=args.max_tokens, timeout=args.timeout)
        moved = {"retries": 0, "continuations": 0}
        if self.gateway:
            now = counters(self.gateway.root)
            moved = {name: now[name] - self.counted[name] for name in now}
            self.counted = now
        return reply, Request(reply.seconds, reply.prompt_tokens, reply.completion_tokens, len(reply.calls),
                              moved["retries"], moved["continuations"], reply.error)

    def close(self) -> None:
        if self.gateway:
            self.gateway.stop()


def reply_record(reply: Reply) -> dict[str, Any]:
    return {
        "content": reply.content,
        "calls": [{"name": c.name, "arguments": c.arguments} for c in reply.calls],
        "finish_reason": reply.finish_reason,
        **({"error": reply.error} if reply.error else {}),
    }


def run_single(target: Target, args: argparse.Namespace, arm: str, case: Case) -> Result:
    reply, request = target.ask(args, list(case.turns[0]), case.tools)
    if reply.error:
        valid, reason = False, f"protocol error: {reply.error[:200]}"
    else:
        valid, reason = check_single(case, reply.calls)
    return Result(arm, case.category, case.id, valid, reason, [request], [reply_record(reply)])


def run_multi_turn(target: Target, args: argparse.Namespace, arm: str, case: Case) -> Result:
    tools = case.tools
    declared = {t["function"]["name"] for t in tools}
    messages: list[dict] = []
    result = Result(arm, case.category, case.id, False, "")
    steps_per_turn: list[list[list[str]]] = []
    for turn in case.turns:
        messages.extend(turn)
        steps: list[list[str]] = []
        for _ in range(MAX_STEPS + 1):
            reply, request = target.ask(args, messages, tools)
            result.requests.append(request)
            result.replies.append(reply_record(reply))
            if reply.error:
                result.reason = f"protocol error: {reply.error[:200]}"
                return result
            messages.append(reply.message)
            step = as_execution(reply.calls, declared)
            steps.append(step)
            if not step:
                break
            for call_idx, call in enumerate(reply.calls):
                ran = as_execution([call], declared)
                output = execute(case, arm, ran)[0] if ran else f"Error during execution: no function {call.name!r}"
                call_id = (reply.message.get("tool_calls") or [{}] * len(reply.calls))[call_idx].get("id") or f"call_{call_idx}"
                messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        else:
            # Past the step limit: BFCL fails the whole case there.
            steps_per_turn.append(steps)
            result.reason = "force-terminated after 20 steps"
            return result
        steps_per_turn.append(steps)
    result.valid, result.reason = check_multi_turn(case, arm, steps_per_turn)
    return result


def result_of(record: dict[str, Any]) -> Result:
    return Result(**{**record, "requests": [Request(**q) for q in record.get("requests", [])]})


def read_partial(path: Path) -> list[Result]:
    """The cases a run wrote one a line as it went. A run killed while writing leaves its last
    line torn: that case is dropped (and run again on --resume)."""
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    results = []
    for n, line in enumerate(lines):
        try:
            results.append(result_of(json.loads(line)))
        except (json.JSONDecodeError, TypeError) as err:
            if n != len(lines) - 1:
                raise SystemExit(f"{path} line {n + 1} is not a case's result ({err})") from err
    return results


def read_run(folder: Path) -> tuple[dict[str, Any], list[Result]]:
    """A run's meta and results: its results.json, or the results.jsonl of a run cut short."""
    whole = folder / "results.json"
    if whole.exists():
        data = json.loads(whole.read_text())
        return data["meta"], [result_of(r) for r in data["results"]]
    if (folder / PARTIAL).exists():
        return {}, read_partial(folder / PARTIAL)
    raise SystemExit(f"{folder}: no results.json or {PARTIAL} (not a bench/bfcl/run.py results folder)")


def merge(args: argparse.Namespace) -> int:
    """One table of several runs (a full run made category by category, say): the results are
    taken as they are; a case two runs both have counts once, from the later folder given."""
    by_key: dict[tuple[str, str, str], Result] = {}
    metas = []
    for folder in args.merge:
        meta, results = read_run(folder)
        metas.append({"folder": str(folder), **{k: v for k, v in meta.items() if k != "cases"}})
        by_key.update({(r.arm, r.category, r.id): r for r in results})
    results = list(by_key.values())
    arm_names = list(dict.fromkeys(r.arm for r in results))
    categories = [c for c in CATEGORIES if any(r.category == c for r in results)]
    first = next((m for m in metas if "model" in m), {})
    meta = {"date": time.strftime("%Y-%m-%d"), "model": first.get("model", "?"), "seed": first.get("seed", "?"),
            "merged": metas, "seconds": round(sum(m.get("seconds", 0) for m in metas), 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    return report(args.out, meta, results, arm_names, categories, args)


def parse_limits(values: list[str]) -> tuple[int, dict[str, int]]:
    default, per = 0, {}
    for value in values:
        if "=" in value:
            name, count = value.split("=", 1)
            if name not in CATEGORIES:
                raise SystemExit(f"--limit {value}: unknown category {name!r}")
            per[name] = int(count)
        else:
            default = int(value)
    return default, per


def local_engine() -> str:
    script = ROOT / "scripts" / "local-model"
    res = subprocess.run([sys.executable, str(script), "start", "qwen"], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"scripts/local-model start qwen failed:\n{res.stderr}")
    return res.stdout.strip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", help="the engine's OpenAI base URL (…/v1); default: scripts/local-model's qwen")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="the model name sent (default: %(default)s)")
    parser.add_argument("--arms", default="engine,auto,emulate",
                        help=f"comma-separated, from: {', '.join(ARMS)} (default: %(default)s)")
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated (default: all)")
    parser.add_argument("--limit", action="append", default=[], metavar="N|CATEGORY=N",
                        help="cases per category (0: all, the default); CATEGORY=N for one category")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=512, help="per request (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per request (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="results folder (default: target/bfcl/DATE-seedSEED)")
    parser.add_argument("--chart", type=Path, help="write a bar chart per category (PNG) here")
    parser.add_argument("--floor", type=Path, help="JSON {arm: {category: lowest accuracy in %%}}: exit 1 below it")
    parser.add_argument("--log", action="store_true",
                        help="keep each gateway arm's log at `info` in OUT/gateway-ARM.log, each case's lines "
                             "after a `===== ID` line: which lever acted on which case (retries, guesses, "
                             "continuations, splits)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the cases a run cut short already wrote to --out (results.jsonl) and run the rest")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                        help="send nothing: one table (and --chart) of these runs' results, written to --out")
    args = parser.parse_args(argv)
    if args.merge:
        if not args.out:
            parser.error("--merge needs --out, the folder the merged results go to")
        return merge(args)

    arm_names = [a for a in args.arms.split(",") if a]
    for name in arm_names:
        if name not in ARMS:
            parser.error(f"unknown arm {name!r}; the arms are {', '.join(ARMS)}")
    categories = [c for c in args.categories.split(",") if c]
    for name in categories:
        if name not in CATEGORIES:
            parser.error(f"unknown category {name!r}; the categories are {', '.join(CATEGORIES)}")
    default_limit, limits = parse_limits(args.limit)
    out = args.out or ROOT / "target" / "bfcl" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{args.seed}"
    out.mkdir(parents=True, exist_ok=True)
    engine = args.engine or local_engine()

    chosen = {c: sample(load(c), limits.get(c, default_limit), args.seed) for c in categories}
    total = sum(len(v) for v in chosen.values()) * len(arm_names)
    print(f"bfcl: {total} cases ({', '.join(f'{c} {len(v)}' for c, v in chosen.items())}) x arms "
          f"{', '.join(arm_names)}; engine {engine}; results in {out}", file=sys.stderr)
    kept = {(r.arm, r.category, r.id): r for r in read_partial(out / PARTIAL)} if args.resume else {}
    if kept:
        print(f"bfcl: {len(kept)} cases kept from {out / PARTIAL}", file=sys.stderr)
    results: list[Result] = []
    started = time.monotonic()
    ran = 0
    # Written anew: the kept cases first (a torn last line is gone), then each case as it ends.
    with (out / PARTIAL).open("w") as partial:
        for name in arm_names:
            todo = {c: [case for case in v if (name, c, case.id) not in kept] for c, v in chosen.items()}
            for key in [(name, c, case.id) for c, v in chosen.items() for case in v]:
                if key in kept:
                    results.append(kept[key])
                    partial.write(json.dumps(asdict(kept[key])) + "\n")
            partial.flush()
            if not any(todo.values()):
                continue
            target = Target(ARMS[name], engine, out / f"gateway-{name}.log" if args.log else None)
            try:
                for category, cases in todo.items():
                    for case in cases:
                        if target.gateway:
                            target.gateway.mark(case.id)
                        run = run_multi_turn if category == "multi_turn_base" else run_single
                        res = run(target, args, name, case)
                        results.append(res)
                        partial.write(json.dumps(asdict(res)) + "\n")
                        partial.flush()
                        ran += 1
                        done = len(results)
                        eta = (time.monotonic() - started) / ran * (total - done)
                        print(f"bfcl: [{done}/{total}] {name} {case.id}: {'right' if res.valid else 'wrong'}"
                              f"{'' if res.valid else ' (' + res.reason[:120] + ')'}; about {eta / 60:.0f} min left",
                              file=sys.stderr, flush=True)
            finally:
                target.close()

    meta = {
        "date": time.strftime("%Y-%m-%d"), "engine": engine, "model": args.model, "seed": args.seed,
        "cases": {c: [case.id for case in v] for c, v in chosen.items()}, "arms": arm_names,
        "seconds": round(time.monotonic() - started, 1), "command": " ".join([Path(sys.argv[0]).name, *argv]),
    }
    if kept:
        meta["kept"] = len(kept)
    return report(out, meta, results, arm_names, categories, args)


def report(out: Path, meta: dict[str, Any], results: list[Result], arm_names: list[str], categories: list[str],
           args: argparse.Namespace) -> int:
    """results.json, table.md and the chart of a run; with --floor, exit 1 below it."""
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": [asdict(r) for r in results]}, indent=1))
    rows = summarize(results, arm_names, categories)
    text = table(rows, {n: ARMS[n].what if n in ARMS else "(an arm this runner no longer has)" for n in arm_names})
    (out / "table.md").write_text(text)
    print(text)
    if args.chart:
        chart(rows, arm_names, categories, args.chart, title=f"BFCL v4, {meta['model']}, seed {meta['seed']}")
    if args.floor:
        floors = json.loads(args.floor.read_text())
        failed = []
        for row in rows:
            floor = floors.get(row.arm, {}).get(row.category)
            if floor is not None and row.accuracy < floor:
                failed.append(f"{row.arm} {row.category}: {row.accuracy:.1f}% < floor {floor}%")
        errors = sum(row.errors for row in rows if row.arm != "engine")
        if errors and floors.get("max_protocol_errors", 0) < errors:
            failed.append(f"{errors} protocol errors through the gateway")
        if failed:
            print("bfcl: below the floor:\n  " + "\n  ".join(failed), file=sys.stderr)
            return 1
        print(f"bfcl: every figure at or above the floor in {args.floor}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
