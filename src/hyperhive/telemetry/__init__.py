"""Observability: OpenTelemetry traces and Prometheus metrics."""

from __future__ import annotations

from hyperhive.telemetry.config import TelemetryConfig
from hyperhive.telemetry.tracing import (
    configure,
    context_from,
    install,
    traceparent,
    tracer,
    tracing,
    untraced,
)

__all__ = [
    "TelemetryConfig",
    "configure",
    "context_from",
    "install",
    "traceparent",
    "tracer",
    "tracing",
    "untraced",
]
