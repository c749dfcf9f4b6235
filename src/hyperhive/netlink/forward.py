"""A remote host serves each agent's socket itself and forwards its frames over the link.

Inside the sandbox nothing changes (spec 002: identity = socket): the agent's
harness, MCP surfaces and in-sandbox producers talk to ``<run>/agents/<name>.sock``
as before. Each frame goes to the coordinator as ``forward`` tagged with the
agent and the incarnation this host was activated with; the coordinator
decides whether this host may speak for that agent, and the agent's own
response comes back verbatim (its id, its error codes).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hyperhive.client import RpcClient
from hyperhive.errors import HiveError, MalformedFrame, Unavailable
from hyperhive.framing import FrameDecoder
from hyperhive.protocol import (
    LinkAbandonReq,
    LinkForwardReq,
    Response,
    encode,
    error_response,
)
from hyperhive.unixsock import UnixStream, serve_unix_streams

__all__ = ["ForwardedSockets"]

log = logging.getLogger(__name__)

# In-flight frames per agent connection; beyond it the reader waits (backpressure).
MAX_IN_FLIGHT = 32
# How long a reopen waits for the closed server of the same socket to finish.
CLOSE_WITHIN = 10.0


class ForwardedSockets:
    """The agents' sockets this host serves, each forwarding over the current link."""

    def __init__(self, link: Callable[[], RpcClient | None], max_frame: int) -> None:
        self._link = link
        self._max_frame = max_frame
        self._scopes: dict[str, anyio.CancelScope] = {}
        # Set once a closed socket's server has finished (its file removed): a reopen of
        # the same path waits for it, or that cleanup could remove the new socket's file.
        self._ended: dict[str, anyio.Event] = {}
        self._conn_ids = itertools.count(1)
        self.incarnations: dict[str, int] = {}

    async def open(
        self,
        tg: TaskGroup,
        agent: str,
        path: Path,
        incarnation: int,
        owner: tuple[int, int] | None,
    ) -> None:
        """Serve ``path`` for ``agent`` (or, if served already, just take the new incarnation)."""
        self.incarnations[agent] = incarnation
        if agent in self._scopes:
            return
        previous = self._ended.get(agent)
        if previous is not None:
            with anyio.move_on_after(CLOSE_WITHIN):
                await previous.wait()
            if agent in self._scopes:  # opened by another activation meanwhile
                return
        scope = anyio.CancelScope()
        self._scopes[agent] = scope
        ended = self._ended[agent] = anyio.Event()

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await serve_unix_streams(
                        path,
                        lambda stream: self._connection(agent, stream),
                        owner=owner,
                        task_status=task_status,
                    )
            finally:
                ended.set()
                if self._ended.get(agent) is ended:
                    del self._ended[agent]

        await tg.start(run)

    def close(self, agent: str) -> None:
        scope = self._scopes.pop(agent, None)
        self.incarnations.pop(agent, None)
        if scope is not None:
            scope.cancel()

    async def _connection(self, agent: str, stream: UnixStream) -> None:
        cid = next(self._conn_ids)
        try:
            await self._serve(agent, cid, stream)
        finally:
            # Whatever it had in flight at the coordinator goes with it (a long-poll there
            # must not take mail for a reader that is gone).
            link = self._link()
            if link is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    try:
                        await link.call(LinkAbandonReq(cmd="abandon", agent=agent, conn=cid))
                    except HiveError as exc:
                        log.debug("could not abandon %s's frames: %s", agent, exc)

    async def _serve(self, agent: str, cid: int, stream: UnixStream) -> None:
        lock = anyio.Lock()
        decoder = FrameDecoder(self._max_frame)
        slots = anyio.Semaphore(MAX_IN_FLIGHT)

        async def reply(response: Response) -> None:
            async with lock:
                try:
                    await stream.send(encode(response))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the agent's process went away; its answer has nowhere to go

        async def one(frame: bytes) -> None:
            try:
                await reply(await self._forward(agent, cid, frame))
            finally:
                slots.release()

        async with stream, anyio.create_task_group() as tg:
            while True:
                try:
                    chunk = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    break
                for frame in decoder.feed(chunk):
                    if isinstance(frame, HiveError):
                        await reply(error_response(None, frame))
                        continue
                    await slots.acquire()
                    tg.start_soon(one, frame)
            tg.cancel_scope.cancel()  # the agent's process is gone: abandon its long-polls

    async def _forward(self, agent: str, cid: int, frame: bytes) -> Response:
        try:
            data = json.loads(frame)
        except ValueError:
            return error_response(None, MalformedFrame("frame is not valid JSON"))
        if not isinstance(data, dict):
            return error_response(None, MalformedFrame("frame must be a JSON object"))
        rid = data.get("id")
        rid = rid if isinstance(rid, int | str) else None
        link = self._link()
        incarnation = self.incarnations.get(agent)
        if link is None or incarnation is None:
            return error_response(
                rid,
                Unavailable(
                    "this agent's host has no link to the coordinator right now "
                    "(it reconnects by itself); retry shortly"
                ),
            )
        try:
            return await link.call(
                LinkForwardReq(
                    cmd="forward", agent=agent, incarnation=incarnation, frame=data, conn=cid
                )
            )
        except HiveError as exc:
            if not isinstance(exc, Unavailable):
                log.warning("the coordinator refused %s's frame: %s", agent, exc.message)
            return error_response(rid, exc)
