"""One agent's Matrix account on its host: provisioned on first need, one client for all.

The watcher's ``/sync`` loop and the agent's tools share one matrix-nio
client, so the tools see the rooms, names and unread counts the last sync
brought. The account file is the record that an identity exists; losing it
only means the agent is signed in again. Making the account and signing it in
need the homeserver's admin credential, so they are the ``issuer``'s: on an
agent host the coordinator, asked on the agent's own socket
(``agent.identities``); the coordinator's own :class:`~.admin.MatrixAdmin` is
one too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from hyperhive.errors import HiveError
from hyperhive.matrix.config import AgentMatrixConfig, MatrixConfig
from hyperhive.matrix.errors import MatrixError, MatrixTokenRejected, MatrixUnreachable
from hyperhive.matrix.identity import (
    Account,
    PendingInvite,
    SyncState,
    read_account,
    read_sync_state,
    write_account,
    write_sync_state,
)
from hyperhive.protocol import MatrixAccountView

if TYPE_CHECKING:
    from nio import AsyncClient

__all__ = ["AgentMatrix", "MatrixIssuer", "nio_call"]


class MatrixIssuer(Protocol):
    """Who makes an agent's account and signs it in (it holds the admin credential)."""

    @property
    def config(self) -> MatrixConfig: ...

    async def provision(self, agent: str) -> Account:
        """``agent``'s account (made if missing) and a new device's access token."""
        ...


log = logging.getLogger(__name__)

# nio retries a failed connection by itself forever unless told otherwise: the watcher
# wants the failure, to back off with jitter and say so in the log.
_MAX_TIMEOUTS = 0


async def nio_call(homeserver: str, doing: str, call: Any) -> Any:
    """Await a nio request; a refused connection becomes ``MatrixUnreachable`` with the URL,
    an error response a ``MatrixError`` naming what was being done."""
    from aiohttp import ClientError
    from nio import ErrorResponse

    try:
        resp = await call
    except (OSError, TimeoutError, ClientError) as exc:
        raise MatrixUnreachable(
            f"the homeserver at {homeserver} is unreachable while {doing} "
            f"({type(exc).__name__}: {exc or 'no answer'})"
        ) from exc
    if isinstance(resp, ErrorResponse):
        if resp.status_code == "M_UNKNOWN_TOKEN":
            raise MatrixTokenRejected(f"the homeserver rejected the access token while {doing}")
        code = f" {resp.status_code}" if resp.status_code else ""
        raise MatrixError(f"the homeserver refused {doing}:{code} {resp.message}")
    return resp


class AgentMatrix:
    def __init__(
        self,
        admin: MatrixIssuer,
        agent: str,
        state_dir: Path,
        config: AgentMatrixConfig,
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.admin = admin
        self.agent = agent
        self.state_dir = state_dir
        self.config = config
        self.owner = owner
        self.problem: str | None = None
        self._client: AsyncClient | None = None
        self._lock = anyio.Lock()
        self._state_lock = anyio.Lock()

    @property
    def user_id(self) -> str:
        return self.admin.config.user_id(self.agent)

    @property
    def homeserver(self) -> str:
        return self.admin.config.homeserver

    @property
    def operator(self) -> str | None:
        return self.admin.config.operator

    async def client(self) -> AsyncClient:
        """The agent's signed-in client, provisioning its account first if it has none."""
        async with self._lock:
            if self._client is not None:
                return self._client
            account = read_account(self.state_dir)
            if account is None or account.homeserver != self.homeserver:
                account = await self.admin.provision(self.agent)
                write_account(self.state_dir, account, self.owner)
            self._client = self._new_client(account)
            self.problem = None
            return self._client

    def _new_client(self, account: Account) -> AsyncClient:
        from nio import AsyncClient, AsyncClientConfig

        client = AsyncClient(
            account.homeserver,
            account.user_id,
            device_id=account.device_id,
            config=AsyncClientConfig(
                max_timeouts=_MAX_TIMEOUTS,
                request_timeout=60,
                encryption_enabled=False,
                store_sync_tokens=False,
            ),
        )
        client.restore_login(account.user_id, account.device_id, account.access_token)
        return client

    async def reissue(self, rejected: AsyncClient) -> None:
        """Sign in afresh after the homeserver rejected the stored token (logged out there)."""
        async with self._lock:
            current = self._client
            if current is None or current is not rejected:
                return  # someone else already did
            log.warning(
                "%s: the homeserver rejected its Matrix token; signing in again", self.agent
            )
            await current.close()
            self._client = None
            account = await self.admin.provision(self.agent)
            write_account(self.state_dir, account, self.owner)
            self._client = self._new_client(account)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # ---- watcher state ------------------------------------------------------------------

    def sync_state(self) -> SyncState:
        return read_sync_state(self.state_dir)

    async def save_sync_state(
        self, since: str, invited: tuple[PendingInvite, ...], settled: set[str]
    ) -> None:
        """Persist the watcher's progress: ``since``, new pending invitations, and rooms whose
        invitation is settled (joined or left) dropped."""
        async with self._state_lock:
            state = read_sync_state(self.state_dir)
            known = {p.room_id for p in state.pending_invites}
            pending = [p for p in state.pending_invites if p.room_id not in settled]
            pending += [p for p in invited if p.room_id not in known]
            write_sync_state(self.state_dir, SyncState(since, tuple(pending)), self.owner)

    def view(self) -> MatrixAccountView:
        """What the operator sees: the account, invitations left pending, what is wrong."""
        problem = self.problem
        pending: tuple[PendingInvite, ...] = ()
        try:
            pending = self.sync_state().pending_invites
        except HiveError as exc:
            problem = exc.message
        return MatrixAccountView(
            user_id=self.user_id,
            homeserver=self.homeserver,
            pending_invites=[f"{p.room_id} from {p.inviter}" for p in pending],
            problem=problem,
        )

    def pending(self) -> tuple[PendingInvite, ...]:
        return self.sync_state().pending_invites

    async def drop_pending(self, room_id: str) -> None:
        """The agent joined or declined ``room_id`` itself: its invitation is no longer pending."""
        async with self._state_lock:
            state = read_sync_state(self.state_dir)
            kept = tuple(p for p in state.pending_invites if p.room_id != room_id)
            if kept != state.pending_invites:
                write_sync_state(self.state_dir, SyncState(state.since, kept), self.owner)
