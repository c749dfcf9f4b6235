"""What the host runs for an active agent beside its harness: tasks, subagents, forge, matrix.

Both live exactly as long as the agent is active on this host, inside the
host's structured concurrency: entered before the turn loop starts, left
(killing their process groups) when it ends or is cancelled. Entering is
also where a restart is noticed: tasks and subagents a previous host left
running are marked ``interrupted`` and reported as todos. An agent with the
``forge`` group gets its forge identity and a notification poller here, and
one with ``[matrix]`` enabled its Matrix account and ``/sync`` watcher. The
identities are the coordinator's to issue (``agent.identities``); the poller and
the watcher stay here, on the agent's host, because they use only the agent's
own token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from hyperhive.agent.activity import CoordinatorActivity
from hyperhive.agent.runtime import AgentRuntime
from hyperhive.agent.spend import CoordinatorSpend
from hyperhive.agent.todos import CoordinatorTodos
from hyperhive.bash.tasks import TaskManager
from hyperhive.errors import HiveError
from hyperhive.forge.notify import NotificationPoller
from hyperhive.matrix.watcher import MatrixWatcher
from hyperhive.permissions import BASH_SERVER
from hyperhive.protocol import WakeReq
from hyperhive.subagent.session import SubagentManager

__all__ = ["SUBAGENT_SUBSYSTEM", "agent_services"]

SUBAGENT_SUBSYSTEM = "subagent"
FORGE_SENDER = "forge"
MATRIX_SENDER = "matrix"

log = logging.getLogger(__name__)


@asynccontextmanager
async def agent_services(rt: AgentRuntime) -> AsyncIterator[None]:
    """Run ``rt``'s task manager, subagent manager and forge poller for the block."""
    # First, so the state dir is made private before anything fills it; off the event
    # loop: useradd, chown and setfacl must not stall the host's other agents.
    await anyio.to_thread.run_sync(rt.prepare_dirs)
    iso = rt.isolation
    if iso is not None and iso.uid is not None and iso.gid is not None:
        # Its token files become the agent user's.
        if rt.forge is not None:
            rt.forge.owner = (iso.uid, iso.gid)
        if rt.matrix is not None:
            rt.matrix.owner = (iso.uid, iso.gid)
    bash_todos = CoordinatorTodos(rt, BASH_SERVER)
    subagent_todos = CoordinatorTodos(rt, SUBAGENT_SUBSYSTEM)
    async with (
        TaskManager(
            rt.sandbox, rt.state_dir, bash_todos, activity=CoordinatorActivity(rt, "bash")
        ) as tasks,
        SubagentManager(
            rt,
            subagent_todos,
            CoordinatorSpend(rt),
            activity=CoordinatorActivity(rt, "subagent"),
            trace_context=lambda: rt.bus.trace_context,
        ) as subagents,
    ):
        rt.bash_tasks, rt.subagents = tasks, subagents
        rt.services_up.set()
        try:
            # Only now: a recovered todo wakes a turn whose status call must find them.
            await tasks.report_recovered()
            await subagents.report_recovered()
            async with anyio.create_task_group() as tg:
                if rt.forge is not None:
                    tg.start_soon(_forge, rt)
                if rt.matrix is not None:
                    tg.start_soon(_matrix, rt)
                yield
                tg.cancel_scope.cancel()
        finally:
            rt.bash_tasks = rt.subagents = None
            if rt.matrix is not None:
                with anyio.CancelScope(shield=True):
                    await rt.matrix.aclose()


async def _forge(rt: AgentRuntime) -> None:
    """Provision the agent's forge identity, then wake it for each forge notification."""
    forge, hive_forge = rt.forge, rt.hive.forge
    assert forge is not None and hive_forge is not None
    try:
        await forge.token()
    except HiveError as exc:  # the poller retries with backoff; create_repo retries too
        log.warning("%s: forge identity not provisioned yet: %s", rt.name, exc.message)

    async def deliver(body: str, key: str) -> None:
        await rt.call(WakeReq(cmd="wake", sender=FORGE_SENDER, body=body, key=key))

    poller = NotificationPoller(
        forge, deliver, interval=hive_forge.poll_seconds, backoff_max=hive_forge.poll_backoff_max
    )
    await poller.run()


async def _matrix(rt: AgentRuntime) -> None:
    """Watch the agent's Matrix account (provisioned on the first sync) and wake it."""
    matrix, hive_matrix = rt.matrix, rt.hive.matrix
    assert matrix is not None and hive_matrix is not None

    async def deliver(body: str, key: str) -> None:
        await rt.call(WakeReq(cmd="wake", sender=MATRIX_SENDER, body=body, key=key))

    watcher = MatrixWatcher(
        matrix,
        deliver,
        timeout=hive_matrix.sync_timeout_seconds,
        backoff_max=hive_matrix.backoff_max,
    )
    await watcher.run()
