"""The Gemini CLI (`gemini -p`, from npm) through the gateway's Gemini API, against a scripted
chat-only upstream (issue 28).

The Gemini CLI speaks only the Gemini API. Here it works in a temp folder, with
`GOOGLE_GEMINI_BASE_URL` pointing at the gateway and an API key: the upstream (chat-only, text
answers: the gateway emulates tools) has it write a file with its `write_file` tool, then run a shell command with `run_shell_command`, and the test
checks the files. Its usage statistics are off, and its home is the temp folder.

The binary comes from `GEMINI_CLI_BIN`, else `target/gemini-cli/node_modules/.bin/gemini`
(`.ci/run` installs it there with npm).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from test_native_agents import NativeUpstream

GEMINI_BIN = Path(
    os.environ.get("GEMINI_CLI_BIN", REPO_ROOT / "target" / "gemini-cli" / "node_modules" / ".bin" / "gemini")
)
TIMEOUT_S = 180
MODEL = "gemini-2.5-flash"
WRITTEN = "made_by_gemini.txt"
SHELL_FILE = "made_by_shell.txt"


def script(work: Path):
    """The upstream's answers, by the conversation (it is chat-only; the gateway emulates): the
    task gets a `write_file` call, its result a shell command, the shell's result the final
    answer; side requests get what they ask for (the CLI's JSON checks) or "ok"."""

    def call(name: str, arguments: dict) -> str:
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"

    def answer(body: dict) -> str:
        everything = json.dumps(body.get("messages", []))
        if "# Tools" not in everything:
            # The CLI's own checks ask for JSON (who speaks next, which model to use).
            if "next_speaker" in everything:
                return json.dumps({"reasoning": "The task is done.", "next_speaker": "user"})
            if "json" in everything.lower() or "response_format" in body:
                return json.dumps({"reasoning": "simple", "model_choice": "flash", "complexity": "simple"})
            return "ok"
        if "(run_shell_command)" in everything:
            return f"Done: {WRITTEN} and {SHELL_FILE} are in place."
        if "(write_file)" in everything:
            return call("run_shell_command", {"command": f"printf shell-ok > {SHELL_FILE}", "description": "write a file"})
        return call("write_file", {"file_path": str(work / WRITTEN), "content": "Hello from Gemini CLI\n"})

    return answer


def test_gemini_cli_writes_a_file_and_runs_a_shell_command(gateway_factory, tmp_path: Path) -> None:
    if not (GEMINI_BIN.is_file() and os.access(GEMINI_BIN, os.X_OK)):
        pytest.fail(
            f"The Gemini CLI not found at {GEMINI_BIN}: install it with "
            "`npm install --prefix target/gemini-cli @google/gemini-cli` or set GEMINI_CLI_BIN.",
            pytrace=False,
        )
    work = tmp_path / "work"
    work.mkdir()
    settings = tmp_path / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(
        json.dumps({"privacy": {"usageStatisticsEnabled": False}, "security": {"auth": {"selectedType": "gemini-api-key"}}})
    )
    upstream = NativeUpstream(script(work))
    try:
        gw = gateway_factory(upstream_url=upstream.base_url)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "GEMINI_API_KEY": "test",
            "GOOGLE_GEMINI_BASE_URL": gw.root,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_COLOR": "1",
            # A temp folder is not trusted, and an untrusted folder turns --yolo off.
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        done = subprocess.run(
            [str(GEMINI_BIN), "-m", MODEL, "--yolo", "-p", f"Write {WRITTEN}, then make {SHELL_FILE} with a shell command."],
            cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
        )
        report = f"gemini exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr[-4000:]}\ngateway: {gw.stderr_text()[-4000:]}"
        assert done.returncode == 0, report
        assert (work / WRITTEN).read_text() == "Hello from Gemini CLI\n", report
        assert (work / SHELL_FILE).read_text() == "shell-ok", report
        assert "are in place" in done.stdout, report
        turns = [r for r in upstream.requests if "# Tools" in json.dumps(r["messages"])]
        assert len(turns) >= 3, f"{len(turns)} tool turns"
        assert not any("tools" in r for r in upstream.requests), "emulated: no native tools upstream"
    finally:
        upstream.close()
