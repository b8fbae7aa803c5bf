"""LangChain `ChatOpenAI` against `toolshim serve --mode emulate`."""

from __future__ import annotations

import functools
import operator

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from support import HTTP_TIMEOUT, MODEL, all_text, assert_emulated_request, assert_no_markup, hermes

QUESTION = "What's the weather in Paris?"


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18°C and cloudy (ref LC-5150)"


def chat_model(gateway, **kw) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL, base_url=gateway.base_url, api_key="test", max_retries=0, timeout=HTTP_TIMEOUT, **kw
    )


def merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    assert chunks, "the stream produced no chunks"
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    return functools.reduce(operator.add, chunks)


def assert_one_call(calls: list[dict], args: dict) -> None:
    assert len(calls) == 1, calls
    call = calls[0]
    assert call["name"] == "get_weather"
    assert call["args"] == args and isinstance(call["args"], dict)
    assert call["id"].startswith("call_")


def test_bind_tools_invoke(gateway, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"})])
    msg = chat_model(gateway).bind_tools([get_weather]).invoke(QUESTION)
    assert isinstance(msg, AIMessage)
    assert_one_call(msg.tool_calls, {"city": "Paris"})
    assert msg.tool_calls[0]["type"] == "tool_call"
    assert msg.invalid_tool_calls == []
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    assert_no_markup(msg.content if isinstance(msg.content, str) else str(msg.content))
    assert_emulated_request(upstream.requests[0], tool_names=("get_weather",))


def test_bind_tools_stream_merges_one_call(gateway, upstream):
    upstream.script([{"text": "Let me check. " + hermes("get_weather", {"city": "Paris"}), "chunk": 2}])
    chunks = list(chat_model(gateway).bind_tools([get_weather]).stream(QUESTION))
    merged = merge(chunks)
    assert_one_call(merged.tool_calls, {"city": "Paris"})
    assert merged.invalid_tool_calls == []
    assert len(merged.tool_call_chunks) == 1 and merged.tool_call_chunks[0]["index"] == 0
    ids = [tc["id"] for c in chunks for tc in c.tool_call_chunks if tc.get("id")]
    names = [tc["name"] for c in chunks for tc in c.tool_call_chunks if tc.get("name")]
    assert len(ids) == 1 and len(names) == 1, "id and name only in the call's first delta"
    assert merged.content.strip() == "Let me check."
    assert merged.response_metadata.get("finish_reason") == "tool_calls"


def test_bind_tools_stream_two_calls(gateway, upstream):
    text = hermes("get_weather", {"city": "Paris"}) + "\n" + hermes("get_weather", {"city": "Tokyo"})
    upstream.script([{"text": text, "chunk": 3}])
    merged = merge(list(chat_model(gateway).bind_tools([get_weather]).stream("Paris and Tokyo?")))
    assert [c["args"] for c in merged.tool_calls] == [{"city": "Paris"}, {"city": "Tokyo"}]
    assert all(c["name"] == "get_weather" and c["id"].startswith("call_") for c in merged.tool_calls)
    assert merged.tool_calls[0]["id"] != merged.tool_calls[1]["id"]
    assert merged.invalid_tool_calls == []


def test_stream_usage(gateway, upstream):
    upstream.script([{"text": "Sunny.", "usage": {"prompt_tokens": 40, "completion_tokens": 2}}])
    merged = merge(list(chat_model(gateway, stream_usage=True).bind_tools([get_weather]).stream(QUESTION)))
    assert merged.content == "Sunny."
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["total_tokens"] == (
        merged.usage_metadata["input_tokens"] + merged.usage_metadata["output_tokens"]
    )


def test_tool_choice_any_is_required(gateway, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"})])
    msg = chat_model(gateway).bind_tools([get_weather], tool_choice="any").invoke(QUESTION)
    assert_one_call(msg.tool_calls, {"city": "Paris"})


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_tool_loop(gateway, upstream, stream):
    upstream.script(
        [hermes("get_weather", {"city": "Paris"}), {"text": "It is 18°C and cloudy in Paris.", "chunk": 4}]
    )
    llm = chat_model(gateway).bind_tools([get_weather])
    messages = [HumanMessage(QUESTION)]
    first = merge(list(llm.stream(messages))) if stream else llm.invoke(messages)
    assert_one_call(first.tool_calls, {"city": "Paris"})
    call = first.tool_calls[0]
    messages += [first, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    final = merge(list(llm.stream(messages))) if stream else llm.invoke(messages)
    assert final.tool_calls == []
    assert final.content == "It is 18°C and cloudy in Paris."
    req = upstream.requests[1]
    assert_emulated_request(req)
    text = all_text(req)
    assert "LC-5150" in text and call["id"] in text and "get_weather" in text
