"""BFCL's test cases, read from the `bfcl-eval` package, and their tools in the Chat
Completions shape.

The data ships inside the package (`bfcl_eval/data/BFCL_v4_<category>.json`, one JSON object a
line, and `possible_answer/` beside it). Tools are converted the way BFCL's own OpenAI
Chat Completions handler converts them: a dot in a name becomes `_`, the parameters are an
`object`, and every property type is mapped onto JSON Schema (`dict`→`object`,
`float`→`number` with `format: float` and a note in the description, `tuple`→`array`,
`any`→`string`, …), nested properties and items too.
"""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The categories this runner knows, in the order tables show them.
CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "multi_turn_base",
)
# Categories scored by the AST checker; `irrelevance` is right when no call is made, and
# `multi_turn_base` runs the calls against BFCL's own tool implementations.
AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")

# BFCL's type names onto JSON Schema's (the facts of BFCL's GORILLA_TO_OPENAPI table).
TYPE_MAP = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
}


@dataclass
class Case:
    """One BFCL test entry with its answer (none for `irrelevance`)."""

    id: str
    category: str
    # Turns of messages: one turn for the single-turn categories.
    turns: list[list[dict[str, Any]]]
    # BFCL's function docs, as the checker wants them (names with dots).
    functions: list[dict[str, Any]]
    answer: Any = None
    # multi_turn only: the state the tool implementations start from.
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return to_tools(self.functions)


def data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).resolve().parent / "data"


def _lines(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _multi_turn_functions(classes: list[str]) -> list[dict[str, Any]]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    docs: list[dict[str, Any]] = []
    for name in classes:
        docs.extend(_lines(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[name]))
    return docs


def load(category: str) -> list[Case]:
    """Every case of a category, in the data file's order."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; the categories are {', '.join(CATEGORIES)}")
    entries = _lines(data_dir() / f"BFCL_v4_{category}.json")
    answers: dict[str, Any] = {}
    answer_file = data_dir() / "possible_answer" / f"BFCL_v4_{category}.json"
    if answer_file.exists():
        answers = {a["id"]: a["ground_truth"] for a in _lines(answer_file)}
    cases = []
    for entry in entries:
        classes = entry.get("involved_classes", [])
        functions = entry.get("function") or _multi_turn_functions(classes)
        cases.append(
            Case(
                id=entry["id"],
                category=category,
                turns=entry["question"],
                functions=functions,
                answer=answers.get(entry["id"]),
                initial_config=entry.get("initial_config", {}),
                involved_classes=classes,
                raw=entry,
            )
        )
    return cases


def sample(cases: list[Case], limit: int, seed: int) -> list[Case]:
    """`limit` cases drawn with `seed` (the same cases for the same seed, whatever else runs),
    in the data file's order; all of them when `limit` is 0 or more than there are."""
    if limit <= 0 or limit >= len(cases):
        return list(cases)
    category = cases[0].category if cases else ""
    picked = set(random.Random(f"{seed}:{category}").sample(range(len(cases)), limit))
    return [case for i, case in enumerate(cases) if i in picked]


def _convert_properties(properties: dict[str, Any]) -> dict[str, Any]:
    for spec in properties.values():
        kind = spec.get("type")
        if kind is None:
            spec["type"] = "string"
        else:
            if kind == "float":
                spec["format"] = "float"
                spec["description"] = spec.get("description", "") + " This is a float type value."
            spec["type"] = TYPE_MAP.get(kind, "string")
        if spec["type"] in ("array", "object"):
            if "properties" in spec:
                spec["properties"] = _convert_properties(spec["properties"])
            elif isinstance(spec.get("items"), dict):
                items = spec["items"]
                items["type"] = TYPE_MAP.get(items.get("type", "string"), "string")
                if items["type"] == "array" and isinstance(items.get("items"), dict):
                    inner = items["items"]
                    inner["type"] = TYPE_MAP.get(inner.get("type", "string"), "string")
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _convert_properties(items["properties"])
    return properties


def to_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs as Chat Completions `tools`."""
    tools = []
    for doc in copy.deepcopy(functions):
        parameters = doc.get("parameters") or {"properties": {}}
        parameters["type"] = "object"
        parameters["properties"] = _convert_properties(parameters.get("properties", {}))
        function = {
            "name": re.sub(r"\.", "_", doc["name"]),
            "description": doc.get("description", ""),
            "parameters": parameters,
        }
        # `response` (multi-turn docs) is no field of a Chat Completions tool: left out.
        tools.append({"type": "function", "function": function})
    return tools
