"""A scripted OpenAI-compatible upstream for the gateway's end-to-end tests.

Standard library only. It plays the plain chat model that sits behind the gateway: it knows
nothing about tools, it answers each `POST /v1/chat/completions` with the next scripted reply,
streamed as OpenAI SSE chunks (or as one JSON completion for `stream: false`), and it records
what it was sent.

    up = MockUpstream().start()
    up.script([{"text": '<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>'},
               "Paris is 18°C."])            # a bare string is {"text": ...}
    ... drive the gateway with --upstream up.base_url ...
    up.requests          # parsed JSON bodies, in arrival order
    up.stop()

A reply is a dict with these keys, all optional:

    text              the assistant text to stream ("")
    chunk             characters per content delta (7)
    finish_reason     of the final chunk ("stop")
    usage             {"prompt_tokens", "completion_tokens"[, "total_tokens"]}; sent as the
                      `choices: []` chunk when the request asked for `include_usage` (and in
                      non-streaming replies). Absent: a default usage. None: no usage at all.
    status            HTTP status (200). Non-200 answers with `error_body` as JSON.
    error_body        the JSON body for a non-200 status (an OpenAI error by default)
    retry_after       a `retry-after` header value for the error reply
    headers           extra response headers
    delay_s           seconds to wait before answering
    chunk_delay_s     seconds to wait between SSE events
    pause_after       after this many SSE events, wait until `resume` is set (or the client
                      goes away, or `pause_timeout_s` passes)
    pause_timeout_s   bound on that wait (10)
    disconnect_after  after this many SSE events (the role chunk counts), drop the connection
                      mid-body without the terminating chunk or `[DONE]`
    model             the `model` echoed in chunks (default: the request's model)

While it streams, the mock watches its socket: when the peer closes the connection early (a
failed write, or EOF seen while pausing or between delayed events), `client_disconnected` is
set and the request's index is added to `disconnected_requests`.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MockUpstream", "RecordedRequest", "REPLY_KEYS"]

REPLY_KEYS = frozenset(
    {
        "text",
        "chunk",
        "finish_reason",
        "usage",
        "status",
        "error_body",
        "retry_after",
        "headers",
        "delay_s",
        "chunk_delay_s",
        "pause_after",
        "pause_timeout_s",
        "disconnect_after",
        "model",
    }
)

_DEFAULT_MODEL = "mock-model"
_CHAT_PATH = "/v1/chat/completions"

_STATUS_ERRORS = {
    400: ("Bad request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    404: ("Not found.", "invalid_request_error", None),
    429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
    500: (
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
    ),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


def openai_error(message: str, type_: str = "server_error", code: str | None = None) -> dict:
    """An error body in the OpenAI shape: all four keys present."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@dataclass
