"""The official `anthropic` SDK against `toolshim serve --mode emulate`, continued: upstream
failures and cancellation, `count_tokens`, the model list, keys and headers (the scenarios
of `test_anthropic_sdk.py`, split for size)."""

from __future__ import annotations

from anthropic_support import *  # noqa: F403
from anthropic_support import _accumulate, _block, _from_message  # noqa: F401

# -- upstream failures and cancellation ------------------------------------------------------------


@MODES
@pytest.mark.parametrize(
    "status,exc,code,error_type",
    [
        (429, anthropic.RateLimitError, 429, "rate_limit_error"),
        (500, anthropic.InternalServerError, 502, "api_error"),
        (503, anthropic.OverloadedError, 529, "overloaded_error"),
    ],
    ids=["429", "500", "503"],
)
def test_upstream_errors_map_to_anthropic_errors(
    anthropic_client, sse_captures, upstream, mode, status, exc, code, error_type
):
    upstream.script([{"status": status, "retry_after": 1}] * 3)
    with pytest.raises(anthropic.APIStatusError) as info:
        turn = run(anthropic_client, sse_captures, mode, tools=TOOLS)
        pytest.fail(f"expected an error, got {turn!r}")
    err = info.value
    assert isinstance(err, exc), f"{type(err).__name__}, expected {exc.__name__}"
    assert err.status_code == code
    assert err.response.headers["content-type"].startswith("application/json"), (
        "errors before the first byte are plain HTTP errors, never an SSE stream (§1.6)"
    )
    assert_anthropic_error_body(err.response.json(), error_type)
    assert err.type == error_type


TEXT_TO_DROP = "The weather today is lovely everywhere, and here is a long answer about it."
DROP_AFTER_TWO_CHUNKS = {
    "text": TEXT_TO_DROP,
    "chunk": 5,
    "pause_after": 3,
    "disconnect_after": 3,
    "pause_timeout_s": 5,
}


@STREAMED
def test_upstream_disconnect_mid_stream_raises_from_the_stream(
    anthropic_client, sse_captures, upstream, mode
):
    upstream.script([dict(DROP_AFTER_TWO_CHUNKS)])
    seen = ""
    kw = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    with pytest.raises(anthropic.APIStatusError) as info:
        if mode == "stream":
            with anthropic_client.messages.stream(**kw) as s:
                for ev in s:
                    if ev.type == "text":
                        seen += ev.text
                        upstream.resume.set()  # streaming began: now let the upstream drop
                s.get_final_message()
        else:
            with anthropic_client.messages.create(stream=True, **kw) as s:
                for ev in s:
                    if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                        seen += ev.delta.text
                        upstream.resume.set()
    assert upstream.resume.is_set(), "the client saw no text before the drop"
    assert seen and TEXT_TO_DROP.startswith(seen)
    assert info.value.type in ERROR_TYPES, info.value.body
    summary = check_anthropic_stream(bytes(sse_captures[-1].body), allow_error=True)
    assert summary.error is not None, "no `event: error` after the upstream dropped"
    assert summary.error["type"] in ERROR_TYPES
    assert summary.text == seen


def _has_text_delta(raw: bytes) -> bool:
    complete = raw[: raw.rfind(b"\n\n") + 2] if b"\n\n" in raw else b""
    for line in complete.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            obj = json.loads(line[5:])
            if obj.get("type") == "content_block_delta" and (obj.get("delta") or {}).get("text"):
                return True
    return False


def test_upstream_disconnect_raw_bytes(gateway, upstream):
    """The same failure over plain httpx: `event: error` ends the stream, nothing follows."""
    upstream.script([dict(DROP_AFTER_TWO_CHUNKS)])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER, "stream": True}
    got = bytearray()
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        with c.stream(
            "POST",
            f"{gateway.root}/v1/messages",
            json=body,
            headers={"x-api-key": "test", "anthropic-version": ANTHROPIC_VERSION},
        ) as r:
            assert r.status_code == 200
            for part in r.iter_bytes():
                got += part
                if not upstream.resume.is_set() and _has_text_delta(bytes(got)):
                    upstream.resume.set()
    assert upstream.resume.is_set(), "the client saw no text before the drop"
    summary = check_anthropic_stream(bytes(got), allow_error=True)
    assert summary.error is not None, "no `event: error` after the upstream dropped"
    assert summary.types[-1] == "error"
    assert b"[DONE]" not in got


