"""Shared by the Python package's tests: the repository, the corpus and the `toolshim` binary.

Standard library only: tests/vllm runs in vLLM's venv with this file loaded too.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "crates" / "parse" / "tests" / "corpus"

#: `# config:` options of corpus cases, as `parse` keywords and as `toolshim parse` flags.
CONFIG_OPTIONS = {
    "reasoning_open": ({"reasoning_open": True}, ["--reasoning-open"]),
    "reasoning_calls=allow": ({"reasoning_calls": True}, ["--reasoning-calls"]),
    "free_text": ({"free_text": True}, ["--free-text"]),
}


@dataclass
class Case:
    """One corpus case (crates/parse/tests/it/corpus.rs reads the same header)."""

    name: str
    text: str
    tools_name: str | None = None
    options: dict = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    @property
    def tools_path(self) -> Path | None:
        return CORPUS / "_tools" / f"{self.tools_name}.json" if self.tools_name else None

    @property
    def tools(self):
        path = self.tools_path
        return json.loads(path.read_text(encoding="utf-8")) if path else None

    @property
    def format_id(self) -> str | None:
        """The format a `formats/<id>__<case>.txt` case is written in."""
        if not self.name.startswith("formats/"):
            return None
        return self.name.removeprefix("formats/").split("__", 1)[0]


def load_case(path: Path) -> Case:
    text = path.read_bytes().decode("utf-8")
    _, rest = text.split("\n", 1)
    case = Case(name=path.relative_to(CORPUS).as_posix(), text="")
    if rest.startswith("# tools: "):
        line, rest = rest.removeprefix("# tools: ").split("\n", 1)
        case.tools_name = line
    if rest.startswith("# config: "):
        line, rest = rest.removeprefix("# config: ").split("\n", 1)
        for option in (o.strip() for o in line.split(",")):
            keywords, flags = CONFIG_OPTIONS[option]
            case.options.update(keywords)
            case.flags.extend(flags)
    case.text = rest
    return case


def corpus_cases() -> list[Case]:
    return [load_case(path) for path in sorted(CORPUS.rglob("*.txt"))]


def chunks(text: str, size: int) -> list[str]:
    """`text` in pieces of `size` characters, as `toolshim parse --chunk-size` splits it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.fixture(scope="session")
def toolshim_bin() -> Path:
    """The `toolshim` binary (TOOLSHIM_BIN, else target/debug/toolshim, built by .ci/run)."""
    path = Path(os.environ.get("TOOLSHIM_BIN", REPO / "target" / "debug" / "toolshim"))
    if not path.is_file():
        pytest.fail(f"{path} is missing: build it with `cargo build -p toolshim` or set TOOLSHIM_BIN")
    return path


def run_cli(binary: Path, text: str, *args: str) -> str:
    """`toolshim parse ARGS` with `text` on standard input; its standard output."""
    done = subprocess.run(
        [str(binary), "parse", *args], input=text.encode("utf-8"), capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    return done.stdout.decode("utf-8")
