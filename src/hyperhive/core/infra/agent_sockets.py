"""One socket per agent: its identity. Opened at start and on spawn, closed on destroy."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from hyperhive.config import HiveConfig, HivePaths
from hyperhive.core.infra.background import Background
from hyperhive.core.infra.sockets import Dispatch, Listeners
from hyperhive.protocol import AgentRequest
from hyperhive.sysusers import ensure_user

__all__ = ["AgentSockets"]


class AgentSockets:
    def __init__(
        self,
        paths: HivePaths,
        config: HiveConfig,
        background: Background,
        api_for: Callable[[str], Dispatch],
    ) -> None:
        self.paths = paths
        self.config = config
        self.background = background
        self.api_for = api_for
        self._listeners: Listeners | None = None

    def _live(self) -> Listeners:
        if self._listeners is None:
            self._listeners = Listeners(self.background.group)
        return self._listeners

    async def open(self, name: str) -> None:
        """``run/agents/<name>.sock``; under bubblewrap it belongs to the agent's user."""
        owner = None
        if self.config.runtime == "bwrap":
            # useradd on a worker thread: a new agent must not stall every other socket.
            owner = await anyio.to_thread.run_sync(ensure_user, self.paths, name)
        await self._live().add(
            name,
            self.paths.agent_sock(name),
            AgentRequest,
            self.api_for(name),
            self.config.max_frame_bytes,
            owner=owner,
        )

    def close(self, name: str) -> None:
        if self._listeners is not None:
            self._listeners.remove(name)

    def reset(self) -> None:
        """The lifespan ended: its listeners went with its task group."""
        self._listeners = None
