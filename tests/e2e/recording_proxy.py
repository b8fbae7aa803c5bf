"""A pass-through proxy in front of a real upstream that records what went through it.

Standard library only. The local-model tests put it between `toolshim serve` and the llama.cpp
server, so that they can compare what the client got with what the model really wrote; the
Codex test puts it between Codex and the gateway, to see what Codex sends:

    proxy = RecordingProxy("http://127.0.0.1:PORT").start()   # the real upstream's root
    ... --upstream proxy.base_url ...
    proxy.exchanges     # one Exchange per POST: the JSON request and the model's text
    proxy.stop()

Streamed answers are relayed event by event as they arrive, so the gateway sees the model's
real timing.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

UPSTREAM_TIMEOUT_S = 600.0


@dataclass
class Exchange:
    """One proxied POST."""

    path: str
    request: dict[str, Any]
    # The request's headers, names in lower case.
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    # The assistant text the upstream produced (content deltas joined, or the message).
    text: str = ""
    finish_reason: str | None = None
    done: bool = False
    # The client closed the connection before the upstream's reply was all relayed (the
    # gateway stops reading a stream it no longer needs): the exchange ended there.
    hung_up: bool = False


@dataclass
class RecordingProxy:
    upstream: str
    exchanges: list[Exchange] = field(default_factory=list)

    def start(self) -> "RecordingProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, body: bytes | None) -> None:
                exchange = None
                if body is not None:
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    exchange = Exchange(path=self.path, request=json.loads(body or b"{}"), headers=headers)
                    proxy.exchanges.append(exchange)
                # The key goes on (a gateway with keys checks it); other headers stay here.
                forwarded = {"content-type": "application/json"}
                if self.headers.get("authorization"):
                    forwarded["authorization"] = self.headers["authorization"]
                req = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=body,
                    method="POST" if body is not None else "GET",
                    headers=forwarded,
                )
                try:
                    resp = urllib.request.urlopen(req, timeout=UPSTREAM_TIMEOUT_S)
                except urllib.error.HTTPError as err:
                    resp = err
                try:
                    with resp:
                        if exchange is not None:
                            exchange.status = resp.status
                        self.send_response(resp.status)
                        kind = resp.headers.get("content-type") or "application/json"
                        self.send_header("content-type", kind)
                        self.send_header("connection", "close")
                        self.end_headers()
                        if "text/event-stream" in kind:
                            for line in iter(resp.readline, b""):
                                self.wfile.write(line)
                                self.wfile.flush()
                                if exchange is not None:
                                    _record_event(exchange, line)
                        else:
                            data = resp.read()
                            self.wfile.write(data)
                            if exchange is not None:
                                _record_message(exchange, data)
                except (BrokenPipeError, ConnectionResetError):
                    # A client hangup ends the exchange; it is not the proxy's failure.
                    if exchange is not None:
                        exchange.hung_up = True
                if exchange is not None:
                    exchange.done = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, what `toolshim serve --upstream` is given."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _record_event(exchange: Exchange, line: bytes) -> None:
    text = line.decode("utf-8", "replace").strip()
    if not text.startswith("data:"):
        return
    data = text[5:].strip()
    if data == "[DONE]":
        return
    try:
        chunk = json.loads(data)
    except ValueError:
        return
    for choice in chunk.get("choices") or []:
        exchange.text += (choice.get("delta") or {}).get("content") or ""
        if choice.get("finish_reason"):
            exchange.finish_reason = choice["finish_reason"]


def _record_message(exchange: Exchange, data: bytes) -> None:
    try:
        body = json.loads(data)
    except ValueError:
        return
    for choice in body.get("choices") or []:
        exchange.text += (choice.get("message") or {}).get("content") or ""
        exchange.finish_reason = choice.get("finish_reason")
