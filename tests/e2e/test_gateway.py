"""The gateway process itself: startup, shutdown, auth, health, metrics, upstream addressing."""

from __future__ import annotations

import re
import signal

import httpx
import openai
import pytest

from support import (
    HTTP_TIMEOUT,
    MODEL,
    SHUTDOWN_TIMEOUT_S,
    UPSTREAM_KEY,
    USER_WEATHER,
    assert_openai_error_body,
    check_chat_stream,
    hermes,
    post_raw,
)

PROM_SAMPLE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})?'
    r" [-+]?([0-9.eE+-]+|NaN|\+Inf|-Inf)( [0-9]+)?$"
)


def test_healthz(gateway):
    r = httpx.get(f"{gateway.root}/healthz", timeout=HTTP_TIMEOUT)
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_metrics_after_a_request(gateway, upstream):
    upstream.script(["hello"])
    assert post_raw(gateway.base_url, {"model": MODEL, "messages": USER_WEATHER}).status == 200
    r = httpx.get(f"{gateway.root}/metrics", timeout=HTTP_TIMEOUT)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    samples = []
    for line in r.text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assert PROM_SAMPLE.match(line), f"not Prometheus text format: {line!r}"
        samples.append(line)
    assert samples, "no metric samples after a completed request"


def test_sigterm_exits_cleanly(gateway_factory):
    gw = gateway_factory()
    assert httpx.get(f"{gw.root}/healthz", timeout=HTTP_TIMEOUT).status_code == 200
    gw.proc.send_signal(signal.SIGTERM)
    code = gw.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
    assert code == 0, f"exit code {code} after SIGTERM; stderr:\n{gw.stderr_text()}"


def test_upstream_gets_the_upstream_key_and_a_streamed_request(gateway, upstream):
    upstream.script(["hi"])
    assert post_raw(gateway.base_url, {"model": MODEL, "messages": USER_WEATHER}).status == 200
    rec = upstream.log[-1]
    assert rec.path.split("?")[0] == "/v1/chat/completions"
    assert rec.headers.get("authorization") == f"Bearer {UPSTREAM_KEY}"
    assert rec.body["stream"] is True
    assert (rec.body.get("stream_options") or {}).get("include_usage") is True


def test_upstream_url_ending_in_v1(gateway_factory, upstream):
    gw = gateway_factory(upstream_url=upstream.base_url_v1)
    upstream.script(["hi"])
    r = post_raw(gw.base_url, {"model": MODEL, "messages": USER_WEATHER})
    assert r.status == 200, r.body
    # The startup probe GETs /v1/models; the request is one POST to the chat endpoint.
    assert [rec.path.split("?")[0] for rec in upstream.log if rec.method == "POST"] == ["/v1/chat/completions"]
    assert {rec.path.split("?")[0] for rec in upstream.log if rec.method == "GET"} <= {"/v1/models"}


def test_upstream_url_with_the_endpoint_path(gateway_factory, upstream):
    gw = gateway_factory(upstream_url=upstream.base_url_v1 + "/chat/completions")
    upstream.script(["hi"])
    r = post_raw(gw.base_url, {"model": MODEL, "messages": USER_WEATHER})
    assert r.status == 200, r.body
    assert [rec.path.split("?")[0] for rec in upstream.log if rec.method == "POST"] == ["/v1/chat/completions"]


@pytest.mark.parametrize("stream", [False, True])
def test_api_keys(gateway_factory, upstream, stream):
    gw = gateway_factory("--api-key", "key-one", "--api-key", "key-two")
    body = {"model": MODEL, "messages": USER_WEATHER, "stream": stream}
    for key in ("", "wrong"):
        r = post_raw(gw.base_url, body, api_key=key)
        assert r.status == 401, f"key {key!r} → {r.status}"
        assert r.headers["content-type"].startswith("application/json")
        assert_openai_error_body(r.json())
    assert upstream.requests == [], "unauthenticated requests must not reach the upstream"
    with openai.OpenAI(
        base_url=gw.base_url,
        api_key="wrong",
        max_retries=0,
        timeout=HTTP_TIMEOUT,
        _strict_response_validation=True,
    ) as c:
        with pytest.raises(openai.AuthenticationError):
            c.chat.completions.create(model=MODEL, messages=USER_WEATHER)
    upstream.script(["one", "two"])
    for key in ("key-one", "key-two"):
        r = post_raw(gw.base_url, body, api_key=key)
        assert r.status == 200, r.body
    assert len(upstream.requests) == 2


@pytest.mark.parametrize("status", [400, 404, 422])
def test_upstream_client_errors_are_not_retried_by_the_sdks(gateway, upstream, status):
    """Issue 14: an upstream 4xx caused by the request keeps its status and message, so the
    official SDKs, with their default retries, ask once (as a 502 they asked three times)."""
    import anthropic

    message = "model 'no-such-model' not found"
    error_body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    upstream.script([{"status": status, "error_body": error_body}])
    with openai.OpenAI(base_url=gateway.base_url, api_key="unused", timeout=HTTP_TIMEOUT) as c:
        with pytest.raises(openai.APIStatusError) as caught:
            c.chat.completions.create(model=MODEL, messages=USER_WEATHER)
    assert caught.value.status_code == status and message in caught.value.message
    assert len(upstream.requests) == 1, "the SDK retried a request the upstream refused"
    upstream.script([{"status": status, "error_body": error_body}])
    root = gateway.base_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key="unused", timeout=HTTP_TIMEOUT) as c:
        with pytest.raises(anthropic.APIStatusError) as caught:
            c.messages.create(model=MODEL, max_tokens=64, messages=USER_WEATHER)
    assert caught.value.status_code == status and message in caught.value.message
    assert len(upstream.requests) == 2, "the SDK retried a request the upstream refused"


def test_no_api_key_means_no_auth(gateway, upstream):
    upstream.script(["ok"])
    r = post_raw(gateway.base_url, {"model": MODEL, "messages": USER_WEATHER}, api_key="")
    assert r.status == 200, r.body


def test_unknown_fields_and_headers_are_accepted(gateway, upstream):
    """Never 400 because of unknown fields or headers."""
    upstream.script([hermes("get_weather", {"city": "Paris"})])
    body = {
        "model": MODEL,
        "messages": USER_WEATHER,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
        "stream": True,
        "metadata": {"a": "b"},
        "store": False,
        "prompt_cache_key": "k",
        "safety_identifier": "s",
        "service_tier": "auto",
        "some_future_field": {"x": 1},
    }
    r = post_raw(gateway.base_url, body, headers={"x-stainless-lang": "python", "OpenAI-Beta": "x"})
    assert r.status == 200, r.body
    s = check_chat_stream(r.body)
    assert [c["name"] for c in s.tool_calls] == ["get_weather"]
