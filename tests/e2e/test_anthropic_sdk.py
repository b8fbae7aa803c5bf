"""The official `anthropic` SDK (strict response validation) against `toolshim serve --mode emulate`.

The upstream is the same scripted OpenAI-compatible chat model as for the OpenAI tests; the
gateway translates Anthropic Messages to it and back. Every scenario scripts what the plain
upstream model writes, then asserts what the SDK sees and what the upstream was sent. Each
scenario runs three ways (`mode`): `create` (non-streamed), `stream`
(`messages.stream(...).get_final_message()`) and `events` (`messages.create(stream=True)`, events
accumulated by hand). Streamed modes also check the raw bytes the SDK received against the event
grammar (`check_anthropic_stream`).
"""

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


# -- single and parallel tool_use ------------------------------------------------------------------


@MODES
def test_single_tool_use(anthropic_client, sse_captures, upstream, mode):
    upstream.script([{"text": hermes("get_weather", PARIS), "chunk": 3}])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["tool_use"], f"no text preceded the call: {turn.content!r}"
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"
    assert turn.stop_sequence is None
    assert len(upstream.requests) == 1
    assert_translated_request(upstream.requests[0], tool_names=("get_weather", "get_time"))
    if mode == "stream":
        assert "input_json" in turn.events, "the stream helper saw no input_json event"


