"""Traces: one span per turn, per MCP tool call, per coordinator request it causes.

With no ``[telemetry] otlp_endpoint`` no SDK provider is installed and every
span is the API's no-op span: nothing is recorded, exported or propagated
(``traceparent()`` is None, so no request frame grows). A process that wants
traces calls :func:`configure` (from ``hive.toml``) or :func:`install` (tests,
with the SDK's in-memory exporter) once.

Context crosses the agent socket as the request frame's optional
``traceparent`` (W3C trace context). The coordinator uses it only to parent its
span: who is asking still comes from the socket alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hyperhive import __version__
from hyperhive.telemetry.config import TelemetryConfig

if TYPE_CHECKING:
    # Only the API is loaded by default: a hive without traces never imports the SDK.
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "configure",
    "context_from",
    "install",
    "traceparent",
    "tracer",
    "tracing",
    "untraced",
]

log = logging.getLogger(__name__)

_NOOP: trace.Tracer = trace.NoOpTracer()
_PROPAGATOR = TraceContextTextMapPropagator()


class _Installed:
    """The process's tracer: the no-op one until a provider is installed."""

    tracer: trace.Tracer = _NOOP


def tracer() -> trace.Tracer:
    """The tracer every span of the hive starts from."""
    return _Installed.tracer


def tracing() -> bool:
    """Whether spans are recorded: a hot path skips building one when they are not."""
    return _Installed.tracer is not _NOOP


def install(provider: TracerProvider | None) -> None:
    """Record spans with ``provider`` from now on (None: back to the no-op tracer).

    Kept apart from OpenTelemetry's global provider (which may be set only
    once per process) so tests can install an in-memory exporter per test.
    """
    _Installed.tracer = _NOOP if provider is None else provider.get_tracer("hyperhive", __version__)


def configure(config: TelemetryConfig, process: str) -> Callable[[], None]:
    """Install an OTLP-exporting provider if ``config`` names an endpoint.

    Returns the shutdown to call on exit (it flushes the spans still queued);
    a no-op when nothing was installed.
    """
    if config.otlp_endpoint is None:
        return lambda: None
    # Imported here: a hive without an endpoint never loads the SDK or the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {
            "service.name": config.service_name,
            "service.version": __version__,
            "hyperhive.process": process,
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.otlp_endpoint)))
    install(provider)
    log.info("traces of %s export to %s", process, config.otlp_endpoint)

    def shutdown() -> None:
        install(None)
        provider.shutdown()

    return shutdown


def traceparent() -> str | None:
    """The current span as a W3C ``traceparent``, or None when no span is recording."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def untraced() -> Iterator[None]:
    """Run outside any trace: requests sent meanwhile carry no ``traceparent``, spans
    started meanwhile begin traces of their own (a long-poll started during a turn is
    no part of that turn's trace, and outlives it)."""
    token = otel_context.attach(Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def context_from(value: str | None) -> Context | None:
    """The remote parent a request frame's ``traceparent`` names (None: a new trace)."""
    if value is None:
        return None
    return _PROPAGATOR.extract({"traceparent": value})
