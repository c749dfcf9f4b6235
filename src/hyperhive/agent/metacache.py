"""The agent's own ``get_agent_meta`` answer, kept on its host between changes.

Every part of the meta is either fixed for an activation (name, hive name,
revision, Matrix account: a change of any of them is a new activation, hence
a new runtime and an empty cache) or pushed to the host when it changes: the
parent by ``place``, the status by ``meta_changed``, ``running`` by
``deactivate`` (a stopping agent asks the coordinator again). So the answer
can be kept until one of those pushes :meth:`MetaCache.forget` it.

Only the agent's own meta is kept: another agent's status or place is not
pushed to this host. Its rendering for the model is kept beside it: rendering
(JSON by alias, indented) costs more than the rest of a cached call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hyperhive.wirebase import AgentMeta

__all__ = ["MetaCache"]


class MetaCache:
    def __init__(self) -> None:
        self._meta: AgentMeta | None = None
        self._text: tuple[AgentMeta, str] | None = None
        # Bumped by every forget: an answer fetched across one is already stale.
        self._generation = 0

    def forget(self) -> None:
        self._meta = None
        self._text = None
        self._generation += 1

    async def get(self, fetch: Callable[[], Awaitable[AgentMeta]]) -> AgentMeta:
        """The kept answer, or ``fetch``'s (kept unless a change arrived meanwhile)."""
        if self._meta is not None:
            return self._meta
        generation = self._generation
        meta = await fetch()
        if generation == self._generation:
            self._meta = meta
        return meta

    def rendered(self, meta: AgentMeta, render: Callable[[AgentMeta], str]) -> str:
        """``render(meta)``, kept while ``meta`` is the answer kept."""
        if self._text is None or self._text[0] is not meta:
            self._text = (meta, render(meta))
        return self._text[1]
