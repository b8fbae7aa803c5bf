"""openai-agents with `OpenAIChatCompletionsModel`.

The SDK's default (Responses) model is driven in test_responses.py. Tracing is off: nothing
leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

from support import HTTP_TIMEOUT, MODEL, all_text, assert_emulated_request, hermes

set_tracing_disabled(True)

QUESTION = "What's the weather in Paris?"
FINAL = "Paris is 18°C and cloudy."


def make_agent(base_url: str, calls: list[str]) -> tuple[Agent, openai.AsyncOpenAI]:
    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"{city}: 18°C and cloudy (ref AGENT-4242)"

    client = openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    agent = Agent(
        name="Weather", instructions="Answer questions about the weather.", tools=[get_weather], model=model
    )
    return agent, client


def assert_round_trip(upstream, calls: list[str]) -> None:
    assert calls == ["Paris"], f"the tool ran with {calls}"
    assert len(upstream.requests) == 2
    assert_emulated_request(upstream.requests[0], tool_names=("get_weather",))
    second = upstream.requests[1]
    assert_emulated_request(second)
    assert "AGENT-4242" in all_text(second), "the tool result must reach the upstream"


@pytest.fixture
def scripted(upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"}), {"text": FINAL, "chunk": 3}])
    return upstream


def test_runner_run(gateway, scripted):
    calls: list[str] = []

    async def main():
        agent, client = make_agent(gateway.base_url, calls)
        try:
            return await asyncio.wait_for(Runner.run(agent, QUESTION), timeout=30)
        finally:
            await client.close()

    result = asyncio.run(main())
    assert result.final_output == FINAL
    assert_round_trip(scripted, calls)


def test_runner_run_streamed(gateway, scripted):
    calls: list[str] = []

    async def main():
        agent, client = make_agent(gateway.base_url, calls)
        try:
            run = Runner.run_streamed(agent, input=QUESTION)
            kinds = []

            async def drain():
                async for ev in run.stream_events():
                    kinds.append(ev.type)

            await asyncio.wait_for(drain(), timeout=30)
            return run, kinds
        finally:
            await client.close()

    run, kinds = asyncio.run(main())
    assert run.final_output == FINAL
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    items = [type(i).__name__ for i in run.new_items]
    assert "ToolCallItem" in items and "ToolCallOutputItem" in items
    assert_round_trip(scripted, calls)