class RecordedRequest:
    """One request the mock received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text if it was not JSON, or None for GET
    index: int = -1  # position among chat-completion requests, -1 for others
    received_at: float = field(default_factory=time.monotonic)


def _normalize(reply: Any) -> dict:
    if isinstance(reply, str):
        reply = {"text": reply}
    if not isinstance(reply, dict):
        raise TypeError(f"a scripted reply is a dict or a str, not {type(reply).__name__}")
    unknown = set(reply) - REPLY_KEYS
    if unknown:
        raise ValueError(f"unknown reply keys {sorted(unknown)}; known: {sorted(REPLY_KEYS)}")
    return dict(reply)


class MockUpstream:
    """A scripted, recording OpenAI-compatible chat upstream on 127.0.0.1:0."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._queue: deque[dict] = deque()
        self.requests: list[Any] = []  # bodies of chat-completion requests
        self.log: list[RecordedRequest] = []  # every request, any path
        self.exhausted: list[int] = []  # indices of requests that found the script empty
        self.disconnected_requests: list[int] = []
        self.client_disconnected = threading.Event()
        self.resume = threading.Event()
        self.completion_counter = 0

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> "MockUpstream":
        server = _Server((self._host, 0), _Handler)
        server.mock = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.resume.set()  # release paused handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "MockUpstream":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("MockUpstream is not started")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, without `/v1` (the gateway appends `/v1/chat/completions`)."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url_v1(self) -> str:
        """`http://127.0.0.1:PORT/v1` (the gateway then appends only `/chat/completions`)."""
        return self.base_url + "/v1"

    # -- script ----------------------------------------------------------------------------------

    def script(self, replies: list[Any]) -> "MockUpstream":
        """Replace the queue of replies; each chat request pops the next one."""
        normalized = [_normalize(r) for r in replies]
        with self._cond:
            self._queue = deque(normalized)
        return self

    def push(self, *replies: Any) -> "MockUpstream":
        """Append replies to the queue."""
        normalized = [_normalize(r) for r in replies]
        with self._cond:
            self._queue.extend(normalized)
        return self

    @property
    def remaining(self) -> int:
        with self._cond:
            return len(self._queue)

    def reset(self) -> None:
        """Forget the script, the recorded requests and the events."""
        with self._cond:
            self._queue.clear()
            self.requests.clear()
            self.log.clear()
            self.exhausted.clear()
            self.disconnected_requests.clear()
            self.completion_counter = 0
        self.client_disconnected.clear()
        self.resume.clear()

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        """Block until at least `n` chat requests arrived, or `timeout` passes."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= n, timeout=timeout)

    # -- used by the handler -------------------------------------------------------------------

    def _record(self, rec: RecordedRequest, is_chat: bool) -> dict | None:
        with self._cond:
            self.log.append(rec)
            reply = None
            if is_chat:
                rec.index = len(self.requests)
                self.requests.append(rec.body)
                if self._queue:
                    reply = self._queue.popleft()
                else:
                    self.exhausted.append(rec.index)
            self._cond.notify_all()
            return reply

    def _mark_disconnected(self, index: int) -> None:
        with self._cond:
            self.disconnected_requests.append(index)
        self.client_disconnected.set()

    def _next_id(self) -> str:
        with self._cond:
            self.completion_counter += 1
            n = self.completion_counter
        return f"chatcmpl-mock{n:025d}"

    def describe(self, limit: int = 4000) -> str:
        """A readable dump of what the mock received, for failure reports."""
        lines = []
        for rec in list(self.log):
            body = rec.body if isinstance(rec.body, str) else json.dumps(rec.body, ensure_ascii=False)
            if body and len(body) > limit:
                body = body[:limit] + f"… ({len(body)} chars)"
            lines.append(f"#{rec.index} {rec.method} {rec.path} {body}")
        if self.exhausted:
            lines.append(f"requests that found the script empty: {self.exhausted}")
        return "\n".join(lines) or "(no requests)"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    mock: MockUpstream


class _ClientGone(Exception):
    pass


def _peer_closed(sock: socket.socket) -> bool:
    """True when the peer has closed its side (EOF or reset), without consuming data."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MockUpstream/1"
    timeout = 30  # idle keep-alive connections end after this

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        pass

    # -- plumbing --------------------------------------------------------------------------------

    @property
    def mock(self) -> MockUpstream:
        return self.server.mock

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes, index: int) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError) as err:
            self.close_connection = True
            self.mock._mark_disconnected(index)
            raise _ClientGone from err

    def _wait(self, seconds: float, index: int, until: threading.Event | None = None) -> None:
        """Sleep up to `seconds` (or until `until` is set), watching for the peer to go away."""
        deadline = time.monotonic() + seconds
        while True:
            if _peer_closed(self.connection):
                self.close_connection = True
                self.mock._mark_disconnected(index)
                raise _ClientGone
            if until is not None and until.is_set():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.01, left))

    # -- routes ----------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 (stdlib naming)
        path = self.path.split("?", 1)[0]
        self.mock._record(
            RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None),
            is_chat=False,
        )
        if path in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": _DEFAULT_MODEL,
                            "object": "model",
                            "created": 1700000000,
                            "owned_by": "mock-upstream",
                        }
                    ],
                },
            )
        else:
            self._send_json(404, openai_error(f"mock upstream: no route GET {path}", "invalid_request_error"))

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        raw = self._read_body()
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        is_chat = path == _CHAT_PATH
        rec = RecordedRequest("POST", self.path, headers, body)
        reply = self.mock._record(rec, is_chat=is_chat)
        if not is_chat:
            self._send_json(
                404, openai_error(f"mock upstream: no route POST {path}", "invalid_request_error")
            )
            return
        if not isinstance(body, dict):
            self._send_json(
                400, openai_error("mock upstream: body is not a JSON object", "invalid_request_error")
            )
            return
        if reply is None:
            self._send_json(
                500,
                openai_error(f"mock upstream: script exhausted at request #{rec.index}", "server_error"),
            )
            return
        try:
            self._answer(rec.index, body, reply)
        except _ClientGone:
            pass

    def _answer(self, index: int, body: dict, reply: dict) -> None:
        if reply.get("delay_s"):
            self._wait(float(reply["delay_s"]), index)
        status = int(reply.get("status", 200))
        if status != 200:
            code_msg = _STATUS_ERRORS.get(status, (f"mock upstream error {status}", "server_error", None))
            err = reply.get("error_body") or openai_error(code_msg[0], code_msg[1], code_msg[2])
            extra = dict(reply.get("headers") or {})
            if reply.get("retry_after") is not None:
                extra["retry-after"] = str(reply["retry_after"])
            self._send_json(status, err, extra)
            return

        text = str(reply.get("text", ""))
        finish = reply.get("finish_reason", "stop")
        model = reply.get("model") or body.get("model") or _DEFAULT_MODEL
        usage = self._usage(reply, text)
        cid = self.mock._next_id()
        created = int(time.time())

        if not body.get("stream"):
            self._send_json(
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text, "refusal": None},
                            "logprobs": None,
                            "finish_reason": finish,
                        }
                    ],
                    **({"usage": usage} if usage is not None else {}),
                },
                reply.get("headers"),
            )
            return

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        step = max(1, int(reply.get("chunk", 7)))

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            c = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                c["usage"] = None
            return c

        events: list[str] = [json.dumps(chunk({"role": "assistant", "content": ""}))]
        events += [json.dumps(chunk({"content": text[i : i + step]})) for i in range(0, len(text), step)]
        events.append(json.dumps(chunk({}, finish)))
        if include_usage and usage is not None:
            events.append(
                json.dumps(
                    {
                        "id": cid,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        events.append("[DONE]")

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in (reply.get("headers") or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.flush()
        except OSError as err:
            self.mock._mark_disconnected(index)
            raise _ClientGone from err

        pause_after = reply.get("pause_after")
        disconnect_after = reply.get("disconnect_after")
        chunk_delay = float(reply.get("chunk_delay_s") or 0)
        sent = 0
        for data in events:
            if pause_after is not None and sent == pause_after:
                self._wait(float(reply.get("pause_timeout_s", 10.0)), index, until=self.mock.resume)
            if disconnect_after is not None and sent == disconnect_after:
                self._drop()
                return
            if chunk_delay and sent:
                self._wait(chunk_delay, index)
            self._write_chunk(f"data: {data}\n\n".encode(), index)
            sent += 1
        if pause_after is not None and sent == pause_after:
            self._wait(float(reply.get("pause_timeout_s", 10.0)), index, until=self.mock.resume)
        if disconnect_after is not None and sent <= disconnect_after:
            self._drop()
            return
        self._write_chunk(b"", index)  # the terminating zero-length chunk

    def _drop(self) -> None:
        """End the connection mid-body: no terminating chunk, no `[DONE]`."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @staticmethod
    def _usage(reply: dict, text: str) -> dict | None:
        if "usage" in reply:
            given = reply["usage"]
            if given is None:
                return None
            usage = dict(given)
        else:
            usage = {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4)}
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        return usage
