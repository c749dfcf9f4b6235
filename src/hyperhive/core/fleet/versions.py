"""Which hyperhive and claude each agent runs, against what its host runs now.

A host reports an agent's versions when it starts it, and with each heartbeat
its own versions and the agents it runs that started on others (a claude
upgraded in place under them, say): the host holds both, so no report can
race another. The store keeps each agent's versions at its last start; an
outdated agent is marked ``needs_update`` once, with what changed, and its
manager gets the ``needs_update`` event. The agent's next start records the
new versions and clears the mark (and the manager's todo for it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio

from hyperhive.core.mail.notices import Notices
from hyperhive.core.state.loose_ends import LooseEnds
from hyperhive.protocol import NeedsUpdate, Versions
from hyperhive.store.base import AgentRepo

__all__ = ["AgentVersions", "behind"]

log = logging.getLogger(__name__)


def behind(started: Versions, host: Versions) -> str:
    """What ``host`` runs that an agent ``started`` with differs in ("" if nothing). Pure."""
    return ", ".join(
        f"{what} {old or 'unknown'} → {new or 'unknown'}"
        for what, old, new in (
            ("hyperhive", started.hive, host.hive),
            ("claude", started.claude, host.claude),
        )
        if old != new
    )


class AgentVersions:
    """Records agents' versions at start; marks and tells of those their host outran."""

    def __init__(self, agents: AgentRepo, notices: Notices, loose_ends: LooseEnds) -> None:
        self._agents = agents
        self._notices = notices
        self._loose_ends = loose_ends
        # The agents marked already (loaded on first use): a heartbeat writes nothing for them.
        self._marked: set[str] | None = None
        self._lock = anyio.Lock()

    async def _load(self) -> set[str]:
        if self._marked is None:
            self._marked = {r.name for r in await self._agents.all() if r.needs_update}
        return self._marked

    async def started(self, agent: str, versions: Versions) -> None:
        """``agent`` started running ``versions``: recorded, its mark cleared."""
        async with self._lock:
            marked = await self._load()
            was = await self._agents.record_started(agent, versions.hive, versions.claude)
            marked.discard(agent)
        submitter = self._notices.submitter_of(agent)
        if was is not None and submitter is not None:
            await self._loose_ends.todo_clear(submitter, "core", NeedsUpdate(agent=agent).key)

    async def outdated(self, host: str, versions: Versions, agents: Mapping[str, Versions]) -> None:
        """``host`` runs ``versions``; ``agents`` (it holds them) started on those others."""
        news = []
        async with self._lock:
            marked = await self._load()
            for agent, started in sorted(agents.items()):
                what = behind(started, versions)
                if agent in marked or not what:
                    continue
                marked.add(agent)
                if await self._agents.mark_needs_update(agent, what):
                    news.append((agent, what))
        for agent, what in news:
            log.info("%s needs a restart: its host %s now runs %s", agent, host, what)
            await self._notices.notify_submitter(agent, NeedsUpdate(agent=agent, behind=what))