@MODES
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_text_then_tool_use_in_every_dialect(anthropic_client, sse_captures, upstream, mode, dialect):
    upstream.script([{"text": "Let me check. " + DIALECTS[dialect]("get_weather", PARIS), "chunk": 4}])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["text", "tool_use"], turn.content
    assert turn.content[0]["text"].strip() == "Let me check."
    assert_no_markup(turn.text, names=("get_weather",))
    assert_tool_use(turn.content[1], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"
    assert len(upstream.requests) == 1


@MODES
def test_parallel_tool_use(anthropic_client, sse_captures, upstream, mode):
    text = "Checking both.\n" + hermes("get_weather", PARIS) + "\n" + hermes("get_time", {"tz": "Asia/Tokyo"})
    upstream.script([{"text": text, "chunk": 5}])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["text", "tool_use", "tool_use"], turn.content
    assert turn.text.strip() == "Checking both."
    assert_tool_use(turn.content[1], "get_weather", PARIS)
    assert_tool_use(turn.content[2], "get_time", {"tz": "Asia/Tokyo"})
    assert turn.stop_reason == "tool_use"
    assert len(upstream.requests) == 1


def test_fresh_ids_per_response(anthropic_client, sse_captures, upstream):
    upstream.script([hermes("get_weather", PARIS)] * 3)
    turns = [
        run(anthropic_client, sse_captures, mode, tools=TOOLS) for mode in ("create", "stream", "events")
    ]
    assert len({t.id for t in turns}) == 3, "message ids must be unique"
    assert len({t.tool_uses[0]["id"] for t in turns}) == 3, "tool_use ids must be unique"


# -- multi-turn with tool_result ----------------------------------------------------------------------


RESULT_FORMS = pytest.mark.parametrize("form", ["string", "blocks", "error"])


def _tool_result(tool_use_id: str, form: str, text: str) -> dict:
    if form == "string":
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if form == "blocks":
        return {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": [{"type": "text", "text": text}],
            "is_error": False,
        }
    assert form == "error"
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": text, "is_error": True}


@MODES
@RESULT_FORMS
def test_multi_turn_loop(anthropic_client, sse_captures, upstream, mode, form):
    """Appendix B: text + tool_use, then the tool_result round trip."""
    upstream.script(
        [
            {
                "text": "I'll check the current weather in Paris for you. " + hermes("get_weather", PARIS),
                "chunk": 6,
            },
            {"text": "It's currently 18°C and cloudy in Paris.", "chunk": 4},
        ]
    )
    first = run(anthropic_client, sse_captures, mode, system=SYSTEM_BLOCKS, tools=TOOLS)
    assert first.stop_reason == "tool_use"
    assert first.types == ["text", "tool_use"]
    call = first.tool_uses[0]
    assert_tool_use(call, "get_weather", PARIS)

    result = (
        "ConnectionError: upstream timeout ZETA-7731" if form == "error" else "18°C, cloudy (ref ZETA-7731)"
    )
    messages = USER_WEATHER + [
        first.as_param(),
        {"role": "user", "content": [_tool_result(call["id"], form, result)]},
    ]
    second = run(anthropic_client, sse_captures, mode, system=SYSTEM_BLOCKS, tools=TOOLS, messages=messages)
    assert_text_only(second, "It's currently 18°C and cloudy in Paris.")

    assert len(upstream.requests) == 2
    req = upstream.requests[1]
    assert_translated_request(req, tool_names=("get_weather",))
    assert "You are a helpful assistant." in system_text(req), (
        "the client's system prompt must reach the upstream"
    )
    text = all_text(req)
    assert "What's the weather in Paris?" in text
    assert "I'll check the current weather in Paris for you." in text, (
        "earlier assistant text must reach the upstream"
    )
    assert call["id"] in text, "the tool_use id must reach the upstream"
    assert "ZETA-7731" in text, "the tool result must reach the upstream"
    if form == "error":
        assert f"Error from call {call['id']} (get_weather)" in text, (
            "is_error: true must read as a failed call"
        )
        assert f"Result of call {call['id']}" not in text
    else:
        assert f"Result of call {call['id']} (get_weather)" in text
        assert f"Error from call {call['id']}" not in text


@MODES
def test_parallel_round_trip_with_one_failure(anthropic_client, sse_captures, upstream, mode):
    upstream.script(
        [
            hermes("get_weather", PARIS) + "\n" + hermes("get_weather", TOKYO),
            {"text": "Paris is 18°C; Tokyo's weather service is down.", "chunk": 5},
        ]
    )
    two = [{"role": "user", "content": "What's the weather in Paris and in Tokyo?"}]
    first = run(anthropic_client, sse_captures, mode, tools=[WEATHER], messages=two)
    assert [b["input"] for b in first.tool_uses] == [PARIS, TOKYO]
    paris, tokyo = first.tool_uses
    messages = two + [
        first.as_param(),
        {
            "role": "user",
            "content": [
                _tool_result(paris["id"], "blocks", "PARIS-RESULT-18C"),
                _tool_result(tokyo["id"], "error", "TOKYO-TIMEOUT"),
            ],
        },
    ]
    second = run(anthropic_client, sse_captures, mode, tools=[WEATHER], messages=messages)
    assert_text_only(second, "Paris is 18°C; Tokyo's weather service is down.")
    req = upstream.requests[1]
    assert_translated_request(req, tool_names=("get_weather",))
    text = all_text(req)
    assert f"Result of call {paris['id']} (get_weather)" in text
    assert f"Error from call {tokyo['id']} (get_weather)" in text
    assert "PARIS-RESULT-18C" in text and "TOKYO-TIMEOUT" in text


@MODES
def test_history_with_client_ids_and_no_tools(anthropic_client, sse_captures, upstream, mode):
    """Ids the client echoes back (real Anthropic ones) are accepted; `tools` may be absent."""
    upstream.script([{"text": "Paris is 18°C.", "chunk": 3}])
    messages = USER_WEATHER + [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "name": "get_weather",
                    "input": PARIS,
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "content": "PARIS-18C",
                },
                {"type": "text", "text": "Answer briefly."},
            ],
        },
    ]
    turn = run(anthropic_client, sse_captures, mode, messages=messages)
    assert_text_only(turn, "Paris is 18°C.")
    req = upstream.requests[0]
    assert_translated_request(req)
    text = all_text(req)
    assert "Result of call toolu_01rwFU1BCccKJ6kT7ht5cpmj (get_weather)" in text
    assert "PARIS-18C" in text and "Answer briefly." in text


# -- tool_choice and disable_parallel_tool_use ------------------------------------------------------


@MODES
def test_tool_choice_auto_text(anthropic_client, sse_captures, upstream, mode):
    upstream.script([{"text": "It is sunny in Paris today.", "chunk": 2}])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "auto"})
    assert_text_only(turn, "It is sunny in Paris today.")
    assert turn.types == ["text"]
    assert len(upstream.requests) == 1


@MODES
def test_tool_choice_auto_call(anthropic_client, sse_captures, upstream, mode):
    upstream.script([DIALECTS["bare_json"]("get_weather", PARIS)])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "auto"})
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"


@MODES
def test_tool_choice_any(anthropic_client, sse_captures, upstream, mode):
    upstream.script([fenced("get_weather", PARIS)])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "any"})
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"
    assert len(upstream.requests) == 1


