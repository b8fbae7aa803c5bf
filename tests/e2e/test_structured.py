"""Issue 18 through the clients that sent the requests: structured outputs (the openai SDK's
`.parse`, LangChain's `with_structured_output`, the Agents SDK's `output_type`, the AI SDK's
`Output.object`, the anthropic SDK's `messages.parse`), the anthropic SDK's `tool_runner`
(threads by default: the gateway's `thread_unsupported_request` makes it send full
histories), thinking blocks, and the openai SDK's `reasoning_content`. The upstream is the
scripted chat-only mock.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess

import anthropic
import openai
import pydantic
import pytest
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled

from support import HTTP_TIMEOUT, MODEL, all_text, hermes
from test_ai_sdk import AI_SDK_DIR, SCRIPT

set_tracing_disabled(True)

ANSWER = {"city": "Paris", "temp_c": 18}


class Weather(pydantic.BaseModel):
    city: str
    temp_c: int


def openai_client(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT,
                         _strict_response_validation=True)


def test_openai_parse(gateway, upstream):
    upstream.script(["```json\n" + json.dumps(ANSWER) + "\n```"])
    with openai_client(gateway) as client:
        completion = client.chat.completions.parse(
            model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(**ANSWER)
    assert upstream.requests[0]["response_format"]["type"] == "json_schema"


def test_openai_parse_retries_a_wrong_answer(gateway, upstream):
    upstream.script(['{"city": "Paris"}', json.dumps(ANSWER)])
    with openai_client(gateway) as client:
        completion = client.chat.completions.parse(
            model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], response_format=Weather
        )
    assert completion.choices[0].message.parsed == Weather(**ANSWER)
    assert "temp_c" in all_text(upstream.requests[1]), "the correction names what was missing"


def test_langchain_with_structured_output(gateway, upstream):
    from langchain_openai import ChatOpenAI

    upstream.script([json.dumps(ANSWER)])
    llm = ChatOpenAI(model=MODEL, base_url=gateway.base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT)
    assert llm.with_structured_output(Weather).invoke("Weather in Paris?") == Weather(**ANSWER)
    # LangChain's default method sends the schema as response_format; the gateway passes it on
    # to the upstream (no tools in play) and checks the answer.
    sent = upstream.requests[0]["response_format"]
    assert sent["type"] == "json_schema", sent
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "temp_c"}, sent


def test_agents_sdk_output_type(gateway, upstream):
    upstream.script([json.dumps(ANSWER)])

    async def main():
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT)
        set_default_openai_client(client, use_for_tracing=False)
        agent = Agent(name="Weather", instructions="Report the weather.", model=MODEL, output_type=Weather)
        try:
            return await asyncio.wait_for(Runner.run(agent, "Weather in Paris?"), timeout=30)
        finally:
            await client.close()

    assert asyncio.run(main()).final_output == Weather(**ANSWER)


def test_ai_sdk_structured_output(gateway, upstream):
    if not (AI_SDK_DIR / "node_modules" / "ai").is_dir():
        pytest.fail(f"the AI SDK is not installed in {AI_SDK_DIR}", pytrace=False)
    script = AI_SDK_DIR / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    upstream.script([json.dumps(ANSWER)])
    env = {"PATH": os.environ.get("PATH", ""), "GATEWAY_URL": gateway.base_url, "MODEL": MODEL}
    done = subprocess.run(["node", str(script), "object"], cwd=AI_SDK_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{gateway.stderr_text()}"
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"object": ANSWER}


def anthropic_client(gateway) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.root, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT,
                               _strict_response_validation=True)


def test_anthropic_messages_parse(gateway, upstream):
    upstream.script([json.dumps(ANSWER)])
    with anthropic_client(gateway) as client:
        message = client.messages.parse(
            model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "Weather in Paris?"}], output_format=Weather
        )
    assert message.parsed_output == Weather(**ANSWER)


def test_anthropic_tool_runner_falls_back_from_threads(gateway, upstream):
    calls: list[str] = []

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"{city}: 18°C (ref RUNNER-3)"

    upstream.script([hermes("get_weather", {"city": "Paris"}), "Paris is 18°C."])
    with anthropic_client(gateway) as client:
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=256, tools=[get_weather], messages=[{"role": "user", "content": "Weather in Paris?"}]
        )
        final = runner.until_done()
    assert calls == ["Paris"]
    assert any(block.type == "text" and "18°C" in block.text for block in final.content), final
    assert "RUNNER-3" in all_text(upstream.requests[-1])
    # The threaded first request was refused (400), then the runner sent full histories.
    assert "status=400" in gateway.stderr_text(), gateway.stderr_text()
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_openai_reasoning_content(gateway, upstream, stream):
    """The openai SDK with `reasoning_effort` gets the model's reasoning as `reasoning_content`
    (the field DeepSeek, vLLM and llama.cpp clients read), apart from the answer; without it,
    the answer alone. No tools: the reasoning is told apart all the same."""
    reply = "<think>Paris in spring: mild.</think>It is mild and sunny."
    upstream.script([{"text": reply, "chunk": 3}, {"text": reply, "chunk": 3}])
    messages = [{"role": "user", "content": "What is Paris like in spring?"}]
    with openai_client(gateway) as client:
        for effort in ["low", None]:
            extra = {"reasoning_effort": effort} if effort else {}
            if stream:
                reasoning, content = "", ""
                for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True, **extra):
                    if chunk.choices:
                        delta = chunk.choices[0].delta
                        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
                        content += delta.content or ""
            else:
                message = client.chat.completions.create(model=MODEL, messages=messages, **extra).choices[0].message
                reasoning = (message.model_extra or {}).get("reasoning_content") or ""
                content = message.content
            assert content == "It is mild and sunny.", (effort, content)
            assert reasoning == ("Paris in spring: mild." if effort else ""), (effort, reasoning)


def test_anthropic_thinking_blocks(gateway, upstream):
    upstream.script(["<think>Paris, so check the weather.</think>It is sunny in Paris."])
    with anthropic_client(gateway) as client:
        message = client.messages.create(
            model=MODEL, max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        )
    assert [b.type for b in message.content] == ["thinking", "text"], message.content
    assert message.content[0].thinking == "Paris, so check the weather."
