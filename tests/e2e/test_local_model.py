"""A real model behind the gateway: llama.cpp serving Qwen2.5-Coder-0.5B and SmolLM2-135M.

Skipped unless `scripts/local-model` runs the models and their URLs are given:

    TOOLSHIM_LOCAL_MODEL_URL=$(scripts/local-model start qwen) \\
    TOOLSHIM_LOCAL_SMOLLM_URL=$(scripts/local-model start smollm) \\
    pytest tests/e2e/test_local_model.py -q -s

Every request uses `temperature: 0`. A recording proxy sits between the gateway and the model,
so a test can compare what the client got with what the model wrote. `-s` shows the success
shares that `test_success_share` prints.

What the figures are on this set (CPU build, 2 threads, temperature 0): 10 of 12 right (83%)
with the gateway, with and without correction retries. Every needed call is right (the model
writes bare JSON, never the `<tool_call>` tags it is asked for; the parser reads it). It calls
an undeclared `translate` tool for the translation, which a correction retry does not fix
(corrections make this model repeat itself or pick another wrong tool); the gateway's last
attempt without tools gets the plain answer (before that attempt existed: 9 of 12, 75%). The
two misses are over-calls: "capital of France" → get_weather(Paris), "12 times 12" →
get_weather(London).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from conftest import Gateway, spawn_gateway
from recording_proxy import RecordingProxy
from support import (
    SHUTDOWN_TIMEOUT_S,
    WEATHER_TOOL,
    TIME_TOOL,
    assert_no_markup,
    check_anthropic_stream,
    check_chat_stream,
    recording_http_client,
    wait_until,
)

QWEN_URL = os.environ.get("TOOLSHIM_LOCAL_MODEL_URL", "").removesuffix("/").removesuffix("/v1")
SMOLLM_URL = os.environ.get("TOOLSHIM_LOCAL_SMOLLM_URL", "").removesuffix("/").removesuffix("/v1")

# A 0.5B model on 2 CPU threads: a prompt takes seconds, a retry doubles it.
REQUEST_TIMEOUT_S = 300.0
pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(not QWEN_URL and not SMOLLM_URL, reason="no local model (scripts/local-model)"),
]
needs_qwen = pytest.mark.skipif(not QWEN_URL, reason="TOOLSHIM_LOCAL_MODEL_URL is not set")
needs_smollm = pytest.mark.skipif(not SMOLLM_URL, reason="TOOLSHIM_LOCAL_SMOLLM_URL is not set")

MAX_TOKENS = 256
# This model with a naive tool prompt and no gateway was right on 54% of such prompts.
NAIVE_SHARE = 0.54
# The goal through the gateway, with its retry policy.
GOAL_SHARE = 0.80
SAMPLING = {"temperature": 0, "max_tokens": MAX_TOKENS}

# -- the prompt set -------------------------------------------------------------------------


def function(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SET_TOOLS = [
    function("get_weather", "Get the current weather for a city", {"city": {"type": "string"}}, ["city"]),
    function(
        "get_time",
        "Get the current local time in a time zone",
        {"timezone": {"type": "string", "description": "IANA time zone name, like Europe/Paris"}},
        ["timezone"],
    ),
    function(
        "convert_currency",
        "Convert an amount of money from one currency to another",
        {
            "amount": {"type": "number"},
            "from": {"type": "string", "description": "ISO 4217 code"},
            "to": {"type": "string", "description": "ISO 4217 code"},
        },
        ["amount", "from", "to"],
    ),
    function("search_web", "Search the web and return the top results", {"query": {"type": "string"}}, ["query"]),
    function(
        "send_email",
        "Send an email",
        {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
        ["to", "body"],
    ),
]
SET_TOOL_NAMES = {t["function"]["name"] for t in SET_TOOLS}


def contains(key: str, *needles: str) -> Callable[[dict], bool]:
    return lambda args: any(n in str(args.get(key, "")).lower() for n in needles)


def amount(value: float, src: str, dst: str) -> Callable[[dict], bool]:
    def check(args: dict) -> bool:
        try:
            ok = float(args.get("amount")) == value
        except (TypeError, ValueError):
            return False
        return ok and contains("from", src)(args) and contains("to", dst)(args)

    return check


@dataclass
class Case:
    prompt: str
    # The expected tool and a check of its arguments; None: the right answer is plain text.
    tool: str | None = None
    args_ok: Callable[[dict], bool] = lambda _args: True


CASES = [
    Case("What's the weather in Paris?", "get_weather", contains("city", "paris")),
    Case("Do I need an umbrella in London today?", "get_weather", contains("city", "london")),
    Case("What time is it in Tokyo right now?", "get_time", contains("timezone", "tokyo", "asia")),
    Case("How much is 250 US dollars in euros?", "convert_currency", amount(250, "usd", "eur")),
    Case("Search the web for the release date of Python 3.14.", "search_web", contains("query", "python")),
    Case("Email alice@example.com that the meeting moves to 3pm.", "send_email", contains("to", "alice@example.com")),
    Case("What is the capital of France?"),
    Case("Write a haiku about the sea."),
    Case("What is 12 times 12?"),
    Case("Translate 'thank you' into German."),
    Case("Hello! Who are you?"),
    Case("Explain in one sentence what a hash map is."),
]


@dataclass
class Outcome:
    right: bool
    calls: list[tuple[str, dict]]
    text: str


def judge(case: Case, message: Any) -> Outcome:
    """Checks the protocol properties of one OpenAI message and whether it is the right answer."""
    calls = []
    for call in message.tool_calls or []:
        assert call.type == "function"
        assert call.function.name in SET_TOOL_NAMES, f"undeclared tool {call.function.name!r}"
        args = json.loads(call.function.arguments)
        assert isinstance(args, dict), f"arguments are not a JSON object: {call.function.arguments!r}"
        calls.append((call.function.name, args))
    text = message.content or ""
    assert_no_markup(text)
    if case.tool is None:
        right = not calls and bool(text.strip())
    else:
        right = any(name == case.tool and case.args_ok(args) for name, args in calls)
    return Outcome(right, calls, text)


# -- fixtures ---------------------------------------------------------------------------------


def warm_up(root: str) -> None:
    """One tiny request straight to the model, so the first test does not pay the load."""
    body = json.dumps(
        {"model": "warm-up", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}
    ).encode()
    req = urllib.request.Request(root + "/v1/chat/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
        assert resp.status == 200


@dataclass
class Rig:
    """A gateway in front of a recording proxy in front of the model."""

    proxy: RecordingProxy
    gateway: Gateway


def rig(upstream: str, *flags: str) -> Iterator[Rig]:
    proxy = RecordingProxy(upstream).start()
    gateway = spawn_gateway(proxy.base_url, *flags)
    try:
        yield Rig(proxy, gateway)
    finally:
        gateway.stop()
        proxy.stop()


@pytest.fixture(scope="module")
def qwen_warm() -> None:
    warm_up(QWEN_URL)


@pytest.fixture(scope="module")
def qwen(qwen_warm: None) -> Iterator[Rig]:
    """The gateway with its default retry policy."""
    yield from rig(QWEN_URL)


@pytest.fixture(scope="module")
def qwen_no_retries(qwen_warm: None) -> Iterator[Rig]:
    yield from rig(QWEN_URL, "--max-retries", "0")


@pytest.fixture(scope="module")
def smollm() -> Iterator[Rig]:
    warm_up(SMOLLM_URL)
    yield from rig(SMOLLM_URL)


def unconstrained_config() -> Iterator[str]:
    """A config file that turns constrained decoding off (`upstream.constrain = "off"`)."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", prefix="local-model-") as config:
        config.write('[upstream]\nconstrain = "off"\n')
        config.flush()
        yield config.name


