"""A run's end: the spend report the coordinator counts, and what it was counted at, told.

The harness sends :func:`run_spend` with the run's ``turn_end``
(:class:`TurnEnds`); the coordinator answers what it counted the run at
(:mod:`hyperhive.runcost`), and :func:`tell_turn_end` puts that figure on the
agent's bus, in its log, on the turn's span and in its turn record — the
same figure spend and budgets hold.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Literal

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.turnreport import TurnReport
from hyperhive.agent.turntrace import record_turn
from hyperhive.client import RpcClient
from hyperhive.protocol import ModelSpend, RunSpend, TurnEnded, TurnEndReq
from hyperhive.runcost import summed

__all__ = ["RunKind", "TurnEnds", "run_spend", "tell_turn_end"]

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


class TurnEnds:
    """The ``turn_end`` of each of one agent's turns: sent, then its runs told.

    One the coordinator never answered (the connection was lost) stays owed:
    :meth:`settle` resends it first after reconnecting, so a clean turn's mail
    is acked exactly as if nothing had happened, and its runs are told once
    the coordinator says what they were counted at.
    """

    def __init__(self, agent: ActiveAgent) -> None:
        self.agent = agent
        self._owed: TurnEndReq | None = None
        self._untold: tuple[Sequence[TurnReport], RunKind] = ((), "turn")

    @property
    def owed(self) -> bool:
        """A ``turn_end`` was sent and never answered."""
        return self._owed is not None

    async def send(
        self, rpc: RpcClient, req: TurnEndReq, reports: Sequence[TurnReport], kind: RunKind
    ) -> TurnEnded:
        """Send the turn's end; then tell what its runs were counted at."""
        self._owed, self._untold = req, (reports, kind)
        result = await rpc.call(req)
        self._owed = None
        tell_turn_end(self.agent, reports, result.spend, kind)
        self.agent.snapshots.turn_ended()  # off the turn's path: its mail is acked already
        return result

    async def settle(self, rpc: RpcClient) -> None:
        """Resend the end still owed from before the connection was lost; tell its runs."""
        if self._owed is None:
            return
        ended = await rpc.call(self._owed)
        self._owed = None
        reports, kind = self._untold
        tell_turn_end(self.agent, reports, ended.spend, kind)
