"""Helpers shared by the end-to-end tests: tools, upstream dialects, SSE grammar checks.

The grammar checks follow the event grammars of OpenAI's Chat Completions stream (chunks, then
`[DONE]`) and Anthropic's Messages stream (message_start, content blocks, message_delta,
message_stop). They take the raw bytes of a stream, so they catch what an SDK would silently
accept or repair.
"""

from __future__ import annotations

import importlib
import json
import re
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx

HTTP_TIMEOUT = 10.0
SHUTDOWN_TIMEOUT_S = 10.0
UPSTREAM_KEY = "upstream-secret-key"  # the gateway gets it as TOOLSHIM_UPSTREAM_API_KEY
MODEL = "mock-model"

# -- tools ------------------------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}

TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"tz": {"type": "string"}},
            "required": ["tz"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}

TOOLS = [WEATHER_TOOL, TIME_TOOL]

# The same tool as clients that know no `strict` write it (Ollama's, and most).
PLAIN_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

USER_WEATHER = [{"role": "user", "content": "What's the weather in Paris?"}]

# -- how the upstream model writes calls (the gateway must understand every dialect) ----------


def hermes(name: str, arguments: dict) -> str:
    """`<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes, Qwen)."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def bare_json(name: str, arguments: dict) -> str:
    """A bare JSON envelope in prose."""
    return json.dumps({"name": name, "arguments": arguments})


def fenced(name: str, arguments: dict) -> str:
    """A fenced ```json block holding the envelope."""
    return "```json\n" + json.dumps({"name": name, "arguments": arguments}, indent=2) + "\n```"


def invoke_xml(name: str, arguments: dict) -> str:
    """Anthropic-style `<function_calls><invoke name=…><parameter name=…>`."""
    params = "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in arguments.items())
    return f'<function_calls><invoke name="{name}">{params}</invoke></function_calls>'


DIALECTS = {"hermes": hermes, "bare_json": bare_json, "fenced": fenced, "invoke_xml": invoke_xml}

REFUSAL_EN = "I'm sorry, but I don't have access to tools, so I can't check the weather."
REFUSAL_ZH = "抱歉，我这里没有可用的工具，无法查询天气。"

# Visible text must never contain any of these.
_MARKUP = [
    re.compile(r"<\s*/?\s*tool_call", re.I),
    re.compile(r"<\s*/?\s*function_calls", re.I),
    re.compile(r"<\s*/?\s*invoke\b", re.I),
    re.compile(r"<\s*/?\s*parameter\b", re.I),
    re.compile(r"\{\s*[\"']name[\"']\s*:"),
    re.compile(r"[\"']arguments[\"']\s*:"),
    re.compile(r"```\s*json", re.I),
]


def assert_no_markup(text: str | None, *, names: tuple[str, ...] = ()) -> None:
    """No tool-call markup (and, if given, no tool name) in client-visible text."""
    if not text:
        return
    for pat in _MARKUP:
        assert not pat.search(text), f"tool-call markup {pat.pattern!r} leaked into content: {text!r}"
    for name in names:
        assert name not in text, f"tool name {name!r} leaked into content: {text!r}"


# -- upstream request inspection ----------------------------------------------------------------


def message_text(msg: dict) -> str:
    """All text of one message, whatever its content shape."""
    content = msg.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text") or part.get("content") or ""))
            else:
                out.append(str(part))
        return "\n".join(out)
    return json.dumps(content)


def all_text(request: dict) -> str:
    """Everything the upstream model can read in one request."""
    return "\n".join(message_text(m) for m in request.get("messages") or [])