@pytest.fixture(scope="module")
def smollm_unconstrained() -> Iterator[Rig]:
    warm_up(SMOLLM_URL)
    for path in unconstrained_config():
        yield from rig(SMOLLM_URL, "--config", path)


@pytest.fixture(scope="module")
def qwen_auto(qwen_warm: None) -> Iterator[Rig]:
    """The gateway in its default mode (`auto`)."""
    yield from rig(QWEN_URL, "--mode", "auto")


def openai_client(gw: Gateway, captures: list | None = None):
    import openai

    return openai.OpenAI(
        base_url=gw.base_url,
        api_key="unused",
        max_retries=0,
        timeout=REQUEST_TIMEOUT_S,
        _strict_response_validation=True,
        http_client=recording_http_client(captures if captures is not None else []),
    )


def anthropic_client(gw: Gateway, captures: list | None = None):
    import anthropic

    return anthropic.Anthropic(
        base_url=gw.root,
        api_key="unused",
        max_retries=0,
        timeout=REQUEST_TIMEOUT_S,
        _strict_response_validation=True,
        http_client=recording_http_client(captures if captures is not None else [], sdk="anthropic"),
    )


def weather_tools() -> list[dict]:
    return [WEATHER_TOOL, TIME_TOOL]


WEATHER_RESULT = "18°C, sunny, light wind"


