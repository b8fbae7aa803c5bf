"""The runner's own checks, without a model: BFCL's answers, given back as a client would
receive them, score right; wrong ones score wrong; the tool conversion follows BFCL's."""

from __future__ import annotations

import json
import math
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import AST_CATEGORIES, load, sample, to_tools  # noqa: E402
from score import Call, as_execution, check_multi_turn, check_single  # noqa: E402


def answer_calls(ground_truth: list[dict]) -> list[Call]:
    """The first allowed value of each argument, as the calls a client would get."""
    calls = []
    for entry in ground_truth:
        ((name, params),) = entry.items()
        args = {key: options[0] for key, options in params.items() if options and options[0] != ""}
        calls.append(Call(name=name.replace(".", "_"), arguments=json.dumps(args)))
    return calls


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_the_answers_score_right(category: str) -> None:
    cases = sample(load(category), 25, seed=7)
    wrong = [(c.id, check_single(c, answer_calls(c.answer))) for c in cases]
    wrong = [w for w in wrong if not w[1][0]]
    assert not wrong, wrong


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_no_call_and_a_schema_copied_into_arguments_score_wrong(category: str) -> None:
    case = load(category)[0]
    assert check_single(case, []) == (False, "no call")
    calls = answer_calls(case.answer)
    first = calls[0]
    args = json.loads(first.arguments)
    key = next(iter(args))
    args[key] = {"type": "string"}
    assert not check_single(case, [Call(first.name, json.dumps(args)), *calls[1:]])[0]


def test_irrelevance_is_right_only_without_a_call() -> None:
    case = load("irrelevance")[0]
    name = case.tools[0]["function"]["name"]
    assert check_single(case, []) == (True, "")
    assert check_single(case, [Call(name, "{}")])[0] is False
    # Arguments that are not JSON are no call for BFCL's decoder either.
    assert check_single(case, [Call(name, "{not json")])[0] is True


def test_multi_turn_answers_score_right_and_an_empty_run_wrong() -> None:
    for case in sample(load("multi_turn_base"), 3, seed=7):
        assert check_multi_turn(case, "selftest", [[turn] for turn in case.answer]) == (True, ""), case.id
        assert not check_multi_turn(case, "selftest-empty", [[] for _ in case.answer])[0]


def test_only_declared_identifiers_are_executed() -> None:
    declared = {"cd", "ls"}
    calls = [
        Call("cd", '{"folder": "x"}'),
        Call("__import__('os').system", "{}"),
        Call("rm", "{}"),
        Call("ls", '{"a": true}'),
        Call("ls", '{"bad key": 1}'),
    ]
    assert as_execution(calls, declared) == ["cd(folder='x')", "ls(a=True)"]


def test_tools_are_converted_as_bfcl_converts_them() -> None:
    functions = [{
        "name": "math.hypot",
        "description": "d",
        "parameters": {"type": "dict", "properties": {
            "x": {"type": "float", "description": "x."},
            "pair": {"type": "tuple", "items": {"type": "integer"}},
            "opts": {"type": "dict", "properties": {"deep": {"type": "any"}}},
            "bare": {"description": "no type"},
        }, "required": ["x"]},
    }]
    (tool,) = to_tools(functions)
    fn = tool["function"]
    assert tool["type"] == "function" and fn["name"] == "math_hypot"
    props = fn["parameters"]["properties"]
    assert fn["parameters"]["type"] == "object" and fn["parameters"]["required"] == ["x"]
    assert props["x"] == {"type": "number", "format": "float", "description": "x. This is a float type value."}
    assert props["pair"] == {"type": "array", "items": {"type": "integer"}}
    assert props["opts"]["type"] == "object" and props["opts"]["properties"]["deep"]["type"] == "string"
    assert props["bare"]["type"] == "string"
    # The input is left as it was.
    assert functions[0]["parameters"]["type"] == "dict"


def test_samples_are_seeded_and_stable() -> None:
    cases = load("simple_python")
    a = [c.id for c in sample(cases, 10, seed=3)]
    assert a == [c.id for c in sample(cases, 10, seed=3)]
    assert a != [c.id for c in sample(cases, 10, seed=4)]
    assert len(sample(cases, 0, seed=3)) == len(cases)


def _result(arm: str, category: str, case_id: str, valid: bool) -> dict:
    request = {"seconds": 1.5, "prompt_tokens": 100, "completion_tokens": 20, "calls": 1, "retries": 0,
               "continuations": 0, "error": ""}
    return {"arm": arm, "category": category, "id": case_id, "valid": valid, "reason": "" if valid else "wrong",
            "requests": [request], "replies": []}