def test_client_disconnect_cancels_upstream(anthropic_client, upstream):
    upstream.script([{"text": "word " * 500, "chunk": 5, "chunk_delay_s": 0.02}])
    s = anthropic_client.messages.create(
        model=MODEL, max_tokens=MAX_TOKENS, messages=USER_WEATHER, stream=True
    )
    for ev in s:
        if ev.type == "content_block_delta":
            break
    s.close()
    assert upstream.client_disconnected.wait(5), "the gateway kept the upstream request open"


# -- count_tokens, models, auth, headers ------------------------------------------------------------


COUNT_CASES = {
    "plain": {"messages": USER_WEATHER},
    "tools_and_system": {"messages": USER_WEATHER, "tools": TOOLS, "system": SYSTEM_BLOCKS},
    "history": {
        "tools": TOOLS,
        "system": "Be brief.",
        "messages": USER_WEATHER
        + [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                        "name": "get_weather",
                        "input": PARIS,
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                        "content": "18°C",
                        "is_error": True,
                    }
                ],
            },
        ],
    },
}


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_count_tokens_matches_message_start(anthropic_client, sse_captures, upstream, case):
    kw = COUNT_CASES[case]
    counted = anthropic_client.messages.count_tokens(model=MODEL, **kw)
    assert isinstance(counted.input_tokens, int) and counted.input_tokens > 0
    assert json.loads(bytes(sse_captures[-1].body)) == {"input_tokens": counted.input_tokens}
    upstream.script(["Fine."])
    turn = run(anthropic_client, sse_captures, "events", **kw)
    assert turn.raw is not None and turn.raw.message is not None
    assert turn.raw.message["usage"]["input_tokens"] == counted.input_tokens, (
        "count_tokens must equal message_start's input_tokens for the same request (§3.13)"
    )


def test_count_tokens_grows_with_the_prompt(anthropic_client):
    small = anthropic_client.messages.count_tokens(model=MODEL, messages=USER_WEATHER).input_tokens
    big = anthropic_client.messages.count_tokens(
        model=MODEL, messages=USER_WEATHER, system="You are a meticulous meteorologist. " * 50, tools=TOOLS
    ).input_tokens
    assert 0 < small < big


def test_count_tokens_with_beta_query(gateway):
    body = {"model": MODEL, "messages": USER_WEATHER, "tools": TOOLS}
    a = post_anthropic_raw(gateway.root, body, path="/v1/messages/count_tokens")
    b = post_anthropic_raw(gateway.root, body, path="/v1/messages/count_tokens?beta=true")
    assert a.status == 200 and b.status == 200, (a.body, b.body)
    assert a.json() == b.json()
    assert set(a.json()) == {"input_tokens"}


def test_models_list(anthropic_client):
    page = anthropic_client.models.list()
    assert len(page.data) >= 1
    assert page.has_more is False
    assert page.first_id == page.data[0].id and page.last_id == page.data[-1].id
    for m in page.data:
        assert m.type == "model"
        assert isinstance(m.id, str) and m.id
        assert isinstance(m.display_name, str) and m.display_name
        assert m.lifecycle == "active"
        assert m.created_at is not None
    assert [m.id for m in anthropic_client.models.list()] == [m.id for m in page.data]


