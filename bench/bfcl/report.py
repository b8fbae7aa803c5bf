"""The table and the chart of a run: per category and arm, accuracy, calls, retries and
tokens per request, and latency."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Row:
    arm: str
    category: str
    cases: int
    right: int
    requests: int
    calls: int
    retries: int
    continuations: int
    tokens: int
    p50: float
    p95: float
    errors: int

    @property
    def accuracy(self) -> float:
        return 100.0 * self.right / self.cases if self.cases else 0.0


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def summarize(results: list[Any], arms: list[str], categories: list[str]) -> list[Row]:
    rows = []
    for category in categories:
        for arm in arms:
            mine = [r for r in results if r.arm == arm and r.category == category]
            if not mine:
                continue
            requests = [q for r in mine for q in r.requests]
            seconds = sorted(q.seconds for q in requests)
            rows.append(Row(
                arm=arm, category=category, cases=len(mine), right=sum(r.valid for r in mine),
                requests=len(requests), calls=sum(q.calls for q in requests),
                retries=sum(q.retries for q in requests),
                continuations=sum(getattr(q, "continuations", 0) for q in requests),
                tokens=sum(q.prompt_tokens + q.completion_tokens for q in requests),
                p50=_quantile(seconds, 0.5), p95=_quantile(seconds, 0.95),
                errors=sum(1 for q in requests if q.error),
            ))
    return rows


def table(rows: list[Row], arms: dict[str, str]) -> str:
    lines = [
        "| category | arm | right | accuracy | calls/req | retries/req | continued/req | tokens/req | p50 s | p95 s | protocol errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        per = max(row.requests, 1)
        lines.append(
            f"| {row.category} | {row.arm} | {row.right}/{row.cases} | {row.accuracy:.1f}% | "
            f"{row.calls / per:.2f} | {row.retries / per:.2f} | {row.continuations / per:.2f} | {row.tokens / per:.0f} | "
            f"{row.p50:.1f} | {row.p95:.1f} | {row.errors} |"
        )
    lines.append("")
    lines.extend(f"- `{name}`: {what}" for name, what in arms.items())
    return "\n".join(lines) + "\n"


def chart(rows: list[Row], arms: list[str], categories: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(len(arms), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(categories)), 4.2), dpi=110)
    for i, arm in enumerate(arms):
        values = []
        for category in categories:
            row = next((r for r in rows if r.arm == arm and r.category == category), None)
            values.append(row.accuracy if row else 0.0)
        xs = [c + (i - (len(arms) - 1) / 2) * width for c in range(len(categories))]
        bars = ax.bar(xs, values, width, label=arm)
        ax.bar_label(bars, labels=[f"{v:.0f}" for v in values], fontsize=7, padding=1)
    ax.set_xticks(range(len(categories)), [c.replace("_", "\n") for c in categories], fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 108)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncols=min(len(arms), 4), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
