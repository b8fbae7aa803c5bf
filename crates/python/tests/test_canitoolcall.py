"""The canitoolcall conformance suite (0.1.1, every fixture and its default chunkings) run
through toolshim's adapter with canitoolcall's own runner, worker and checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from canitoolcall.fixtures import load_families, load_fixtures

from toolshim.adapters.canitoolcall import FAMILY_FORMATS, ToolshimAdapter, _markers, format_for, pieces

#: Cases that pass (strictly or after whitespace normalization) per family today: a floor, so
#: a regression fails here; raise it when toolshim reads more.
FLOOR = {
    "deepseek": 71,
    "gemma4": 43,
    "glm": 46,
    "gpt-oss": 32,
    "kimi": 43,
    "llama": 32,
    "mistral": 45,
    "qwen3-hermes": 45,
    "qwen3-xml": 43,
}


def run(adapter: str, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "canitoolcall", "run", "--engine", f"toolshim.adapters.canitoolcall:{adapter}",
         "--python", sys.executable, "--out", str(out)],
        capture_output=True, text=True, check=False,
    )
    # Exit 1 means some cases fail (the floor below decides); 2 is a harness error.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    [results] = out.glob("*.json")
    return json.loads(results.read_text())


def passes(results: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in results["cases"]:
        if case["status"] in ("pass", "soft_pass"):
            counts[case["family"]] = counts.get(case["family"], 0) + 1
    return counts


def test_the_suite_passes_at_least_the_floor(tmp_path):
    results = run("ToolshimAdapter", tmp_path)
    statuses = {case["status"] for case in results["cases"]}
    assert "error" not in statuses and "unsupported" not in statuses
    got = passes(results)
    below = {family: (got.get(family, 0), floor) for family, floor in FLOOR.items() if got.get(family, 0) < floor}
    assert not below, f"fewer passes than the floor (got, floor): {below}"
    assert set(FLOOR) == set(FAMILY_FORMATS)
    # Streams never differ from the complete parse: any failing check fails for every chunking.
    for case in results["cases"]:
        failing = {check["check"] for check in case["checks"] if check["status"] == "fail"}
        for check in case["checks"]:
            if check["check"] in failing and check["strategy"] not in ("nonstream", "*"):
                assert any(
                    c["check"] == check["check"] and c["strategy"] == "nonstream" and c["status"] == "fail"
                    for c in case["checks"]
                ), (case["fixture_id"], check)


def test_auto_detection_runs_every_fixture(tmp_path):
    results = run("ToolshimAutoAdapter", tmp_path)
    assert sum(passes(results).values()) >= 390
    assert results["engine"]["details"]["formats"] == "auto"


def test_units_are_pieces_that_join_to_the_output_with_markers_whole():
    families = load_families()
    for fixture in load_fixtures():
        markers = _markers(fixture.family)
        text = fixture.raw_output
        split, special = pieces(text, markers)
        assert "".join(split) == text
        for idx in special:
            assert split[idx] in markers
        count = sum(text.count(m) for m in markers)  # markers never overlap in the fixtures
        assert len(special) == count, fixture.id
        assert format_for(fixture.family, fixture.reference_model), fixture.id
        assert fixture.family in families
    adapter = ToolshimAdapter()
    assert adapter.supports("qwen3-hermes", "Qwen/Qwen3-0.6B")
    assert not adapter.supports("unknown-family", "m")
    assert format_for("deepseek", "deepseek-ai/DeepSeek-V3.1") == "deepseek_v31"
    assert format_for("kimi", "moonshotai/Kimi-K3") == "kimi_k3"
    assert format_for("mistral", "mistralai/Magistral-Small-2509") == "mistral_v11"
    assert format_for("llama", "meta-llama/Llama-4-Scout-17B-16E-Instruct") == "pythonic"
