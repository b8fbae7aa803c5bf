#!/usr/bin/env python3
"""How sure the model is of opening its reply with a call (docs/accuracy.md, "The model's
own odds of a call"): whether over-calls can be told from calls by the model's token odds.

Each case of a seeded sample goes to the engine itself (no gateway), as the `engine` arm
sends it, with `logprobs` and five alternatives a token, for the reply's first 40 tokens.
For each reply whose first token opens a call (`{`, `[`, `<` or a code fence), the odds of
opening with a call are the probability the model gave to all such first tokens together
(among the five). The table counts, per category, how many of those replies fall below
each bar: on `irrelevance` they are over-calls a bar would turn into plain answers; on the
call categories, calls it would lose. With --labels (a run.py
results.json of the same sample), the call-category replies below a bar that the run
scored right are named.

    bench/bfcl/odds.py --engine http://127.0.0.1:PORT/v1 --limit 40 --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import load, sample  # noqa: E402

OPENERS = ("{", "[", "<", "`")
BARS = (0.6, 0.7, 0.75, 0.8, 0.9)


def first_token_odds(logprobs: Any) -> tuple[bool, float] | None:
    """Whether the first token opens a call, and the odds of opening with one."""
    try:
        first = logprobs["content"][0]
        top = first["top_logprobs"]
        opens = first["token"].lstrip().startswith(OPENERS)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    odds = sum(math.exp(t["logprob"]) for t in top if str(t.get("token", "")).lstrip().startswith(OPENERS))
    return opens, min(odds, 1.0)


def ask(engine: str, model: str, case: Any) -> Any:
    body = {"model": model, "messages": case.turns[0], "tools": case.tools, "temperature": 0,
            "max_tokens": 40, "logprobs": True, "top_logprobs": 5}
    request = urllib.request.Request(engine.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as resp:
        return json.load(resp)["choices"][0].get("logprobs")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", required=True, help="the engine's OpenAI base URL (…/v1)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--categories", default="irrelevance,simple_python,multiple")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--labels", type=Path, help="a run.py results.json of the same sample")
    args = parser.parse_args(argv)
    right = {}
    if args.labels:
        right = {r["id"]: r["valid"] for r in json.loads(args.labels.read_text())["results"]}
    odds: dict[str, list[tuple[str, float]]] = {}
    for category in args.categories.split(","):
        cases = sample(load(category), args.limit, args.seed)
        found = [(case.id, first_token_odds(ask(args.engine, args.model, case))) for case in cases]
        odds[category] = [(case_id, o[1]) for case_id, o in found if o and o[0]]
        print(f"odds: {category}: {len(odds[category])} of {len(cases)} replies open with a call", file=sys.stderr)
    print("| bar | " + " | ".join(odds) + " |")
    print("|---|" + "---:|" * len(odds))
    for bar in BARS:
        cells = []
        for category, found in odds.items():
            below = [case_id for case_id, o in found if o < bar]
            lost = [c for c in below if right.get(c)] if category != "irrelevance" else []
            cells.append(f"{len(below)}" + (f" ({', '.join(lost)} right)" if lost else ""))
        print(f"| {bar} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
