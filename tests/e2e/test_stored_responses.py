"""Stored responses (issue 26) through `toolshim serve`: the official `openai` SDK (strict
response validation) chains turns with `previous_response_id` and reads them back with
`responses.retrieve` and `input_items.list`; the Agents SDK chains two runs by
`previous_response_id`; a gateway restarted on the same SQLite file still has them; another
key sees none of them; each on SQLite (the default) and on Redis (a `redis-server` of its
own). The upstream is the scripted chat-only mock.
"""

from __future__ import annotations

import asyncio
import socket

import httpx

import openai
import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled

from support import HTTP_TIMEOUT, MODEL, all_text, hermes

set_tracing_disabled(True)


def make_client(gateway, key: str = "sk-alice") -> openai.OpenAI:
    return openai.OpenAI(
        base_url=gateway.base_url, api_key=key, max_retries=0, timeout=HTTP_TIMEOUT, _strict_response_validation=True
    )


@pytest.fixture(params=["sqlite", "redis"])
def stored_gateway(request, gateway_factory):
    """A gateway on the default SQLite store, or on a Redis of its own."""
    if request.param == "sqlite":
        return gateway_factory()
    return gateway_factory("--store", request.getfixturevalue("redis_url"))


def test_openai_sdk_chains_three_turns_and_reads_them_back(stored_gateway, upstream):
    gateway = stored_gateway
    upstream.script([{"text": "Blue.", "chunk": 2}, "Green.", {"text": "Red.", "chunk": 3}])
    client = make_client(gateway)
    try:
        first = client.responses.create(model=MODEL, input="Name a colour.")
        assert first.store is True
        with client.responses.stream(model=MODEL, input="Another?", previous_response_id=first.id) as stream:
            for _ in stream:
                pass
            second = stream.get_final_response()
        assert second.previous_response_id == first.id
        third = client.responses.create(model=MODEL, input="And a third?", previous_response_id=second.id)
        assert third.output_text == "Red."

        # The upstream got the whole conversation on the third turn.
        seen = all_text(upstream.requests[2])
        for text in ["Name a colour.", "Blue.", "Another?", "Green.", "And a third?"]:
            assert text in seen, (text, seen)

        again = client.responses.retrieve(third.id)
        assert again.id == third.id and again.output_text == "Red."
        assert again.previous_response_id == second.id
        # Streamed again: the events a stream of it had, with its own ids.
        replayed = list(client.responses.retrieve(second.id, stream=True))
        assert replayed[0].type == "response.created" and replayed[-1].type == "response.completed"
        assert replayed[-1].response.output_text == "Green." and replayed[-1].response.id == second.id
        deltas = "".join(e.delta for e in replayed if e.type == "response.output_text.delta")
        assert deltas == "Green."
        # Every input item of the third response, a page of two at a time (the SDK follows
        # `after`), newest first.
        items = list(client.responses.input_items.list(third.id, limit=2))
        texts = [item.content[0].text for item in items]
        assert texts == ["And a third?", "Green.", "Another?", "Blue.", "Name a colour."], texts
        oldest = client.responses.input_items.list(third.id, order="asc", limit=1)
        assert oldest.data[0].content[0].text == "Name a colour." and oldest.has_more

        # Another key reads none of it; a deleted response is gone.
        other = make_client(gateway, "sk-bob")
        try:
            with pytest.raises(openai.NotFoundError):
                other.responses.retrieve(third.id)
        finally:
            other.close()
        client.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(first.id)
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=MODEL, input="More?", previous_response_id=third.id)
        assert caught.value.code == "previous_response_not_found"
    finally:
        client.close()


def test_a_restarted_gateway_keeps_its_responses(gateway_factory, upstream, tmp_path):
    store = f"sqlite:{tmp_path / 'responses.db'}"
    upstream.script(["First answer.", "Second answer."])
    before = gateway_factory("--store", store)
    client = make_client(before)
    try:
        first = client.responses.create(model=MODEL, input="First question?")
    finally:
        client.close()
    before.stop()
    after = gateway_factory("--store", store)
    client = make_client(after)
    try:
        assert client.responses.retrieve(first.id).output_text == "First answer."
        second = client.responses.create(model=MODEL, input="Second question?", previous_response_id=first.id)
        assert second.output_text == "Second answer."
        assert "First answer." in all_text(upstream.requests[1])
    finally:
        client.close()


def test_store_false_and_store_off_keep_nothing(gateway_factory, upstream):
    upstream.script(["Not kept.", "Not kept either."])
    client = make_client(gateway_factory())
    try:
        response = client.responses.create(model=MODEL, input="Hi", store=False)
        assert response.store is False
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response.id)
    finally:
        client.close()
    client = make_client(gateway_factory("--store", "off"))
    try:
        response = client.responses.create(model=MODEL, input="Hi")
        assert response.store is False
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model=MODEL, input="Hi", previous_response_id=response.id)
        assert caught.value.code == "previous_response_not_found"
    finally:
        client.close()


