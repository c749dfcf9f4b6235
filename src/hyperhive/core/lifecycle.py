"""Agent lifecycle: create, apply, kill/start/restart/update/destroy, crash watch.

Who may act on whom is the topology's target table (``may_manage``,
``may_destroy``), checked here for agents and skipped for the operator.
Every apply is a commit in the meta repo, followed by a reconcile of the
tree and a rebuild of the agent. A crashed agent is restarted with backoff
(its unacked mail redelivers to the new incarnation) and the submitting
agent hears about it; the root manager just restarts.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hyperhive import topology
from hyperhive.config import AgentConfig, dump_agent_config
from hyperhive.errors import Conflict, PermissionDenied
from hyperhive.forge.service import revoke_agent
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import ContainerCrash, Destroyed, Killed, Rebuilt

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["CRASH_BACKOFF", "Lifecycle", "tail_lines"]

log = logging.getLogger(__name__)

CRASH_BACKOFF = (2.0, 4.0, 8.0, 16.0, 32.0, 60.0)
CRASH_WINDOW = 300.0  # crashes older than this no longer lengthen the backoff


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a file, read from the end (logs can be large)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            block = min(size, max(4096, lines * 200))
            fh.seek(size - block)
            data = fh.read()
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", "replace").splitlines()
    return text[-lines:]


class Lifecycle:
    def __init__(self, coord: Coordinator) -> None:
        self.c = coord
        self._crashes: dict[str, deque[float]] = {}
        # The last crash reason of agents not running again yet (for views).
        self.crash_reasons: dict[str, str] = {}

    # ---- rules ----------------------------------------------------------------------

    def check_manage(self, actor: str | None, verb: str, target: str) -> None:
        """``None`` is the operator, who may act on anyone."""
        self.c.require_agent(target)
        if actor is None:
            return
        topo = self.c.topology()
        if verb == "destroy":
            if target == actor:
                raise PermissionDenied("an agent cannot destroy itself (self)")
            if topology.is_descendant_of(topo, actor, target):
                raise PermissionDenied(
                    f"{target} is your ancestor; it cannot be destroyed by you (an ancestor)"
                )
        if not topology.may_manage(topo, actor, target):
            raise PermissionDenied(
                f"{verb} {target}: {target} is not your descendant (not a descendant)"
            )

    # ---- applying configs ---------------------------------------------------------------

    async def create(
        self, name: str, config: AgentConfig, parent: str | None, message: str
    ) -> str | None:
        """A new agent (or a re-init): proposed repo, applied config, tree edge, activation."""
        existed = self.c.registry.exists(name)
        await anyio.to_thread.run_sync(
            self.c.meta.seed_proposed, name, dump_agent_config(config), message
        )
        self.c.registry.write(name, config)
        self.c.registry.agent_dir_ready(name)
        topo = topology.reconcile(self.c.topology(), self.c.registry.known())
        if not existed:
            topo[name] = parent
        self.c.topology_store.write(topo)
        commit = await anyio.to_thread.run_sync(self.c.meta.commit_meta, message)
        await self.c.store.agents.ensure([name])
        await self.c.open_agent_socket(name)
        self.c.bus.emit("topology", child=name, parent=topo.get(name))
        await self.rebuild(name)
        return commit

    async def apply(self, name: str, config: AgentConfig, message: str) -> str | None:
        """Apply a new config to an existing agent: commit, reconcile, rebuild."""
        self.c.registry.write(name, config)
        self.c.reconcile()
        commit = await anyio.to_thread.run_sync(self.c.meta.commit_meta, message)
        await self.rebuild(name)
        return commit

    async def rebuild(self, name: str) -> None:
        """Stop (gracefully) and start again with the applied config, if it should run."""
        if self.c.hostlink.running(name):
            await self.c.hostlink.deactivate(name, graceful=True)
        if await self._desired(name) and self.c.hostlink.hosts:
            await self.c.activate(name)

    # ---- verbs ------------------------------------------------------------------------

    async def act(self, actor: str | None, verb: str, target: str) -> dict[str, Any]:
        self.check_manage(actor, verb, target)
        if verb == "kill":
            await self._set_desired(target, False)
            stopped = await self.c.hostlink.deactivate(target, graceful=True)
            await self.c.notify_submitter(target, Killed(agent=target))
            return {"agent": target, "stopped": stopped}
        if verb == "start":
            await self._set_desired(target, True)
            if not self.c.hostlink.running(target) and self.c.hostlink.hosts:
                await self.c.activate(target)
            return {"agent": target, "running": self.c.hostlink.running(target)}
        if verb in ("restart", "update"):
            await self._set_desired(target, True)
            await self.rebuild(target)
            if verb == "update":
                await self.c.notify_submitter(target, Rebuilt(agent=target))
            return {"agent": target, "running": self.c.hostlink.running(target)}
        if verb == "destroy":
            return await self.destroy(target)
        raise Conflict(f"unknown lifecycle verb {verb!r}")

    async def destroy(self, name: str) -> dict[str, Any]:
        kids = topology.children(self.c.topology(), name)
        if kids:
            raise Conflict(
                f"{name} still has children ({', '.join(kids)}); destroy or reparent them first"
            )
        submitter = self.c.submitter_of(name)
        applied = self.c.registry.configs.get(name)
        await self.c.hostlink.deactivate(name, graceful=False)
        self.c.close_agent_socket(name)
        self.c.registry.remove(name)
        self.c.reconcile()
        await anyio.to_thread.run_sync(self.c.meta.commit_meta, f"destroy {name}")
        trash: Path | None = self.c.paths.home / "agents" / ".trash" / f"{name}-{int(time.time())}"
        src = self.c.paths.agent_dir(name)
        if src.exists() and trash is not None:
            trash.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            await anyio.to_thread.run_sync(shutil.move, str(src), str(trash))
        else:
            trash = None
        await self.c.store.agents.delete(name)
        self.c.on_destroyed(name)
        if applied is not None and ToolGroup.FORGE in applied.tool_groups:
            problem = await revoke_agent(self.c.config.forge, name)
            if problem is not None:
                log.error("destroying %s: its forge identity: %s", name, problem)
        if submitter is not None:
            await self.c.notify_agent(submitter, Destroyed(agent=name))
        self.c.bus.emit("topology", child=name, parent=None, destroyed=True)
        return {"agent": name, "destroyed": True, "data_moved_to": str(trash) if trash else None}

    # ---- crash watch --------------------------------------------------------------------

    async def crashed(self, agent: str, reason: str) -> None:
        """Restart with backoff; tell the submitting agent (the root manager just restarts)."""
        now = time.time()
        self.crash_reasons[agent] = reason
        history = self._crashes.setdefault(agent, deque(maxlen=len(CRASH_BACKOFF)))
        while history and now - history[0] > CRASH_WINDOW:
            history.popleft()
        history.append(now)
        delay = CRASH_BACKOFF[len(history) - 1]
        log.error("agent %s crashed (%s); restarting in %.0fs", agent, reason, delay)
        await self.c.notify_submitter(agent, ContainerCrash(agent=agent, reason=reason))
        self.c.bus.emit("agent", agent=agent, running=False, crashed=True, reason=reason)
        self.c.spawn_task(self._restart_later, agent, delay)

    async def _restart_later(self, agent: str, delay: float) -> None:
        await anyio.sleep(delay)
        if (
            self.c.registry.exists(agent)
            and await self._desired(agent)
            and not self.c.hostlink.running(agent)
            and self.c.hostlink.hosts
        ):
            await self.c.activate(agent)

    # ---- desired state ------------------------------------------------------------------

    async def _desired(self, name: str) -> bool:
        return (await self.c.store.agents.get(name)).desired_running

    async def _set_desired(self, name: str, running: bool) -> None:
        await self.c.store.agents.set_desired(name, running)