@MODES
@pytest.mark.parametrize("choice", ["any", "tool"])
def test_forced_choice_has_no_text_before_tool_use(anthropic_client, sse_captures, upstream, mode, choice):
    """§3.6: with `any`/`tool` the real API pre-fills the turn, so no text block comes first."""
    upstream.script([{"text": "Sure, let me look that up. " + hermes("get_weather", PARIS), "chunk": 3}])
    tool_choice = {"type": "any"} if choice == "any" else {"type": "tool", "name": "get_weather"}
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice=tool_choice)
    assert turn.content and turn.content[0]["type"] == "tool_use", (
        f"text before the tool_use: {turn.content!r}"
    )
    assert_tool_use(turn.tool_uses[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"


@MODES
def test_tool_choice_any_retries_a_text_answer(anthropic_client, sse_captures, upstream, mode):
    upstream.script(["The weather in Paris is usually mild.", hermes("get_weather", PARIS)])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "any"})
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert "usually mild" not in turn.text
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])
    assert_translated_request(upstream.requests[1])


@MODES
def test_tool_choice_named_stops_with_tool_use(anthropic_client, sse_captures, upstream, mode):
    upstream.script([invoke_xml("get_time", {"tz": "Europe/Paris"})])
    turn = run(
        anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "tool", "name": "get_time"}
    )
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_time", {"tz": "Europe/Paris"})
    assert turn.stop_reason == "tool_use", "a forced tool still stops with tool_use (§3.6), unlike OpenAI"
    assert len(upstream.requests) == 1


@MODES
def test_tool_choice_named_retries_a_call_to_another_tool(anthropic_client, sse_captures, upstream, mode):
    upstream.script([hermes("get_weather", PARIS), hermes("get_time", {"tz": "UTC"})])
    turn = run(
        anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "tool", "name": "get_time"}
    )
    assert [b["name"] for b in turn.tool_uses] == ["get_time"]
    assert turn.tool_uses[0]["input"] == {"tz": "UTC"}
    assert turn.stop_reason == "tool_use"
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])


@MODES
def test_tool_choice_none_hides_calls(anthropic_client, sse_captures, upstream, mode):
    reply = {"text": "Sure, here you go. " + hermes("get_weather", PARIS), "chunk": 3}
    upstream.script([reply, reply])  # the same again if the gateway asks twice
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "none"})
    assert_text_only(turn)
    assert "Sure" in turn.text
    assert_translated_request(upstream.requests[0])


@MODES
@pytest.mark.parametrize("choice", ["auto", "any"])
def test_disable_parallel_tool_use_keeps_one(anthropic_client, sse_captures, upstream, mode, choice):
    two = hermes("get_weather", PARIS) + "\n" + hermes("get_weather", TOKYO)
    upstream.script([two, hermes("get_weather", PARIS)])  # the second only if the gateway re-asks
    turn = run(
        anthropic_client,
        sse_captures,
        mode,
        tools=TOOLS,
        tool_choice={"type": choice, "disable_parallel_tool_use": True},
    )
    assert len(turn.tool_uses) == 1, turn.content
    assert_tool_use(turn.tool_uses[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"
    assert_no_markup(turn.text)
    assert len(upstream.requests) <= 2


# -- retries and repairs --------------------------------------------------------------------------


@MODES
@pytest.mark.parametrize("refusal", [REFUSAL_EN, REFUSAL_ZH], ids=["en", "zh"])
def test_refusal_is_retried(anthropic_client, sse_captures, upstream, mode, refusal):
    upstream.script([refusal, hermes("get_weather", PARIS)])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert turn.stop_reason == "tool_use"
    assert refusal not in turn.text, "the refusal must not reach the client"
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])
    assert_translated_request(upstream.requests[1])


@MODES
def test_malformed_call_is_repaired(anthropic_client, sse_captures, upstream, mode):
    broken = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',},}</tool_call>"
    upstream.script([broken, hermes("get_weather", {"city": "RETRIED"})])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["tool_use"]
    assert_tool_use(turn.content[0], "get_weather", PARIS)
    assert len(upstream.requests) == 1, "a repairable call is repaired, not retried"


@MODES
def test_unknown_tool_is_retried_then_text(anthropic_client, sse_captures, upstream, mode):
    upstream.script([hermes("launch_rockets", {"count": 3}), "I can only check the weather."])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert_text_only(turn, "I can only check the weather.")
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])


@MODES
def test_unknown_tool_after_retries_never_becomes_a_call(anthropic_client, sse_captures, upstream, mode):
    # After the retry, one attempt without tools asks for a plain answer.
    bad = hermes("launch_rockets", {"count": 3})
    upstream.script([bad, bad, "I can't launch rockets."])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert_text_only(turn)
    assert turn.text == "I can't launch rockets."
    assert len(upstream.requests) == 3


