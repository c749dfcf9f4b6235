"""Agents' forge and Matrix identities, administered here with the hive's admin credentials.

Issue #14: hosts hold no hive-wide credential. The forge's admin token and the
homeserver's admin secret are read by the coordinator only (on each use, so a
rotated file is picked up without a restart); an agent's host asks on the
agent's own socket (``agent_api``) and gets back only that agent's own
credential. Who is asking is the socket (for a remote host, the link's
node-authorizer check: the host holding the agent at its incarnation).

One issue at a time per agent: a fresh token replaces the last one on the
forge, so two concurrent asks would leave one of them holding a dead token.

And a few per minute per agent and kind (a token bucket): each ask mints a
token, makes a repository or signs a device in, so a compromised host must
not be able to hammer the forge or the homeserver with the hive's admin
credentials through the agents it holds.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict

import anyio

from hyperhive.errors import ConfigError, LimitExceeded
from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.errors import ForgeNotConfigured
from hyperhive.matrix.config import MatrixConfig
from hyperhive.matrix.errors import MatrixNotConfigured
from hyperhive.protocol import ForgeTokenIssued, MatrixSignedIn, RepoCreated
from hyperhive.ratelimit import RateLimiter

__all__ = ["ASKS_BURST", "ASKS_PER_MINUTE", "AgentIdentities"]

log = logging.getLogger(__name__)

# Per agent and kind of ask: an activation asks once or twice, a host's restart again,
# create_repo once per repository; a burst of this many, then this many a minute.
ASKS_BURST = 4
ASKS_PER_MINUTE = 3.0


class AgentIdentities:
    def __init__(self, forge: ForgeConfig | None, matrix: MatrixConfig | None) -> None:
        self.forge = forge
        self.matrix = matrix
        self._locks: defaultdict[str, anyio.Lock] = defaultdict(anyio.Lock)
        self._asks = RateLimiter(ASKS_BURST, ASKS_PER_MINUTE)

    def _admit(self, agent: str, kind: str, what: str) -> None:
        """Refuse ``agent``'s ask beyond its rate, before anything is minted or made."""
        wait = self._asks.take((agent, kind), time.monotonic())
        if wait > 0:
            log.warning("refused %s for %s: over its rate", what, agent)
            raise LimitExceeded(
                f"{agent} asked for {what} too often: {ASKS_BURST} at once, then "
                f"{ASKS_PER_MINUTE:g} a minute (each ask mints one); try again in "
                f"{math.ceil(wait)} s"
            )

    def problems(self) -> list[str]:
        """What is missing for the coordinator to administer what hive.toml configures."""
        out: list[str] = []
        if self.forge is not None and self.forge.admin_token_file is None:
            out.append(
                "[forge] has no admin_token_file: agents with the forge group get no forge "
                "identity until the coordinator's hive.toml names one"
            )
        if self.matrix is not None:
            try:
                self.matrix.require_credential()
            except ConfigError as exc:
                out.append(exc.message)
        return out

    def _forge_config(self) -> ForgeConfig:
        if self.forge is None:
            raise ForgeNotConfigured(
                "no forge is configured for this hive: the operator sets [forge] url and "
                "admin_token_file in the coordinator's hive.toml (docs/forge.md)"
            )
        return self.forge

    async def forge_token(self, agent: str) -> ForgeTokenIssued:
        """``agent``'s forge user provisioned and a fresh personal token for it."""
        from hyperhive.forge.service import Forge  # pyforgejo: only a hive with a forge pays

        self._admit(agent, "forge_token", "a forge token")
        config = self._forge_config()
        async with self._locks[agent]:
            forge = Forge.from_config(config)
            try:
                token = await forge.provision(agent)
            finally:
                await forge.aclose()
        return ForgeTokenIssued(user=config.username(agent), token=token)

    async def create_repo(
        self, agent: str, name: str, description: str, private: bool
    ) -> RepoCreated:
        """A repository in the hive's org with ``agent`` as its write collaborator."""
        from hyperhive.forge.service import Forge

        self._admit(agent, "forge_create_repo", "a new forge repository")
        forge = Forge.from_config(self._forge_config())
        try:
            return await forge.create_repo(agent, name, description, private)
        finally:
            await forge.aclose()

    async def matrix_account(self, agent: str) -> MatrixSignedIn:
        """``agent``'s Matrix account (made if missing) and a new device's access token."""
        from hyperhive.matrix.admin import MatrixAdmin

        self._admit(agent, "matrix_account", "a Matrix sign-in")
        if self.matrix is None:
            raise MatrixNotConfigured(
                "no homeserver is configured for this hive: the operator sets [matrix] in the "
                "coordinator's hive.toml (docs/matrix.md)"
            )
        async with self._locks[agent]:
            admin = MatrixAdmin(self.matrix)
            try:
                account = await admin.provision(agent)
            finally:
                await admin.aclose()
        return MatrixSignedIn(
            user_id=account.user_id,
            device_id=account.device_id,
            access_token=account.access_token,
            homeserver=account.homeserver,
        )
