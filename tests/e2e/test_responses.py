"""The Responses API (issue 16) through `toolshim serve`, driven by the official
`openai` SDK with strict response validation and by the OpenAI Agents SDK's default
(Responses) model. The upstream is the scripted chat-only mock; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json

import httpx

import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled

from support import (
    HTTP_TIMEOUT,
    MODEL,
    all_text,
    assert_emulated_request,
    hermes,
    parse_sse,
)

set_tracing_disabled(True)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /(.|\\n)*/ "*** End Patch"'},
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+Hello, world!\n*** End Patch"


@pytest.fixture
def client(gateway):
    c = openai.OpenAI(
        base_url=gateway.base_url,
        api_key="test",
        max_retries=0,
        timeout=HTTP_TIMEOUT,
        _strict_response_validation=True,
    )
    yield c
    c.close()


def test_create_returns_a_function_call(client, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"})])
    response = client.responses.create(model=MODEL, input="What's the weather in Paris?", tools=[WEATHER])
    assert response.status == "completed"
    assert response.id.startswith("resp_")
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1, response.output
    call = calls[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert_emulated_request(upstream.requests[0], tool_names=("get_weather",))


def test_stream_follows_the_event_grammar(client, upstream):
    upstream.script([{"text": "Let me check. " + hermes("get_weather", {"city": "Paris"}), "chunk": 3}])
    types: list[str] = []
    argument_deltas: list[str] = []
    with client.responses.stream(model=MODEL, input="What's the weather in Paris?", tools=[WEATHER]) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.function_call_arguments.delta":
                argument_deltas.append(event.delta)
        final = stream.get_final_response()
    assert types[0] == "response.created" and types[1] == "response.in_progress"
    assert types[-1] == "response.completed"
    assert "response.output_text.delta" in types
    # Held until it ends (its required city could be a guess: `check_grounding`), the call's
    # arguments come in one delta; a multi-line or long one streams as the model writes it
    # (see the custom tool's test below).
    assert argument_deltas, "the arguments stream"
    kinds = [item.type for item in final.output]
    assert kinds == ["message", "function_call"], kinds
    assert final.output[0].content[0].text.strip() == "Let me check."
    assert json.loads("".join(argument_deltas)) == {"city": "Paris"}


def test_two_turn_round_trip_with_function_call_output(client, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"}), "Paris is 18°C and cloudy."])
    first = client.responses.create(model=MODEL, input="What's the weather in Paris?", tools=[WEATHER])
    call = next(item for item in first.output if item.type == "function_call")
    history = [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18°C, cloudy (ref RESP-7)"},
    ]
    second = client.responses.create(model=MODEL, input=history, tools=[WEATHER])
    assert second.output_text == "Paris is 18°C and cloudy."
    sent = all_text(upstream.requests[1])
    assert "RESP-7" in sent and call.call_id in sent


def test_streamed_two_turn_round_trip_with_function_call_output(client, upstream):
    upstream.script([
        {"text": hermes("get_weather", {"city": "Paris"}), "chunk": 3},
        {"text": "Paris is 18°C and cloudy.", "chunk": 4},
    ])
    with client.responses.stream(model=MODEL, input="What's the weather in Paris?", tools=[WEATHER]) as stream:
        for _ in stream:
            pass
        first = stream.get_final_response()
    call = next(item for item in first.output if item.type == "function_call")
    history = [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "function_call", "id": call.id, "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18°C, cloudy (ref RESP-9)"},
    ]
    deltas: list[str] = []
    with client.responses.stream(model=MODEL, input=history, tools=[WEATHER]) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        second = stream.get_final_response()
    assert second.status == "completed"
    assert "".join(deltas) == second.output_text == "Paris is 18°C and cloudy."
    assert len(deltas) > 1
    sent = all_text(upstream.requests[1])
    assert "RESP-9" in sent and call.call_id in sent


def test_custom_tool_call_carries_its_input_verbatim(client, upstream):
    upstream.script([hermes("apply_patch", {"input": PATCH})])
    response = client.responses.create(model=MODEL, input="Add hello.txt", tools=[APPLY_PATCH])
    calls = [item for item in response.output if item.type == "custom_tool_call"]
    assert len(calls) == 1, response.output
    assert calls[0].name == "apply_patch" and calls[0].input == PATCH

    upstream.script([hermes("apply_patch", {"input": PATCH})])
    done = None
    deltas: list[str] = []
    with client.responses.stream(model=MODEL, input="Add hello.txt", tools=[APPLY_PATCH]) as stream:
        for event in stream:
            if event.type == "response.custom_tool_call_input.delta":
                deltas.append(event.delta)
            if event.type == "response.custom_tool_call_input.done":
                done = event.input
        final = stream.get_final_response()
    assert done == PATCH
    assert len(deltas) > 1 and "".join(deltas) == PATCH, deltas
    assert final.output[-1].type == "custom_tool_call" and final.output[-1].input == PATCH
    # Rendered back into history the same way.
    upstream.script(["Added."])
    history = [
        {"role": "user", "content": "Add hello.txt"},
        {"type": "custom_tool_call", "call_id": calls[0].call_id, "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": calls[0].call_id, "output": "Done!"},
    ]
    client.responses.create(model=MODEL, input=history, tools=[APPLY_PATCH])
    assert "Add File: hello.txt" in all_text(upstream.requests[-1])


def test_hosted_tools_are_left_out_and_cannot_be_forced(client, upstream, gateway):
    upstream.script(["Sunny."])
    response = client.responses.create(
        model=MODEL, input="Weather?", tools=[WEATHER, {"type": "web_search"}], tool_choice="auto"
    )
    assert response.output_text == "Sunny."
    prompt = all_text(upstream.requests[0])
    assert "get_weather" in prompt and "web_search" not in prompt
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="x", tools=[{"type": "web_search"}], tool_choice={"type": "web_search"})
    assert "hosted tool" in caught.value.message
    metrics = httpx.get(gateway.root + "/metrics", timeout=HTTP_TIMEOUT).text
    assert 'toolshim_hosted_tools_left_out_total{type="web_search"} 1' in metrics, metrics


def test_stateful_features_get_clear_errors(client, gateway):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_123")
    assert caught.value.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_123")


def test_raw_stream_ends_with_completed_and_numbers_every_event(gateway, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"})])
    raw = httpx.post(
        gateway.base_url + "/responses",
        json={"model": MODEL, "input": "Weather in Paris?", "tools": [WEATHER], "stream": True},
        timeout=HTTP_TIMEOUT,
    )
    assert raw.status_code == 200, raw.text
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [ev for ev in parse_sse(raw.content) if ev.data]
    payloads = [json.loads(ev.data) for ev in events]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert all(ev.event == p["type"] for ev, p in zip(events, payloads))
    assert payloads[-1]["type"] == "response.completed"
    assert not raw.content.endswith(b"[DONE]\n\n")


# -- the Agents SDK with its default (Responses) model -------------------------------------------

QUESTION = "What's the weather in Paris?"
FINAL = "Paris is 18°C and cloudy."


def make_agent(base_url: str, calls: list[str]) -> tuple[Agent, openai.AsyncOpenAI]:
    from agents import set_default_openai_client

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"{city}: 18°C and cloudy (ref AGENT-RESP-1)"

    client = openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT)
    set_default_openai_client(client, use_for_tracing=False)
    agent = Agent(name="Weather", instructions="Answer questions about the weather.", tools=[get_weather], model=MODEL)
    return agent, client


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_agents_sdk_default_model_round_trip(gateway, upstream, streamed):
    upstream.script([hermes("get_weather", {"city": "Paris"}), {"text": FINAL, "chunk": 3}])
    calls: list[str] = []

    async def main():
        agent, client = make_agent(gateway.base_url, calls)
        try:
            if not streamed:
                return await asyncio.wait_for(Runner.run(agent, QUESTION), timeout=30)
            run = Runner.run_streamed(agent, input=QUESTION)

            async def drain():
                async for _ in run.stream_events():
                    pass

            await asyncio.wait_for(drain(), timeout=30)
            return run
        finally:
            await client.close()

    result = asyncio.run(main())
    assert result.final_output == FINAL
    assert calls == ["Paris"]
    assert len(upstream.requests) == 2
    assert "AGENT-RESP-1" in all_text(upstream.requests[1])