@MODES
def test_text_cut_by_length_stops_with_max_tokens(anthropic_client, sse_captures, upstream, mode):
    upstream.script([{"text": "The weather in Paris is", "finish_reason": "length"}])
    turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
    assert turn.types == ["text"]
    assert turn.text == "The weather in Paris is"
    assert turn.stop_reason == "max_tokens"
    assert len(upstream.requests) == 1


@MODES
def test_any_retries_exhausted_is_a_502(anthropic_client, sse_captures, upstream, mode):
    upstream.script([REFUSAL_EN, REFUSAL_EN, REFUSAL_EN])
    with pytest.raises(anthropic.APIStatusError) as info:
        turn = run(anthropic_client, sse_captures, mode, tools=TOOLS, tool_choice={"type": "any"})
        pytest.fail(f"expected an error, got {turn!r}")
    err = info.value
    assert isinstance(err, anthropic.InternalServerError), type(err)
    assert err.status_code == 502
    assert err.response.headers["content-type"].startswith("application/json")
    assert_anthropic_error_body(err.response.json(), "api_error")
    assert len(upstream.requests) == 2, "default: one retry"


# -- upstream failures and cancellation ------------------------------------------------------------


@MODES
@pytest.mark.parametrize(
    "status,exc,code,error_type",
    [
        (429, anthropic.RateLimitError, 429, "rate_limit_error"),
        (500, anthropic.InternalServerError, 502, "api_error"),
        (503, anthropic.OverloadedError, 529, "overloaded_error"),
    ],
    ids=["429", "500", "503"],
)
def test_upstream_errors_map_to_anthropic_errors(
    anthropic_client, sse_captures, upstream, mode, status, exc, code, error_type
):
    upstream.script([{"status": status, "retry_after": 1}] * 3)
    with pytest.raises(anthropic.APIStatusError) as info:
        turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
        pytest.fail(f"expected an error, got {turn!r}")
    err = info.value
    assert isinstance(err, exc), f"{type(err).__name__}, expected {exc.__name__}"
    assert err.status_code == code
    assert err.response.headers["content-type"].startswith("application/json"), (
        "errors before the first byte are plain HTTP errors, never an SSE stream (§1.6)"
    )
    assert_anthropic_error_body(err.response.json(), error_type)
    assert err.type == error_type


TEXT_TO_DROP = "The weather today is lovely everywhere, and here is a long answer about it."
DROP_AFTER_TWO_CHUNKS = {
    "text": TEXT_TO_DROP,
    "chunk": 5,
    "pause_after": 3,
    "disconnect_after": 3,
    "pause_timeout_s": 5,
}


@STREAMED
def test_upstream_disconnect_mid_stream_raises_from_the_stream(
    anthropic_client, sse_captures, upstream, mode
):
    upstream.script([dict(DROP_AFTER_TWO_CHUNKS)])
    seen = ""
    kw = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    with pytest.raises(anthropic.APIStatusError) as info:
        if mode == "stream":
            with anthropic_client.messages.stream(**kw) as s:
                for ev in s:
                    if ev.type == "text":
                        seen += ev.text
                        upstream.resume.set()  # streaming began: now let the upstream drop
                s.get_final_message()
        else:
            with anthropic_client.messages.create(stream=True, **kw) as s:
                for ev in s:
                    if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                        seen += ev.delta.text
                        upstream.resume.set()
    assert upstream.resume.is_set(), "the client saw no text before the drop"
    assert seen and TEXT_TO_DROP.startswith(seen)
    assert info.value.type in ERROR_TYPES, info.value.body
    summary = check_anthropic_stream(bytes(sse_captures[-1].body), allow_error=True)
    assert summary.error is not None, "no `event: error` after the upstream dropped"
    assert summary.error["type"] in ERROR_TYPES
    assert summary.text == seen


def _has_text_delta(raw: bytes) -> bool:
    complete = raw[: raw.rfind(b"\n\n") + 2] if b"\n\n" in raw else b""
    for line in complete.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            obj = json.loads(line[5:])
            if obj.get("type") == "content_block_delta" and (obj.get("delta") or {}).get("text"):
                return True
    return False