def openai_turn(client, captures: list, messages: list[dict], stream: bool,
                tools: list[dict] | None = None) -> tuple[str, list[dict], str]:
    """One request (with `weather_tools()` unless `tools` are given); returns (content, tool
    calls as {id, name, arguments}, finish_reason)."""
    tools = weather_tools() if tools is None else tools
    if not stream:
        resp = client.chat.completions.create(
            model="qwen", messages=messages, tools=tools, **SAMPLING
        )
        choice = resp.choices[0]
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in choice.message.tool_calls or []
        ]
        return choice.message.content or "", calls, choice.finish_reason
    chunks = client.chat.completions.create(
        model="qwen", messages=messages, tools=tools, stream=True, **SAMPLING
    )
    for _ in chunks:
        pass
    summary = check_chat_stream(bytes(captures[-1].body))
    return summary.content, summary.tool_calls, summary.finish_reason


@needs_qwen
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_openai_sdk_weather_round_trip(qwen: Rig, stream: bool) -> None:
    captures: list = []
    client = openai_client(qwen.gateway, captures)
    messages: list[dict] = [{"role": "user", "content": "What's the weather in Paris?"}]
    content, calls, finish = openai_turn(client, captures, messages, stream)
    assert_no_markup(content)
    assert finish == "tool_calls", (finish, content, qwen.proxy.exchanges[-1].text)
    assert [c["name"] for c in calls] == ["get_weather"]
    assert "paris" in json.loads(calls[0]["arguments"])["city"].lower()

    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": calls[0]["id"], "type": "function",
                 "function": {"name": "get_weather", "arguments": calls[0]["arguments"]}}
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": WEATHER_RESULT})
    content, calls, finish = openai_turn(client, captures, messages, stream)
    assert_no_markup(content, names=("get_weather",))
    assert finish == "stop" and not calls, (finish, calls, qwen.proxy.exchanges[-1].text)
    assert "18" in content, content


def anthropic_tools() -> list[dict]:
    return [
        {"name": t["function"]["name"], "description": t["function"]["description"],
         "input_schema": t["function"]["parameters"]}
        for t in weather_tools()
    ]


def anthropic_turn(client, captures: list, messages: list[dict], stream: bool) -> tuple[str, list[dict], str]:
    """One request; returns (text, tool_use blocks, stop_reason)."""
    # This SDK version has no `temperature` argument; the gateway reads it from the body.
    kwargs = dict(model="qwen", max_tokens=MAX_TOKENS, messages=messages, tools=anthropic_tools(),
                  extra_body={"temperature": 0})
    if not stream:
        msg = client.messages.create(**kwargs)
        blocks = [b.model_dump() for b in msg.content]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        return text, [b for b in blocks if b["type"] == "tool_use"], msg.stop_reason
    for _ in client.messages.create(stream=True, **kwargs):
        pass
    summary = check_anthropic_stream(bytes(captures[-1].body))
    return summary.text, summary.tool_uses, summary.stop_reason


@needs_qwen
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_anthropic_sdk_weather_round_trip(qwen: Rig, stream: bool) -> None:
    captures: list = []
    client = anthropic_client(qwen.gateway, captures)
    messages: list[dict] = [{"role": "user", "content": "What's the weather in Paris?"}]
    text, uses, stop = anthropic_turn(client, captures, messages, stream)
    assert_no_markup(text)
    assert stop == "tool_use", (stop, text, qwen.proxy.exchanges[-1].text)
    assert [u["name"] for u in uses] == ["get_weather"]
    assert "paris" in uses[0]["input"]["city"].lower()

    messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": uses[0]["id"],
                                                       "name": "get_weather", "input": uses[0]["input"]}]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"],
                                                  "content": WEATHER_RESULT}]})
    text, uses, stop = anthropic_turn(client, captures, messages, stream)
    assert_no_markup(text, names=("get_weather",))
    assert stop == "end_turn" and not uses, (stop, uses, qwen.proxy.exchanges[-1].text)
    assert "18" in text, text