def assert_emulated_request(request: dict, *, tool_names: tuple[str, ...] = ()) -> None:
    """What every emulate-mode upstream request must look like (the contract in the brief)."""
    assert request.get("stream") is True, f"upstream request not streamed: {request.get('stream')!r}"
    assert (request.get("stream_options") or {}).get("include_usage") is True, (
        f"upstream request lacks stream_options.include_usage=true: {request.get('stream_options')!r}"
    )
    assert "tools" not in request, "emulate mode must not send `tools` upstream"
    assert "tool_choice" not in request, "emulate mode must not send `tool_choice` upstream"
    for i, m in enumerate(request.get("messages") or []):
        assert m.get("role") != "tool", f"upstream message {i} has role 'tool' in emulate mode"
        assert "tool_calls" not in m, f"upstream message {i} carries `tool_calls` in emulate mode"
        assert "tool_call_id" not in m, f"upstream message {i} carries `tool_call_id` in emulate mode"
    if tool_names:
        system = "\n".join(
            message_text(m) for m in request.get("messages") or [] if m.get("role") == "system"
        )
        for name in tool_names:
            assert name in system, f"no system message describes tool {name!r}"


def assert_retry_request(first: dict, second: dict) -> None:
    """The retry's last message tells the model what went wrong: it differs from the first's."""
    assert first.get("messages") and second.get("messages")
    assert second["messages"][-1] != first["messages"][-1], (
        "the retry request must end with a message telling the model what went wrong"
    )


# -- SSE ----------------------------------------------------------------------------------------


@dataclass
class SSEEvent:
    lines: list[str]
    event: str | None = None
    data: str | None = None


def parse_sse(raw: bytes) -> list[SSEEvent]:
    """Split a raw SSE body into events (blank-line separated), keeping each event's lines."""
    text = raw.decode("utf-8")  # an SSE body must be UTF-8
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    events = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln != ""]
        if not lines:
            continue
        ev = SSEEvent(lines=lines)
        data_lines = []
        for ln in lines:
            if ln.startswith(":"):
                continue
            name, _, value = ln.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "event":
                ev.event = value
            elif name == "data":
                data_lines.append(value)
        if data_lines:
            ev.data = "\n".join(data_lines)
        events.append(ev)
    return events


@dataclass
class StreamSummary:
    """What a Chat Completions stream amounts to, after its grammar was checked."""

    chunks: list[dict]
    content: str = ""
    role: str | None = None
    tool_calls: list[dict] = field(default_factory=list)  # {"id","type","name","arguments"}
    finish_reason: str | None = None
    usage: dict | None = None
    error: dict | None = None

    def args(self, i: int = 0) -> Any:
        return json.loads(self.tool_calls[i]["arguments"])


