"""An agent whose claude cannot be started takes no turns until it can.

Retrying such a turn cannot help (``bwrap: execvp claude`` fails at once, a
minute apart, with the operator told nothing): like ``needs login``, the agent
says why and what to do — on its stream, to the coordinator (``hivectl agents
list``, the console of ``hivectl up``, the dashboard) — and holds its mail
until the claude it is given can be started, then carries on by itself.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio

from hyperhive.agent.active import ActiveAgent
from hyperhive.agentreach import agent_users, claude_problem

__all__ = ["RECHECK_SECONDS", "hold_while_claude_unrunnable", "launch_problem_of"]

log = logging.getLogger(__name__)

# A few stat calls per check: cheap enough to repeat until the operator fixes the install.
RECHECK_SECONDS = 2.0


def launch_problem_of(agent: ActiveAgent) -> str | None:
    """Why ``agent``'s claude cannot be started in its sandbox now, with the remedy."""
    hive, paths = agent.spec.hive, agent.spec.paths
    claude = hive.claude_bin or "claude"
    if "/" not in claude:
        return (
            f"claude was not found on this host (claude_bin = {claude!r}): install it with "
            f"`hivectl --home {paths.home} install-claude`, or set claude_bin in hive.toml"
        )
    problem = claude_problem(Path(claude), paths.home, agent_users=agent_users(hive.runtime))
    return problem.text if problem is not None else None


async def hold_while_claude_unrunnable(agent: ActiveAgent) -> bool:
    """Wait while ``agent``'s claude cannot be started: True once it can, False if stopped."""
    problem = launch_problem_of(agent)
    stopping, bus = agent.lifetime.stopping, agent.bus
    if problem is None:
        return True
    log.warning("%s: cannot run claude; no turns until that is fixed: %s", agent.name, problem)
    bus.set_state("idle")
    bus.set_launch_problem(problem)
    try:
        while problem is not None and not stopping.is_set():
            with anyio.move_on_after(RECHECK_SECONDS):
                await stopping.wait()
            problem = launch_problem_of(agent)
            if problem is not None:
                bus.set_launch_problem(problem)  # a changed reason is said again
    finally:
        bus.set_launch_problem(None)
    if stopping.is_set():
        return False
    log.info("%s: claude can be started again; taking turns", agent.name)
    return True