@needs_qwen
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_ollama_client_weather_round_trip(qwen: Rig, stream: bool) -> None:
    """The Ollama API (docs/ollama.md) with the official `ollama` client, on the real model."""
    import ollama

    client = ollama.Client(host=qwen.gateway.root, timeout=REQUEST_TIMEOUT_S)
    options = {"temperature": 0, "num_predict": MAX_TOKENS}

    def turn(messages: list) -> tuple[str, list]:
        if not stream:
            reply = client.chat(model="qwen", messages=messages, tools=weather_tools(), options=options)
            assert reply.done and reply.done_reason == "stop", reply
            return reply.message.content or "", list(reply.message.tool_calls or [])
        parts = list(client.chat(model="qwen", messages=messages, tools=weather_tools(), options=options, stream=True))
        assert parts[-1].done, parts[-1]
        text = "".join(p.message.content or "" for p in parts)
        return text, [c for p in parts for c in (p.message.tool_calls or [])]

    messages: list = [{"role": "user", "content": "What's the weather in Paris?"}]
    text, calls = turn(messages)
    assert_no_markup(text)
    assert [c.function.name for c in calls] == ["get_weather"], (text, qwen.proxy.exchanges[-1].text)
    assert "paris" in str(calls[0].function.arguments.get("city", "")).lower()
    messages.append({"role": "assistant", "content": text, "tool_calls": [c.model_dump() for c in calls]})
    messages.append({"role": "tool", "content": WEATHER_RESULT, "tool_name": "get_weather"})
    text, calls = turn(messages)
    assert_no_markup(text, names=("get_weather",))
    assert not calls and "18" in text, (text, calls, qwen.proxy.exchanges[-1].text)


@needs_qwen
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_gemini_sdk_weather_round_trip(qwen: Rig, stream: bool) -> None:
    """The Gemini API (docs/gemini.md) with the official `google-genai` SDK, on the real model."""
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="local", http_options=types.HttpOptions(base_url=qwen.gateway.root, timeout=int(REQUEST_TIMEOUT_S * 1000))
    )
    declarations = [
        types.FunctionDeclaration(name=t["function"]["name"], description=t["function"]["description"],
                                  parameters_json_schema=t["function"]["parameters"])
        for t in weather_tools()
    ]
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)], temperature=0, max_output_tokens=MAX_TOKENS,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )

    def turn(contents: list) -> tuple[str, list, list]:
        if not stream:
            reply = client.models.generate_content(model="qwen", contents=contents, config=config)
            parts = list(reply.candidates[0].content.parts or [])
        else:
            chunks = list(client.models.generate_content_stream(model="qwen", contents=contents, config=config))
            parts = [p for c in chunks for p in (c.candidates[0].content.parts or [])]
        text = "".join(p.text or "" for p in parts if not p.thought)
        return text, [p.function_call for p in parts if p.function_call], parts

    contents: list = [types.Content(role="user", parts=[types.Part(text="What's the weather in Paris?")])]
    text, calls, parts = turn(contents)
    assert_no_markup(text)
    assert [c.name for c in calls] == ["get_weather"], (text, qwen.proxy.exchanges[-1].text)
    assert "paris" in str(calls[0].args.get("city", "")).lower()
    contents.append(types.Content(role="model", parts=parts))
    contents.append(types.Content(role="user", parts=[
        types.Part.from_function_response(name="get_weather", response={"output": WEATHER_RESULT})]))
    text, calls, _ = turn(contents)
    assert_no_markup(text, names=("get_weather",))
    assert not calls and "18" in text, (text, calls, qwen.proxy.exchanges[-1].text)


def run_cases(rig_: Rig) -> list[Outcome]:
    client = openai_client(rig_.gateway)
    outcomes = []
    for case in CASES:
        resp = client.chat.completions.create(
            model="qwen", messages=[{"role": "user", "content": case.prompt}], tools=SET_TOOLS, **SAMPLING
        )
        assert resp.object == "chat.completion" and len(resp.choices) == 1
        message = resp.choices[0].message
        assert resp.choices[0].finish_reason == ("tool_calls" if message.tool_calls else "stop")
        outcomes.append(judge(case, message))
    return outcomes