def test_a_run_cut_short_goes_on_where_it_stopped(tmp_path: Path) -> None:
    import run

    ids = [c.id for c in sample(load("simple_python"), 3, seed=1)]
    lines = [json.dumps(_result("auto", "simple_python", i, n != 1)) for n, i in enumerate(ids)]
    # The run was killed while writing a fourth line.
    (tmp_path / run.PARTIAL).write_text("\n".join(lines) + "\n" + lines[0][:40])
    # Every chosen case is kept, so nothing is sent (the engine's address is never used).
    code = run.main(["--engine", "http://127.0.0.1:9/v1", "--arms", "auto", "--categories", "simple_python",
                     "--limit", "3", "--seed", "1", "--out", str(tmp_path), "--resume"])
    assert code == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in data["results"]] == ids and data["meta"]["kept"] == 3
    assert "| simple_python | auto | 2/3 | 66.7% |" in (tmp_path / "table.md").read_text()
    # The torn line is gone from the partial file, which now holds exactly the kept cases.
    assert [json.loads(line)["id"] for line in (tmp_path / run.PARTIAL).read_text().splitlines()] == ids


def test_runs_made_apart_are_merged_into_one_table(tmp_path: Path) -> None:
    import run

    first, second, merged = tmp_path / "a", tmp_path / "b", tmp_path / "merged"
    first.mkdir()
    second.mkdir()
    meta = {"model": "m", "seed": 1, "seconds": 10}
    (first / "results.json").write_text(json.dumps({"meta": meta, "results": [
        _result("auto", "irrelevance", "irrelevance_0", False), _result("auto", "irrelevance", "irrelevance_1", True)]}))
    # A run cut short has only its partial file; a case both runs have counts once.
    (second / run.PARTIAL).write_text("\n".join(json.dumps(r) for r in [
        _result("auto", "irrelevance", "irrelevance_1", True), _result("auto", "simple_python", "simple_python_0", True)]))
    assert run.main(["--merge", str(first), str(second), "--out", str(merged)]) == 0
    table = (merged / "table.md").read_text()
    assert table.index("| simple_python | auto | 1/1 | 100.0% |") < table.index("| irrelevance | auto | 1/2 | 50.0% |")
    data = json.loads((merged / "results.json").read_text())
    assert len(data["results"]) == 3 and [m["folder"] for m in data["meta"]["merged"]] == [str(first), str(second)]
    with pytest.raises(SystemExit):
        run.main(["--merge", str(tmp_path / "nowhere"), "--out", str(merged)])


def test_the_odds_of_opening_with_a_call_follow_the_gateway_s_rule() -> None:
    from odds import first_token_odds

    def top(*pairs: tuple[str, float]) -> dict:
        tokens = [{"token": t, "logprob": math.log(p)} for t, p in pairs]
        return {"content": [{"token": pairs[0][0], "logprob": tokens[0]["logprob"], "top_logprobs": tokens}]}

    opens, odds = first_token_odds(top(("```", 0.6), ('{"', 0.1), ("The", 0.3)))
    assert opens and abs(odds - 0.7) < 1e-9
    assert first_token_odds(top(("The", 0.9), (" {", 0.1)))[0] is False
    assert first_token_odds(None) is None and first_token_odds({"content": []}) is None


def test_a_kept_log_holds_the_gateway_s_lines_after_each_case_s_mark(tmp_path: Path) -> None:
    import arms

    try:
        arms.toolshim_bin()
    except SystemExit:
        pytest.skip("no toolshim binary built")
    log = tmp_path / "gateway-auto.log"
    # No engine answers at this address: the gateway starts all the same.
    gateway = arms.Gateway("http://127.0.0.1:9", (), "", log)
    try:
        gateway.mark("simple_python_0")
        # A case's request: the gateway logs it at `info` (then fails to reach the engine).
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(f"{gateway.root}/v1/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=30)
    finally:
        gateway.stop()
    lines = log.read_text().splitlines()
    assert any(line.startswith("toolshim: listening on http://127.0.0.1:") for line in lines), lines
    mark = lines.index("===== simple_python_0")
    # Kept at `info`, to the last line: the case's request is logged after its mark.
    assert any(" INFO " in line and "chat completion" in line for line in lines[mark:]), lines
