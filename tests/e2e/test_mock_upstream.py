"""Self-tests of the scripted upstream and of the SSE grammar checker. No gateway needed."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from mock_upstream import MockUpstream
from support import HTTP_TIMEOUT, check_chat_stream, parse_sse, wait_until


@pytest.fixture
def up():
    with MockUpstream() as m:
        yield m


@pytest.fixture
def http():
    with httpx.Client(timeout=HTTP_TIMEOUT) as c:
        yield c


def chat(stream: bool = True, include_usage: bool = True, **extra) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream, **extra}
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    return body


def test_base_urls(up):
    assert up.base_url == f"http://127.0.0.1:{up.port}"
    assert up.base_url_v1 == up.base_url + "/v1"
    assert up.port > 0


def test_stream_chunks_role_content_finish_usage_done(up, http):
    up.script([{"text": "Hello, world!", "chunk": 5, "usage": {"prompt_tokens": 3, "completion_tokens": 4}}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    s = check_chat_stream(r.content, include_usage=True)
    deltas = [c["choices"][0]["delta"] for c in s.chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert [d.get("content") for d in deltas[1:-1]] == ["Hello", ", wor", "ld!"]
    assert deltas[-1] == {}
    assert s.content == "Hello, world!"
    assert s.finish_reason == "stop"
    assert s.usage == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert r.text.endswith("data: [DONE]\n\n")
    assert s.chunks[0]["model"] == "m"


def test_stream_without_include_usage_has_no_usage_key(up, http):
    up.script(["abc"])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat(include_usage=False))
    s = check_chat_stream(r.content, include_usage=False)
    assert s.usage is None and s.content == "abc"


def test_usage_none_omits_the_usage_chunk(up, http):
    up.script([{"text": "abc", "usage": None}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    events = [e.data for e in parse_sse(r.content)]
    assert all('"choices": []' not in (d or "") for d in events)


def test_unicode_split_by_characters(up, http):
    text = "18°C, 晴れ ☀️ ok"
    up.script([{"text": text, "chunk": 1, "finish_reason": "length"}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    s = check_chat_stream(r.content, include_usage=True)
    assert s.content == text
    assert s.finish_reason == "length"


def test_non_stream_json_completion(up, http):
    up.script([{"text": "plain answer", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat(stream=False))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "plain answer", "refusal": None}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == 7


def test_script_order_recording_and_exhaustion(up, http):
    up.script(["one", {"text": "two"}])
    assert up.remaining == 2
    for expect in ("one", "two"):
        r = http.post(
            f"{up.base_url}/v1/chat/completions",
            json=chat(),
            headers={"Authorization": "Bearer up-key", "X-Extra": "1"},
        )
        assert check_chat_stream(r.content).content == expect
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    assert r.status_code == 500
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert "exhausted" in r.json()["error"]["message"]
    assert up.exhausted == [2]
    assert len(up.requests) == 3
    assert up.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert up.log[0].headers["authorization"] == "Bearer up-key"
    assert up.log[0].headers["x-extra"] == "1"
    assert [rec.index for rec in up.log] == [0, 1, 2]
    assert "#0 POST /v1/chat/completions" in up.describe()
    up.push("three")
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    assert check_chat_stream(r.content).content == "three"


def test_chunked_request_body_is_read(up, http):
    up.script(["ok"])
    payload = json.dumps(chat()).encode()
    r = http.post(
        f"{up.base_url}/v1/chat/completions",
        content=iter([payload[:10], payload[10:]]),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 200
    assert up.requests[0]["stream"] is True


@pytest.mark.parametrize("status", [400, 429, 500, 503])
def test_error_statuses(up, http, status):
    up.script([{"status": status, "retry_after": 3 if status == 429 else None}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if status == 429:
        assert r.headers["retry-after"] == "3"
        assert err["code"] == "rate_limit_exceeded"


def test_custom_error_body_and_headers(up, http):
    body = {"error": {"message": "nope", "type": "x", "param": None, "code": "y"}}
    up.script([{"status": 418, "error_body": body, "headers": {"x-mock": "1"}}])
    r = http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    assert r.status_code == 418 and r.json() == body and r.headers["x-mock"] == "1"


def test_models_and_unknown_paths(up, http):
    r = http.get(f"{up.base_url}/v1/models")
    assert r.status_code == 200
    assert r.json()["object"] == "list" and r.json()["data"][0]["object"] == "model"
    assert http.post(f"{up.base_url}/v1/completions", json={}).status_code == 404
    assert http.post(f"{up.base_url}/chat/completions", json=chat()).status_code == 404
    assert up.requests == []  # only /v1/chat/completions counts as a chat request
    assert [rec.path for rec in up.log] == ["/v1/models", "/v1/completions", "/chat/completions"]


def test_unknown_reply_key_is_rejected(up):
    with pytest.raises(ValueError, match="unknown reply keys"):
        up.script([{"txt": "typo"}])


def test_disconnect_after_drops_the_body(up, http):
    up.script([{"text": "abcdefghijklmnop", "chunk": 2, "disconnect_after": 3}])
    got = bytearray()
    with pytest.raises(httpx.RemoteProtocolError):
        with http.stream("POST", f"{up.base_url}/v1/chat/completions", json=chat()) as r:
            assert r.status_code == 200
            for part in r.iter_bytes():
                got += part
    events = parse_sse(bytes(got))
    assert len(events) == 3
    assert all(e.data != "[DONE]" for e in events)


def test_pause_then_resume_completes(up, http):
    up.script([{"text": "abcdef", "chunk": 2, "pause_after": 2}])
    seen = []
    with http.stream("POST", f"{up.base_url}/v1/chat/completions", json=chat()) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                seen.append(line)
                if len(seen) == 2:
                    assert not up.resume.is_set()
                    up.resume.set()
    assert seen[-1] == "data: [DONE]"
    assert not up.client_disconnected.is_set()


def test_client_disconnect_while_paused_is_detected(up, http):
    up.script([{"text": "x" * 100, "pause_after": 2, "pause_timeout_s": 10}])
    with http.stream("POST", f"{up.base_url}/v1/chat/completions", json=chat()) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # leaving the block closes the unread response's connection
    assert up.client_disconnected.wait(5), "the mock did not notice the closed connection"
    assert up.disconnected_requests == [0]


def test_client_disconnect_between_slow_chunks_is_detected(up, http):
    up.script([{"text": "y" * 400, "chunk": 1, "chunk_delay_s": 0.02}])
    with http.stream("POST", f"{up.base_url}/v1/chat/completions", json=chat()) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                break
    assert up.client_disconnected.wait(5)


def test_delay_and_wait_for_requests(up, http):
    up.script([{"text": "late", "delay_s": 0.05}])
    result = {}

    def call():
        result["r"] = http.post(f"{up.base_url}/v1/chat/completions", json=chat(stream=False))

    t = threading.Thread(target=call)
    t.start()
    assert up.wait_for_requests(1, timeout=5)
    t.join(timeout=5)
    assert result["r"].json()["choices"][0]["message"]["content"] == "late"
    assert wait_until(lambda: len(up.log) == 1, timeout=1)


def test_reset_forgets_everything(up, http):
    up.script(["a", "b"])
    http.post(f"{up.base_url}/v1/chat/completions", json=chat())
    up.client_disconnected.set()
    up.reset()
    assert up.requests == [] and up.log == [] and up.remaining == 0
    assert not up.client_disconnected.is_set()


# -- the grammar checker itself rejects the known breakages ---------------------


def _sse(*objs) -> bytes:
    return (
        b"".join(b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs)
        + b"data: [DONE]\n\n"
    )


def _c(delta, finish=None, **over):
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    base.update(over)
    return base


def _start(i, cid="call_a", name="get_weather"):
    return {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}


def _args(i, frag):
    return {"index": i, "function": {"arguments": frag}}


GOOD = [
    _c({"role": "assistant", "content": None}),
    _c({"tool_calls": [_start(0)]}),
    _c({"tool_calls": [_args(0, '{"city":')]}),
    _c({"tool_calls": [_args(0, '"Paris"}')]}),
    _c({"tool_calls": [_start(1, "call_b")]}),
    _c({"tool_calls": [_args(1, "{}")]}),
    _c({}, "tool_calls"),
]


def test_checker_accepts_the_reference_stream():
    s = check_chat_stream(_sse(*GOOD), include_usage=False)
    assert [c["name"] for c in s.tool_calls] == ["get_weather", "get_weather"]
    assert s.args(0) == {"city": "Paris"} and s.args(1) == {}
    assert s.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            lambda g: g.__setitem__(2, _c({"role": "assistant", "tool_calls": [_args(0, '{"city":')]})),
            id="role-repeated",
        ),
        pytest.param(
            lambda g: g.__setitem__(2, _c({"tool_calls": [{**_args(0, '{"city":'), "id": "call_a"}]})),
            id="id-repeated",
        ),
        pytest.param(lambda g: g.__setitem__(2, _c({"tool_calls": [{"index": 0}]})), id="no-function"),
        pytest.param(lambda g: g.__setitem__(4, _c({"tool_calls": [_start(2, "call_b")]})), id="index-gap"),
        pytest.param(
            lambda g: g.__setitem__(3, _c({"tool_calls": [_args(0, '"Paris"')]})), id="args-not-json"
        ),
        pytest.param(
            lambda g: g.__setitem__(1, _c({"tool_calls": [_start(0)]}, object="chat.completion")),
            id="wrong-object",
        ),
        pytest.param(
            lambda g: g.__setitem__(1, _c({"tool_calls": [_start(0)]}, id="chatcmpl-2")), id="id-changes"
        ),
        pytest.param(lambda g: g.pop(), id="no-finish"),
        pytest.param(lambda g: g.append(_c({"content": "late"})), id="after-finish"),
        pytest.param(lambda g: g.__setitem__(5, _c({"tool_calls": [_args(0, "")]})), id="interleaved"),
    ],
)
def test_checker_rejects_broken_streams(mutate):
    g = [json.loads(json.dumps(x)) for x in GOOD]
    mutate(g)
    with pytest.raises((AssertionError, ValueError)):
        check_chat_stream(_sse(*g), include_usage=False)


def test_checker_requires_done_last_and_one_data_line():
    body = b"".join(b"data: " + json.dumps(x).encode() + b"\n\n" for x in GOOD)
    with pytest.raises(AssertionError, match="DONE"):
        check_chat_stream(body)
    with pytest.raises(AssertionError, match="one `data:` line"):
        check_chat_stream(b'data: {"a":\ndata: 1}\n\n' + _sse(*GOOD))


def test_checker_in_band_error():
    err = {"error": {"message": "upstream went away", "type": "server_error", "param": None, "code": None}}
    body = _sse(GOOD[0], _c({"content": "hi"}), err)
    with pytest.raises(AssertionError, match="in-band error"):
        check_chat_stream(body)
    s = check_chat_stream(body, allow_error=True)
    assert s.error["message"] == "upstream went away" and s.content == "hi"
