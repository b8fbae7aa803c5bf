"""Claude Code (`claude -p`, from npm) against the gateway and a scripted chat-only upstream.

One real tool round trip: the upstream asks for `Read` on a file in a temp folder, Claude Code
runs the tool and sends the `tool_result`, the gateway renders it as text for the upstream,
and the upstream answers with what it was given. Claude Code's session-title request, a
structured output, is answered with JSON that fits its schema and must pass the gateway's check. The gateway's default route takes
Claude Code's default model names to that upstream under a local model name. The file holds a random secret that only the
tool result can carry, so the answer proves the whole loop ran.

The binary comes from `CLAUDE_BIN`, else `target/claude-code/node_modules/.bin/claude`
(`.ci/run` installs it there with npm).
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import REPO_ROOT

CLAUDE_BIN = Path(os.environ.get("CLAUDE_BIN", REPO_ROOT / "target" / "claude-code" / "node_modules" / ".bin" / "claude"))
TIMEOUT_S = 180


def fitting(schema: dict) -> object:
    """A small value that fits a JSON schema of the kinds Claude Code sends (objects of
    strings, numbers, booleans, arrays, enums)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: fitting(properties[name]) for name in schema.get("required", properties)}
    if kind == "array":
        return [fitting(schema.get("items", {}))] if schema.get("minItems", 0) > 0 else []
    return {"string": "Read hello.txt", "integer": 1, "number": 1, "boolean": True}.get(kind)


def claude_env(home: Path, gateway_root: str) -> dict[str, str]:
    """Claude Code's environment: the gateway as its API, no telemetry, updates or reports."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": gateway_root,
        "ANTHROPIC_AUTH_TOKEN": "test",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        # Not CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: it also turns off the session-title
        # request, a structured output (output_config.format) the tests check.
    }


def run_claude(work: Path, env: dict[str, str], prompt: str, gw) -> dict:
    """`claude -p PROMPT` allowed to `Read`, in `work`; its JSON result."""
    done = subprocess.run(
        [str(CLAUDE_BIN), "-p", prompt, "--allowedTools", "Read", "--output-format", "json"],
        cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"claude exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\ngateway: {gw.stderr_text()}"
    return json.loads(done.stdout.strip().splitlines()[-1])


class ScriptedUpstream:
    """A chat-only OpenAI-compatible upstream that answers by looking at the conversation:
    the main turn (it carries the tool prompt and mentions the file) gets a `Read` call; a
    turn that carries a tool result gets an answer quoting it; a request with a JSON schema
    (Claude Code's session title) gets JSON that fits it; anything else (Claude Code's other
    side calls) gets "ok"."""

    def __init__(self, file_path: Path) -> None:
        self.requests: list[dict] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models
                body = json.dumps({"object": "list", "data": [{"id": "claude-sonnet-4-5", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                upstream.requests.append(body)
                schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
                reply = json.dumps(fitting(schema)) if schema else upstream.reply(body.get("messages", []))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for i in range(0, len(reply), 8):
                    self._send({"choices": [{"index": 0, "delta": {"content": reply[i : i + 8]}, "finish_reason": None}]})
                self._send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                self._send({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send(self, obj: dict) -> None:
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

        self.file_path = file_path
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def reply(self, messages: list[dict]) -> str:
        last = messages[-1]["content"] if messages else ""
        everything = json.dumps(messages)
        if isinstance(last, str) and "Result of call" in last:
            result = last.split(":", 1)[1].strip() if ":" in last else last
            return f"The file says: {result}"
        if self.file_path.name in everything and "# Tools" in everything:
            call = {"name": "Read", "arguments": {"file_path": str(self.file_path)}}
            return f"I'll read it.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return "ok"

    def close(self) -> None:
        self.server.shutdown()


def test_claude_code_reads_a_file_through_the_gateway(gateway_factory, tmp_path: Path) -> None:
    if not (CLAUDE_BIN.is_file() and os.access(CLAUDE_BIN, os.X_OK)):
        pytest.fail(
            f"Claude Code not found at {CLAUDE_BIN}: install it with "
            "`npm install --prefix target/claude-code @anthropic-ai/claude-code` or set CLAUDE_BIN.",
            pytrace=False,
        )
    secret = f"pelican-{secrets.token_hex(6)}"
    work = tmp_path / "work"
    work.mkdir()
    note = work / "hello.txt"
    note.write_text(f"The secret word is {secret}.\n")
    upstream = ScriptedUpstream(note)
    try:
        # A default route (issue 18): Claude Code's own model names (its main model and the
        # small one for side requests), which no upstream lists, reach the scripted upstream
        # as `local-qwen`; without the route they would go to the `--upstream`, where nothing
        # listens.
        config = tmp_path / "gateway.toml"
        config.write_text(
            f'default_upstream = "local"\n[upstreams.local]\nurl = "{upstream.base_url}"\nmodel = "local-qwen"\n'
        )
        gw = gateway_factory("--config", str(config), upstream_url="http://127.0.0.1:9")
        home = tmp_path / "home"
        home.mkdir()
        result = run_claude(work, claude_env(home, gw.root), "Read the file hello.txt and tell me what it says.", gw)
        assert result["is_error"] is False, result
        assert result["num_turns"] >= 2, result
        assert secret in result["result"], result
        # The secret only reached the upstream inside the rendered tool result.
        carried = [r for r in upstream.requests if secret in json.dumps(r["messages"])]
        assert carried, "no upstream request carried the tool result"
        assert "Result of call" in carried[0]["messages"][-1]["content"]
        assert not any("tools" in r for r in upstream.requests), "emulated: no native tools upstream"
        assert {r["model"] for r in upstream.requests} == {"local-qwen"}, "every request was routed"
        # The session title is a structured output: its schema reached the upstream as
        # response_format, and the answer fitted it the first time (no retry, no 502).
        titles = [r for r in upstream.requests if "title" in json.dumps(r.get("response_format", {}))]
        assert titles, "Claude Code's session-title request did not reach the upstream"
        assert titles[0]["response_format"]["json_schema"]["strict"] is True, titles[0]["response_format"]
        assert not any("required format" in json.dumps(r["messages"]) for r in upstream.requests), "a title was asked again"
        assert "output_invalid" not in gw.stderr_text(), gw.stderr_text()
    finally:
        upstream.close()
