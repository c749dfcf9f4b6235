"""The span of one subagent run, under the turn of its parent that started it.

Opened when the run's claude starts (after any wait for a claude slot) and
closed when it exits, so it may outlive the parent's turn span, as a
background job's span does. Its parent is the turn span that was open when
``start`` or ``continue`` was called (taken from the agent's bus), not the
tool call's. Attributes (spec 000 names the subagent and its effort):

- ``hyperhive.agent``: the parent agent; ``hyperhive.subagent``: the
  subagent's id; ``hyperhive.subagent.run``: which run of it (``continue``
  makes a new one);
- ``gen_ai.request.model`` and ``hyperhive.subagent.effort``: what its claude
  was started with (``--model``, ``--effort``);
- at the end, as on a turn: ``hyperhive.outcome``, ``hyperhive.exit_code``,
  ``hyperhive.cost_usd``, ``hyperhive.model_calls``, ``gen_ai.usage.*`` and
  ``hyperhive.session_id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from hyperhive.agent.stream import ResultEvent
from hyperhive.telemetry import tracer

__all__ = ["record_run", "subagent_span"]


@contextmanager
def subagent_span(
    agent: str, sid: str, run: int, model: str, effort: str, parent: Context | None
) -> Iterator[Span]:
    attributes: dict[str, AttributeValue] = {
        "hyperhive.agent": agent,
        "hyperhive.subagent": sid,
        "hyperhive.subagent.run": run,
        "gen_ai.request.model": model,
        "hyperhive.subagent.effort": effort,
    }
    with tracer().start_as_current_span(
        f"subagent {agent}/{sid}", context=parent, attributes=attributes
    ) as span:
        yield span


def record_run(
    span: Span,
    outcome: str,
    exit_code: int | None,
    result: ResultEvent | None,
    cost_usd: float | None,
) -> None:
    """Put the run's end (and, if claude got that far, its usage) on ``span``.

    ``cost_usd`` is the run's own cost as the store counted it (``hyperhive.runcost``);
    the result's ``total_cost_usd`` is its session's total so far, not the run's.
    """
    if not span.is_recording():
        return
    attributes: dict[str, AttributeValue] = {"hyperhive.outcome": outcome}
    if exit_code is not None:
        attributes["hyperhive.exit_code"] = exit_code
    if result is not None:
        usage = result.usage
        if cost_usd is not None:
            attributes["hyperhive.cost_usd"] = cost_usd
        attributes |= {
            "hyperhive.model_calls": result.num_turns,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read_input_tokens": usage.cache_read_input_tokens,
            "gen_ai.usage.cache_creation_input_tokens": usage.cache_creation_input_tokens,
        }
        if result.session_id:
            attributes["hyperhive.session_id"] = result.session_id
    span.set_attributes(attributes)
    if outcome != "finished":
        span.set_status(Status(StatusCode.ERROR, outcome))
