"""Compaction: a notes-checkpoint turn, then ``/compact``, counted as one.

The harness compacts once a turn leaves the context above hive.toml's
``compact_watermark``, or when a compaction was requested (the ``compact``
tool, the operator). The checkpoint turn asks the agent to write what it must
not forget to its notes; ``/compact`` then summarises the conversation. Both
resume the session back to back in one claude slot, under one span, one turn
record and one ``turn_end`` (``kind="compaction"``). An agent with no session
yet has nothing to compact: the record says ``skipped``.
"""

from __future__ import annotations

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.clauderun import claude_slot, run_turn
from hyperhive.agent.turnend import TurnEnds, run_spend
from hyperhive.agent.turnreport import TurnReport
from hyperhive.agent.turntrace import turn_span
from hyperhive.client import RpcClient
from hyperhive.protocol import TurnEndReq

__all__ = ["CHECKPOINT_PROMPT", "compact"]

CHECKPOINT_PROMPT = (
    "Your context window is nearly full and will be compacted right after this turn. "
    "Write everything you must not forget (open work, decisions, who is waiting on what) "
    "to your durable notes under {state_dir} now, then end the turn."
)


async def compact(
    agent: ActiveAgent, rpc: RpcClient, session_id: str | None, ends: TurnEnds
) -> None:
    """Checkpoint and ``/compact`` ``session_id``; end them as one turn."""
    # One span for the checkpoint, /compact and their turn_end: they are counted as one.
    with turn_span(agent.name, agent.bus, None, agent.spec.model), agent.records.turn(None):
        reports = await _run_compaction(agent, session_id)
        agent.records.finish(reports, outcome=None if reports else "skipped")
        after = reports[-1] if reports else None
        usage = (after.usage.output_tokens / agent.spec.hive.context_window) if after else None
        await ends.send(
            rpc,
            TurnEndReq(
                cmd="turn_end",
                outcome="ok",
                context_usage=usage,
                session_id=session_id,
                spend=run_spend(reports, "compaction") if reports else None,
                seconds=sum(r.seconds for r in reports) if reports else None,
            ),
            reports,
            "compaction",
        )
    agent.bus.set_context_usage(usage)


async def _run_compaction(agent: ActiveAgent, session_id: str | None) -> list[TurnReport]:
    """The notes-checkpoint turn, then ``/compact``: both reports (both are spend)."""
    if session_id is None:
        return []
    async with claude_slot(agent, "compacting"):  # one slot for both: back to back
        checkpoint, _ = await run_turn(
            agent, CHECKPOINT_PROMPT.format(state_dir=agent.state_dir), session_id
        )
        report, _ = await run_turn(agent, "/compact", session_id)
    agent.bus.set_state("idle")
    return [checkpoint, report]