def test_models_shape_depends_on_anthropic_version(gateway):
    """§1.2: one path, two list shapes, chosen by the `anthropic-version` header."""
    a = post_anthropic_raw(gateway.root, None, path="/v1/models?limit=1000", method="GET")
    assert a.status == 200, a.body
    body = a.json()
    assert set(("data", "has_more", "first_id", "last_id")) <= set(body), body
    assert body["has_more"] is False
    assert (
        body["data"]
        and body["first_id"] == body["data"][0]["id"]
        and body["last_id"] == body["data"][-1]["id"]
    )
    for m in body["data"]:
        assert m["type"] == "model" and m["lifecycle"] == "active"
        assert isinstance(m["display_name"], str) and isinstance(m["created_at"], str)
        assert "object" not in m

    r = httpx.get(f"{gateway.root}/v1/models", headers={"Authorization": "Bearer test"}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200
    o = r.json()
    assert o.get("object") == "list" and "has_more" not in o, o
    assert all(m.get("object") == "model" for m in o["data"])


def test_anthropic_version_header_is_required(gateway, upstream):
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    r = post_anthropic_raw(gateway.root, body, version=None)
    assert r.status == 400, r.body
    assert r.headers["content-type"].startswith("application/json")
    err = assert_anthropic_error_body(r.json(), "invalid_request_error")
    assert err["message"] == "anthropic-version: header is required"
    assert upstream.requests == []


def test_auth_with_x_api_key_and_bearer(gateway_factory, upstream, monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    gw = gateway_factory("--api-key", "key-one")
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}

    for headers in ({}, {"x-api-key": "wrong"}, {"Authorization": "Bearer wrong"}):
        r = post_anthropic_raw(gw.root, body, api_key=None, headers=headers)
        assert r.status == 401, f"{headers} → {r.status}"
        assert r.headers["content-type"].startswith("application/json")
        assert_anthropic_error_body(r.json(), "authentication_error")
    with strict_client(gw.root, api_key="wrong") as c:
        with pytest.raises(anthropic.AuthenticationError) as info:
            c.messages.create(**body)
        assert info.value.type == "authentication_error"
    assert upstream.requests == [], "unauthenticated requests must not reach the upstream"

    upstream.script(["one", "two"])
    with strict_client(gw.root, api_key="key-one") as c:
        assert c.messages.create(**body).content[0].text == "one"
    with strict_client(gw.root, api_key=None, auth_token="key-one") as c:
        assert c.messages.create(**body).content[0].text == "two"
    assert len(upstream.requests) == 2


def test_messages_with_beta_query_and_unknown_fields(gateway, upstream):
    """§1.1, §1.9, §3.1: `?beta=true`, `anthropic-beta`, Claude Code's extra fields are accepted."""
    upstream.script([hermes("get_weather", PARIS)])
    body = {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM_BLOCKS,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris?", "cache_control": {"type": "ephemeral"}}
                ],
            }
        ],
        "tools": [dict(WEATHER, cache_control={"type": "ephemeral"})],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "user-123"},
        "temperature": 1,
        "thinking": {"type": "disabled"},
        "service_tier": "auto",
        "some_future_field": {"x": 1},
        "stream": True,
    }
    headers = {
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
        "x-app": "cli",
        "X-Claude-Code-Session-Id": "abc",
    }
    r = post_anthropic_raw(gateway.root, body, path="/v1/messages?beta=true", headers=headers)
    assert r.status == 200, r.body
    s = check_anthropic_stream(r.body)
    assert [b["name"] for b in s.tool_uses] == ["get_weather"]
    assert s.tool_uses[0]["input"] == PARIS
    assert_translated_request(upstream.requests[0], tool_names=("get_weather",))


# -- byte-level grammar over plain httpx ------------------------------------------------------------


def _stream_raw(gateway, body: dict) -> AnthropicStreamSummary:
    body = dict(body, stream=True)
    body.setdefault("model", MODEL)
    body.setdefault("max_tokens", MAX_TOKENS)
    body.setdefault("messages", USER_WEATHER)
    r = post_anthropic_raw(gateway.root, body)
    assert r.status == 200, r.body
    assert r.headers["content-type"].startswith("text/event-stream"), r.headers["content-type"]
    assert b"[DONE]" not in r.body
    s = check_anthropic_stream(r.body)
    assert s.message is not None and s.message["model"] == body["model"]
    return s