def check_chat_stream(
    raw: bytes, *, include_usage: bool | None = None, allow_error: bool = False
) -> StreamSummary:
    """Assert the Chat Completions stream grammar.

    `include_usage`: True → the usage chunk must be there; False → no chunk may carry `usage`;
    None → not checked. `allow_error`: the stream may end with an in-band `{"error": …}` chunk
    (then `[DONE]` is not required).
    """
    events = parse_sse(raw)
    assert events, "empty SSE body"
    for ev in events:
        assert ev.event is None, f"Chat Completions SSE must not name events: {ev.lines!r}"
        data = [ln for ln in ev.lines if ln.startswith("data:")]
        others = [ln for ln in ev.lines if not ln.startswith("data:") and not ln.startswith(":")]
        assert not others, f"unexpected SSE field lines: {others!r}"
        assert len(data) <= 1, f"a JSON payload must sit on one `data:` line: {ev.lines!r}"

    payloads = [ev.data for ev in events if ev.data is not None]
    summary = StreamSummary(chunks=[])
    done_at = [i for i, d in enumerate(payloads) if d == "[DONE]"]
    error_seen = False
    for i, d in enumerate(payloads):
        if d == "[DONE]":
            continue
        obj = json.loads(d)  # every non-[DONE] data line must be JSON (§5.4)
        assert isinstance(obj, dict), f"chunk {i} is not a JSON object: {d!r}"
        if "error" in obj:
            assert allow_error, f"unexpected in-band error chunk: {d!r}"
            err = obj["error"]
            assert isinstance(err, dict) and err, f"error chunk without an error object: {d!r}"
            for key in ("message", "type", "param", "code"):
                assert key in err, f"in-band error lacks {key!r}: {d!r}"
            assert isinstance(err["message"], str) and err["message"]
            assert not obj.get("choices"), "an error chunk carries no choices"
            summary.error = err
            error_seen = True
            assert i == len(payloads) - 1 or payloads[i + 1 :] == ["[DONE]"], (
                "nothing but [DONE] may follow an in-band error"
            )
            continue
        summary.chunks.append(obj)

    if error_seen:
        assert len(done_at) <= 1
    else:
        assert done_at == [len(payloads) - 1], (
            f"`data: [DONE]` must be the last event, exactly once (at {done_at} of {len(payloads)})"
        )

    chunks = summary.chunks
    assert chunks or error_seen, "no chunks before [DONE]"
    first_id = None
    tool_open: list[int] = []  # indices in order of their start delta
    finish_chunk = None
    usage_chunk = None
    role_count = 0
    for n, c in enumerate(chunks):
        for key in ("id", "object", "created", "model", "choices"):
            assert key in c, f"chunk {n} lacks {key!r}: {c!r}"
        assert c["object"] == "chat.completion.chunk", f"chunk {n} object={c['object']!r}"
        ident = (c["id"], c["created"], c["model"])
        if first_id is None:
            first_id = ident
        assert ident == first_id, f"chunk {n} changes id/created/model: {ident} vs {first_id}"
        assert isinstance(c["created"], int)
        assert "error" not in c

        if include_usage is False:
            assert "usage" not in c, f"chunk {n} carries `usage` although it was not requested"

        if c["choices"] == []:
            assert usage_chunk is None, "more than one `choices: []` chunk"
            assert finish_chunk is not None, "the usage chunk must follow the finish_reason chunk"
            usage_chunk = c
            continue
        assert usage_chunk is None, "no choice chunk may follow the usage chunk"
        if include_usage:
            assert "usage" in c and c["usage"] is None, f"chunk {n} must carry `usage: null`"
        assert len(c["choices"]) == 1, f"chunk {n} has {len(c['choices'])} choices"
        ch = c["choices"][0]
        for key in ("index", "delta", "finish_reason"):
            assert key in ch, f"chunk {n} choice lacks {key!r}: {ch!r}"
        assert "logprobs" in ch and ch["logprobs"] is None, f"chunk {n} choice lacks logprobs:null"
        assert ch["index"] == 0
        assert finish_chunk is None, f"chunk {n} follows the finish_reason chunk"
        delta = ch["delta"]
        assert isinstance(delta, dict)
        if "role" in delta:
            role_count += 1
            assert n == 0, f"`role` appears in chunk {n}; only the first chunk may carry it"
            assert delta["role"] == "assistant"
            summary.role = delta["role"]
        if isinstance(delta.get("content"), str):
            summary.content += delta["content"]
        for tc in delta.get("tool_calls") or []:
            assert "index" in tc, f"tool delta without index: {tc!r}"
            assert isinstance(tc.get("function"), dict), f"tool delta without function: {tc!r}"
            i = tc["index"]
            if i not in tool_open:
                assert i == len(tool_open), f"tool index {i} not contiguous (have {tool_open})"
                assert tc.get("id", "").startswith("call_"), f"first delta of call {i} lacks id call_…"
                assert tc.get("type") == "function", f"first delta of call {i} lacks type"
                assert tc["function"].get("name"), f"first delta of call {i} lacks name"
                tool_open.append(i)
                summary.tool_calls.append(
                    {
                        "id": tc["id"],
                        "type": tc["type"],
                        "name": tc["function"]["name"],
                        "arguments": tc["function"].get("arguments") or "",
                    }
                )
            else:
                assert i == tool_open[-1], f"call {i} continues after call {tool_open[-1]} began"
                for key in ("id", "type"):
                    assert key not in tc, f"{key!r} repeated in a later delta of call {i}: {tc!r}"
                assert "name" not in tc["function"], f"name repeated in a later delta of call {i}"
                summary.tool_calls[i]["arguments"] += tc["function"].get("arguments") or ""
        if ch["finish_reason"] is not None:
            finish_chunk = c
            summary.finish_reason = ch["finish_reason"]

    assert role_count <= 1
    if not error_seen:
        assert chunks and "role" in chunks[0]["choices"][0]["delta"], "the first chunk carries role"
        assert finish_chunk is not None, "no chunk with a finish_reason"
    for call in summary.tool_calls:
        args = json.loads(call["arguments"])
        assert isinstance(args, dict), f"arguments are not a JSON object: {call['arguments']!r}"
    if usage_chunk is not None:
        summary.usage = usage_chunk["usage"]
        assert_usage(summary.usage)
    if include_usage and not error_seen:
        assert usage_chunk is not None, "include_usage was requested but no usage chunk came"
    return summary


