"""Trace context across a real unix socket, the no-op default, and OTLP export."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hyperhive import telemetry
from hyperhive.client import connect
from hyperhive.config import load_hive_config
from hyperhive.core.infra.sockets import serve_unix
from hyperhive.errors import ConfigError, MalformedFrame
from hyperhive.protocol import AgentRequest, SendReq, Sent
from hyperhive.telemetry import TelemetryConfig
from tests.support.spans import named

pytestmark = pytest.mark.anyio


async def _served(tmp_path: Path, seen: list[Any], task_status: Any) -> None:
    async def dispatch(request: Any) -> Sent:
        seen.append(request)
        return Sent(id=len(seen), to=request.to)

    await serve_unix(
        tmp_path / "alice.sock",
        AgentRequest,
        dispatch,
        1 << 20,
        identity="alice",
        task_status=task_status,
    )


async def test_a_traced_call_carries_its_span_and_the_server_span_is_its_child(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    seen: list[Any] = []
    async with anyio.create_task_group() as tg:
        await tg.start(_served, tmp_path, seen)
        async with connect(tmp_path / "alice.sock") as rpc:
            with telemetry.tracer().start_as_current_span("tool hyperhive.send") as tool:
                await rpc.call(SendReq(cmd="send", to="bob", body="hi"))
            await rpc.call(SendReq(cmd="send", to="bob", body="untraced"))
        tg.cancel_scope.cancel()
    ctx = tool.get_span_context()
    flags = int(ctx.trace_flags)
    assert seen[0].traceparent == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{flags:02x}"
    assert seen[1].traceparent is None
    (server,) = named(spans, "coordinator send")
    assert server.kind is SpanKind.SERVER
    assert server.parent is not None and server.parent.span_id == ctx.span_id
    assert server.context.trace_id == ctx.trace_id
    assert dict(server.attributes or {}) == {"hyperhive.cmd": "send", "hyperhive.caller": "alice"}


async def test_with_no_provider_nothing_is_recorded_or_sent(tmp_path: Path) -> None:
    seen: list[Any] = []
    async with anyio.create_task_group() as tg:
        await tg.start(_served, tmp_path, seen)
        async with connect(tmp_path / "alice.sock") as rpc:
            with telemetry.tracer().start_as_current_span("turn alice") as span:
                assert not span.is_recording()
                assert telemetry.traceparent() is None
                await rpc.call(SendReq(cmd="send", to="bob", body="hi"))
        tg.cancel_scope.cancel()
    assert seen[0].traceparent is None


async def test_a_malformed_traceparent_is_refused_naming_the_field(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(_served, tmp_path, [])
        async with connect(tmp_path / "alice.sock") as rpc:
            with pytest.raises(MalformedFrame, match="traceparent"):
                await rpc.call_json(
                    {"cmd": "send", "to": "bob", "body": "x", "traceparent": "00-nope"}
                )
        tg.cancel_scope.cancel()


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length", "0"))
        type(self).bodies.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def otlp_receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    bodies: list[tuple[str, bytes]] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_an_otlp_endpoint_gets_the_spans_on_shutdown(
    otlp_receiver: tuple[str, list[tuple[str, bytes]]],
) -> None:
    url, bodies = otlp_receiver
    stop = telemetry.configure(TelemetryConfig(otlp_endpoint=url), "coordinator")
    try:
        with telemetry.tracer().start_as_current_span("turn alice"):
            assert telemetry.traceparent() is not None
    finally:
        stop()
    assert telemetry.traceparent() is None  # the no-op tracer is back
    (path, body) = bodies[0]
    assert path == "/v1/traces"
    export = ExportTraceServiceRequest.FromString(body)
    (resource,) = export.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "hyperhive" and service["hyperhive.process"] == "coordinator"
    names = [s.name for scope in resource.scope_spans for s in scope.spans]
    assert names == ["turn alice"]


def test_no_endpoint_installs_nothing() -> None:
    stop = telemetry.configure(TelemetryConfig(), "agent-host")
    with telemetry.tracer().start_as_current_span("turn alice") as span:
        assert not span.is_recording()
    stop()


def test_hive_toml_refuses_an_endpoint_that_is_not_a_url(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text('[telemetry]\notlp_endpoint = "localhost:4318"\n')
    with pytest.raises(ConfigError, match="otlp_endpoint must be an http"):
        load_hive_config(tmp_path, {})
    (tmp_path / "hive.toml").write_text(
        '[telemetry]\notlp_endpoint = "http://127.0.0.1:4318/v1/traces"\n'
    )
    hive = load_hive_config(tmp_path, {})
    assert hive.telemetry.otlp_endpoint == "http://127.0.0.1:4318/v1/traces"
