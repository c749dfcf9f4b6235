"""An agent's forge and Matrix credentials, asked of the coordinator on the agent's socket.

Issue #14: the host holds no hive-wide credential. What needs the forge's
admin token or the homeserver's admin secret (making the agent's user or
account, issuing its token, creating a repository it gets write access to) is
done by the coordinator; the host asks on the agent's own socket, so it can
ask only for that agent (and a remote host only while it holds the agent at
its incarnation), and gets back only that agent's own credential, which it
keeps in the agent's state as before (0600, the agent's user).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import httpx

from hyperhive.forge.client import ForgeApi
from hyperhive.forge.config import ForgeConfig
from hyperhive.matrix.config import MatrixConfig
from hyperhive.matrix.identity import Account
from hyperhive.protocol import (
    CreateRepoReq,
    ForgeTokenReq,
    MatrixAccountReq,
    RepoCreated,
    Req,
)

__all__ = ["ISSUE_TIMEOUT", "CoordinatorForge", "CoordinatorMatrix", "IssuedTo"]

R = TypeVar("R")

# Provisioning is several calls from the coordinator to the forge or homeserver, each
# bounded by their clients' own timeouts (15 s); this bounds the whole ask.
ISSUE_TIMEOUT = 120.0


class IssuedTo(Protocol):
    """The agent an identity is issued to, as it asks on its own socket (its site)."""

    @property
    def name(self) -> str: ...

    async def call(self, request: Req[R], within: float = ...) -> R: ...


class CoordinatorForge:
    """:class:`~hyperhive.forge.agent.ForgeIssuer` for one agent: the coordinator does it."""

    def __init__(
        self,
        rt: IssuedTo,
        config: ForgeConfig,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.rt = rt
        self.config = config
        self._transport = transport

    def _check(self, agent: str) -> None:
        # The socket decides who is asking; a mismatch here is a bug, not an attack.
        if agent != self.rt.name:
            raise ValueError(f"{self.rt.name}'s forge cannot act for {agent}")

    async def provision(self, agent: str) -> str:
        self._check(agent)
        issued = await self.rt.call(ForgeTokenReq(cmd="forge_token"), within=ISSUE_TIMEOUT)
        return issued.token

    async def create_repo(
        self, agent: str, name: str, description: str, private: bool
    ) -> RepoCreated:
        self._check(agent)
        return await self.rt.call(
            CreateRepoReq(
                cmd="forge_create_repo", name=name, description=description, private=private
            ),
            within=ISSUE_TIMEOUT,
        )

    def as_agent(self, token: str) -> ForgeApi:
        return ForgeApi(self.config.url, token, whose="agent's", transport=self._transport)


class CoordinatorMatrix:
    """:class:`~hyperhive.matrix.agent.MatrixIssuer` for one agent: the coordinator does it."""

    def __init__(self, rt: IssuedTo, config: MatrixConfig) -> None:
        self.rt = rt
        self.config = config

    async def provision(self, agent: str) -> Account:
        if agent != self.rt.name:
            raise ValueError(f"{self.rt.name}'s Matrix account cannot act for {agent}")
        signed = await self.rt.call(MatrixAccountReq(cmd="matrix_account"), within=ISSUE_TIMEOUT)
        return Account(
            user_id=signed.user_id,
            device_id=signed.device_id,
            access_token=signed.access_token,
            # This host's URL of the homeserver: it may reach it by another route.
            homeserver=self.config.homeserver,
        )
