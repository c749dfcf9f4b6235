"""The flush turn: a graceful stop's last turn, to save what the agent must keep.

An agent the stop finds idle gets one short turn to write what it needs to
its notes (``flush_on_stop`` in its config, on by default), cut by the stop's
grace like any turn: past it, the host kills the activation and, with it,
this claude. Not for an agent that never had a session (nothing in context to
save), nor one the stop kills outright, nor one whose claude cannot start. It
is counted like any turn, and handles no mail: new mail waits for the next start.
"""

from __future__ import annotations

import logging

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.claudecheck import launch_problem_of
from hyperhive.agent.clauderun import claude_slot, run_turn
from hyperhive.agent.session import next_session
from hyperhive.agent.turnend import TurnEnds, run_spend
from hyperhive.agent.turntrace import turn_span
from hyperhive.client import RpcClient
from hyperhive.protocol import TurnEndReq, WaitResult

__all__ = ["FLUSH_PROMPT", "flush", "owes_flush"]

log = logging.getLogger(__name__)

FLUSH_PROMPT = (
    "The hive is stopping you gracefully; this is your last turn before it does. Write "
    "everything you must not forget (open work, decisions, who is waiting on what) to your "
    "durable notes under {state_dir} now, then end the turn. New mail waits for your next "
    "start."
)


def owes_flush(agent: ActiveAgent, session_id: str | None) -> bool:
    """A stop found it idle: a flush turn, unless off, or it has nothing to save."""
    return (
        agent.spec.config.flush_on_stop
        and session_id is not None
        and not agent.lifetime.killed.is_set()
        and launch_problem_of(agent) is None
    )


async def flush(
    agent: ActiveAgent, rpc: RpcClient, session_id: str | None, ends: TurnEnds
) -> str | None:
    """Run the flush turn on ``session_id`` and end it; the session id after it."""
    log.info("%s: graceful stop while idle: its flush turn", agent.name)
    with turn_span(agent.name, agent.bus, None, agent.spec.model, "flush"):
        async with claude_slot(agent, "thinking", flush=True):
            with agent.records.turn(WaitResult(stop=True)):
                prompt = FLUSH_PROMPT.format(state_dir=agent.state_dir)
                report, _ = await run_turn(agent, prompt, session_id)
                agent.records.finish([report])
        session_id = next_session(agent, session_id, report)
        await ends.send(
            rpc,
            TurnEndReq(
                cmd="turn_end",
                outcome=report.outcome,
                context_usage=report.context_usage,
                session_id=session_id,
                spend=run_spend([report], "turn"),
            ),
            [report],
            "turn",
        )
    return session_id
