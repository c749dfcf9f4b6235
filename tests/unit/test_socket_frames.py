"""A connection's in-flight handlers over a real unix socket: the cap, and a gone client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.core.infra.sockets import MAX_IN_FLIGHT, serve_unix
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
    chunks: list[bytes] = []
    lines = 0
    while lines < n:
        chunks.append(await stream.receive(65536))
        lines += chunks[-1].count(b"\n")
    return [json.loads(line) for line in b"".join(chunks).splitlines()]


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


async def test_a_client_that_does_not_read_is_not_served_without_bound(tmp_path: Path) -> None:
    """Handlers wait to write while the client lags; every reply arrives whole later."""
    big = "x" * 20_000  # a few replies fill the socket's and the transport's buffers
    served = 0

    async def dispatch(request: Any) -> Any:
        nonlocal served
        served += 1
        return [{"id": served, "from": "a", "to": "b", "body": big, "created_at": 0.0}]

    sock = tmp_path / "a.sock"
    frames = 300
    async with anyio.create_task_group() as tg:
        await tg.start(
            lambda task_status: serve_unix(
                sock, AgentRequest, dispatch, 1 << 20, task_status=task_status
            )
        )
        stream = await connect_unix(sock)
        async with stream:
            await stream.send(_frames(frames, "recv"))
            await anyio.sleep(0.5)  # the server does what it can while nobody reads
            # In flight, plus what the kernel's and the transport's buffers took.
            assert served < frames // 2
            replies = await _replies(stream, frames)
        assert served == frames
        assert sorted(r["id"] for r in replies) == list(range(frames))
        assert all(r["ok"] and r["result"][0]["body"] == big for r in replies)
        tg.cancel_scope.cancel()


async def test_a_listener_that_stops_drops_its_clients_and_cancels_their_handlers(
    tmp_path: Path,
) -> None:
    parked = _Parked()
    sock = tmp_path / "a.sock"
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def listen(*, task_status: Any) -> None:
            with scope:
                await serve_unix(sock, AgentRequest, parked, 1 << 20, task_status=task_status)

        await tg.start(listen)
        stream = await connect_unix(sock)
        async with stream:
            await stream.send(_frames(3))
            await parked.until(lambda: parked.started == 3)
            scope.cancel()
            await parked.until(lambda: parked.cancelled == 3)
            with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
                await stream.receive()
        assert not sock.exists()