def assert_usage(usage: Any) -> None:
    assert isinstance(usage, dict), f"usage is {usage!r}"
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert isinstance(usage.get(key), int), f"usage.{key} is {usage.get(key)!r}"
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll `predicate` until it holds or `timeout` passes; no fixed sleeps."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# -- raw HTTP to the gateway --------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def post_raw(base_url: str, body: dict, *, api_key: str = "test", headers: dict | None = None) -> RawResponse:
    """POST /chat/completions with plain httpx and read the whole body."""
    h = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    h.update(headers or {})
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        with c.stream("POST", f"{base_url}/chat/completions", json=body, headers=h) as r:
            data = r.read()
            return RawResponse(r.status_code, r.headers, data)


def assert_openai_error_body(body: Any) -> dict:
    """`{"error": {"message", "type", "param", "code"}}` with all four keys (§2.15)."""
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), f"not an OpenAI error: {body!r}"
    err = body["error"]
    for key in ("message", "type", "param", "code"):
        assert key in err, f"error lacks {key!r}: {body!r}"
    assert isinstance(err["message"], str) and err["message"]
    return err


# -- capturing what the openai SDK received ---------------------------------------------------

try:  # openai 3.x ships its own fork of httpx
    _sdk_http = importlib.import_module("httpx2")
except ImportError:  # pragma: no cover - older openai
    _sdk_http = httpx


@dataclass
class Capture:
    method: str
    url: str
    status: int
    headers: Any
    body: bytearray


class _TeeStream(_sdk_http.SyncByteStream):  # type: ignore[name-defined,misc]
    def __init__(self, inner: Any, sink: bytearray) -> None:
        self._inner = inner
        self._sink = sink

    def __iter__(self) -> Iterator[bytes]:
        for part in self._inner:
            self._sink += part
            yield part

    def close(self) -> None:
        self._inner.close()


class _RecordingTransport(_sdk_http.BaseTransport):  # type: ignore[name-defined,misc]
    def __init__(self, captures: list[Capture]) -> None:
        self._inner = _sdk_http.HTTPTransport()
        self._captures = captures

    def handle_request(self, request: Any) -> Any:
        response = self._inner.handle_request(request)
        sink = bytearray()
        self._captures.append(
            Capture(request.method, str(request.url), response.status_code, response.headers, sink)
        )
        response.stream = _TeeStream(response.stream, sink)
        return response

    def close(self) -> None:
        self._inner.close()


def recording_http_client(captures: list[Capture], sdk: str = "openai") -> Any:
    """An http client for `openai.OpenAI(http_client=…)` that keeps every raw response body.

    `sdk="anthropic"` builds `anthropic.DefaultHttpxClient` instead, for `anthropic.Anthropic`.
    """
    module = importlib.import_module(sdk)
    return module.DefaultHttpxClient(transport=_RecordingTransport(captures), timeout=HTTP_TIMEOUT)


# The Anthropic Messages checks live in `support_anthropic` (imported last: it uses the above).
from support_anthropic import *  # noqa: E402,F401,F403
from support_anthropic import _jiter_partial  # noqa: E402,F401


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 30) -> None:
    """Waits until `port` on 127.0.0.1 accepts connections; fails if `proc` (the server that
    should listen there) exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr and proc.poll() is not None else ""
                proc.kill()
                raise AssertionError(f"{what} did not listen on {port}: {err}") from None
            time.sleep(0.05)
