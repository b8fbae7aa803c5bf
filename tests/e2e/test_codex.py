"""The Codex CLI (`codex exec`, from npm) through the gateway's Responses API, against a scripted
chat-only upstream (issue 16).

Codex speaks only the Responses API. Here it works in a temp folder: the upstream has it run a
shell command that creates a file (its `exec_command` function tool), then apply a patch that
adds another (its freeform `apply_patch` custom tool, answered with a `custom_tool_call`), then
search for its deferred sub-agent tools (`tool_search`, which Codex runs itself) and call one
of the tools that loads (`multi_agent_v1.close_agent`, a namespaced tool), and the test checks
the files and the calls. Codex's plugins, analytics and update checks are off, and its only
provider is the gateway on 127.0.0.1, through a recording proxy that keeps what Codex sent:
the first request is checked against what docs/responses.md says Codex sends.

The binary comes from `CODEX_BIN`, else `target/codex/node_modules/.bin/codex` (`.ci/run`
installs it there with npm).
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from recording_proxy import RecordingProxy

CODEX_BIN = Path(os.environ.get("CODEX_BIN", REPO_ROOT / "target" / "codex" / "node_modules" / ".bin" / "codex"))
TIMEOUT_S = 180
# A model name Codex knows, so that it offers `apply_patch` (it leaves the tool out for
# names it does not know); the gateway passes it on, and the scripted upstream ignores it.
MODEL = "gpt-5.5"
SHELL_FILE = "made_by_shell.txt"
PATCH_FILE = "made_by_patch.txt"
PATCH = f"*** Begin Patch\n*** Add File: {PATCH_FILE}\n+Hello from apply_patch\n*** End Patch\n"

# What Codex 0.169 sends, as docs/responses.md lists it: a new field or tool type fails here,
# so that the list (and what the gateway does with it) is looked at again.
CODEX_FIELDS = {
    "model", "stream", "input", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "store",
    "include", "prompt_cache_key", "text", "client_metadata", "instructions", "service_tier",
}
CODEX_TOOL_TYPES = {"function", "custom", "namespace", "tool_search", "web_search", "local_shell"}


def codex_home(home: Path, base_url: str) -> None:
    """Codex's config in `home`: the gateway at `base_url` as its only provider, over the
    Responses API; no update checks, analytics or plugins."""
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "toolshim"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[features]\nplugins = false\n"
        "[model_providers.toolshim]\n"
        'name = "toolshim"\n'
        f'base_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "TOOLSHIM_TEST_KEY"\n'
    )


def codex_env(tmp_path: Path, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(home),
        "TOOLSHIM_TEST_KEY": "test",
        "RUST_LOG": "warn",
    }


class ScriptedUpstream:
    """A chat-only OpenAI-compatible upstream that answers by looking at the conversation: the
    task gets a shell call, the shell's result gets the patch, the patch's result gets the
    final answer; anything else (side requests) gets "ok"."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                body = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                upstream.requests.append(body)
                reply = upstream.reply(body.get("messages", []))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for i in range(0, len(reply), 16):
                    self._send({"choices": [{"index": 0, "delta": {"content": reply[i : i + 16]}, "finish_reason": None}]})
                self._send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send(self, obj: dict) -> None:
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @staticmethod
    def reply(messages: list[dict]) -> str:
        everything = json.dumps(messages)
        if "# Tools" not in everything:
            return "ok"
        def call(name: str, arguments: dict) -> str:
            return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
        if "(multi_agent_v1__close_agent)" in everything:
            return f"Both files are in place: {SHELL_FILE} and {PATCH_FILE}."
        if "(tool_search)" in everything:
            return call("multi_agent_v1__close_agent", {"target": "no-such-agent"})
        if "(apply_patch)" in everything:
            return call("tool_search", {"query": "agent"})
        if "(exec_command)" in everything:
            return "Now the patch.\n" + call("apply_patch", {"input": PATCH})
        return call("exec_command", {"cmd": f"printf shell-ok > {SHELL_FILE}"})

    def close(self) -> None:
        self.server.shutdown()


def test_codex_runs_a_shell_command_applies_a_patch_and_calls_a_deferred_tool(gateway_factory, tmp_path: Path) -> None:
    if not (CODEX_BIN.is_file() and os.access(CODEX_BIN, os.X_OK)):
        pytest.fail(
            f"Codex not found at {CODEX_BIN}: install it with "
            "`npm install --prefix target/codex @openai/codex` or set CODEX_BIN.",
            pytrace=False,
        )
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "codex-home"
    home.mkdir()
    upstream = ScriptedUpstream()
    proxy = None
    try:
        gw = gateway_factory(upstream_url=upstream.base_url)
        # Codex talks to the gateway through a recording proxy, to see what it sends.
        proxy = RecordingProxy(gw.root).start()
        codex_home(home, proxy.base_url)
        env = codex_env(tmp_path, home)
        done = subprocess.run(
            [str(CODEX_BIN), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
             "-C", str(work), f"Create {SHELL_FILE} with a shell command, then add {PATCH_FILE} with a patch."],
            cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"codex exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\ngateway: {gw.stderr_text()}"
        assert (work / SHELL_FILE).read_text() == "shell-ok", done.stderr
        assert (work / PATCH_FILE).read_text() == "Hello from apply_patch\n", done.stderr
        assert "Both files are in place" in done.stdout + done.stderr
        turns = [r for r in upstream.requests if "# Tools" in json.dumps(r["messages"])]
        assert len(turns) >= 3, f"{len(turns)} tool turns"
        # The custom tool's raw input went back into the history as a call with that input.
        assert "Add File: made_by_patch.txt" in json.dumps(turns[-1]["messages"])
        assert not any("tools" in r for r in upstream.requests), "emulated: no native tools upstream"
        check_what_codex_sent(proxy)
    finally:
        upstream.close()
        if proxy is not None:
            proxy.stop()


def check_what_codex_sent(proxy: RecordingProxy) -> None:
    """The first request as docs/responses.md describes it, and the tool search's round trip:
    the tools it loaded were declared, and the namespaced call was Codex's to run."""
    posts = [e for e in proxy.exchanges if e.path == "/v1/responses"]
    assert posts, [e.path for e in proxy.exchanges]
    first = posts[0].request
    assert set(first) <= CODEX_FIELDS, f"new fields: {set(first) - CODEX_FIELDS}"
    assert first["stream"] is True and first["store"] is False
    assert first["include"] == ["reasoning.encrypted_content"]
    types = {tool["type"] for tool in first["tools"]}
    assert types <= CODEX_TOOL_TYPES, f"new tool types: {types - CODEX_TOOL_TYPES}"
    search = next(tool for tool in first["tools"] if tool["type"] == "tool_search")
    assert search["execution"] == "client", search
    assert {"session-id", "originator", "x-codex-turn-metadata"} <= set(posts[0].headers), posts[0].headers
    last = posts[-1].request["input"]
    outputs = {item["call_id"]: item for item in last if item.get("type") in ("function_call_output", "tool_search_output")}
    searched = next(item for item in last if item.get("type") == "tool_search_call")
    loaded = outputs[searched["call_id"]]["tools"]
    assert any(tool.get("name") == "multi_agent_v1" for tool in loaded), loaded
    close = next(item for item in last if item.get("type") == "function_call" and item.get("name") == "close_agent")
    assert close["namespace"] == "multi_agent_v1", close
    answer = outputs[close["call_id"]]["output"]
    assert "no-such-agent" in str(answer) and "unsupported call" not in str(answer), answer
