"""The span of one turn: opened at the wake, closed once the coordinator took its end.

Its attributes say what woke the agent (message ids and senders, a todo
change, a reminder), which model answered, the tokens, the cost and the
outcome (the cost and tokens are the run's own, as spend counted them). MCP
tool calls served while it is open are its children (the surfaces read the
open span from the agent's bus), and the coordinator's
handling of every request made inside it joins the same trace through the
request frame's ``traceparent``. Under the no-op tracer (no ``[telemetry]``)
the span records nothing and :func:`record_turn` returns at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from hyperhive.agent.events import EventsBus
from hyperhive.agent.turnreport import TurnReport
from hyperhive.names import REMINDER
from hyperhive.protocol import ModelSpend, WaitResult
from hyperhive.telemetry import tracer

__all__ = ["HarnessRun", "record_turn", "turn_span", "wake_attributes"]

HarnessRun = Literal["compaction", "flush"]
"""A run the harness starts by itself: no wake behind it."""


def wake_attributes(
    woke: WaitResult | None, run: HarnessRun = "compaction"
) -> dict[str, AttributeValue]:
    """What woke a turn, as span attributes (None: a ``run`` the harness started). Pure."""
    if woke is None:
        return {"hyperhive.wake": run}
    kinds = [k for k, on in (("messages", woke.messages), ("todos", woke.todos_changed)) if on]
    return {
        "hyperhive.wake": "+".join(kinds) or "nothing",
        "hyperhive.wake.message_ids": [m.id for m in woke.messages],
        "hyperhive.wake.senders": sorted({m.sender for m in woke.messages}),
        "hyperhive.wake.reminder": any(m.sender == REMINDER for m in woke.messages),
        "hyperhive.wake.todos_changed": woke.todos_changed,
    }


@contextmanager
def turn_span(
    agent: str,
    bus: EventsBus,
    woke: WaitResult | None,
    model: str | None,
    run: HarnessRun = "compaction",
) -> Iterator[Span]:
    """The current span for a turn (or, ``woke=None``, a ``run`` the harness started)."""
    attributes: dict[str, AttributeValue] = {
        "hyperhive.agent": agent,
        **wake_attributes(woke, run),
    }
    if model is not None:
        attributes["gen_ai.request.model"] = model
    name = f"turn {agent}" if woke is not None else f"{run} {agent}"
    with tracer().start_as_current_span(name, attributes=attributes) as span:
        bus.set_trace_context(trace.set_span_in_context(span))
        try:
            yield span
        finally:
            bus.set_trace_context(None)


def record_turn(reports: Sequence[TurnReport], spent: ModelSpend | None) -> None:
    """Put a counted run's model, tokens, cost and outcome on the current span.

    ``reports`` are its claude runs (a compaction has two); ``spent`` is what
    the coordinator counted them at — the run's own cost and tokens, the
    figures spend and budgets hold (``None``: nothing was counted).
    """
    span = trace.get_current_span()
    if not span.is_recording() or not reports:
        return
    last = reports[-1]
    model = next((r.model for r in reports if r.model), None)
    attributes: dict[str, AttributeValue] = {
        "hyperhive.outcome": last.outcome,
        "hyperhive.model_calls": sum(r.num_turns for r in reports),
        "hyperhive.context_usage": last.context_usage,
    }
    if spent is not None:
        attributes |= {
            "hyperhive.cost_usd": spent.cost_usd,
            "gen_ai.usage.input_tokens": spent.input_tokens,
            "gen_ai.usage.output_tokens": spent.output_tokens,
            "gen_ai.usage.cache_read_input_tokens": spent.cache_read_tokens,
            "gen_ai.usage.cache_creation_input_tokens": spent.cache_creation_tokens,
        }
    if model is not None:
        attributes["gen_ai.response.model"] = model
    session = next((r.session_id for r in reversed(reports) if r.session_id), None)
    if session is not None:
        attributes["hyperhive.session_id"] = session
    span.set_attributes(attributes)
    if last.outcome != "ok":
        span.set_status(Status(StatusCode.ERROR, last.outcome))
