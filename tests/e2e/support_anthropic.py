"""Anthropic Messages checks shared by the end-to-end tests: a strict incremental JSON checker
for `partial_json`, the Messages stream grammar on raw bytes, the whole-message shape, and raw
requests (re-exported by `support`)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx

from support import HTTP_TIMEOUT, RawResponse, parse_sse

# -- Anthropic Messages: JSON prefixes, the SSE grammar, bodies --------------------------------

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_STOP_REASONS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)

_WS = " \t\n\r"
_HEX = "0123456789abcdefABCDEF"
# number states → {character class: next state}; "end" states may be followed by a non-number
_NUM = {
    "minus": {"0": "zero", "d": "int"},
    "zero": {".": "dot", "e": "exp_mark"},
    "int": {"0": "int", "d": "int", ".": "dot", "e": "exp_mark"},
    "dot": {"0": "frac", "d": "frac"},
    "frac": {"0": "frac", "d": "frac", "e": "exp_mark"},
    "exp_mark": {"+": "exp_sign", "-": "exp_sign", "0": "exp", "d": "exp"},
    "exp_sign": {"0": "exp", "d": "exp"},
    "exp": {"0": "exp", "d": "exp"},
}
_NUM_END = {"zero", "int", "frac", "exp"}


def _num_class(c: str) -> str:
    if c == "0":
        return "0"
    if c in "123456789":
        return "d"
    if c in "eE":
        return "e"
    return c


class JsonObjectPrefix:
    """A strict incremental JSON checker for one top-level object.

    `feed(text)` raises `ValueError` at the first character that no valid JSON object could
    continue with, so after every `feed` the text so far is a valid prefix. `complete` is True
    once the object is closed (only whitespace may follow).
    """

    def __init__(self) -> None:
        self.text = ""
        self._stack: list[str] = []
        self._state = "top"
        self._in_key = False
        self._esc: str | int | None = None
        self._num = ""
        self._lit = ""

    @property
    def complete(self) -> bool:
        return self._state == "end"

    def feed(self, text: str) -> None:
        for c in text:
            try:
                self._char(c)
            except ValueError as err:
                raise ValueError(f"{err} at offset {len(self.text)} of {self.text + c!r}") from None
            self.text += c

    def _after_value(self) -> str:
        return "after" if self._stack else "end"

    def _start_value(self, c: str) -> None:
        if c == "{":
            self._stack.append("{")
            self._state = "key_or_close"
        elif c == "[":
            self._stack.append("[")
            self._state = "value_or_close"
        elif c == '"':
            self._state, self._in_key, self._esc = "string", False, None
        elif c == "-" or c.isdigit() and c.isascii():
            self._state = "number"
            self._num = "minus" if c == "-" else ("zero" if c == "0" else "int")
        elif c in "tfn":
            self._state = "literal"
            self._lit = {"t": "rue", "f": "alse", "n": "ull"}[c]
        else:
            raise ValueError(f"unexpected {c!r} where a value must start")

    def _char(self, c: str) -> None:
        st = self._state
        if st == "string":
            if self._esc is None:
                if c == '"':
                    self._state = "colon" if self._in_key else self._after_value()
                elif c == "\\":
                    self._esc = "\\"
                elif ord(c) < 0x20:
                    raise ValueError(f"raw control character {c!r} inside a string")
                return
            if self._esc == "\\":
                if c in '"\\/bfnrt':
                    self._esc = None
                elif c == "u":
                    self._esc = 4
                else:
                    raise ValueError(f"bad escape \\{c}")
                return
            if c not in _HEX:
                raise ValueError(f"bad \\u escape digit {c!r}")
            assert isinstance(self._esc, int)
            self._esc = self._esc - 1 or None
            return
        if st == "number":
            nxt = _NUM[self._num].get(_num_class(c))
            if nxt is not None:
                self._num = nxt
                return
            if self._num not in _NUM_END:
                raise ValueError(f"unexpected {c!r} inside a number")
            self._state = self._after_value()
            self._char(c)
            return
        if st == "literal":
            if not self._lit.startswith(c):
                raise ValueError(f"unexpected {c!r} inside a literal")
            self._lit = self._lit[1:]
            if not self._lit:
                self._state = self._after_value()
            return
        if c in _WS:
            return
        if st == "top":
            if c != "{":
                raise ValueError(f"the top-level value must be an object, it starts with {c!r}")
            self._start_value(c)
        elif st in ("value", "value_or_close"):
            if st == "value_or_close" and c == "]":
                self._stack.pop()
                self._state = self._after_value()
            else:
                self._start_value(c)
        elif st in ("key", "key_or_close"):
            if st == "key_or_close" and c == "}":
                self._stack.pop()
                self._state = self._after_value()
            elif c == '"':
                self._state, self._in_key, self._esc = "string", True, None
            else:
                raise ValueError(f"unexpected {c!r} where an object key must start")
        elif st == "colon":
            if c != ":":
                raise ValueError(f"expected ':' after a key, got {c!r}")
            self._state = "value"
        elif st == "after":
            top = self._stack[-1]
            if c == ",":
                self._state = "key" if top == "{" else "value"
            elif c == ("}" if top == "{" else "]"):
                self._stack.pop()
                self._state = self._after_value()
            else:
                raise ValueError(f"expected ',' or the closing bracket, got {c!r}")
        elif st == "end":
            raise ValueError(f"{c!r} after the complete object")
        else:  # pragma: no cover
            raise AssertionError(st)


def _jiter_partial(buf: str) -> Any:
    """What the anthropic SDK does with the cumulative buffer (jiter, partial mode)."""
    try:
        from jiter import from_json
    except ImportError:  # pragma: no cover - jiter ships with both SDKs
        return None
    return from_json(buf.encode(), partial_mode=True)


class AnthropicContent:
    """Views over `self.content`, a list of Anthropic content blocks."""

    content: list[dict]

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b["type"] == "text")

    @property
    def tool_uses(self) -> list[dict]:
        return [b for b in self.content if b["type"] == "tool_use"]


@dataclass
class AnthropicStreamSummary(AnthropicContent):
    """What a Messages stream amounts to, after its grammar was checked."""

    payloads: list[dict]  # every event's JSON, pings included, in order
    message: dict | None = None  # message_start.message
    content: list[dict] = field(
        default_factory=list
    )  # {"type":"text","text"} | {"type":"tool_use","id","name","input"}
    partial_json: list[str | None] = field(default_factory=list)  # per block: concatenated fragments
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: dict = field(default_factory=dict)  # message_start usage, overwritten by message_delta's
    delta_usage: dict | None = None
    error: dict | None = None  # the `error` object of an `event: error`

    @property
    def types(self) -> list[str]:
        return [p["type"] for p in self.payloads]


def check_anthropic_stream(
    raw: bytes, *, allow_error: bool = False, ping_after_first_block: bool = True
) -> AnthropicStreamSummary:
    """Assert the Messages stream grammar on raw SSE bytes.

    message_start, then for i = 0, 1, …: content_block_start(i) · content_block_delta(i)* ·
    content_block_stop(i), then message_delta, message_stop (last). Every event has an `event:`
    line equal to its JSON `type` and one `data:` line. `ping` may come anywhere between
    message_start and message_stop; with `ping_after_first_block`, one must directly follow the
    first content_block_start. A text block starts as `{"type":"text","text":""}`, a tool_use block
    with `"input": {}`; every cumulative `partial_json` is a valid prefix of one JSON object and
    ends as the whole object. `allow_error`: the stream may instead end with an `event: error`
    (and nothing after it).
    """
    events = parse_sse(raw)
    s = AnthropicStreamSummary(payloads=[])
    for ev in events:
        fields = [ln for ln in ev.lines if not ln.startswith(":")]
        if not fields:
            continue  # a comment-only keep-alive
        data = [ln for ln in fields if ln.startswith("data:")]
        names = [ln for ln in fields if ln.startswith("event:")]
        others = [ln for ln in fields if not ln.startswith(("data:", "event:"))]
        assert not others, f"unexpected SSE field lines: {others!r}"
        assert len(names) == 1, (
            f"every Anthropic event needs exactly one `event:` line (the SDK drops unnamed ones): {ev.lines!r}"
        )
        assert len(data) == 1, f"a JSON payload must sit on one `data:` line: {ev.lines!r}"
        assert ev.data != "[DONE]", "Anthropic streams have no `[DONE]`"
        obj = json.loads(ev.data)
        assert isinstance(obj, dict), f"event data is not a JSON object: {ev.data!r}"
        assert obj.get("type") == ev.event, f"`event: {ev.event}` but JSON type {obj.get('type')!r}"
        s.payloads.append(obj)

    assert s.payloads, "empty SSE body"
    p = s.payloads
    assert p[0]["type"] == "message_start", f"the first event must be message_start, got {s.types[:3]}"
    msg = p[0].get("message")
    assert isinstance(msg, dict), f"message_start without a message: {p[0]!r}"
    assert isinstance(msg.get("id"), str) and msg["id"].startswith("msg_"), f"message id {msg.get('id')!r}"
    assert msg.get("type") == "message" and msg.get("role") == "assistant", msg
    assert isinstance(msg.get("model"), str) and msg["model"], msg
    assert msg.get("content") == [], f"message_start content must be []: {msg.get('content')!r}"
    for key in ("stop_reason", "stop_sequence"):
        assert key in msg and msg[key] is None, f"message_start needs {key}: null: {msg!r}"
    usage = msg.get("usage")
    assert isinstance(usage, dict), f"message_start without usage: {msg!r}"
    assert isinstance(usage.get("input_tokens"), int) and usage["input_tokens"] > 0, (
        f"message_start usage.input_tokens must be the real count, > 0 (§3.9): {usage!r}"
    )
    assert isinstance(usage.get("output_tokens"), int) and usage["output_tokens"] >= 0, usage
    s.message = msg
    s.usage = dict(usage)

    open_block: int | None = None
    prefix: JsonObjectPrefix | None = None
    first_block_at: int | None = None
    delta_at: int | None = None
    stop_at: int | None = None
    for n, ev in enumerate(p[1:], start=1):
        t = ev["type"]
        assert stop_at is None, f"{t!r} after message_stop"
        if t == "ping":
            assert ev == {"type": "ping"}, f"ping carries extra fields: {ev!r}"
            continue
        if t == "error":
            assert allow_error, f"unexpected error event: {ev!r}"
            err = ev.get("error")
            assert isinstance(err, dict), f"error event without an error object: {ev!r}"
            assert isinstance(err.get("type"), str) and err["type"], ev
            assert isinstance(err.get("message"), str), ev
            assert n == len(p) - 1, f"events after the error event: {s.types[n + 1 :]}"
            s.error = err
            break
        assert t != "message_start", f"a second message_start at event {n}"
        if t == "content_block_start":
            assert delta_at is None, "content_block_start after message_delta"
            assert open_block is None, f"block {ev.get('index')} starts while block {open_block} is open"
            assert ev.get("index") == len(s.content), (
                f"block index {ev.get('index')!r}, expected {len(s.content)} (0-based, contiguous)"
            )
            block = ev.get("content_block")
            assert isinstance(block, dict), ev
            if block.get("type") == "text":
                assert block.get("text") == "", f'a text block starts with text "": {block!r}'
                s.content.append({"type": "text", "text": ""})
                s.partial_json.append(None)
            elif block.get("type") == "tool_use":
                assert isinstance(block.get("id"), str) and block["id"].startswith("toolu_"), (
                    f"tool_use id {block.get('id')!r}"
                )
                assert isinstance(block.get("name"), str) and block["name"], block
                assert "input" in block and block["input"] == {}, (
                    f"a tool_use block must start with input {{}} (§3.9): {block!r}"
                )
                s.content.append({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
                s.partial_json.append("")
                prefix = JsonObjectPrefix()
            else:
                raise AssertionError(f"unexpected content block type: {block!r}")
            open_block = ev["index"]
            if first_block_at is None:
                first_block_at = n
                if ping_after_first_block:
                    assert n + 1 < len(p) and p[n + 1]["type"] == "ping", (
                        f"a ping must follow the first content_block_start; got {s.types[n + 1 : n + 2]}"
                    )
        elif t == "content_block_delta":
            assert open_block is not None and ev.get("index") == open_block, (
                f"delta for block {ev.get('index')!r} while {open_block!r} is open"
            )
            block = s.content[open_block]
            delta = ev.get("delta")
            assert isinstance(delta, dict), ev
            if block["type"] == "text":
                assert delta.get("type") == "text_delta", f"text block got {delta!r}"
                assert isinstance(delta.get("text"), str), delta
                block["text"] += delta["text"]
            else:
                assert delta.get("type") == "input_json_delta", f"tool_use block got {delta!r}"
                frag = delta.get("partial_json")
                assert isinstance(frag, str), delta
                assert prefix is not None
                buf = s.partial_json[open_block] + frag
                try:
                    prefix.feed(frag)
                except ValueError as err:
                    raise AssertionError(
                        f"cumulative partial_json is not a valid JSON prefix: {err}"
                    ) from None
                if buf.strip():
                    try:
                        _jiter_partial(buf)  # the SDK's own check (§3.10)
                    except ValueError as err:
                        raise AssertionError(f"jiter rejects partial_json {buf!r}: {err}") from None
                s.partial_json[open_block] = buf
        elif t == "content_block_stop":
            assert open_block is not None and ev.get("index") == open_block, (
                f"content_block_stop for {ev.get('index')!r} while {open_block!r} is open"
            )
            block = s.content[open_block]
            if block["type"] == "tool_use":
                buf = s.partial_json[open_block] or ""
                if buf.strip():
                    assert prefix is not None and prefix.complete, f"partial_json ends incomplete: {buf!r}"
                    block["input"] = json.loads(buf)
                assert isinstance(block["input"], dict), f"tool input is not an object: {buf!r}"
            open_block = None
            prefix = None
        elif t == "message_delta":
            assert open_block is None, f"message_delta while block {open_block} is open"
            assert delta_at is None, "a second message_delta"
            delta_at = n
            delta = ev.get("delta")
            assert isinstance(delta, dict), ev
            assert delta.get("stop_reason") in ANTHROPIC_STOP_REASONS, (
                f"stop_reason {delta.get('stop_reason')!r}"
            )
            assert "stop_sequence" in delta, f"message_delta.delta lacks stop_sequence: {ev!r}"
            if delta["stop_reason"] != "stop_sequence":
                assert delta["stop_sequence"] is None, ev
            du = ev.get("usage")
            assert isinstance(du, dict), f"message_delta without usage (the SDK reads it): {ev!r}"
            assert isinstance(du.get("output_tokens"), int) and du["output_tokens"] >= 0, du
            for key, value in du.items():
                if key in (
                    "input_tokens",
                    "output_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ):
                    assert value is None or isinstance(value, int) and value >= 0, du
            s.stop_reason = delta["stop_reason"]
            s.stop_sequence = delta["stop_sequence"]
            s.delta_usage = du
            s.usage.update({k: v for k, v in du.items() if v is not None})
        elif t == "message_stop":
            assert delta_at is not None, "message_stop before message_delta"
            assert ev == {"type": "message_stop"}, f"message_stop carries extra fields: {ev!r}"
            stop_at = n
        else:
            raise AssertionError(f"unknown event type {t!r}; the gateway must not invent events (§3.11)")

    if s.error is None:
        assert stop_at == len(p) - 1, f"message_stop must be the last event; events: {s.types}"
        if s.tool_uses and s.stop_reason != "max_tokens":
            assert s.stop_reason == "tool_use", f"tool_use blocks but stop_reason {s.stop_reason!r} (§3.8)"
        if not s.tool_uses:
            assert s.stop_reason != "tool_use", "stop_reason tool_use without a tool_use block"
    return s


def check_anthropic_message(obj: Any) -> dict:
    """The non-streaming Message shape of the contract; returns it."""
    assert isinstance(obj, dict), f"not a JSON object: {obj!r}"
    for key in ("id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"):
        assert key in obj, f"message lacks {key!r}: {obj!r}"
    assert obj["id"].startswith("msg_"), obj["id"]
    assert obj["type"] == "message" and obj["role"] == "assistant"
    assert obj["stop_reason"] in ANTHROPIC_STOP_REASONS, obj["stop_reason"]
    if obj["stop_reason"] != "stop_sequence":
        assert obj["stop_sequence"] is None
    assert isinstance(obj["content"], list)
    for block in obj["content"]:
        assert block.get("type") in ("text", "tool_use"), f"unexpected block {block!r}"
        if block["type"] == "text":
            assert isinstance(block.get("text"), str)
        else:
            assert isinstance(block.get("id"), str) and block["id"].startswith("toolu_"), block
            assert isinstance(block.get("name"), str) and block["name"], block
            assert isinstance(block.get("input"), dict), f"tool_use input must be an object: {block!r}"
    tool_uses = [b for b in obj["content"] if b["type"] == "tool_use"]
    if tool_uses and obj["stop_reason"] != "max_tokens":
        assert obj["stop_reason"] == "tool_use", obj["stop_reason"]
    if not tool_uses:
        assert obj["stop_reason"] != "tool_use"
    u = obj["usage"]
    assert isinstance(u, dict)
    assert isinstance(u.get("input_tokens"), int) and u["input_tokens"] > 0, u
    assert isinstance(u.get("output_tokens"), int) and u["output_tokens"] >= 0, u
    assert u.get("cache_creation_input_tokens") == 0 and u.get("cache_read_input_tokens") == 0, u
    assert u.get("service_tier") == "standard", u
    return obj


def assert_anthropic_error_body(body: Any, error_type: str | None = None) -> dict:
    """`{"type":"error","error":{"type","message"},"request_id"}` (§3.12); returns `error`."""
    assert isinstance(body, dict) and body.get("type") == "error", f"not an Anthropic error: {body!r}"
    err = body.get("error")
    assert isinstance(err, dict), f"not an Anthropic error: {body!r}"
    assert isinstance(err.get("type"), str) and err["type"], body
    assert isinstance(err.get("message"), str) and err["message"], body
    assert isinstance(body.get("request_id"), str) and body["request_id"], f"no request_id: {body!r}"
    if error_type is not None:
        assert err["type"] == error_type, f"error.type {err['type']!r}, expected {error_type!r}"
    return err


def post_anthropic_raw(
    root: str,
    body: dict | None,
    *,
    path: str = "/v1/messages",
    api_key: str | None = "test",
    version: str | None = ANTHROPIC_VERSION,
    headers: dict | None = None,
    method: str = "POST",
) -> RawResponse:
    """A Messages-API request with plain httpx (`x-api-key`, `anthropic-version`); reads it all."""
    h: dict[str, str] = {}
    if api_key:
        h["x-api-key"] = api_key
    if version:
        h["anthropic-version"] = version
    h.update(headers or {})
    kw: dict[str, Any] = {"headers": h}
    if body is not None:
        kw["json"] = body
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        with c.stream(method, root + path, **kw) as r:
            data = r.read()
            return RawResponse(r.status_code, r.headers, data)
