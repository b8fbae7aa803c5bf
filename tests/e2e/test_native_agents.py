"""Claude Code (Messages) and Codex (Responses) in front of an upstream with native tool
calling, the gateway in its default `auto` mode (issue 25), each with a picture: Claude Code
reads one with its `Read` tool, Codex gets one attached to its prompt (`-i`); the upstream
must receive it as an image.

The scripted upstream here is what vLLM or llama.cpp with a working tool parser is: it takes
`tools` and answers with `tool_calls`. It looks at what it was sent: the tools as Chat
Completions declares them, the history's calls as `tool_calls` and their results as `tool`
messages, and no tool contract in the prompt. Emulation against a chat-only upstream is
`test_claude_code.py` and `test_codex.py`.

The binaries come from `CLAUDE_BIN` and `CODEX_BIN`, else `target/claude-code` and
`target/codex` (`.ci/run` installs them there with npm).
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import struct
import subprocess
import threading
import zlib
from pathlib import Path
from typing import Callable

import pytest

from test_claude_code import CLAUDE_BIN, claude_env, fitting, run_claude
from test_codex import CODEX_BIN, PATCH, PATCH_FILE, SHELL_FILE, codex_env, codex_home

TIMEOUT_S = 180

class NativeUpstream:
    """An upstream with native tool calling, answering through `script`: the request body →
    its text, or one native call as (name, arguments). `wire` is the API it speaks: OpenAI's
    Chat Completions (`tool_calls`), or Anthropic's Messages (`tool_use` blocks, as the
    Anthropic API or a proxy that speaks it does). Every request is kept."""

    def __init__(self, script: Callable[[dict], object], wire: str = "openai") -> None:
        self.requests: list[dict] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models
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
                answer = script(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                if wire == "anthropic":
                    self._messages(answer)
                    return
                if isinstance(answer, tuple):
                    name, arguments = answer
                    text = json.dumps(arguments)
                    call_id = f"call_{secrets.token_hex(4)}"
                    self._send({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]},
                        "finish_reason": None}]})
                    for i in range(0, len(text), 12):
                        self._send({"choices": [{"index": 0, "delta": {"tool_calls": [
                            {"index": 0, "function": {"arguments": text[i : i + 12]}}]}, "finish_reason": None}]})
                    finish = "tool_calls"
                else:
                    for i in range(0, len(answer), 8):
                        self._send({"choices": [{"index": 0, "delta": {"content": answer[i : i + 8]}, "finish_reason": None}]})
                    finish = "stop"
                self._send({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                self._send({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _messages(self, answer: object) -> None:
                """The answer as Messages events: a text block, or one `tool_use` block."""
                self._event({"type": "message_start", "message": {"id": "msg_up", "type": "message", "role": "assistant",
                             "content": [], "usage": {"input_tokens": 100, "output_tokens": 1}}})
                if isinstance(answer, tuple):
                    name, arguments = answer
                    self._event({"type": "content_block_start", "index": 0, "content_block": {
                        "type": "tool_use", "id": f"toolu_{secrets.token_hex(4)}", "name": name, "input": {}}})
                    text, kind, field, stop = json.dumps(arguments), "input_json_delta", "partial_json", "tool_use"
                else:
                    self._event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
                    text, kind, field, stop = answer, "text_delta", "text", "end_turn"
                for i in range(0, len(text), 12):
                    self._event({"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: text[i : i + 12]}})
                self._event({"type": "content_block_stop", "index": 0})
                self._event({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 10}})
                self._event({"type": "message_stop"})

            def _event(self, obj: dict) -> None:
                self.wfile.write(f"event: {obj['type']}\n".encode())
                self._send(obj)

            def _send(self, obj: dict) -> None:
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()


def png(path: Path) -> Path:
    """Writes an 8×8 red PNG at `path`."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return path


def images(request: dict) -> list[str]:
    """The image URLs of an upstream request's messages."""
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def tool_names(body: dict) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", []) if tool.get("type") == "function"}


def called(body: dict) -> list[str]:
    """The names of the history's calls, in order."""
    return [call["function"]["name"] for message in body["messages"] for call in message.get("tool_calls") or []]