@needs_qwen
def test_success_share(qwen: Rig, qwen_no_retries: Rig) -> None:
    """Right call or right no-call on CASES, without retries and with the default policy.

    Every reply must be valid protocol whatever the model did (`judge`); the shares are printed.
    """
    started = time.monotonic()
    n0 = len(qwen_no_retries.proxy.exchanges)
    before = run_cases(qwen_no_retries)
    n_before = len(qwen_no_retries.proxy.exchanges) - n0
    n0 = len(qwen.proxy.exchanges)
    after = run_cases(qwen)
    n_after = len(qwen.proxy.exchanges) - n0
    lines = ["", f"success share on {len(CASES)} prompts (Qwen2.5-Coder-0.5B, temperature 0):"]
    for case, b, a in zip(CASES, before, after):
        got = ", ".join(f"{n}({json.dumps(args)})" for n, args in a.calls) or f"text {a.text[:40]!r}"
        lines.append(f"  {'+' if b.right else '-'}{'+' if a.right else '-'}  {case.prompt:<55} {got}")
    share_before = sum(o.right for o in before) / len(CASES)
    share_after = sum(o.right for o in after) / len(CASES)
    lines.append(f"  retries 0: {share_before:.0%}; default retry policy: {share_after:.0%} "
                 f"({n_before} and {n_after} upstream requests, {time.monotonic() - started:.0f} s); "
                 f"without the gateway, a naive prompt: {NAIVE_SHARE:.0%}")
    print("\n".join(lines))
    # The gateway must never be worse than no gateway at all, and the goal is 80% with
    # the retry policy (reached: 83% on this set, see the module docstring).
    assert share_before >= NAIVE_SHARE and share_after >= NAIVE_SHARE
    assert share_after >= GOAL_SHARE, f"{share_after:.0%} is below the {GOAL_SHARE:.0%} goal"


# -- SmolLM2-135M: a model that never calls ----------------------------------------------------


@needs_smollm
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_smollm_required_ends_in_the_documented_error(smollm_unconstrained: Rig, stream: bool) -> None:
    """Without constrained decoding, a model that only chats cannot be made to call."""
    import openai

    smollm = smollm_unconstrained
    client = openai_client(smollm.gateway)
    n0 = len(smollm.proxy.exchanges)
    with pytest.raises(openai.APIError) as caught:
        resp = client.chat.completions.create(
            model="smollm", messages=[{"role": "user", "content": "What's the weather in Paris?"}],
            tools=weather_tools(), tool_choice="required", stream=stream, **SAMPLING,
        )
        if stream:
            for _ in resp:
                pass
    err = caught.value
    # A stream held longer than stream_keepalive_secs (10 s) across the retry has already sent
    # its head and keep-alives (so proxies do not cut it): the error then comes in-band, with
    # the same code and message. Otherwise it is the HTTP 502.
    if isinstance(err, openai.APIStatusError):
        assert err.status_code == 502
    else:
        assert stream, "only a stream can report the error in-band"
    assert err.code == "tool_call_missing", err.body
    assert "did not produce the required tool call (after 1 retries)" in err.message
    # The first attempt and the one retry (the default --max-retries 1), no more.
    assert len(smollm.proxy.exchanges) - n0 == 2
    assert all("grammar" not in e.request for e in smollm.proxy.exchanges[n0:])


def continued(exchange) -> bool:
    """A continuation: the request's last message is the assistant's reply to go on with."""
    messages = exchange.request.get("messages") or [{}]
    return messages[-1].get("role") == "assistant"


def odds_probe(exchange) -> bool:
    """The one-token request for the model's odds of opening with a call
    (`min_call_confidence`), sent before a native request with tools."""
    return exchange.request.get("logprobs") is True and exchange.request.get("max_tokens") == 1


def first_attempts(exchanges: list) -> list:
    """The chat requests that were attempts at a reply (not continuations, not probes)."""
    return [e for e in exchanges
            if e.path.endswith("/chat/completions") and not continued(e) and not odds_probe(e)]


def fits_a_tool(call_name: str, arguments: str, tools: list[dict]) -> dict:
    """The arguments of a call to one of `tools`, checked against its schema: declared keys
    only, the required ones present, strings where strings are declared, enums kept."""
    (tool,) = [t["function"] for t in tools if t["function"]["name"] == call_name]
    args = json.loads(arguments)
    schema = tool["parameters"]
    assert set(args) <= set(schema["properties"]), (call_name, args)
    assert set(schema.get("required", [])) <= set(args), (call_name, args)
    for key, value in args.items():
        declared = schema["properties"][key]
        if declared.get("type") == "string":
            assert isinstance(value, str), (key, value)
        if "enum" in declared:
            assert value in declared["enum"], (key, value)
    return args


