"""What one finished run of claude came to: its outcome, usage, cost and context fill.

Pure module: no I/O. :func:`summarize_turn` reads a run's typed events
(:mod:`~hyperhive.agent.stream`) and claude's exit status into a
:class:`TurnReport`, the figure the harness ends the turn with: how it ended
(:func:`classify_outcome`), how full the context now is
(:func:`context_usage`), and the session's totals per model
(:func:`session_totals`), which the coordinator turns into the run's cost.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from hyperhive.agent.stream import AssistantEvent, InitEvent, ResultEvent, StreamEvent, Usage
from hyperhive.runcost import UNKNOWN_MODEL, Figures

__all__ = [
    "TurnOutcome",
    "TurnReport",
    "classify_outcome",
    "context_tokens",
    "context_usage",
    "session_totals",
    "summarize_turn",
]

TurnOutcome = Literal["ok", "error", "api_error", "needs_login", "interrupted"]

# What claude's own error label says when the API refused the credentials.
_AUTH_FAILED = "authentication_failed"
# A wrapper (sandbox, shell) reports a child killed by a signal as 128+N.
_SIGNAL_EXITS = frozenset(128 + s for s in (signal.SIGINT, signal.SIGKILL, signal.SIGTERM))


def _result(events: Iterable[StreamEvent]) -> ResultEvent | None:
    found = None
    for event in events:
        if isinstance(event, ResultEvent):
            found = event
    return found


def session_totals(result: ResultEvent | None) -> dict[str, Figures]:
    """The session's totals per model after the run (empty: the run reported none).

    A result without ``modelUsage`` but with a cost (not seen from 2.1.328)
    is kept as a USD-only total (:data:`~hyperhive.runcost.UNKNOWN_MODEL`).
    """
    if result is None:
        return {}
    if result.model_usage:
        return {model: usage.figures() for model, usage in result.model_usage.items()}
    if result.total_cost_usd > 0:
        return {UNKNOWN_MODEL: Figures(result.total_cost_usd)}
    return {}


def classify_outcome(events: Sequence[StreamEvent], returncode: int | None) -> TurnOutcome:
    """How a finished turn ended.

    A ``result`` event decides it (a signal that arrives after it does not
    undo a finished turn): an authentication failure → ``needs_login``; an
    API error → ``api_error``; ``is_error`` or a non-success subtype →
    ``error``; else ``ok``. Without one, death by signal (negative
    ``returncode``, or 128+INT/KILL/TERM from a wrapper) → ``interrupted``,
    anything else → ``error`` (or ``needs_login`` if claude got as far as
    saying so).
    """
    auth_failed = any(isinstance(e, AssistantEvent) and e.error == _AUTH_FAILED for e in events)
    result = _result(events)
    if result is None:
        if returncode is not None and (returncode < 0 or returncode in _SIGNAL_EXITS):
            return "interrupted"
        return "needs_login" if auth_failed else "error"
    if result.is_error:
        if (
            auth_failed
            or result.api_error_status == 401
            or result.api_error_type == "authentication_error"
        ):
            return "needs_login"
        if result.api_error_status is not None or result.terminal_reason == "api_error":
            return "api_error"
        return "error"
    if result.subtype != "success":
        return "error"
    return "ok"


def context_tokens(usage: Usage) -> int:
    """Tokens of the prompt a call sent: fresh input plus cache reads and writes."""
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def context_usage(usage: Usage, context_window: int) -> float:
    """The fraction of ``context_window`` the prompt of ``usage`` filled."""
    if context_window <= 0:
        raise ValueError(f"context window must be positive, got {context_window}")
    return context_tokens(usage) / context_window


@dataclass(frozen=True, slots=True)
class TurnReport:
    """What the harness records about one finished run of claude.

    ``context_usage`` is measured on the turn's *last model call* (its prompt
    is the conversation as it now stands): ``result.usage`` sums every call
    of the turn, so a turn of five tool calls would read about five times
    too full. It falls back to ``result.usage`` when no model call reported.

    ``session_totals`` is what the session had cost after the run, per model,
    as claude reported it: not the run's cost. The coordinator turns it into
    the run's own (:mod:`hyperhive.runcost`), against the session's previous totals.
    """

    outcome: TurnOutcome
    session_id: str | None
    usage: Usage
    session_totals: dict[str, Figures]
    num_turns: int
    result_text: str | None
    context_tokens: int
    context_window: int
    context_usage: float
    model_context_window: int | None
    model: str | None = None  # the model the session was started with (``system/init``)
    # How long claude ran, by the monotonic clock (the harness sets it; the stream cannot).
    seconds: float = 0.0


def summarize_turn(
    events: Sequence[StreamEvent], returncode: int | None, context_window: int
) -> TurnReport:
    """Outcome, session, usage and context fill of a finished turn.

    ``context_window`` is the caller's figure (``HiveConfig.context_window``):
    the watermark is the operator's budget. The window claude reports for the
    model is kept beside it as ``model_context_window``.
    """
    result = _result(events)
    session_id = result.session_id if result is not None else None
    last_call: Usage | None = None
    model: str | None = None
    for event in events:
        if isinstance(event, InitEvent):
            session_id = session_id or event.session_id
            model = model or event.model
        if isinstance(event, AssistantEvent) and not event.synthetic and event.message.usage:
            last_call = event.message.usage
    usage = result.usage if result is not None else Usage()
    windows = [m.context_window for m in (result.model_usage if result else {}).values()]
    tokens = context_tokens(last_call or usage)
    return TurnReport(
        outcome=classify_outcome(events, returncode),
        session_id=session_id,
        usage=usage,
        session_totals=session_totals(result),
        num_turns=result.num_turns if result is not None else 0,
        result_text=result.result if result is not None else None,
        context_tokens=tokens,
        context_window=context_window,
        context_usage=context_usage(Usage(input_tokens=tokens), context_window),
        model_context_window=max((w for w in windows if w), default=None),
        model=model,
    )
