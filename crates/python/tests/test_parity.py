"""The Python package gives what `toolshim parse` prints, on every corpus case
(crates/parse/tests/corpus/**.txt): complete, event by event at a chunking, and with the
case's format pinned. And the events fold to `parse` at every chunking."""

from __future__ import annotations

import json
import random

import pytest
from conftest import chunks, corpus_cases, run_cli

import toolshim

CASES = corpus_cases()
FORMAT_IDS = {f.id for f in toolshim.formats() if f.support != "missing"}


def stream(case, size: int | None = None, sizes=None, **extra) -> list:
    parser = toolshim.StreamParser(case.tools, **case.options, **extra)
    pieces = [case.text] if size is None and sizes is None else (chunks(case.text, size) if size else sizes)
    events = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    events.extend(parser.finish())
    return events


def cli_args(case) -> list[str]:
    return (["--tools", str(case.tools_path)] if case.tools_path else []) + case.flags


def test_the_corpus_is_there():
    assert len(CASES) > 400
    assert FORMAT_CASES and AGENT_CASES


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_complete_and_streamed_results_equal_the_cli(case, toolshim_bin):
    expected = json.loads(run_cli(toolshim_bin, case.text, *cli_args(case)))
    parsed = toolshim.parse(case.text, case.tools, **case.options)
    assert parsed.to_dict() == expected

    # Event by event, in chunks of 3 characters, as `--events --chunk-size 3` prints them.
    lines = run_cli(toolshim_bin, case.text, *cli_args(case), "--events", "--chunk-size", "3")
    expected_events = [json.loads(line) for line in lines.splitlines()]
    events = stream(case, 3)
    assert [event.to_dict() for event in events] == expected_events

    # Every chunking folds to the complete result.
    rng = random.Random(case.name)
    cuts = sorted(rng.sample(range(1, len(case.text)), min(8, max(len(case.text) - 1, 0)))) if len(case.text) > 1 else []
    seeded = [case.text[a:b] for a, b in zip([0, *cuts], [*cuts, len(case.text)])]
    for folded in (
        toolshim.Parsed.from_events(events),
        toolshim.Parsed.from_events(stream(case)),
        toolshim.Parsed.from_events(stream(case, 1)),
        toolshim.Parsed.from_events(stream(case, 7)),
        toolshim.Parsed.from_events(stream(case, sizes=seeded)),
    ):
        assert folded == parsed
        assert folded.to_dict() == {k: v for k, v in expected.items() if k != "outcome"}


FORMAT_CASES = [case for case in CASES if case.format_id in FORMAT_IDS]


@pytest.mark.parametrize("case", FORMAT_CASES, ids=lambda case: case.name)
def test_a_pinned_format_gives_what_the_cli_gives(case, toolshim_bin):
    expected = json.loads(run_cli(toolshim_bin, case.text, *cli_args(case), "--format", case.format_id))
    assert toolshim.parse(case.text, case.tools, format=case.format_id, **case.options).to_dict() == expected
    folded = toolshim.Parsed.from_events(stream(case, 2, format=case.format_id))
    assert folded.to_dict() == expected


AGENT_CASES = [case for case in CASES if case.tools_name == "agent"]


@pytest.mark.parametrize("case", AGENT_CASES, ids=lambda case: case.name)
def test_the_agent_outcome_is_the_clis(case, toolshim_bin):
    expected = json.loads(run_cli(toolshim_bin, case.text, *cli_args(case), "--exit-tools", "finish,give_up"))
    parsed = toolshim.parse(case.text, case.tools, exit_tools=["finish", "give_up"], **case.options)
    assert parsed.to_dict() == expected
    assert parsed.outcome.to_dict() == expected["outcome"]