@needs_smollm
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_smollm_required_under_the_grammar_calls_a_declared_tool(smollm: Rig, stream: bool) -> None:
    """llama.cpp decodes under the contract's grammar (found by `GET /props`): even a model
    that only chats writes a call that fits a declared tool's schema, on the first attempt."""
    client = openai_client(smollm.gateway)
    n0 = len(smollm.proxy.exchanges)
    resp = client.chat.completions.create(
        model="smollm", messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=weather_tools(), tool_choice="required", stream=stream, **SAMPLING,
    )
    if stream:
        calls: dict[int, dict] = {}
        for chunk in resp:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
        found = list(calls.values())
    else:
        found = [{"name": c.function.name, "arguments": c.function.arguments}
                 for c in resp.choices[0].message.tool_calls or []]
    assert found, "a forced choice under a grammar always calls"
    for call in found:
        fits_a_tool(call["name"], call["arguments"], weather_tools())
    sent = smollm.proxy.exchanges[n0:]
    attempts = first_attempts(sent)
    assert len(attempts) == 1, [a.text for a in sent]
    assert "<tool_call>" in attempts[0].request["grammar"]
    # (A continuation after the call, issue 24, may follow: it is not an attempt.)


@needs_qwen
def test_the_readme_example_is_a_call_on_the_first_attempt(qwen: Rig) -> None:
    """The README's first example as written (one tool, this question): the model's first
    reply is the call. (It used to be empty: the contract showed the tool results' marker,
    the model began its reply with a result it made up, and the marker is a stop sequence.)"""
    tools = [{"type": "function", "function": {"name": "get_weather",
              "description": "The current weather in a city.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}}]
    client = openai_client(qwen.gateway)
    n0 = len(qwen.proxy.exchanges)
    reply = client.chat.completions.create(model="qwen", temperature=0, tools=tools,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    calls = reply.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})], reply
    attempts = first_attempts(qwen.proxy.exchanges[n0:])
    assert len(attempts) == 1, [e.text for e in qwen.proxy.exchanges[n0:]]


@needs_qwen
@pytest.mark.parametrize("rig_name", ["qwen", "qwen_auto"], ids=["emulate", "auto"])
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_question_about_two_cities_gets_both_calls(rig_name: str, stream: bool, request) -> None:
    """The model writes the Paris call and stops; continued from the opening of another call
    it writes the Rome call, which is kept (the user named Rome), and the repeat after it ends
    the reply (issue 24, parallel calls by continuation). Emulated and native alike. (One tool:
    offered the time tool too, this model sometimes goes on with a time call for a zone it
    makes up, which is rightly not kept, depending on what llama-server has cached.)"""
    rig_: Rig = request.getfixturevalue(rig_name)
    captures: list = []
    client = openai_client(rig_.gateway, captures)
    n0 = len(rig_.proxy.exchanges)
    content, calls, finish = openai_turn(
        client, captures, [{"role": "user", "content": "What is the weather in Paris and in Rome?"}], stream,
        tools=[WEATHER_TOOL])
    cities = sorted(json.loads(c["arguments"])["city"].lower() for c in calls)
    sent = rig_.proxy.exchanges[n0:]
    assert [c["name"] for c in calls] == ["get_weather", "get_weather"], \
        (calls, content, [(e.request.get("messages", [{}])[-1], e.text) for e in sent])
    assert cities == ["paris", "rome"], calls
    assert finish == "tool_calls"
    assert len(first_attempts(sent)) == 1, [e.text for e in sent]
    continuations = [e for e in sent if continued(e)]
    assert continuations, "the second call came from a continuation"
    assert "Paris" in continuations[0].request["messages"][-1]["content"]
    # Native (auto): the model's odds were asked for first, unstreamed (llama.cpp's server
    # refuses logprobs on a streamed request with tools), and it was sure of its call.
    probes = [e for e in sent if odds_probe(e)]
    if rig_name == "qwen_auto":
        assert [(p.status, p.request["stream"], bool(p.request.get("tools"))) for p in probes] == [
            (200, False, True)], [(p.status, p.text) for p in probes]
    else:
        assert probes == [], "an emulated request asks for no odds"


@needs_qwen
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_call_the_model_is_unsure_of_gives_way_to_a_plain_answer(qwen_auto: Rig, stream: bool) -> None:
    """Asked "Should I bring an umbrella?" with a weather tool and no city, this model opens
    its reply with a call at odds of about 70% (below `min_call_confidence`, 75%): the
    gateway's one-token probe sees it, and the request goes without its tools (issue 24)."""
    captures: list = []
    client = openai_client(qwen_auto.gateway, captures)
    n0 = len(qwen_auto.proxy.exchanges)
    content, calls, finish = openai_turn(
        client, captures, [{"role": "user", "content": "Should I bring an umbrella?"}], stream)
    sent = qwen_auto.proxy.exchanges[n0:]
    assert calls == [] and content.strip() and finish == "stop", (content, calls, finish)
    assert [odds_probe(e) for e in sent] == [True, False], [(e.request, e.text) for e in sent]
    assert sent[0].status == 200 and sent[0].request.get("tools")
    assert "tools" not in sent[1].request, "the answer is asked for without tools"


ROOTS_TOOL = function(
    "find_roots", "Find the roots of a quadratic equation ax^2 + bx + c = 0.",
    {"a": {"type": "number"}, "b": {"type": "number"}, "c": {"type": "number"}}, ["a", "b", "c"])


@needs_qwen
def test_a_call_with_made_up_numbers_becomes_a_plain_answer(qwen_auto: Rig) -> None:
    """Asked about a linear equation with only a quadratic solver, the model fills a, b and c
    with numbers nobody gave; the call is dropped as a guess and the model answers in words
    (issue 24, over-calls)."""
    client = openai_client(qwen_auto.gateway)
    n0 = len(qwen_auto.proxy.exchanges)
    resp = client.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": "What is the roots of linear equation bx + c = 0?"}],
        tools=[ROOTS_TOOL], **SAMPLING)
    message = resp.choices[0].message
    sent = [e for e in qwen_auto.proxy.exchanges[n0:] if e.path.endswith("/chat/completions")]
    assert not message.tool_calls, (message, [e.text for e in sent])
    assert message.content and resp.choices[0].finish_reason in ("stop", "length"), resp
    assert len(sent) == 2 and "tools" in sent[0].request and "tools" not in sent[1].request, \
        [e.request.keys() for e in sent]


