"""The Ollama API (issue 28) through the official `ollama` Python client (and `ollama` from npm,
a tool round trip streamed and not): chat with tools
(a schema and a Python function), streaming with tools, a two-turn round trip, `format` with a
schema, `generate`, `list` and `show`, and Ollama's errors; against `toolshim serve` emulating
tools in front of the scripted upstream.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import ollama
import pytest
from pydantic import BaseModel

from conftest import REPO_ROOT
from support import HTTP_TIMEOUT, MODEL, PLAIN_WEATHER_TOOL, hermes

OLLAMA_JS_DIR = Path(os.environ.get("OLLAMA_JS_DIR", REPO_ROOT / "target" / "ollama-js"))
SCRIPT = Path(__file__).with_name("ollama_js_chat.mjs")

WEATHER = PLAIN_WEATHER_TOOL


def get_time(timezone: str) -> str:
    """The local time in a timezone.

    Args:
      timezone: An IANA timezone, such as Europe/Paris.
    """
    return "12:00"


@pytest.fixture
def client(gateway):
    return ollama.Client(host=gateway.root, timeout=HTTP_TIMEOUT)


def test_chat_with_tools_and_a_two_turn_round_trip(client, upstream):
    upstream.script([hermes("get_weather", {"city": "Paris"}), "It is 18 degrees in Paris."])
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    reply = client.chat(model=MODEL, messages=messages, tools=[WEATHER])
    assert reply.done and reply.done_reason == "stop"
    call = reply.message.tool_calls[0].function
    assert call.name == "get_weather" and call.arguments == {"city": "Paris"}
    assert not reply.message.content
    messages += [reply.message, {"role": "tool", "content": "18 degrees", "tool_name": "get_weather"}]
    answer = client.chat(model=MODEL, messages=messages, tools=[WEATHER])
    assert answer.message.content == "It is 18 degrees in Paris."
    assert not answer.message.tool_calls
    second = json.dumps(upstream.requests[1])
    assert "18 degrees" in second and "get_weather" in second


def test_a_python_function_as_a_tool_and_a_streamed_call(client, upstream):
    upstream.script([f"Let me look. {hermes('get_time', {'timezone': 'Europe/Paris'})}"])
    parts = list(
        client.chat(
            model=MODEL,
            messages=[{"role": "user", "content": "What time is it in Paris?"}],
            tools=[get_time],
            stream=True,
        )
    )
    text = "".join(part.message.content or "" for part in parts)
    calls = [call for part in parts for call in (part.message.tool_calls or [])]
    assert text.strip() == "Let me look."
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [("get_time", {"timezone": "Europe/Paris"})]
    assert parts[-1].done and parts[-1].done_reason == "stop"
    assert all(not part.done for part in parts[:-1])
    contract = upstream.requests[0]["messages"][0]["content"]
    assert "get_time" in contract and "IANA timezone" in contract


class Answer(BaseModel):
    city: str
    degrees: int


def test_format_with_a_schema_and_generate(client, upstream):
    upstream.script(['{"city": "Paris", "degrees": 18}', "Four."])
    reply = client.chat(
        model=MODEL,
        messages=[{"role": "user", "content": "Paris weather as JSON."}],
        format=Answer.model_json_schema(),
        options={"temperature": 0},
    )
    assert Answer.model_validate_json(reply.message.content) == Answer(city="Paris", degrees=18)
    generated = client.generate(model=MODEL, prompt="2 + 2?", system="Answer in one word.")
    assert generated.response == "Four." and generated.done
    assert upstream.requests[0]["temperature"] == 0


def test_list_show_and_errors(client, upstream):
    assert MODEL in [m.model for m in client.list().models]
    shown = client.show(MODEL)
    assert "tools" in shown.capabilities
    assert client.ps().models == []
    upstream.script([{"status": 429, "retry_after": "7"}])
    with pytest.raises(ollama.ResponseError) as limited:
        client.chat(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert limited.value.status_code == 429, limited.value
    with pytest.raises(ollama.ResponseError) as bad:
        client.chat(model=MODEL, messages=[{"role": "robot", "content": "Hi"}])
    assert bad.value.status_code == 400 and "unknown role `robot`" in bad.value.error


@pytest.mark.parametrize("mode", ["complete", "stream"])
def test_the_ollama_package_from_npm(gateway, upstream, mode):
    if not (OLLAMA_JS_DIR / "node_modules" / "ollama").is_dir():
        pytest.fail(f"ollama-js is not installed in {OLLAMA_JS_DIR}: see .ci/run for the pinned `npm install`", pytrace=False)
    # Node resolves the package from the script's folder.
    script = OLLAMA_JS_DIR / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    upstream.script([hermes("get_weather", {"city": "Paris"}), "It is 18 degrees in Paris."])
    env = {"PATH": os.environ.get("PATH", ""), "GATEWAY_URL": gateway.root, "MODEL": MODEL}
    done = subprocess.run(["node", str(script), mode], cwd=OLLAMA_JS_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"node exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"calls": [["get_weather", {"city": "Paris"}]], "text": "It is 18 degrees in Paris.", "done": True}
    assert "18 degrees" in json.dumps(upstream.requests[1])
