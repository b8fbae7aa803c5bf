"""Scoring with BFCL's own checkers, from the `bfcl-eval` package.

The package's checker modules import `bfcl_eval.constants.model_config`, which imports every
model handler BFCL has (and their SDKs). Only one fact is read from it here: whether a
model's function names had their dots replaced by `_` (ours do, as BFCL's OpenAI handler
does). So a small module with that one entry stands in for it, installed before the checkers
are imported; nothing else of BFCL's inference code is used.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from typing import Any

from cases import AST_CATEGORIES, Case

# The model name the checkers are given: its config says names use `_` for `.`.
MODEL_NAME = "toolshim-bfcl"


@dataclass(frozen=True)
class _ModelConfig:
    underscore_to_dot: bool = True
    is_fc_model: bool = True


def _install_model_config() -> None:
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:
        return
    module = types.ModuleType(name)
    module.MODEL_CONFIG_MAPPING = {MODEL_NAME.replace("_", "/"): _ModelConfig()}  # type: ignore[attr-defined]
    sys.modules[name] = module


_install_model_config()

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (  # noqa: E402
    execute_multi_turn_func_call,
    is_empty_execute_response,
)


@dataclass
class Call:
    """A tool call as a client received it: the name and the arguments' JSON text."""

    name: str
    arguments: str


def decode(calls: list[Call]) -> list[dict[str, Any]] | None:
    """The calls as BFCL's checkers take them (`[{name: {arg: value}}]`); None when any
    call's arguments are not a JSON object (BFCL's decoder fails on those too)."""
    out = []
    for call in calls:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        out.append({call.name: args})
    return out


def check_single(case: Case, calls: list[Call]) -> tuple[bool, str]:
    """Whether a single-turn reply is right, and BFCL's reason when it is not."""
    decoded = decode(calls)
    if case.category == "irrelevance":
        made_call = bool(decoded)
        return (not made_call, "a call where none fits" if made_call else "")
    if not decoded:
        return False, "no call" if not calls else "arguments are not a JSON object"
    try:
        res = ast_checker(case.functions, decoded, case.answer, Language.PYTHON, case.category, MODEL_NAME)
    except Exception as err:  # the checker's own failure on odd output is a wrong answer
        return False, f"checker: {err}"
    if res.get("valid"):
        return True, ""
    reason = res.get("error_type") or "; ".join(str(e) for e in res.get("error", []))
    return False, str(reason)


def as_execution(calls: list[Call], declared: set[str]) -> list[str]:
    """A step's calls as BFCL's execution strings (`name(arg=repr(value))`). Only calls to a
    declared tool whose name is an identifier are kept: BFCL evaluates these strings, so
    nothing else a model writes may reach them (an undeclared tool could not run anyway)."""
    out = []
    for call in calls:
        if call.name not in declared or not call.name.isidentifier():
            continue
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            continue
        if not isinstance(args, dict) or not all(isinstance(k, str) and k.isidentifier() for k in args):
            continue
        out.append(f"{call.name}({','.join(f'{k}={v!r}' for k, v in args.items())})")
    return out


def execute(case: Case, arm: str, step: list[str]) -> list[str]:
    """Runs one step's calls against BFCL's tool implementations (state kept per case and
    arm across the whole conversation) and returns what each call returned."""
    if not step:
        return []
    results, _ = execute_multi_turn_func_call(
        step, case.initial_config, case.involved_classes, f"{MODEL_NAME}_{arm}", case.id,
        long_context=False, is_evaL_run=False,
    )
    return [str(r) for r in results]


def check_multi_turn(case: Case, arm: str, steps_per_turn: list[list[list[str]]]) -> tuple[bool, str]:
    """BFCL's multi-turn verdict: per turn the model's state and results against the
    ground truth's, after running both. A turn cut short (the step limit) fails the case,
    as in BFCL."""
    if len(steps_per_turn) != len(case.answer):
        return False, "force-terminated"
    decoded = [[step for step in turn if not is_empty_execute_response(step)] for turn in steps_per_turn]
    try:
        res = multi_turn_checker(decoded, case.answer, case.raw, case.category, f"{MODEL_NAME}_{arm}")
    except Exception as err:
        return False, f"checker: {err}"
    if res.get("valid"):
        return True, ""
    return False, str(res.get("error_type") or res.get("error_message") or "wrong state")


def is_ast(category: str) -> bool:
    return category in AST_CATEGORIES
