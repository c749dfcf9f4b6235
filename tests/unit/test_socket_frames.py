"""A connection's in-flight handlers over a real unix socket: the cap, and a gone client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.core.sockets import MAX_IN_FLIGHT, serve_unix
from hyperhive.protocol import AgentRequest, RecvReq, WaitResult
from hyperhive.unixsock import connect_unix

pytestmark = pytest.mark.anyio


class _Parked:
    """A dispatch whose ``wait`` parks until released; records starts and cancellations."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.release = anyio.Event()
        self._changed = anyio.Event()

    async def __call__(self, request: Any) -> Any:
        if isinstance(request, RecvReq):
            return []
        self.started += 1
        self._bump()
        try:
            await self.release.wait()
        except BaseException:
            self.cancelled += 1
            self._bump()
            raise
        return WaitResult(todo_version=request.todo_version)

    def _bump(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, condition: Any) -> None:
        with anyio.fail_after(10):
            while not condition():
                await self._changed.wait()


def _frames(n: int, cmd: str = "wait") -> bytes:
    return b"".join(json.dumps({"cmd": cmd, "id": i}).encode() + b"\n" for i in range(n))


async def _replies(stream: Any, n: int) -> list[dict[str, Any]]:
    buf = b""
    while buf.count(b"\n") < n:
        buf += await stream.receive(65536)
    return [json.loads(line) for line in buf.splitlines()]


async def test_past_the_cap_a_connection_stops_reading_until_a_handler_ends(
    tmp_path: Path,
) -> None:
    parked = _Parked()
    sock = tmp_path / "a.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(
            lambda task_status: serve_unix(
                sock, AgentRequest, parked, 1 << 20, task_status=task_status
            )
        )
        stream = await connect_unix(sock)
        async with stream:
            await stream.send(_frames(MAX_IN_FLIGHT + 8) + _frames(1, "recv"))
            await parked.until(lambda: parked.started == MAX_IN_FLIGHT)
            await anyio.sleep(0.2)  # the rest are not started, the recv not answered
            assert parked.started == MAX_IN_FLIGHT
            parked.release.set()
            replies = await _replies(stream, MAX_IN_FLIGHT + 9)
        assert parked.started == MAX_IN_FLIGHT + 8 and parked.cancelled == 0
        assert all(r["ok"] for r in replies)
        assert sorted(r["id"] for r in replies) == sorted([*range(MAX_IN_FLIGHT + 8), 0])
        tg.cancel_scope.cancel()


async def test_a_client_that_goes_away_has_its_parked_handlers_cancelled(tmp_path: Path) -> None:
    parked = _Parked()
    sock = tmp_path / "a.sock"
    async with anyio.create_task_group() as tg:
        await tg.start(
            lambda task_status: serve_unix(
                sock, AgentRequest, parked, 1 << 20, task_status=task_status
            )
        )
        stream = await connect_unix(sock)
        async with stream:
            await stream.send(_frames(5))
            await parked.until(lambda: parked.started == 5)
        await parked.until(lambda: parked.cancelled == 5)
        # The server is unharmed: a new connection is served.
        stream = await connect_unix(sock)
        async with stream:
            await stream.send(_frames(1, "recv"))
            (reply,) = await _replies(stream, 1)
        assert reply == {"id": 0, "ok": True, "result": [], "error": None}
        tg.cancel_scope.cancel()