def test_upstream_disconnect_raw_bytes(gateway, upstream):
    """The same failure over plain httpx: `event: error` ends the stream, nothing follows."""
    upstream.script([dict(DROP_AFTER_TWO_CHUNKS)])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER, "stream": True}
    got = bytearray()
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        with c.stream(
            "POST",
            f"{gateway.root}/v1/messages",
            json=body,
            headers={"x-api-key": "test", "anthropic-version": ANTHROPIC_VERSION},
        ) as r:
            assert r.status_code == 200
            for part in r.iter_bytes():
                got += part
                if not upstream.resume.is_set() and _has_text_delta(bytes(got)):
                    upstream.resume.set()
    assert upstream.resume.is_set(), "the client saw no text before the drop"
    summary = check_anthropic_stream(bytes(got), allow_error=True)
    assert summary.error is not None, "no `event: error` after the upstream dropped"
    assert summary.types[-1] == "error"
    assert b"[DONE]" not in got


def test_client_disconnect_cancels_upstream(anthropic_client, upstream):
    upstream.script([{"text": "word " * 500, "chunk": 5, "chunk_delay_s": 0.02}])
    s = anthropic_client.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, messages=USER_WEATHER, stream=True
    )
    for ev in s:
        if ev.type == "content_block_delta":
            break
    s.close()
    assert upstream.client_disconnected.wait(5), "the gateway kept the upstream request open"


# -- count_tokens, models, auth, headers ------------------------------------------------------------


COUNT_CASES = {
    "plain": {"messages": USER_WEATHER},
    "tools_and_system": {"messages": USER_WEATHER, "tools": TOOLS, "system": SYSTEM_BLOCKS},
    "history": {
        "tools": TOOLS,
        "system": "Be brief.",
        "messages": USER_WEATHER
        + [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                        "name": "get_weather",
                        "input": PARIS,
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                        "content": "18°C",
                        "is_error": True,
                    }
                ],
            },
        ],
    },
}


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_count_tokens_matches_message_start(anthropic_client, sse_captures, upstream, case):
    kw = COUNT_CASES[case]
    counted = anthropic_client.messages.count_tokens(model=MODEL, **kw)
    assert isinstance(counted.input_tokens, int) and counted.input_tokens > 0
    assert json.loads(bytes(sse_captures[-1].body)) == {"input_tokens": counted.input_tokens}
    upstream.script(["Fine."])
    turn = run(anthropic_client, sse_captures, "events", **kw)
    assert turn.raw is not None and turn.raw.message is not None
    assert turn.raw.message["usage"]["input_tokens"] == counted.input_tokens, (
        "count_tokens must equal message_start's input_tokens for the same request (§3.13)"
    )


def test_count_tokens_grows_with_the_prompt(anthropic_client):
    small = anthropic_client.messages.count_tokens(model=MODEL, messages=USER_WEATHER).input_tokens
    big = anthropic_client.messages.count_tokens(
        model=MODEL, messages=USER_WEATHER, system="You are a meticulous meteorologist. " * 50, tools=TOOLS
    ).input_tokens
    assert 0 < small < big


def test_count_tokens_with_beta_query(gateway):
    body = {"model": MODEL, "messages": USER_WEATHER, "tools": TOOLS}
    a = post_anthropic_raw(gateway.root, body, path="/v1/messages/count_tokens")
    b = post_anthropic_raw(gateway.root, body, path="/v1/messages/count_tokens?beta=true")
    assert a.status == 200 and b.status == 200, (a.body, b.body)
    assert a.json() == b.json()
    assert set(a.json()) == {"input_tokens"}


def test_models_list(anthropic_client):
    page = anthropic_client.models.list()
    assert len(page.data) >= 1
    assert page.has_more is False
    assert page.first_id == page.data[0].id and page.last_id == page.data[-1].id
    for m in page.data:
        assert m.type == "model"
        assert isinstance(m.id, str) and m.id
        assert isinstance(m.display_name, str) and m.display_name
        assert m.lifecycle == "active"
        assert m.created_at is not None
    assert [m.id for m in anthropic_client.models.list()] == [m.id for m in page.data]


