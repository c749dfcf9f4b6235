"""A run's end: the spend report the coordinator counts, and what it was counted at, told.

The harness sends :func:`run_spend` with the run's ``turn_end``; the
coordinator answers what it counted the run at (:mod:`hyperhive.runcost`),
and :func:`tell_turn_end` puts that figure on the agent's bus, in its log,
on the turn's span and in its turn record — the same figure spend and budgets hold.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Literal

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.turnreport import TurnReport
from hyperhive.agent.turntrace import record_turn
from hyperhive.protocol import ModelSpend, RunSpend
from hyperhive.runcost import summed

__all__ = ["RunKind", "run_spend", "tell_turn_end"]

RunKind = Literal["turn", "compaction"]


def run_spend(reports: Sequence[TurnReport], kind: RunKind) -> RunSpend:
    """What these runs of one session reported about their cost, under a fresh run id.

    The session's totals after the last run that reported any: the coordinator
    counts their difference to the session's previous totals, so the runs of a
    compaction (the checkpoint, then ``/compact``, both resuming one session)
    are counted together. The id is made once, before the first send: a
    resent ``turn_end`` carries the same one, so the coordinator counts the run once.
    """
    last = next((r for r in reversed(reports) if r.session_totals), None)
    return RunSpend(
        run_id=uuid.uuid4().hex,
        kind=kind,
        session_id=last.session_id if last is not None else None,
        session_totals=(
            {m: ModelSpend.of(f) for m, f in last.session_totals.items()} if last else {}
        ),
    )


def tell_turn_end(
    agent: ActiveAgent,
    reports: Sequence[TurnReport],
    spent: ModelSpend | None,
    kind: RunKind,
) -> None:
    """A run counted: its figures to the bus, the agent log and the open span.

    ``spent`` is what the coordinator counted the run at (a compaction's runs
    together); ``None`` when it counted nothing (no run to count).
    """
    if not reports:
        return
    last = reports[-1]
    calls = sum(r.num_turns for r in reports)
    agent.records.counted(spent)  # first: a reader woken by turn_end finds the cost
    agent.bus.turn_ended(
        {
            "outcome": last.outcome,
            "cost_usd": spent.cost_usd if spent is not None else None,
            "num_turns": calls,
            "context_usage": last.context_usage,
        }
    )
    reported = next((r.session_totals for r in reversed(reports) if r.session_totals), None)
    if spent is None:
        cost = "cost not counted"
    elif reported is None:
        cost = f"${spent.cost_usd:.4f} (claude reported no cost)"
    else:
        cost = f"${spent.cost_usd:.4f} (session so far ${summed(reported.values()).usd:.4f})"
    what = "compaction end (checkpoint and /compact)" if kind == "compaction" else "turn end"
    AgentLog(agent.spec.log_file).line(
        f"{what}: {last.outcome}, {calls} model call(s), {cost}, context {last.context_usage:.0%}"
    )
    record_turn(reports, spent)
