"""The canitoolcall conformance suite (PyPI, 0.1.1: 469 fixtures over nine model families,
each checked complete, streamed at its default chunkings, split-invariant and markup-free),
run with its own runner, worker and checks through toolshim's engine adapter
(`toolshim.adapters.canitoolcall`, in the Python package), the format pinned and detected.

`baseline.json` holds every fixture's status as of the last change that moved one. A fixture
that passed (or soft-passed) there and does worse now fails this test; a fixture that does
better asks for the baseline to be rewritten (`python tests/conformance/test_conformance.py
--write`), so the gain is recorded. docs/conformance.md explains every fixture that does not
pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.json"
ADAPTERS = {"pinned": "ToolshimAdapter", "auto": "ToolshimAutoAdapter"}
RANK = {"fail": 0, "error": 0, "unsupported": 0, "soft_pass": 1, "pass": 2}
#: The issue's bar: at least this many of the 469 fixtures pass strictly, in both modes.
MIN_PASS = 455


def run_suite(mode: str, out: Path) -> dict[str, str]:
    """Runs the whole suite through the adapter; returns each fixture's status."""
    done = subprocess.run(
        [
            sys.executable, "-m", "canitoolcall", "run",
            "--engine", f"toolshim.adapters.canitoolcall:{ADAPTERS[mode]}",
            "--python", sys.executable, "--out", str(out),
        ],
        capture_output=True, text=True, check=False,
    )
    # Exit 1: some fixture fails (judged below); anything else is a harness problem.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    [results] = out.glob("*.json")
    cases = json.loads(results.read_text())["cases"]
    return {case["fixture_id"]: case["status"] for case in cases}


@pytest.mark.parametrize("mode", sorted(ADAPTERS))
def test_no_fixture_does_worse_than_the_baseline(mode: str, tmp_path: Path) -> None:
    baseline = json.loads(BASELINE.read_text())[mode]
    got = run_suite(mode, tmp_path)
    assert set(got) == set(baseline), "the suite's fixtures changed: rewrite the baseline"
    worse = {fid: (baseline[fid], got[fid]) for fid in got if RANK[got[fid]] < RANK[baseline[fid]]}
    assert not worse, f"fixtures that do worse than the baseline (was, now): {worse}"
    better = {fid: (baseline[fid], got[fid]) for fid in got if RANK[got[fid]] > RANK[baseline[fid]]}
    assert not better, (
        f"fixtures that do better (was, now): {better}; record it: "
        "python tests/conformance/test_conformance.py --write"
    )
    passes = sum(status == "pass" for status in got.values())
    assert passes >= MIN_PASS, f"{passes} of {len(got)} pass, fewer than {MIN_PASS}"


def write_baseline() -> None:
    statuses = {}
    for mode in sorted(ADAPTERS):
        with tempfile.TemporaryDirectory() as out:
            statuses[mode] = run_suite(mode, Path(out))
    BASELINE.write_text(json.dumps(statuses, indent=1, sort_keys=True) + "\n")
    for mode, got in statuses.items():
        counts = {s: sum(v == s for v in got.values()) for s in sorted(set(got.values()))}
        print(mode, counts)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/conformance/test_conformance.py --write")
    write_baseline()