def test_raw_sse_appendix_b_turn_one(gateway, upstream):
    upstream.script(
        [
            {
                "text": "I'll check the current weather in Paris for you. " + hermes("get_weather", PARIS),
                "chunk": 1,
            }
        ]
    )
    s = _stream_raw(gateway, {"system": SYSTEM_BLOCKS, "tools": [WEATHER], "tool_choice": {"type": "auto"}})
    assert [b["type"] for b in s.content] == ["text", "tool_use"]
    assert s.content[0]["text"].strip() == "I'll check the current weather in Paris for you."
    assert s.tool_uses[0]["name"] == "get_weather" and s.tool_uses[0]["input"] == PARIS
    assert s.stop_reason == "tool_use"
    assert json.loads(s.partial_json[1]) == PARIS
    assert s.types[0] == "message_start" and s.types[1] == "content_block_start" and s.types[2] == "ping"
    assert s.types[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_raw_sse_two_calls(gateway, upstream, chunk):
    upstream.script(
        [{"text": hermes("get_weather", PARIS) + hermes("get_time", {"tz": "Asia/Tokyo"}), "chunk": chunk}]
    )
    s = _stream_raw(gateway, {"tools": TOOLS})
    assert [b["type"] for b in s.content] == ["tool_use", "tool_use"]
    assert [b["input"] for b in s.tool_uses] == [PARIS, {"tz": "Asia/Tokyo"}]
    assert s.tool_uses[0]["id"] != s.tool_uses[1]["id"]
    assert s.stop_reason == "tool_use"


TRICKY = {
    "city": 'São "Paulo"\n\\ <b> 東京 😀',
    "days": 3,
    "options": {"units": ["c", "f"], "note": None, "hourly": True, "offset": -1.5},
}


@pytest.mark.parametrize("chunk", [1, 2, 7])
def test_raw_sse_partial_json_with_tricky_arguments(gateway, upstream, chunk):
    """Every cumulative partial_json is a valid prefix even with escapes, unicode, nesting, numbers."""
    upstream.script([{"text": hermes("get_forecast", TRICKY), "chunk": chunk}])
    # The user gives the number of days: a required number nobody gave is dropped as a guess.
    question = [{"role": "user", "content": "The forecast for the next 3 days, please."}]
    s = _stream_raw(gateway, {"tools": [FORECAST], "messages": question})
    assert [b["name"] for b in s.tool_uses] == ["get_forecast"]
    assert s.tool_uses[0]["input"] == TRICKY
    assert s.stop_reason == "tool_use"


def test_raw_sse_tool_without_arguments(gateway, upstream):
    upstream.script([hermes("ping_server", {})])
    s = _stream_raw(gateway, {"tools": [PING]})
    assert [b["name"] for b in s.tool_uses] == ["ping_server"]
    assert s.tool_uses[0]["input"] == {}
    assert (s.partial_json[0] or "").strip() in ("", "{}"), 'no arguments: no deltas, "" or {} (§3.10)'


def test_raw_sse_appendix_b_turn_two(gateway, upstream):
    upstream.script([{"text": "It's currently 18°C and cloudy in Paris.", "chunk": 4}])
    messages = USER_WEATHER + [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll check the current weather in Paris for you."},
                {
                    "type": "tool_use",
                    "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "name": "get_weather",
                    "input": PARIS,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj",
                    "content": [{"type": "text", "text": "18°C, cloudy"}],
                    "is_error": False,
                }
            ],
        },
    ]
    s = _stream_raw(gateway, {"system": SYSTEM_BLOCKS, "tools": [WEATHER], "messages": messages})
    assert [b["type"] for b in s.content] == ["text"]
    assert s.text == "It's currently 18°C and cloudy in Paris."
    assert s.stop_reason == "end_turn"
    assert "Result of call toolu_01rwFU1BCccKJ6kT7ht5cpmj (get_weather)" in all_text(upstream.requests[0])


def test_raw_sse_text_without_tools(gateway, upstream):
    upstream.script([{"text": "Plain text, no tools here.", "chunk": 2}])
    s = _stream_raw(gateway, {})
    assert s.content == [{"type": "text", "text": "Plain text, no tools here."}]
    assert s.stop_reason == "end_turn"


def test_raw_non_stream_shape(gateway, upstream):
    upstream.script([hermes("get_weather", PARIS)])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER, "tools": TOOLS}
    r = post_anthropic_raw(gateway.root, body)
    assert r.status == 200, r.body
    assert r.headers["content-type"].startswith("application/json")
    obj = check_anthropic_message(r.json())
    assert obj["model"] == MODEL
    assert obj["stop_reason"] == "tool_use"
    assert [b["type"] for b in obj["content"]] == ["tool_use"]
    assert obj["content"][0]["input"] == PARIS


def test_requests_hit_the_upstream_chat_path(gateway, upstream):
    upstream.script(["hi"])
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": USER_WEATHER}
    assert post_anthropic_raw(gateway.root, body).status == 200
    # The gateway's startup probe may GET /v1/models; the request itself is one POST.
    posts = lambda: [rec for rec in upstream.log if rec.method == "POST"]  # noqa: E731
    assert wait_until(lambda: len(posts()) >= 1)
    assert [rec.path.split("?")[0] for rec in posts()] == ["/v1/chat/completions"]


# -- the grammar checker itself (no gateway) -------------------------------------------------------


