"""One agent's forge on its host: its identity, provisioned on first need, and its repos.

Provisioned when the agent is activated with the ``forge`` group (at spawn,
or the first activation after the group is granted), and again on the next
``create_repo`` if the forge was unreachable then. The token file is the
record that an identity exists; losing it only means a fresh token is issued.

Whatever needs the admin token is the ``issuer``'s: on an agent host that is
the coordinator, asked on the agent's own socket (``agent.identities``), so
the host holds this agent's token and nothing hive-wide; the coordinator's
own :class:`~hyperhive.forge.service.Forge` is an issuer too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import anyio

from hyperhive.forge.client import ForgeApi
from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.identity import read_token, write_token
from hyperhive.protocol import RepoCreated

__all__ = ["AgentForge", "ForgeIssuer"]


class ForgeIssuer(Protocol):
    """Who does an agent's forge administration (it holds the admin token)."""

    @property
    def config(self) -> ForgeConfig: ...

    async def provision(self, agent: str) -> str:
        """``agent``'s user made (or taken back) and a fresh token for it."""
        ...

    async def create_repo(
        self, agent: str, name: str, description: str, private: bool
    ) -> RepoCreated: ...

    def as_agent(self, token: str) -> ForgeApi:
        """A client acting as the agent's user with its own ``token``."""
        ...


log = logging.getLogger(__name__)


class AgentForge:
    def __init__(
        self, forge: ForgeIssuer, agent: str, state_dir: Path, owner: tuple[int, int] | None
    ) -> None:
        self.forge = forge
        self.agent = agent
        self.state_dir = state_dir
        self.owner = owner
        self._lock = anyio.Lock()

    @property
    def username(self) -> str:
        return self.forge.config.username(self.agent)

    async def token(self) -> str:
        """The agent's personal token, provisioning its user first if it has none."""
        async with self._lock:
            token = read_token(self.state_dir)
            if token is None:
                token = await self.forge.provision(self.agent)
                write_token(self.state_dir, token, self.owner)
            return token

    async def reissue(self, rejected: str) -> str:
        """A fresh token after the forge rejected ``rejected`` (revoked or expired there).

        Only if the stored token is still the rejected one: two callers that
        both saw the rejection provision once.
        """
        async with self._lock:
            token = read_token(self.state_dir)
            if token is None or token == rejected:
                log.warning("%s: the forge rejected its token; issuing a new one", self.agent)
                token = await self.forge.provision(self.agent)
                write_token(self.state_dir, token, self.owner)
            return token

    def as_agent(self, token: str) -> ForgeApi:
        return self.forge.as_agent(token)

    async def create_repo(self, name: str, description: str, private: bool) -> RepoCreated:
        await self.token()  # a collaborator must exist before it is added
        return await self.forge.create_repo(self.agent, name, description, private)