@needs_qwen
@pytest.mark.parametrize("question", [
    "What is 2+2?",
    "Write a haiku about the sea.",
    "What time is it in Tokyo?",
])
def test_a_named_tool_is_called_every_time_in_auto_mode(qwen_auto: Rig, question: str) -> None:
    """The default mode, a forced named tool, questions that do not need it: the call is to
    that tool, with arguments that fit its schema (emulated under the grammar, since the
    engine's native tool calling finds no call in this model's replies)."""
    client = openai_client(qwen_auto.gateway)
    n0 = len(qwen_auto.proxy.exchanges)
    resp = client.chat.completions.create(
        model="qwen", messages=[{"role": "user", "content": question}], tools=weather_tools(),
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, **SAMPLING,
    )
    calls = resp.choices[0].message.tool_calls or []
    assert calls and all(c.function.name == "get_weather" for c in calls), resp
    for call in calls:
        fits_a_tool("get_weather", call.function.arguments, weather_tools())
    sent = qwen_auto.proxy.exchanges[n0:]
    assert len(sent) == 1 and "grammar" in sent[0].request and "tools" not in sent[0].request


@needs_smollm
def test_smollm_auto_returns_its_text_untouched(smollm: Rig) -> None:
    client = openai_client(smollm.gateway)
    n0 = len(smollm.proxy.exchanges)
    resp = client.chat.completions.create(
        model="smollm", messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=weather_tools(), **SAMPLING,
    )
    message = resp.choices[0].message
    assert not message.tool_calls
    attempts = smollm.proxy.exchanges[n0:]
    # The gateway may answer before the proxy has seen the connection close.
    assert attempts and wait_until(lambda: attempts[-1].done, timeout=10)
    assert message.content == attempts[-1].text, (message.content, [a.text for a in attempts])
    assert resp.choices[0].finish_reason == attempts[-1].finish_reason