def test_models_shape_depends_on_anthropic_version(gateway):
    """§1.2: one path, two list shapes, chosen by the `anthropic-version` header."""
    a = post_anthropic_raw(gateway.root, None, path="/v1/models?limit=1000", method="GET")
    assert a.status == 200, a.body
    body = a.json()
    assert set(("data", "has_more", "first_id", "last_id")) <= set(body), body
    assert body["has_more"] is False
    assert (
        body["data"]
        and body["first_id"] == body["data"][0]["id"]
        and body["last_id"] == body["data"][-1]["id"]
    )
    for m in body["data"]:
        assert m["type"] == "model" and m["lifecycle"] == "active"
        assert isinstance(m["display_name"], str) and isinstance(m["created_at"], str)
        assert "object" not in m

    r = httpx.get(f"{gateway.root}/v1/models", headers={"Authorization": "Bearer test"}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200
    o = r.json()
    assert o.get("object") == "list" and "has_more" not in o, o
    assert all(m.get("object") == "model" for m in o["data"])


def test_anthropic_version_header_is_required(gateway, upstream):
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    r = post_anthropic_raw(gateway.root, body, version=None)
    assert r.status == 400, r.body
    assert r.headers["content-type"].startswith("application/json")
    err = assert_anthropic_error_body(r.json(), "invalid_request_error")
    assert err["message"] == "anthropic-version: header is required"
    assert upstream.requests == []


def test_auth_with_x_api_key_and_bearer(gateway_factory, upstream, monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    gw = gateway_factory("--api-key", "key-one")
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}

    for headers in ({}, {"x-api-key": "wrong"}, {"Authorization": "Bearer wrong"}):
        r = post_anthropic_raw(gw.root, body, api_key=None, headers=headers)
        assert r.status == 401, f"{headers} → {r.status}"
        assert r.headers["content-type"].startswith("application/json")
        assert_anthropic_error_body(r.json(), "authentication_error")
    with strict_client(gw.root, api_key="wrong") as c:
        with pytest.raises(anthropic.AuthenticationError) as info:
            c.messages.create(**body)
        assert info.value.type == "authentication_error"
    assert upstream.requests == [], "unauthenticated requests must not reach the upstream"

    upstream.script(["one", "two"])
    with strict_client(gw.root, api_key="key-one") as c:
        assert c.messages.create(**body).content[0].text == "one"
    with strict_client(gw.root, api_key=None, auth_token="key-one") as c:
        assert c.messages.create(**body).content[0].text == "two"
    assert len(upstream.requests) == 2


def test_messages_with_beta_query_and_unknown_fields(gateway, upstream):
    """§1.1, §1.9, §3.1: `?beta=true`, `anthropic-beta`, Claude Code's extra fields are accepted."""
    upstream.script([hermes("get_weather", PARIS)])
    body = {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM_BLOCKS,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris?", "cache_control": {"type": "ephemeral"}}
                ],
            }
        ],
        "tools": [dict(WEATHER, cache_control={"type": "ephemeral"})],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "user-123"},
        "temperature": 1,
        "thinking": {"type": "disabled"},
        "service_tier": "auto",
        "some_future_field": {"x": 1},
        "stream": True,
    }
    headers = {
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
        "x-app": "cli",
        "X-Claude-Code-Session-Id": "abc",
    }
    r = post_anthropic_raw(gateway.root, body, path="/v1/messages?beta=true", headers=headers)
    assert r.status == 200, r.body
    s = check_anthropic_stream(r.body)
    assert [b["name"] for b in s.tool_uses] == ["get_weather"]
    assert s.tool_uses[0]["input"] == PARIS
    assert_translated_request(upstream.requests[0], tool_names=("get_weather",))


# -- byte-level grammar over plain httpx ------------------------------------------------------------


def _stream_raw(gateway, body: dict) -> AnthropicStreamSummary:
    body = dict(body, stream=True)
    body.setdefault("model", MODEL)
    body.setdefault("max_tokens", MAX_TOKENS)
    body.setdefault("messages", USER_WEATHER)
    r = post_anthropic_raw(gateway.root, body)
    assert r.status == 200, r.body
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers["content-type"]
    assert b"[DONE]" not in r.body
    s = check_anthropic_stream(r.body)
    assert s.message is not None and s.message["model"] == body["model"]
    return s


