"""What the `anthropic` SDK tests share: the tools, the scripted scenarios' constants, and
`run`, which sends one request in any of the three modes and checks what came back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import pytest

from support import (
    AnthropicContent,
    ANTHROPIC_VERSION,
    DIALECTS,
    HTTP_TIMEOUT,
    MODEL,
    REFUSAL_EN,
    REFUSAL_ZH,
    AnthropicStreamSummary,
    JsonObjectPrefix,
    all_text,
    assert_anthropic_error_body,
    assert_no_markup,
    assert_retry_request,
    check_anthropic_message,
    check_anthropic_stream,
    fenced,
    hermes,
    invoke_xml,
    message_text,
    post_anthropic_raw,
    wait_until,
)

MAX_TOKENS = 1024
PARIS = {"city": "Paris"}
TOKYO = {"city": "Tokyo"}
USER_WEATHER = [{"role": "user", "content": "What's the weather in Paris?"}]
SYSTEM_BLOCKS = [
    {"type": "text", "text": "You are a helpful assistant.", "cache_control": {"type": "ephemeral"}}
]

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {
    "name": "get_time",
    "description": "Get the current time in a time zone",
    "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
}
FORECAST = {
    "name": "get_forecast",
    "description": "Get a multi-day forecast",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "options": {
                "type": "object",
                "properties": {
                    "units": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": ["string", "null"]},
                    "hourly": {"type": "boolean"},
                    "offset": {"type": "number"},
                },
            },
        },
        "required": ["city", "days"],
    },
}
PING = {
    "name": "ping_server",
    "description": "Check that the server is up",
    "input_schema": {"type": "object", "properties": {}},
}
TOOLS = [WEATHER, TIME]

MODES = pytest.mark.parametrize("mode", ["create", "stream", "events"])
STREAMED = pytest.mark.parametrize("mode", ["stream", "events"])

# Anthropic's error types.
ERROR_TYPES = {
    "invalid_request_error",
    "authentication_error",
    "billing_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error",
}


# -- helpers --------------------------------------------------------------------------------------


@dataclass
class Turn(AnthropicContent):
    """One assistant message as the SDK delivered it, streamed or not, in one shape."""

    id: str
    model: str
    content: list[dict]  # {"type":"text","text"} | {"type":"tool_use","id","name","input"}
    stop_reason: str | None
    stop_sequence: str | None
    usage: dict
    raw: AnthropicStreamSummary | None = None  # the checked raw stream, for streamed modes
    events: list[str] = field(default_factory=list)  # event types the SDK yielded

    @property
    def types(self) -> list[str]:
        return [b["type"] for b in self.content]

    def as_param(self) -> dict:
        """This turn as an assistant message for the next request."""
        return {"role": "assistant", "content": [dict(b) for b in self.content]}


def _block(b: Any) -> dict:
    if b.type == "text":
        return {"type": "text", "text": b.text}
    assert b.type == "tool_use", f"unexpected content block type {b.type!r}"
    return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}


def _from_message(msg: anthropic.types.Message) -> Turn:
    assert msg.type == "message" and msg.role == "assistant"
    return Turn(
        id=msg.id,
        model=msg.model,
        content=[_block(b) for b in msg.content],
        stop_reason=msg.stop_reason,
        stop_sequence=msg.stop_sequence,
        usage=msg.usage.model_dump(exclude_none=True),
    )


def run(client: anthropic.Anthropic, captures: list, mode: str, **kw: Any) -> Turn:
    """`messages.create`, `messages.stream` or `create(stream=True)`; streams are grammar-checked."""
    kw.setdefault("model", MODEL)
    kw.setdefault("max_tokens", MAX_TOKENS)
    kw.setdefault("messages", USER_WEATHER)
    if mode == "create":
        msg = client.messages.create(**kw)
        turn = _from_message(msg)
        cap = captures[-1]
        assert cap.status == 200
        assert cap.headers["content-type"].startswith("application/json")
        raw = check_anthropic_message(json.loads(bytes(cap.body)))
        assert raw["content"] == turn.content
    elif mode == "stream":
        with client.messages.stream(**kw) as s:
            seen = [ev.type for ev in s]
            msg = s.get_final_message()
        turn = _from_message(msg)
        turn.events = seen
    elif mode == "events":
        turn = _accumulate(client, **kw)
    else:  # pragma: no cover
        raise AssertionError(mode)

    if mode != "create":
        cap = captures[-1]
        assert cap.status == 200
        assert cap.headers["content-type"].startswith("text/event-stream"), cap.headers["content-type"]
        turn.raw = check_anthropic_stream(bytes(cap.body))
        assert turn.raw.content == turn.content, "the SDK's message differs from the raw events"
        assert turn.raw.stop_reason == turn.stop_reason
        assert turn.raw.message is not None and turn.raw.message["id"] == turn.id

    assert turn.id.startswith("msg_"), turn.id
    assert turn.model == kw["model"], f"model {turn.model!r}, requested {kw['model']!r}"
    assert isinstance(turn.usage.get("input_tokens"), int) and turn.usage["input_tokens"] > 0, turn.usage
    assert isinstance(turn.usage.get("output_tokens"), int), turn.usage
    ids = [b["id"] for b in turn.tool_uses]
    assert len(set(ids)) == len(ids), f"tool_use ids repeat: {ids}"
    for b in turn.content:
        if b["type"] == "tool_use":
            assert b["id"].startswith("toolu_"), b["id"]
            assert isinstance(b["input"], dict), b
        else:
            assert b["text"].strip(), f"empty or whitespace-only text block in {turn.content!r}"
    return turn


def _accumulate(client: anthropic.Anthropic, **kw: Any) -> Turn:
    """`messages.create(stream=True)`: walk the typed events and build the message by hand."""
    turn: Turn | None = None
    bufs: dict[int, str] = {}
    with client.messages.create(stream=True, **kw) as stream:
        for ev in stream:
            if turn is None:
                assert ev.type == "message_start", f"first event {ev.type!r}"
            if ev.type == "message_start":
                assert turn is None, "a second message_start"
                m = ev.message
                assert m.content == [] and m.stop_reason is None
                turn = Turn(m.id, m.model, [], None, None, m.usage.model_dump(exclude_none=True))
            elif ev.type == "content_block_start":
                assert ev.index == len(turn.content)
                b = ev.content_block
                if b.type == "text":
                    assert b.text == ""
                    turn.content.append({"type": "text", "text": ""})
                else:
                    assert b.type == "tool_use" and b.input == {}, b
                    turn.content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": {}})
                    bufs[ev.index] = ""
            elif ev.type == "content_block_delta":
                if ev.delta.type == "text_delta":
                    turn.content[ev.index]["text"] += ev.delta.text
                else:
                    assert ev.delta.type == "input_json_delta", ev.delta
                    bufs[ev.index] += ev.delta.partial_json
            elif ev.type == "content_block_stop":
                block = turn.content[ev.index]
                if block["type"] == "tool_use" and bufs[ev.index].strip():
                    block["input"] = json.loads(bufs[ev.index])
            elif ev.type == "message_delta":
                turn.stop_reason = ev.delta.stop_reason
                turn.stop_sequence = ev.delta.stop_sequence
                turn.usage.update(ev.usage.model_dump(exclude_none=True))
            turn.events.append(ev.type)
    assert turn is not None, "no events"
    assert turn.events[-1] == "message_stop", turn.events
    return turn


def assert_tool_use(block: dict, name: str, arguments: dict) -> None:
    assert block["type"] == "tool_use", block
    assert block["id"].startswith("toolu_")
    assert block["name"] == name, block
    assert block["input"] == arguments, block


def assert_text_only(turn: Turn, text: str | None = None) -> None:
    assert turn.tool_uses == [], f"unexpected tool_use: {turn.content!r}"
    assert turn.stop_reason == "end_turn", turn.stop_reason
    assert_no_markup(turn.text, names=("get_weather", "get_time", "launch_rockets"))
    if text is not None:
        assert turn.text == text


def assert_translated_request(request: dict, *, tool_names: tuple[str, ...] = ()) -> None:
    """What the upstream may see of an Anthropic request in emulate mode (the brief's contract)."""
    assert isinstance(request, dict)
    assert "tools" not in request, "emulate mode must not send `tools` upstream"
    assert "tool_choice" not in request, "emulate mode must not send `tool_choice` upstream"
    for i, m in enumerate(request.get("messages") or []):
        assert m.get("role") in ("system", "user", "assistant"), (
            f"upstream message {i} role {m.get('role')!r}"
        )
        for key in ("tool_calls", "tool_call_id"):
            assert key not in m, f"upstream message {i} carries {key!r}"
        if isinstance(m.get("content"), list):
            for part in m["content"]:
                assert part.get("type") not in ("tool_use", "tool_result"), (
                    f"upstream message {i} carries an Anthropic {part.get('type')} block"
                )
    if tool_names:
        system = "\n".join(
            message_text(m) for m in request.get("messages") or [] if m.get("role") == "system"
        )
        for name in tool_names:
            assert name in system, f"no system message describes tool {name!r}"


def system_text(request: dict) -> str:
    return "\n".join(message_text(m) for m in request.get("messages") or [] if m.get("role") == "system")


def strict_client(root: str, **kw: Any) -> anthropic.Anthropic:
    kw.setdefault("api_key", "test")
    return anthropic.Anthropic(
        base_url=root, max_retries=0, timeout=HTTP_TIMEOUT, _strict_response_validation=True, **kw
    )
