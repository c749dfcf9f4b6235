"""What the host runs for an active agent beside its harness: bash tasks and subagents.

Both live exactly as long as the agent is active on this host, inside the
host's structured concurrency: entered before the turn loop starts, left
(killing their process groups) when it ends or is cancelled. Entering is
also where a restart is noticed: tasks and subagents a previous host left
running are marked ``interrupted`` and reported as todos.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from hyperhive.agent.runtime import AgentRuntime
from hyperhive.agent.todos import CoordinatorTodos
from hyperhive.bash.tasks import TaskManager
from hyperhive.permissions import BASH_SERVER
from hyperhive.subagent.session import SubagentManager

__all__ = ["SUBAGENT_SUBSYSTEM", "agent_services"]

SUBAGENT_SUBSYSTEM = "subagent"


@asynccontextmanager
async def agent_services(rt: AgentRuntime) -> AsyncIterator[None]:
    """Run ``rt``'s task manager and subagent manager for the block."""
    rt.prepare_dirs()  # first, so the state dir is made private before anything fills it
    bash_todos = CoordinatorTodos(rt, BASH_SERVER)
    subagent_todos = CoordinatorTodos(rt, SUBAGENT_SUBSYSTEM)
    async with (
        TaskManager(rt.sandbox(), rt.state_dir, bash_todos) as tasks,
        SubagentManager(rt, subagent_todos) as subagents,
    ):
        rt.bash_tasks, rt.subagents = tasks, subagents
        try:
            yield
        finally:
            rt.bash_tasks = rt.subagents = None