def test_raw_sse_appendix_b_turn_one(gateway, upstream):
    upstream.script(
        [
            {
                "text": "I'll check the current weather in Paris for you. " + hermes("get_weather", PARIS),
                "chunk": 1,
            }
        ]
    )
    s = _stream_raw(gateway, {"system": SYSTEM_BLOCKS, "tools": [WEATHER], "tool_choice": {"type": "auto"}})
    assert [b["type"] for b in s.content] == ["text", "tool_use"]
    assert s.content[0]["text"].strip() == "I'll check the current weather in Paris for you."
    assert s.tool_uses[0]["name"] == "get_weather" and s.tool_uses[0]["input"] == PARIS
    assert s.stop_reason == "tool_use"
    assert json.loads(s.partial_json[1]) == PARIS
    assert s.types[0] == "message_start" and s.types[1] == "content_block_start" and s.types[2] == "ping"
    assert s.types[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_raw_sse_two_calls(gateway, upstream, chunk):
    upstream.script(
        [{"text": hermes("get_weather", PARIS) + hermes("get_time", {"tz": "Asia/Tokyo"}), "chunk": chunk}]
    )
    s = _stream_raw(gateway, {"tools": TOOLS})
    assert [b["type"] for b in s.content] == ["tool_use", "tool_use"]
    assert [b["input"] for b in s.tool_uses] == [PARIS, {"tz": "Asia/Tokyo"}]
    assert s.tool_uses[0]["id"] != s.tool_uses[1]["id"]
    assert s.stop_reason == "tool_use"


TRICKY = {
    "city": 'São "Paulo"\n\\ <b> 東京 😀',
    "days": 3,
    "options": {"units": ["c", "f"], "note": None, "hourly": True, "offset": -1.5},
}


@pytest.mark.parametrize("chunk", [1, 2, 7])
def test_raw_sse_partial_json_with_tricky_arguments(gateway, upstream, chunk):
    """Every cumulative partial_json is a valid prefix even with escapes, unicode, nesting, numbers."""
    upstream.script([{"text": hermes("get_forecast", TRICKY), "chunk": chunk}])
    # The user gives the number of days: a required number nobody gave is dropped as a guess.
    question = [{"role": "user", "content": "The forecast for the next 3 days, please."}]
    s = _stream_raw(gateway, {"tools": [FORECAST], "messages": question})
    assert [b["name"] for b in s.tool_uses] == ["get_forecast"]
    assert s.tool_uses[0]["input"] == TRICKY
    assert s.stop_reason == "tool_use"


def test_raw_sse_tool_without_arguments(gateway, upstream):
    upstream.script([hermes("ping_server", {})])
    s = _stream_raw(gateway, {"tools": [PING]})
    assert [b["name"] for b in s.tool_uses] == ["ping_server"]
    assert s.tool_uses[0]["input"] == {}
    assert (s.partial_json[0] or "").strip() in ("", "{}"), 'no arguments: no deltas, "" or {} (§3.10)'


def test_raw_sse_appendix_b_turn_two(gateway, upstream):
    upstream.script([{"text": "It's currently 18°C and cloudy in Paris.", "chunk": 4}])
    messages = USER_WEATHER + [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll check the current weather in Paris for you."},
                {
                    "type": "tool_use",
                    "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "name": "get_weather",
                    "input": PARIS,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "content": [{"type": "text", "text": "18°C, cloudy"}],
                    "is_error": False,
                }
            ],
        },
    ]
    s = _stream_raw(gateway, {"system": SYSTEM_BLOCKS, "tools": [WEATHER], "messages": messages})
    assert [b["type"] for b in s.content] == ["text"]
    assert s.text == "It's currently 18°C and cloudy in Paris."
    assert s.stop_reason == "end_turn"
    assert "Result of call toolu_01rwFU1BCccKJ6kT7ht5cpmj (get_weather)" in all_text(upstream.requests[0])


def test_raw_sse_text_without_tools(gateway, upstream):
    upstream.script([{"text": "Plain text, no tools here.", "chunk": 2}])
    s = _stream_raw(gateway, {})
    assert s.content == [{"type": "text", "text": "Plain text, no tools here."}]
    assert s.stop_reason == "end_turn"


def test_raw_non_stream_shape(gateway, upstream):
    upstream.script([hermes("get_weather", PARIS)])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER, "tools": TOOLS}
    r = post_anthropic_raw(gateway.root, body)
    assert r.status == 200, r.body
    assert r.headers["content-type"].startswith("application/json")
    obj = check_anthropic_message(r.json())
    assert obj["model"] == MODEL
    assert obj["stop_reason"] == "tool_use"
    assert [b["type"] for b in obj["content"]] == ["tool_use"]
    assert obj["content"][0]["input"] == PARIS


def test_requests_hit_the_upstream_chat_path(gateway, upstream):
    upstream.script(["hi"])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    assert post_anthropic_raw(gateway.root, body).status == 200
    # The gateway's startup probe may GET /v1/models; the request itself is one POST.
    posts = lambda: [rec for rec in upstream.log if rec.method == "POST"]  # noqa: E731
    assert wait_until(lambda: len(posts()) >= 1)
    assert [rec.path.split("?")[0] for rec in posts()] == ["/v1/chat/completions"]


# -- the grammar checker itself (no gateway) -------------------------------------------------------


