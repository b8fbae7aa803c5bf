"""The Gemini API (issue 28) through the official `google-genai` SDK: function calling with
automatic function calling off and on, streaming, structured output, a two-turn round trip,
`countTokens`, the model list, both API versions (`v1beta`, `v1`), and Gemini's errors;
against `toolshim serve` emulating tools in front of the scripted upstream.
"""

from __future__ import annotations

import json

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from support import HTTP_TIMEOUT, MODEL, hermes

WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city.",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
        required=["city"],
    ),
)


def client_for(gateway, version: str = "v1beta") -> genai.Client:
    return genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=gateway.root, api_version=version, timeout=10_000)
    )


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_a_function_call_and_a_two_turn_round_trip(gateway, upstream, version):
    upstream.script([hermes("get_weather", {"city": "Paris"}), "It is 18 degrees in Paris."])
    client = client_for(gateway, version)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents = [types.Content(role="user", parts=[types.Part(text="What is the weather in Paris?")])]
    reply = client.models.generate_content(model=MODEL, contents=contents, config=config)
    call = reply.function_calls[0]
    assert (call.name, call.args) == ("get_weather", {"city": "Paris"})
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    assert reply.usage_metadata.prompt_token_count > 0
    contents.append(reply.candidates[0].content)
    contents.append(
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"output": "18 degrees"})],
        )
    )
    answer = client.models.generate_content(model=MODEL, contents=contents, config=config)
    assert answer.text == "It is 18 degrees in Paris." and not answer.function_calls
    second = json.dumps(upstream.requests[1])
    assert "18 degrees" in second and "get_weather" in second
    # The OpenAPI-subset schema went to the model as JSON Schema.
    contract = upstream.requests[0]["messages"][0]["content"]
    assert '"type":"object"' in contract and '"type":"string"' in contract and "OBJECT" not in contract, contract


def get_time(timezone: str) -> str:
    """The local time in a timezone.

    Args:
      timezone: An IANA timezone, such as Europe/Paris.
    """
    return "12:00"


def test_automatic_function_calling_runs_the_python_function(gateway, upstream):
    upstream.script([hermes("get_time", {"timezone": "Europe/Paris"}), "It is noon in Paris."])
    client = client_for(gateway)
    reply = client.models.generate_content(
        model=MODEL, contents="What time is it in Paris?", config=types.GenerateContentConfig(tools=[get_time])
    )
    assert reply.text == "It is noon in Paris."
    assert "12:00" in json.dumps(upstream.requests[1])


def test_streaming_text_and_a_call(gateway, upstream):
    upstream.script([f"Let me look. {hermes('get_weather', {'city': 'Rome'})}"])
    client = client_for(gateway)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="Weather in Rome?", config=config))
    text = "".join(part.text for chunk in chunks for part in chunk.candidates[0].content.parts or [] if part.text)
    calls = [call for chunk in chunks for call in (chunk.function_calls or [])]
    assert text.strip() == "Let me look."
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Rome"})]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.total_token_count > 0


class Weather(BaseModel):
    city: str
    degrees: int


def test_structured_output_and_forced_calls(gateway, upstream):
    upstream.script(['{"city": "Paris", "degrees": 18}', hermes("get_weather", {"city": "Oslo"})])
    client = client_for(gateway)
    reply = client.models.generate_content(
        model=MODEL,
        contents="Paris weather as JSON.",
        config=types.GenerateContentConfig(response_mime_type="application/json", response_schema=Weather),
    )
    assert reply.parsed == Weather(city="Paris", degrees=18)
    forced = client.models.generate_content(
        model=MODEL,
        contents="Anything about Oslo.",
        config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[WEATHER])],
            tool_config=types.ToolConfig(
                function_calling_config=types.FunctionCallingConfig(mode="ANY", allowed_function_names=["get_weather"])
            ),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        ),
    )
    assert forced.function_calls[0].name == "get_weather"


def test_count_tokens_models_and_errors(gateway, upstream):
    client = client_for(gateway)
    assert client.models.count_tokens(model=MODEL, contents="Hello there").total_tokens > 0
    assert f"models/{MODEL}" in [m.name for m in client.models.list()]
    assert client.models.get(model=MODEL).name == f"models/{MODEL}"
    with pytest.raises(errors.ClientError) as unknown:
        client.models.generate_content(
            model=MODEL,
            contents="Hi",
            config=types.GenerateContentConfig(
                tools=[types.Tool(function_declarations=[WEATHER])],
                tool_config=types.ToolConfig(
                    function_calling_config=types.FunctionCallingConfig(mode="ANY", allowed_function_names=["nope"])
                ),
            ),
        )
    assert unknown.value.code == 400 and unknown.value.status == "INVALID_ARGUMENT"
    assert "`nope` is not a declared function" in unknown.value.message
    # A malformed `contents`, which the SDK would not send: Gemini's error shape.
    malformed = httpx.post(
        f"{gateway.root}/v1beta/models/{MODEL}:generateContent",
        json={"contents": "not a list"},
        headers={"x-goog-api-key": "test"},
        timeout=HTTP_TIMEOUT,
    )
    assert malformed.status_code == 400
    assert malformed.json()["error"]["status"] == "INVALID_ARGUMENT", malformed.text
    assert "'contents'" in malformed.json()["error"]["message"]
    wrong = httpx.post(f"{gateway.root}/v1beta/models/{MODEL}:embedContent", json={}, timeout=HTTP_TIMEOUT)
    assert wrong.status_code == 404 and wrong.json()["error"]["status"] == "NOT_FOUND"
    upstream.script([{"status": 429, "retry_after": "3"}])
    with pytest.raises(errors.ClientError) as limited:
        client.models.generate_content(model=MODEL, contents="Hi")
    assert limited.value.code == 429 and limited.value.status == "RESOURCE_EXHAUSTED"