def _appendix_b() -> list[tuple[str, dict]]:
    msg = {
        "id": "msg_01NJaZGacwhrF7oEsScw2EeJ",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 412,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    tool = {"type": "tool_use", "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj", "name": "get_weather", "input": {}}
    return [
        ("message_start", {"type": "message_start", "message": msg}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "I'll check the current weather"},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": " in Paris for you."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": tool}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": 'ris"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 58},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _sse(events: list[tuple[str | None, dict]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name is not None else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def test_checker_accepts_appendix_b():
    s = check_anthropic_stream(_sse(_appendix_b()))
    assert s.content == [
        {"type": "text", "text": "I'll check the current weather in Paris for you."},
        {"type": "tool_use", "id": "toolu_01rwFU1BCccKJ6kT7ht5cpmj", "name": "get_weather", "input": PARIS},
    ]
    assert s.stop_reason == "tool_use" and s.usage["input_tokens"] == 412 and s.usage["output_tokens"] == 58
    # keep-alive comments are fine too
    assert check_anthropic_stream(b": keepalive\n\n" + _sse(_appendix_b())).content == s.content


def _mutated(i: int, replacement: tuple[str | None, dict] | None) -> list:
    ev = _appendix_b()
    if replacement is None:
        del ev[i]
    else:
        ev[i] = replacement
    return ev


def _delta(index: int, fragment: str) -> tuple[str, dict]:
    return (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": fragment},
        },
    )


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([(None, d) for _, d in _appendix_b()], id="no-event-lines"),
        pytest.param(_mutated(3, ("content_block_start", _appendix_b()[3][1])), id="event-name-mismatch"),
        pytest.param(_mutated(8, _delta(1, '{"city": Pa')), id="bad-json-prefix"),
        pytest.param(_mutated(9, _delta(1, 'ris"}}')), id="json-after-object"),
        pytest.param(_mutated(9, _delta(1, "ris")), id="json-incomplete-at-stop"),
        pytest.param(_mutated(9, _delta(1, 'ris", }')), id="trailing-comma"),
        pytest.param(
            _mutated(
                6,
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 2,
                        "content_block": _appendix_b()[6][1]["content_block"],
                    },
                ),
            ),
            id="index-gap",
        ),
        pytest.param(
            _mutated(
                6,
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 1,
                        "content_block": dict(_appendix_b()[6][1]["content_block"], input=PARIS),
                    },
                ),
            ),
            id="tool-start-input-not-empty",
        ),
        pytest.param(_mutated(5, None), id="block-not-stopped"),
        pytest.param(_mutated(2, None), id="no-ping-after-first-block"),
        pytest.param(_mutated(12, None), id="no-message-stop"),
        pytest.param(_appendix_b() + [("ping", {"type": "ping"})], id="event-after-message-stop"),
        pytest.param(_appendix_b()[1:], id="no-message-start"),
        pytest.param(
            _mutated(
                11,
                (
                    "message_delta",
                    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}},
                ),
            ),
            id="message-delta-without-usage",
        ),
        pytest.param(
            _mutated(
                11,
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
            ),
            id="tool-use-but-end-turn",
        ),
        pytest.param(
            _mutated(
                0,
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": dict(
                            _appendix_b()[0][1]["message"], usage={"input_tokens": 0, "output_tokens": 1}
                        ),
                    },
                ),
            ),
            id="zero-input-tokens",
        ),
        pytest.param(
            _mutated(
                12,
                ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
            id="unexpected-error",
        ),
    ],
)
def test_checker_rejects(events):
    with pytest.raises(AssertionError):
        check_anthropic_stream(_sse(events))


def test_checker_accepts_a_trailing_error_event_when_allowed():
    events = _appendix_b()[:9] + [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    ]
    s = check_anthropic_stream(_sse(events), allow_error=True)
    assert s.error == {"type": "overloaded_error", "message": "Overloaded"}
    with pytest.raises(AssertionError):
        check_anthropic_stream(_sse(events + [("message_stop", {"type": "message_stop"})]), allow_error=True)


@pytest.mark.parametrize(
    "text,ok",
    [
        ('{"a": [1, -2.5e+3, true, null, {"b": "\\u00e9\\n"}]}', True),
        ('{"a": 01}', False),
        ('{"a": 1.}', False),
        ('{"a": "x\ny"}', False),
        ("[1]", False),
        ('{"a": 1} {}', False),
        ('{"a": tru}', False),
    ],
)
def test_json_object_prefix(text, ok):
    checker = JsonObjectPrefix()
    if ok:
        for c in text:
            checker.feed(c)
        assert checker.complete
    else:
        with pytest.raises(ValueError):
            checker.feed(text)