def check_native(requests: list[dict]) -> list[dict]:
    """The upstream requests with tools: each declares them natively and carries no tool
    contract; every earlier call is a `tool_calls` entry answered by a `tool` message."""
    native = [r for r in requests if r.get("tools")]
    assert native, "no request reached the upstream with native tools"
    for request in native:
        assert "# Tools" not in json.dumps(request["messages"]), "a tool contract in a native request"
        ids = [call["id"] for m in request["messages"] for call in m.get("tool_calls") or []]
        answered = [m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"]
        assert ids == answered, (ids, answered)
    return native


def require(binary: Path, package: str, folder: str) -> None:
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail(f"{binary} not found: `npm install --prefix target/{folder} {package}`", pytrace=False)


def claude_workspace(tmp_path: Path, word: str) -> tuple[str, Path, Path, Path]:
    """Claude Code's working folder: a note holding a secret word, and a picture; the
    secret, the folder, the note and the picture."""
    require(CLAUDE_BIN, "@anthropic-ai/claude-code", "claude-code")
    secret = f"{word}-{secrets.token_hex(6)}"
    work = tmp_path / "work"
    work.mkdir()
    note = work / "hello.txt"
    note.write_text(f"The secret word is {secret}.\n")
    return secret, work, note, png(work / "pixel.png")


def claude_reads_through(gateway_factory, tmp_path: Path, work: Path, secret: str, route: str) -> dict:
    """Claude Code, in `work`, asked to read the note and look at the picture through a
    gateway in `auto` whose configuration is `route`; its result, which must hold the
    secret and the one picture."""
    config = tmp_path / "gateway.toml"
    config.write_text(route)
    gw = gateway_factory("--config", str(config), "--mode", "auto", upstream_url="http://127.0.0.1:9")
    home = tmp_path / "home"
    home.mkdir()
    prompt = "Read the file hello.txt and tell me what it says, then look at pixel.png."
    result = run_claude(work, claude_env(home, gw.root), prompt, gw)
    assert result["is_error"] is False, result
    assert secret in result["result"], result
    assert "The picture has 1 image" in result["result"], result
    return result


def test_claude_code_reads_a_file_with_native_tools(gateway_factory, tmp_path: Path) -> None:
    secret, work, note, picture = claude_workspace(tmp_path, "heron")

    def script(body: dict) -> object:
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
        if schema:  # Claude Code's session title: a structured output, emulated
            return json.dumps(fitting(schema))
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if len(results) >= 2:  # the picture came back: an image after the results
            return f"The file says: {results[0]['content']} The picture has {len(images(body))} image."
        if results:
            return ("Read", {"file_path": str(picture)})
        if "Read" in tool_names(body) and note.name in json.dumps(body["messages"]):
            return ("Read", {"file_path": str(note)})
        return "ok"

    upstream = NativeUpstream(script)
    try:
        route = f'default_upstream = "local"\n[upstreams.local]\nurl = "{upstream.base_url}"\nmodel = "local-qwen"\n'
        result = claude_reads_through(gateway_factory, tmp_path, work, secret, route)
        assert result["num_turns"] >= 2, result
        native = check_native(upstream.requests)
        assert any("Read" in tool_names(r) for r in native)
        # Claude Code's Read returns a picture as an image block: it reached the upstream as
        # an image, after the tool's result.
        shown = [url for r in native for url in images(r)]
        assert shown and shown[-1].startswith("data:image/"), shown
        # The tool result came back to the upstream as a `tool` message holding the file.
        results = [m for r in native for m in r["messages"] if m["role"] == "tool"]
        assert any(secret in json.dumps(m["content"]) for m in results), results
        assert {r["model"] for r in upstream.requests} == {"local-qwen"}
    finally:
        upstream.close()


def test_codex_runs_a_shell_command_and_a_patch_with_native_tools(gateway_factory, tmp_path: Path) -> None:
    require(CODEX_BIN, "@openai/codex", "codex")
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "codex-home"
    home.mkdir()
    picture = png(tmp_path / "pixel.png")

    def script(body: dict) -> object:
        if not body.get("tools"):
            return "ok"
        done = called(body)
        if "apply_patch" in done:
            return f"Both files are in place: {SHELL_FILE} and {PATCH_FILE}."
        if "exec_command" in done:
            return ("apply_patch", {"input": PATCH})
        return ("exec_command", {"cmd": f"printf shell-ok > {SHELL_FILE}"})

    upstream = NativeUpstream(script)
    try:
        gw = gateway_factory("--mode", "auto", upstream_url=upstream.base_url)
        codex_home(home, gw.root)
        env = codex_env(tmp_path, home)
        done = subprocess.run(
            [str(CODEX_BIN), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
             "-C", str(work), f"--image={picture}",
             f"Create {SHELL_FILE} with a shell command, then add {PATCH_FILE} with a patch."],
            cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"codex exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\ngateway: {gw.stderr_text()}"
        assert (work / SHELL_FILE).read_text() == "shell-ok", done.stderr
        assert (work / PATCH_FILE).read_text() == "Hello from apply_patch\n", done.stderr
        assert "Both files are in place" in done.stdout + done.stderr
        native = check_native(upstream.requests)
        # The attached picture reached the upstream as an image in the user's message.
        assert all(images(r) and images(r)[0].startswith("data:image/png") for r in native), [images(r)[:1] for r in native]
        last = native[-1]
        assert called(last)[:2] == ["exec_command", "apply_patch"], called(last)
        # The freeform tool is a function of one string `input` upstream, and its call went
        # back into the history with that input.
        patch = next(t for t in last["tools"] if t["function"]["name"] == "apply_patch")
        assert patch["function"]["parameters"]["properties"]["input"]["type"] == "string", patch
        assert "Add File: made_by_patch.txt" in json.dumps(last["messages"])
    finally:
        upstream.close()


def test_claude_code_reads_a_file_through_an_anthropic_upstream_with_native_tools(
    gateway_factory, tmp_path: Path
) -> None:
    """The route claude-code-router users take: Claude Code in front of a Messages upstream
    of another model, the gateway in `auto`. The upstream gets the tools declared as
    Messages declares them, `tool_use` and `tool_result` blocks in the history (the
    picture Claude Code's Read returns inside the result), and no tool contract."""
    secret, work, note, picture = claude_workspace(tmp_path, "egret")

    def blocks(body: dict, kind: str) -> list[dict]:
        return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == kind]

    def script(body: dict) -> object:
        schema = ((body.get("output_config") or {}).get("format") or {}).get("schema")
        if schema:  # Claude Code's session title: a structured output
            return json.dumps(fitting(schema))
        tools = {tool["name"] for tool in body.get("tools", [])}
        results = blocks(body, "tool_result")
        if len(results) >= 2:
            first = json.dumps(results[0]["content"])
            shown = sum(1 for r in results for part in r["content"] if part.get("type") == "image")
            return f"The file says: {first} The picture has {shown} image."
        if results:
            return ("Read", {"file_path": str(picture)})
        if "Read" in tools and note.name in json.dumps(body["messages"]):
            return ("Read", {"file_path": str(note)})
        return "ok"

    upstream = NativeUpstream(script, wire="anthropic")
    try:
        route = (f'default_upstream = "claude"\n[upstreams.claude]\nurl = "{upstream.base_url}"\n'
                 'api = "anthropic"\nmodel = "up-model"\n')
        claude_reads_through(gateway_factory, tmp_path, work, secret, route)
        native = [r for r in upstream.requests if r.get("tools")]
        assert native, "no request reached the upstream with native tools"
        for request in native:
            assert "# Tools" not in json.dumps(request), "a tool contract in a native request"
            assert all("input_schema" in tool for tool in request["tools"]), request["tools"]
            uses = [b["id"] for b in blocks(request, "tool_use")]
            answered = [b["tool_use_id"] for b in blocks(request, "tool_result")]
            assert uses == answered, (uses, answered)
        last = native[-1]
        assert [b["name"] for b in blocks(last, "tool_use")] == ["Read", "Read"]
        assert secret in json.dumps(blocks(last, "tool_result")[0]), last["messages"]
        assert {r["model"] for r in upstream.requests} == {"up-model"}
    finally:
        upstream.close()
