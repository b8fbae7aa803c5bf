"""OpenTelemetry traces (issue 27): `toolshim serve` with `OTEL_EXPORTER_OTLP_ENDPOINT` sends
its spans over OTLP/HTTP in protobuf to a receiver here, which decodes them with the official
OTLP definitions (the `opentelemetry-proto` package). A request that needed a retry is one
trace that continues the client's `traceparent`: its server span with the GenAI conventions'
attributes and toolshim's own, one span per attempt (the second says why it was made), and one
client span per upstream request, whose id the upstream received in its own `traceparent`.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from support import HTTP_TIMEOUT, MODEL, USER_WEATHER, WEATHER_TOOL

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


class Receiver:
    """An OTLP/HTTP traces endpoint on loopback: every export decoded, kept in order."""

    def __init__(self) -> None:
        self.exports: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                export = trace_service_pb2.ExportTraceServiceRequest()
                export.ParseFromString(body)
                with receiver.cond:
                    receiver.exports.append(export)
                    receiver.content_types.append(self.headers.get("content-type", ""))
                    receiver.cond.notify_all()
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[trace_pb2.Span]:
        return [s for e in self.exports for rs in e.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def wait(self, ready, timeout: float = 10.0) -> list[trace_pb2.Span]:
        with self.cond:
            self.cond.wait_for(lambda: ready(self.spans()), timeout=timeout)
            return self.spans()


def attributes(span: trace_pb2.Span) -> dict:
    out = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [v.string_value for v in value.array_value.values]
        else:
            out[kv.key] = getattr(value, kind)
    return out


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


def test_a_retried_request_is_one_trace_continuing_the_clients(gateway_factory, upstream, receiver):
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    upstream.script(["I am not able to look that up.", call])
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "toolshim-e2e"}
    gateway = gateway_factory(env=env)
    client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0, timeout=HTTP_TIMEOUT)
    reply = client.chat.completions.create(
        model=MODEL,
        messages=USER_WEATHER,
        tools=[WEATHER_TOOL],
        tool_choice="required",
        extra_headers={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"},
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"

    def whole(spans) -> bool:
        return any(s.kind == trace_pb2.Span.SPAN_KIND_SERVER for s in spans) and sum(
            s.kind == trace_pb2.Span.SPAN_KIND_CLIENT for s in spans
        ) >= 2

    spans = receiver.wait(whole)
    assert whole(spans), spans
    assert set(receiver.content_types) == {"application/x-protobuf"}
    resource = {kv.key: kv.value.string_value for kv in receiver.exports[0].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "toolshim-e2e"

    # The request: the client's trace, a child of its span.
    (server,) = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
    assert server.trace_id.hex() == TRACE_ID and server.parent_span_id.hex() == CLIENT_SPAN
    assert server.name == f"chat {MODEL}"
    attrs = attributes(server)
    print(f"server span: {attrs}")
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == MODEL
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attrs["http.route"] == "/v1/chat/completions"
    assert attrs["http.response.status_code"] == 200
    assert attrs["toolshim.mode"] == "emulate"
    assert attrs["toolshim.retries"] == 1
    assert len(attrs["toolshim.retry_reasons"]) == 1
    assert attrs["toolshim.calls"] == 1
    assert server.end_time_unix_nano > server.start_time_unix_nano

    # Two attempts under it, the second with its reason; an upstream request under each.
    attempts = sorted(
        (s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_INTERNAL), key=lambda s: s.start_time_unix_nano
    )
    assert [s.name for s in attempts] == ["attempt 1", "attempt 2"]
    assert all(s.parent_span_id == server.span_id and s.trace_id == server.trace_id for s in attempts)
    assert "toolshim.retry_reason" not in attributes(attempts[0])
    assert attributes(attempts[1])["toolshim.retry_reason"] == attrs["toolshim.retry_reasons"][0]
    clients = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_CLIENT]
    assert sorted(s.parent_span_id for s in clients) == sorted(s.span_id for s in attempts)
    for span in clients:
        upstream_attrs = attributes(span)
        assert upstream_attrs["server.address"] == "127.0.0.1"
        assert upstream_attrs["http.response.status_code"] == 200
    # Each upstream request carried its own span as the parent.
    sent = [r.headers.get("traceparent") for r in upstream.log if r.path.endswith("/chat/completions")]
    assert sorted(sent) == sorted(f"00-{TRACE_ID}-{s.span_id.hex()}-01" for s in clients)


def test_a_failed_request_is_an_error_span_and_without_an_endpoint_nothing_is_sent(
    gateway_factory, upstream, receiver
):
    upstream.script([{"status": 400, "error_body": {"error": {"message": "bad things", "type": "invalid_request_error"}}}])
    gateway = gateway_factory(env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces"})
    client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0, timeout=HTTP_TIMEOUT)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=USER_WEATHER)
    spans = receiver.wait(lambda spans: any(s.kind == trace_pb2.Span.SPAN_KIND_SERVER for s in spans))
    (server,) = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
    assert server.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert attributes(server)["error.type"] == "upstream_rejected"
    assert attributes(server)["http.response.status_code"] == 400
    assert len(server.trace_id) == 16 and not server.parent_span_id

    # A gateway without an endpoint exports nothing.
    before = len(receiver.exports)
    upstream.script(["Hello."])
    quiet = gateway_factory()
    openai.OpenAI(base_url=quiet.base_url, api_key="x", max_retries=0).chat.completions.create(
        model=MODEL, messages=USER_WEATHER
    )
    time.sleep(1.5)
    assert len(receiver.exports) == before