def test_agents_sdk_chains_runs_by_previous_response_id(stored_gateway, upstream):
    gateway = stored_gateway
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"{city}: 18C and cloudy (ref STORED-7)"

    upstream.script([hermes("get_weather", {"city": "Paris"}), "It is 18C in Paris.", "You asked about Paris."])

    async def main():
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="sk-agents", max_retries=0, timeout=HTTP_TIMEOUT)
        from agents import OpenAIResponsesModel

        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        agent = Agent(name="Weather", instructions="Answer about the weather.", tools=[get_weather], model=model)
        try:
            first = await asyncio.wait_for(Runner.run(agent, "Weather in Paris?"), timeout=30)
            second = await asyncio.wait_for(
                Runner.run(agent, "Which city did I ask about?", previous_response_id=first.last_response_id), timeout=30
            )
            return first, second
        finally:
            await client.close()

    first, second = asyncio.run(main())
    assert first.final_output == "It is 18C in Paris."
    assert second.final_output == "You asked about Paris."
    assert calls == ["Paris"]
    # The third upstream request holds the first run whole: question, call, result, answer.
    seen = all_text(upstream.requests[2])
    for text in ["Weather in Paris?", "get_weather", "STORED-7", "It is 18C in Paris.", "Which city did I ask about?"]:
        assert text in seen, (text, seen)


def test_openai_sdk_conversations(stored_gateway, upstream):
    gateway = stored_gateway
    upstream.script(["Ada.", {"text": "A-D-A.", "chunk": 2}])
    client = make_client(gateway)
    try:
        conversation = client.conversations.create(
            items=[{"type": "message", "role": "user", "content": "My name is Ada."}], metadata={"topic": "names"}
        )
        assert conversation.id.startswith("conv_") and conversation.metadata == {"topic": "names"}
        first = client.responses.create(model=MODEL, input="What is my name?", conversation=conversation.id)
        assert first.output_text == "Ada." and first.conversation.id == conversation.id
        with client.responses.stream(model=MODEL, input="Spell it.", conversation=conversation.id) as stream:
            for _ in stream:
                pass
            assert stream.get_final_response().output_text == "A-D-A."
        seen = all_text(upstream.requests[1])
        for text in ["My name is Ada.", "What is my name?", "Ada.", "Spell it."]:
            assert text in seen, (text, seen)

        items = list(client.conversations.items.list(conversation.id, order="asc"))
        texts = [item.content[0].text for item in items]
        assert texts == ["My name is Ada.", "What is my name?", "Ada.", "Spell it.", "A-D-A."], texts
        added = client.conversations.items.create(
            conversation.id, items=[{"type": "message", "role": "user", "content": "A note."}]
        )
        note = added.data[0].id
        assert client.conversations.items.retrieve(note, conversation_id=conversation.id).content[0].text == "A note."
        client.conversations.items.delete(note, conversation_id=conversation.id)
        updated = client.conversations.update(conversation.id, metadata={"topic": "spelling"})
        assert updated.metadata == {"topic": "spelling"}
        assert client.conversations.retrieve(conversation.id).metadata == {"topic": "spelling"}
        deleted = client.conversations.delete(conversation.id)
        assert deleted.deleted and deleted.id == conversation.id
        with pytest.raises(openai.NotFoundError):
            client.conversations.retrieve(conversation.id)
    finally:
        client.close()


def test_agents_sdk_runs_in_a_conversation(stored_gateway, upstream):
    gateway = stored_gateway
    upstream.script([hermes("get_weather", {"city": "Rome"}), "It is 21C in Rome.", "You asked about Rome."])
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"{city}: 21C and sunny (ref CONV-3)"

    async def main():
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="sk-agents", max_retries=0, timeout=HTTP_TIMEOUT)
        from agents import OpenAIResponsesModel

        model = OpenAIResponsesModel(model=MODEL, openai_client=client)
        agent = Agent(name="Weather", instructions="Answer about the weather.", tools=[get_weather], model=model)
        try:
            conversation = await client.conversations.create()
            first = await asyncio.wait_for(Runner.run(agent, "Weather in Rome?", conversation_id=conversation.id), timeout=30)
            second = await asyncio.wait_for(
                Runner.run(agent, "Which city did I ask about?", conversation_id=conversation.id), timeout=30
            )
            items = [item async for item in client.conversations.items.list(conversation.id, order="asc")]
            return first, second, items
        finally:
            await client.close()

    first, second, items = asyncio.run(main())
    assert first.final_output == "It is 21C in Rome."
    assert second.final_output == "You asked about Rome."
    assert calls == ["Rome"]
    seen = all_text(upstream.requests[2])
    for text in ["Weather in Rome?", "get_weather", "CONV-3", "It is 21C in Rome.", "Which city did I ask about?"]:
        assert text in seen, (text, seen)
    kinds = [item.type for item in items]
    assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1, kinds


def test_a_store_that_goes_down_is_a_503_and_the_rest_goes_on(gateway_factory, upstream, redis_url):
    upstream.script(["Kept.", "Still answering."])
    gateway = gateway_factory("--store", redis_url)
    client = make_client(gateway)
    try:
        kept = client.responses.create(model=MODEL, input="Keep this.")
        # The Redis goes away.
        host, port = redis_url.removeprefix("redis://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(b"SHUTDOWN NOSAVE\r\n")
            conn.recv(64)
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.retrieve(kept.id)
        assert caught.value.status_code == 503 and caught.value.code == "store_unavailable", caught.value
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model=MODEL, input="More?", previous_response_id=kept.id)
        assert caught.value.status_code == 503
        chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
        assert chat.choices[0].message.content == "Still answering."
        ready = httpx.get(gateway.root + "/readyz", timeout=HTTP_TIMEOUT).json()
        assert ready["store"]["status"] == "unavailable" and ready["status"] == "degraded", ready
    finally:
        client.close()
