"""An agent's connection to the coordinator, over its own socket (identity = the socket).

The harness holds the connection while it is up (:meth:`AgentConnection.held`);
every other caller (a tool call, a todo, a forge identity) goes through
:meth:`AgentConnection.call`, which uses it, or a one-off connection to the same
socket while it is down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from hyperhive.client import RpcClient, call_once
from hyperhive.errors import HiveError
from hyperhive.protocol import FenceReq, Req

__all__ = ["CALL_TIMEOUT", "AgentConnection"]

R = TypeVar("R")
# A one-off call that gets no answer in this long is reported as the coordinator being away.
CALL_TIMEOUT = 30.0


class AgentConnection:
    """The agent's side of its socket: the harness's connection, or a one-off."""

    __slots__ = ("_rpc", "socket")

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._rpc: RpcClient | None = None

    @property
    def up(self) -> bool:
        """Whether the harness holds its connection (it attached, or is attaching)."""
        return self._rpc is not None

    @contextmanager
    def held(self, rpc: RpcClient) -> Iterator[RpcClient]:
        """The harness's connection, used by every call for the block."""
        self._rpc = rpc
        try:
            yield rpc
        finally:
            if self._rpc is rpc:
                self._rpc = None

    async def call(self, request: Req[R], within: float = CALL_TIMEOUT) -> R:
        """Forward ``request`` to the coordinator on this agent's socket.

        The harness's connection is used while it is up. While it is down — the
        host just started, or the coordinator restarted in the middle of a turn
        and the harness reconnects only once the turn is over — a one-off
        connection to the same socket: a tool call must not fail, or a todo
        retry for minutes, on a connection that is known to be dead.
        """
        rpc = self._rpc
        if rpc is not None and not rpc.closed:
            return await rpc.call(request)
        return await call_once(self.socket, request, within)

    async def fence(self) -> bool:
        """Fence the agent's inbox on the harness's connection (a graceful stop): its
        turn finishes, its loop then ends. ``False``: no connection, or it failed."""
        rpc = self._rpc
        if rpc is None:
            return False
        try:
            await rpc.call(FenceReq(cmd="fence"))
        except HiveError:
            return False
        return True