def _appendix_b() -> list[tuple[str, dict]]:
    msg = {
        "id": "msg_01NJaZGacwhrF7oEsScw2EeJ",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    tool = {"type": "tool_use", "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj", "name": "get_weather", "input": {}}
    return [
        ("message_start", {"type": "message_start", "message": msg}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "I'll check the current weather"},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": " in Paris for you."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": tool}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ris"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 58},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _sse(events: list[tuple[str | None, dict]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def test_checker_accepts_appendix_b():
    s = check_anthropic_stream(_sse(_appendix_b()))
    assert s.content == [
        {"type": "text", "text": "I'll check the current weather in Paris for you."},
        {"type": "tool_use", "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj", "name": "get_weather", "input": PARIS},
    ]
    assert s.stop_reason == "tool_use" and s.usage["input_tokens"] == 412 and s.usage["output_tokens"] == 58
    # keep-alive comments are fine too
    assert check_anthropic_stream(b": keepalive\n\n" + _sse(_appendix_b())).content == s.content


def _mutated(i: int, replacement: tuple[str | None, dict] | None) -> list:
    ev = _appendix_b()
    if replacement is None:
        del ev[i]
    else:
        ev[i] = replacement
    return ev


def _delta(index: int, fragment: str) -> tuple[str, dict]:
    return (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": fragment},
        },
    )


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([(None, d) for _, d in _appendix_b()], id="no-event-lines"),
        pytest.param(_mutated(3, ("content_block_start", _appendix_b()[3][1])), id="event-name-mismatch"),
        pytest.param(_mutated(8, _delta(1, '{"city": Pa')), id="bad-json-prefix"),
        pytest.param(_mutated(9, _delta(1, 'ris"}}')), id="json-after-object"),
        pytest.param(_mutated(9, _delta(1, "ris")), id="json-incomplete-at-stop"),
        pytest.param(_mutated(9, _delta(1, 'ris", }')), id="trailing-comma"),
        pytest.param(
            _mutated(
                6,
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 2,
                        "content_block": _appendix_b()[6][1]["content_block"],
                    },
                ),
            ),
            id="index-gap",
        ),
        pytest.param(
            _mutated(
                6,
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 1,
                        "content_block": dict(_appendix_b()[6][1]["content_block"], input=PARIS),
                    },
                ),
            ),
            id="tool-start-input-not-empty",
        ),
        pytest.param(_mutated(5, None), id="block-not-stopped"),
        pytest.param(_mutated(2, None), id="no-ping-after-first-block"),
        pytest.param(_mutated(12, None), id="no-message-stop"),
        pytest.param(_appendix_b() + [("ping", {"type": "ping"})], id="event-after-message-stop"),
        pytest.param(_appendix_b()[1:], id="no-message-start"),
        pytest.param(
            _mutated(
                11,
                (
                    "message_delta",
                    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}},
                ),
            ),
            id="message-delta-without-usage",
        ),
        pytest.param(
            _mutated(
                11,
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
            ),
            id="tool-use-but-end-turn",
        ),
        pytest.param(
            _mutated(
                0,
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": dict(
                            _appendix_b()[0][1]["message"], usage={"input_tokens": 0, "output_tokens": 1}
                        ),
                    },
                ),
            ),
            id="zero-input-tokens",
        ),
        pytest.param(
            _mutated(
                12,
                ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
            id="unexpected-error",
        ),
    ],
)
def test_checker_rejects(events):
    with pytest.raises(AssertionError):
        check_anthropic_stream(_sse(events))


def test_checker_accepts_a_trailing_error_event_when_allowed():
    events = _appendix_b()[:9] + [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    ]
    s = check_anthropic_stream(_sse(events), allow_error=True)
    assert s.error == {"type": "overloaded_error", "message": "Overloaded"}
    with pytest.raises(AssertionError):
        check_anthropic_stream(_sse(events + [("message_stop", {"type": "message_stop"})]), allow_error=True)


@pytest.mark.parametrize(
    "text,ok",
    [
        ('{"a": [1, -2.5e+3, true, null, {"b": "\\u00e9\\n"}]}', True),
        ('{"a": 01}', False),
        ('{"a": 1.}', False),
        ('{"a": "x\ny"}', False),
        ("[1]", False),
        ('{"a": 1} {}', False),
        ('{"a": tru}', False),
    ],
)
def test_json_object_prefix(text, ok):
    checker = JsonObjectPrefix()
    if ok:
        for c in text:
            checker.feed(c)
        assert checker.complete
    else:
        with pytest.raises(ValueError):
            checker.feed(text)
