"""The official `openai` SDK (strict response validation) against `toolshim serve --mode emulate`.

Every scenario scripts what the plain upstream model writes, then asserts what the SDK sees and
what the upstream was sent. Streaming scenarios also check the raw bytes the SDK received
against the Chat Completions stream grammar.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pydantic
import pytest

from support import (
    DIALECTS,
    HTTP_TIMEOUT,
    MODEL,
    REFUSAL_EN,
    REFUSAL_ZH,
    TOOLS,
    USER_WEATHER,
    WEATHER_TOOL,
    all_text,
    assert_emulated_request,
    assert_no_markup,
    assert_openai_error_body,
    assert_retry_request,
    assert_usage,
    bare_json,
    check_chat_stream,
    fenced,
    hermes,
    invoke_xml,
    post_raw,
)

PARIS = {"city": "Paris"}
TOKYO = {"city": "Tokyo"}
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])


# -- helpers --------------------------------------------------------------------------------------


class Result:
    """One completion as the SDK delivered it, streamed or not, in one shape."""

    def __init__(self) -> None:
        self.content: str | None = None
        self.tool_calls: list[dict] = []  # {"id","type","name","arguments"}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.raw: Any = None  # StreamSummary of the raw bytes, for streams

    def args(self, i: int = 0) -> Any:
        return json.loads(self.tool_calls[i]["arguments"])

    def names(self) -> list[str]:
        return [c["name"] for c in self.tool_calls]


def complete(client: openai.OpenAI, captures: list, *, stream: bool, **kw: Any) -> Result:
    """`chat.completions.create`, streamed or not; streams are grammar-checked byte for byte."""
    kw.setdefault("model", MODEL)
    kw.setdefault("messages", USER_WEATHER)
    res = Result()
    if not stream:
        resp = client.chat.completions.create(**kw)
        assert resp.object == "chat.completion"
        assert len(resp.choices) == 1
        ch = resp.choices[0]
        assert ch.index == 0
        assert ch.message.role == "assistant"
        res.content = ch.message.content
        res.finish_reason = ch.finish_reason
        for tc in ch.message.tool_calls or []:
            assert tc.type == "function"
            res.tool_calls.append(
                {"id": tc.id, "type": tc.type, "name": tc.function.name, "arguments": tc.function.arguments}
            )
        res.usage = resp.usage
        assert resp.usage is not None, "non-streaming responses carry usage (§2.11)"
        assert_usage(resp.usage.model_dump())
        assert captures[-1].headers["content-type"].startswith("application/json")
        return res

    include_usage = bool((kw.get("stream_options") or {}).get("include_usage"))
    calls: dict[int, dict] = {}
    content = ""
    roles = []
    usage_chunks = []
    with client.chat.completions.create(stream=True, **kw) as s:
        for chunk in s:
            assert chunk.object == "chat.completion.chunk"
            if not chunk.choices:
                usage_chunks.append(chunk.usage)
                continue
            ch = chunk.choices[0]
            if ch.delta.role:
                roles.append(ch.delta.role)
            if ch.delta.content:
                content += ch.delta.content
            for tc in ch.delta.tool_calls or []:
                e = calls.setdefault(tc.index, {"id": "", "type": "", "name": "", "arguments": ""})
                # concatenate like the SDK's accumulator does, so a repeated id/name shows up
                e["id"] += tc.id or ""
                e["type"] = tc.type or e["type"]
                assert tc.function is not None
                e["name"] += tc.function.name or ""
                e["arguments"] += tc.function.arguments or ""
            if ch.finish_reason is not None:
                res.finish_reason = ch.finish_reason
    assert roles == ["assistant"], f"role deltas: {roles}"
    res.content = content
    res.tool_calls = [calls[i] for i in sorted(calls)]
    assert sorted(calls) == list(range(len(calls)))
    if include_usage:
        assert len(usage_chunks) == 1, "exactly one usage chunk with choices: []"
        res.usage = usage_chunks[0]
    else:
        assert usage_chunks == []

    cap = captures[-1]
    assert cap.status == 200
    assert cap.headers["content-type"].startswith("text/event-stream")
    res.raw = check_chat_stream(bytes(cap.body), include_usage=include_usage)
    assert res.raw.content == res.content
    assert [(c["id"], c["name"], c["arguments"]) for c in res.raw.tool_calls] == [
        (c["id"], c["name"], c["arguments"]) for c in res.tool_calls
    ]
    assert res.raw.finish_reason == res.finish_reason
    return res


def assert_call(res: Result, i: int, name: str, args: dict) -> None:
    call = res.tool_calls[i]
    assert call["id"].startswith("call_"), f"call id {call['id']!r}"
    assert call["type"] == "function"
    assert call["name"] == name
    assert isinstance(call["arguments"], str)
    assert json.loads(call["arguments"]) == args


def assert_text_only(res: Result) -> None:
    assert res.tool_calls == []
    assert res.finish_reason == "stop"
    assert_no_markup(res.content)


# -- single and parallel calls ------------------------------------------------------------------


@STREAM
def test_single_call(client, sse_captures, upstream, stream):
    upstream.script([{"text": hermes("get_weather", PARIS), "chunk": 3}])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert len(res.tool_calls) == 1
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert not res.content, f"no text preceded the call, content must be empty/null: {res.content!r}"
    assert len(upstream.requests) == 1
    assert_emulated_request(upstream.requests[0], tool_names=("get_weather", "get_time"))


@STREAM
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_call_after_text_in_every_dialect(client, sse_captures, upstream, stream, dialect):
    upstream.script([{"text": "Let me check. " + DIALECTS[dialect]("get_weather", PARIS), "chunk": 4}])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert len(res.tool_calls) == 1
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert (res.content or "").strip() == "Let me check."
    assert_no_markup(res.content, names=("get_weather",))
    assert len(upstream.requests) == 1


@STREAM
def test_two_parallel_calls(client, sse_captures, upstream, stream):
    upstream.script(
        [
            {
                "text": "Checking both.\n"
                + hermes("get_weather", PARIS)
                + "\n"
                + hermes("get_weather", TOKYO),
                "chunk": 5,
            }
        ]
    )
    two = [{"role": "user", "content": "What's the weather in Paris and in Tokyo?"}]
    res = complete(client, sse_captures, stream=stream, tools=[WEATHER_TOOL], messages=two)
    assert len(res.tool_calls) == 2
    assert_call(res, 0, "get_weather", PARIS)
    assert_call(res, 1, "get_weather", TOKYO)
    assert res.tool_calls[0]["id"] != res.tool_calls[1]["id"]
    assert res.finish_reason == "tool_calls"
    assert_no_markup(res.content)


def test_fresh_ids_per_response(client, sse_captures, upstream):
    upstream.script([hermes("get_weather", PARIS), hermes("get_weather", PARIS)])
    a = complete(client, sse_captures, stream=False, tools=TOOLS)
    b = complete(client, sse_captures, stream=True, tools=TOOLS)
    assert a.tool_calls[0]["id"] != b.tool_calls[0]["id"]


class GetWeather(pydantic.BaseModel):
    """Get the current weather for a city."""

    city: str


def test_stream_helper_final_completion_strict_tool(client, sse_captures, upstream):
    upstream.script([{"text": "On it. " + hermes("GetWeather", PARIS), "chunk": 2}])
    events = []
    with client.chat.completions.stream(
        model=MODEL, messages=USER_WEATHER, tools=[openai.pydantic_function_tool(GetWeather)]
    ) as s:
        for ev in s:
            events.append(ev)
        final = s.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].id.startswith("call_")
    assert calls[0].function.name == "GetWeather"
    assert calls[0].function.parsed_arguments == GetWeather(city="Paris")
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert len(done) == 1 and done[0].name == "GetWeather" and done[0].index == 0
    assert json.loads(done[0].arguments) == PARIS
    assert_no_markup(choice.message.content)
    check_chat_stream(bytes(sse_captures[-1].body))
    assert_emulated_request(upstream.requests[0], tool_names=("GetWeather",))


# -- multi-turn -------------------------------------------------------------------------------------


@STREAM
def test_multi_turn_loop(client, sse_captures, upstream, stream):
    upstream.script([hermes("get_weather", PARIS), {"text": "Paris is 18°C and cloudy.", "chunk": 4}])
    first = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert first.finish_reason == "tool_calls"
    call = first.tool_calls[0]
    result = json.dumps({"temp_c": 18, "sky": "cloudy", "ref": "ZETA-7731"})
    messages = USER_WEATHER + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": result},
    ]
    second = complete(client, sse_captures, stream=stream, tools=TOOLS, messages=messages)
    assert_text_only(second)
    assert second.content == "Paris is 18°C and cloudy."
    assert len(upstream.requests) == 2
    req = upstream.requests[1]
    assert_emulated_request(req, tool_names=("get_weather",))
    text = all_text(req)
    assert "ZETA-7731" in text, "the tool result must reach the upstream"
    assert call["id"] in text, "the call id must reach the upstream"
    assert "get_weather" in text
    assert "What's the weather in Paris?" in text


@STREAM
def test_second_turn_without_tools(client, sse_captures, upstream, stream):
    """History with two calls (client-chosen ids, echoed back) and their results; no `tools`."""
    upstream.script([{"text": "Paris is 18°C; Tokyo is 24°C.", "chunk": 6}])
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What's the weather in Paris and Tokyo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_IjplD4eZ1U48oji4zkaFQzaS",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_qwAhWzhYaVS9d3bRZFoVBlU5",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_IjplD4eZ1U48oji4zkaFQzaS", "content": "PARIS-RESULT-18C"},
        {"role": "tool", "tool_call_id": "call_qwAhWzhYaVS9d3bRZFoVBlU5", "content": "TOKYO-RESULT-24C"},
    ]
    res = complete(client, sse_captures, stream=stream, messages=messages)
    assert_text_only(res)
    assert res.content == "Paris is 18°C; Tokyo is 24°C."
    req = upstream.requests[0]
    assert_emulated_request(req)
    text = all_text(req)
    for needle in (
        "PARIS-RESULT-18C",
        "TOKYO-RESULT-24C",
        "call_IjplD4eZ1U48oji4zkaFQzaS",
        "call_qwAhWzhYaVS9d3bRZFoVBlU5",
        "get_weather",
    ):
        assert needle in text, f"{needle!r} missing from the upstream request"


# -- tool_choice and parallel_tool_calls --------------------------------------------------------------


@STREAM
def test_tool_choice_none_hides_calls(client, sse_captures, upstream, stream):
    reply = {"text": "Sure, here you go. " + hermes("get_weather", PARIS), "chunk": 3}
    upstream.script([reply, reply])  # the same again if the gateway asks twice
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="none")
    assert_text_only(res)
    assert "Sure" in (res.content or "")
    assert_no_markup(res.content, names=("get_weather",))
    assert_emulated_request(upstream.requests[0])


@STREAM
def test_tool_choice_required(client, sse_captures, upstream, stream):
    upstream.script([fenced("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="required")
    assert len(res.tool_calls) >= 1
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert len(upstream.requests) == 1


@STREAM
def test_tool_choice_named_finishes_with_stop(client, sse_captures, upstream, stream):
    upstream.script([invoke_xml("get_time", {"tz": "Europe/Paris"})])
    res = complete(
        client,
        sse_captures,
        stream=stream,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    assert len(res.tool_calls) == 1
    assert_call(res, 0, "get_time", {"tz": "Europe/Paris"})
    assert res.finish_reason == "stop", "a forced named function finishes with `stop` (§2.10)"
    assert len(upstream.requests) == 1


@STREAM
def test_tool_choice_named_retries_a_call_to_another_tool(client, sse_captures, upstream, stream):
    upstream.script([hermes("get_weather", PARIS), hermes("get_time", {"tz": "UTC"})])
    res = complete(
        client,
        sse_captures,
        stream=stream,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    assert res.names() == ["get_time"]
    assert res.args(0) == {"tz": "UTC"}
    assert res.finish_reason == "stop"
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])


@STREAM
def test_tool_choice_auto_text_answer(client, sse_captures, upstream, stream):
    upstream.script([{"text": "It is sunny in Paris today.", "chunk": 2}])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="auto")
    assert_text_only(res)
    assert res.content == "It is sunny in Paris today."
    assert len(upstream.requests) == 1


@STREAM
def test_tool_choice_auto_call(client, sse_captures, upstream, stream):
    upstream.script([bare_json("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="auto")
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"


@STREAM
def test_parallel_tool_calls_false_keeps_one(client, sse_captures, upstream, stream):
    two = hermes("get_weather", PARIS) + "\n" + hermes("get_weather", TOKYO)
    upstream.script([two, hermes("get_weather", PARIS)])  # the second only if the gateway re-asks
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, parallel_tool_calls=False)
    assert len(res.tool_calls) == 1
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert_no_markup(res.content)
    assert len(upstream.requests) <= 2


# -- retries -----------------------------------------------------------------------------------------


@STREAM
@pytest.mark.parametrize("refusal", [REFUSAL_EN, REFUSAL_ZH], ids=["en", "zh"])
def test_refusal_is_retried(client, sse_captures, upstream, stream, refusal):
    upstream.script([refusal, hermes("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])
    assert_emulated_request(upstream.requests[1])
    assert refusal not in (res.content or ""), "the refusal must not reach the client"


@STREAM
def test_required_without_call_is_retried(client, sse_captures, upstream, stream):
    upstream.script(["The weather in Paris is usually mild.", hermes("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="required")
    assert_call(res, 0, "get_weather", PARIS)
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])


@STREAM
def test_malformed_json_is_repaired(client, sse_captures, upstream, stream):
    broken = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',},}</tool_call>"
    upstream.script([broken, hermes("get_weather", {"city": "RETRIED"})])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert_call(res, 0, "get_weather", PARIS)
    assert len(upstream.requests) == 1, "a repairable call is repaired, not retried"


@STREAM
def test_unknown_tool_is_retried_then_text(client, sse_captures, upstream, stream):
    upstream.script([hermes("launch_rockets", {"count": 3}), "I can only check the weather."])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert_text_only(res)
    assert res.content == "I can only check the weather."
    assert len(upstream.requests) == 2
    assert_retry_request(upstream.requests[0], upstream.requests[1])


@STREAM
def test_unknown_tool_after_retries_never_becomes_a_call(client, sse_captures, upstream, stream):
    # Only calls to a tool that does not exist: after the retry, one more attempt without
    # tools asks for a plain answer, so the client does not get an empty reply.
    bad = hermes("launch_rockets", {"count": 3})
    upstream.script([bad, bad, "I can't launch rockets; I can check the weather or the time."])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert_text_only(res)
    assert_no_markup(res.content, names=("launch_rockets",))
    assert res.content == "I can't launch rockets; I can check the weather or the time."
    assert len(upstream.requests) == 3
    assert "get_weather" not in json.dumps(upstream.requests[2]["messages"][0])


def test_truncated_call_is_retried(client, sse_captures, upstream):
    cut = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    upstream.script([{"text": cut, "finish_reason": "length"}, hermes("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=False, tools=TOOLS)
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert len(upstream.requests) == 2


def test_streamed_call_cut_by_length_ends_with_length(client, sse_captures, upstream):
    # A streamed call that nothing holds (its tool is not strict, and has no value the guess
    # check judges: nothing required, no typed string) goes out as soon as it begins, so it
    # cannot be retried; like OpenAI, the stream ends with `length`, and the arguments sent
    # still parse as a JSON object.
    loose = [{**tool, "function": {**{k: v for k, v in tool["function"].items() if k != "strict"},
                                   "parameters": {"type": "object", "properties": {"city": {}}}}}
             for tool in TOOLS]
    cut = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    upstream.script([{"text": cut, "finish_reason": "length"}, hermes("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=True, tools=loose)
    assert_call(res, 0, "get_weather", {"city": "Par"})
    assert res.finish_reason == "length"
    assert len(upstream.requests) == 1


def test_streamed_call_to_a_strict_tool_cut_by_length_is_asked_again(client, sse_captures, upstream):
    # A strict tool's call is held until it ends (issue 24: it must fit its schema), so a call
    # the token limit cut has not gone out and is asked for again.
    cut = 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    upstream.script([{"text": cut, "finish_reason": "length"}, hermes("get_weather", PARIS)])
    res = complete(client, sse_captures, stream=True, tools=TOOLS)
    assert_call(res, 0, "get_weather", PARIS)
    assert res.finish_reason == "tool_calls"
    assert len(upstream.requests) == 2


@STREAM
def test_text_cut_by_length_finishes_with_length(client, sse_captures, upstream, stream):
    upstream.script([{"text": "The weather in Paris is", "finish_reason": "length"}])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert res.tool_calls == []
    assert res.finish_reason == "length"
    assert res.content == "The weather in Paris is"
    assert len(upstream.requests) == 1


@STREAM
def test_required_retries_exhausted_is_an_error(client, sse_captures, upstream, stream):
    upstream.script([REFUSAL_EN, REFUSAL_EN, REFUSAL_EN])
    with pytest.raises(openai.APIStatusError) as info:
        res = complete(client, sse_captures, stream=stream, tools=TOOLS, tool_choice="required")
        pytest.fail(f"expected an error, got {vars(res)}")
    assert info.value.status_code >= 400
    assert_openai_error_body(info.value.response.json())
    assert len(upstream.requests) == 2, "default: one retry"


@pytest.mark.parametrize("retries", [0, 2])
def test_max_retries_flag(gateway_factory, upstream, retries):
    gw = gateway_factory("--max-retries", str(retries))
    upstream.script([REFUSAL_EN] * 4)
    with openai.OpenAI(
        base_url=gw.base_url,
        api_key="test",
        max_retries=0,
        timeout=HTTP_TIMEOUT,
        _strict_response_validation=True,
    ) as c:
        with pytest.raises(openai.APIStatusError) as info:
            c.chat.completions.create(
                model=MODEL,
                messages=USER_WEATHER,
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            )
    assert_openai_error_body(info.value.response.json())
    assert len(upstream.requests) == 1 + retries


# -- upstream failures and cancellation ------------------------------------------------------------


@STREAM
def test_upstream_429_is_a_rate_limit(client, sse_captures, upstream, stream):
    upstream.script([{"status": 429, "retry_after": 1}] * 3)
    with pytest.raises(openai.RateLimitError) as info:
        complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert info.value.status_code == 429
    assert_openai_error_body(info.value.response.json())


@STREAM
@pytest.mark.parametrize("status,expected", [(500, 502), (503, 503)])
def test_upstream_5xx_is_a_bad_gateway_or_overloaded(client, sse_captures, upstream, stream, status, expected):
    # An overloaded upstream (503) stays 503 for OpenAI clients; other
    # failures are a bad gateway.
    upstream.script([{"status": status}] * 3)
    with pytest.raises(openai.InternalServerError) as info:
        complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert info.value.status_code == expected
    assert_openai_error_body(info.value.response.json())


def test_upstream_disconnect_mid_stream_is_an_in_band_error(client, sse_captures, upstream):
    text = "The weather today is lovely everywhere, and here is a long answer about it."
    upstream.script(
        [{"text": text, "chunk": 5, "pause_after": 3, "disconnect_after": 3, "pause_timeout_s": 5}]
    )
    seen = ""
    with pytest.raises(openai.APIError) as info:
        with client.chat.completions.create(model=MODEL, messages=USER_WEATHER, stream=True) as s:
            for chunk in s:
                if chunk.choices and chunk.choices[0].delta.content:
                    seen += chunk.choices[0].delta.content
                    upstream.resume.set()  # streaming began: now let the upstream drop
    assert not isinstance(info.value, openai.APIConnectionError), (
        "the gateway must send an in-band error chunk, not cut the connection"
    )
    assert seen and text.startswith(seen)
    assert upstream.resume.is_set(), "the client saw no content before the drop"
    summary = check_chat_stream(bytes(sse_captures[-1].body), allow_error=True)
    assert summary.error is not None


def _has_content(raw: bytes) -> bool:
    """Whether the complete SSE events in `raw` include a non-empty content delta."""
    complete_part = raw[: raw.rfind(b"\n\n") + 2] if b"\n\n" in raw else b""
    for line in complete_part.decode("utf-8", "replace").splitlines():
        if line.startswith("data: {"):
            obj = json.loads(line[6:])
            for ch in obj.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    return True
    return False


def test_upstream_disconnect_raw_bytes(gateway, upstream):
    """The same failure over plain httpx: a `data: {"error": {…}}` event ends the stream."""
    text = "Some answer text that goes on and on for a while before it breaks off."
    upstream.script(
        [{"text": text, "chunk": 4, "pause_after": 3, "disconnect_after": 3, "pause_timeout_s": 5}]
    )
    body = {"model": MODEL, "messages": USER_WEATHER, "stream": True}
    got = bytearray()
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        with c.stream(
            "POST",
            f"{gateway.base_url}/chat/completions",
            json=body,
            headers={"Authorization": "Bearer test"},
        ) as r:
            assert r.status_code == 200
            for part in r.iter_bytes():
                got += part
                if not upstream.resume.is_set() and _has_content(bytes(got)):
                    upstream.resume.set()  # streaming began: now let the upstream drop
    assert upstream.resume.is_set(), "the client saw no content before the drop"
    summary = check_chat_stream(bytes(got), allow_error=True)
    assert summary.error is not None, "no in-band error chunk after the upstream dropped"
    assert summary.error["message"]


def test_client_disconnect_cancels_upstream(client, upstream):
    # ~10 s of slow streaming: the gateway keeps writing, so it learns of the close either way
    upstream.script([{"text": "word " * 500, "chunk": 5, "chunk_delay_s": 0.02}])
    s = client.chat.completions.create(model=MODEL, messages=USER_WEATHER, stream=True)
    for chunk in s:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    s.close()
    assert upstream.client_disconnected.wait(5), "the gateway kept the upstream request open"


# -- text fidelity, usage, models ------------------------------------------------------------------


HARMLESS = 'To compare, use a < b and c > d; an object like {"x": 1} or <b>bold</b> is fine.'


@STREAM
def test_markup_looking_text_is_preserved(client, sse_captures, upstream, stream):
    upstream.script([{"text": HARMLESS, "chunk": 1}])
    res = complete(client, sse_captures, stream=stream, tools=TOOLS)
    assert res.tool_calls == []
    assert res.finish_reason == "stop"
    assert res.content == HARMLESS


def test_include_usage_chunk(client, sse_captures, upstream):
    upstream.script(
        [{"text": hermes("get_weather", PARIS), "usage": {"prompt_tokens": 120, "completion_tokens": 17}}]
    )
    res = complete(client, sse_captures, stream=True, tools=TOOLS, stream_options={"include_usage": True})
    assert_call(res, 0, "get_weather", PARIS)
    assert res.usage is not None
    assert_usage(res.usage.model_dump())
    chunks = res.raw.chunks
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] is not None
    assert all(c["usage"] is None for c in chunks[:-1])


def test_usage_matches_upstream(client, sse_captures, upstream):
    """One upstream request → the client sees its usage."""
    usage = {"prompt_tokens": 321, "completion_tokens": 23}
    upstream.script([{"text": "Fine.", "usage": usage}, {"text": "Fine.", "usage": usage}])
    res = complete(client, sse_captures, stream=True, tools=TOOLS, stream_options={"include_usage": True})
    assert (res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens) == (321, 23, 344)
    res = complete(client, sse_captures, stream=False, tools=TOOLS)
    assert (res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens) == (321, 23, 344)


def test_models_list(client):
    models = client.models.list()
    assert models.object == "list"
    assert len(models.data) >= 1
    for m in models.data:
        assert m.object == "model"
        assert isinstance(m.id, str) and m.id
        assert isinstance(m.created, int)
        assert isinstance(m.owned_by, str)


# -- byte-level grammar over plain httpx ------------------------------------------------------------


def test_raw_sse_two_calls_with_usage(gateway, upstream):
    upstream.script(
        [{"text": hermes("get_weather", PARIS) + hermes("get_time", {"tz": "Asia/Tokyo"}), "chunk": 1}]
    )
    body = {
        "model": MODEL,
        "messages": USER_WEATHER,
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = post_raw(gateway.base_url, body)
    assert r.status == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    s = check_chat_stream(r.body, include_usage=True)
    assert [c["name"] for c in s.tool_calls] == ["get_weather", "get_time"]
    assert s.args(0) == PARIS and s.args(1) == {"tz": "Asia/Tokyo"}
    assert s.finish_reason == "tool_calls"
    assert_no_markup(s.content)
    assert s.chunks[0]["id"].startswith("chatcmpl-")
    assert r.body.endswith(b"data: [DONE]\n\n")


def test_raw_sse_text_without_usage(gateway, upstream):
    upstream.script([{"text": "Plain text, no tools here.", "chunk": 2}])
    body = {"model": MODEL, "messages": USER_WEATHER, "tools": TOOLS, "stream": True}
    r = post_raw(gateway.base_url, body)
    assert r.status == 200
    s = check_chat_stream(r.body, include_usage=False)
    assert s.content == "Plain text, no tools here."
    assert s.finish_reason == "stop" and s.tool_calls == []


def test_raw_non_stream_shape(gateway, upstream):
    upstream.script([hermes("get_weather", PARIS)])
    body = {"model": MODEL, "messages": USER_WEATHER, "tools": TOOLS}
    r = post_raw(gateway.base_url, body)
    assert r.status == 200
    assert r.headers["content-type"].startswith("application/json")
    obj = r.json()
    for key in ("id", "object", "created", "model", "choices", "usage"):
        assert key in obj, f"response lacks {key!r}"
    ch = obj["choices"][0]
    assert set(("index", "message", "logprobs", "finish_reason")) <= set(ch)
    msg = ch["message"]
    assert set(("role", "content", "refusal")) <= set(msg)
    assert msg["content"] is None, "a call with no preceding text has content null (§2.9)"
    tc = msg["tool_calls"][0]
    assert set(tc) >= {"id", "type", "function"} and set(tc["function"]) >= {"name", "arguments"}
    assert isinstance(tc["function"]["arguments"], str)
    assert ch["finish_reason"] == "tool_calls"
    assert_usage(obj["usage"])


def test_custom_tool_calls_parse_in_the_sdk(client, upstream):
    """Issue 25: a custom (freeform) tool on Chat Completions: the SDK parses a `custom` call
    whose `input` is the raw text; streamed, the input comes in `custom.input` pieces with no
    `type` (the chunk schema, which the SDK validates, knows only `function`), which the SDK
    keeps as an extra field; a custom call in the history is accepted."""
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
    tools = [{"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files."}}]
    messages = [{"role": "user", "content": "Add a.txt"}]
    upstream.script([{"text": hermes("apply_patch", {"input": patch}), "chunk": 5}])
    call = client.chat.completions.create(model=MODEL, messages=messages, tools=tools).choices[0].message.tool_calls[0]
    assert call.type == "custom", call
    assert call.custom.name == "apply_patch" and call.custom.input == patch, call
    upstream.script([{"text": hermes("apply_patch", {"input": patch}), "chunk": 5}])
    name, pieces = "", []
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, tools=tools, stream=True):
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            custom = delta.model_extra["custom"]
            assert delta.type is None, delta
            name += custom.get("name") or ""
            pieces.append(custom["input"])
    assert name == "apply_patch" and "".join(pieces) == patch, pieces
    assert len(pieces) > 2, f"the input streams in pieces: {pieces}"
    upstream.script([{"text": "Done."}])
    history = [
        {"role": "user", "content": "Add a.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    answer = client.chat.completions.create(model=MODEL, messages=history, tools=tools)
    assert answer.choices[0].message.content == "Done."
