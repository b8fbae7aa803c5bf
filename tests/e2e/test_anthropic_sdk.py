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

from anthropic_support import *  # noqa: F403
from anthropic_support import _accumulate, _block, _from_message  # noqa: F401

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
