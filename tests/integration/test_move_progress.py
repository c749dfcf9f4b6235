"""``agents move`` shows how far it is: the coordinator reports a move's phase and the
bytes uploaded and fetched (``move_progress``), and ``hivectl agents move`` draws them
on a terminal, and prints only its result when piped.

The two agent hosts are played by the test over real host links, so every byte of
the move is one the test sent: each figure is checked against what was sent so far.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig
from hyperhive.core.coordinator import Coordinator
from hyperhive.protocol import (
    MOVE_CHUNK,
    MOVE_TIMEOUT,
    LinkMoveDroppedReq,
    LinkMoveGetReq,
    LinkMovePackedReq,
    LinkMovePutReq,
    LinkMoveUnpackedReq,
    Moved,
    MoveProgress,
    OpAgentMoveReq,
    OpMoveProgressReq,
)
from tests.support.hive import hivectl_env
from tests.support.hostlink import Pushes, linked_hive, registered
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

HIVE_TOML = 'dashboard_port = 0\nhostlink = { listen = "127.0.0.1:0", lease_seconds = 300 }\n'
# Two whole chunks and a short one: three uploads, three fetches.
ARCHIVE = b"a" * MOVE_CHUNK + b"b" * MOVE_CHUNK + b"c" * 1000
WAIT = 20.0  # a progress poll that is not woken would come back unchanged after this
SEEN_WITHIN = 60.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Hosts:
    """The move's source (h1, running agent ``a``) and target (h2), played by the test."""

    c: Coordinator
    op: RpcClient
    h1: Pushes
    h2: Pushes
    link1: RpcClient
    link2: RpcClient

    async def progress(self, after: int = -1) -> MoveProgress:
        req = OpMoveProgressReq(cmd="move_progress", agent="a", after=after, wait=WAIT)
        return await self.op.call(req)

    async def upload(self, move_id: str, offset: int, data: bytes) -> None:
        await self.link1.call(
            LinkMovePutReq(
                cmd="move_put",
                agent="a",
                move_id=move_id,
                offset=offset,
                data=base64.b64encode(data).decode(),
                sha256=_sha(data),
            )
        )

    async def fetch(self, move_id: str, offset: int) -> bytes:
        chunk = await self.link2.call(
            LinkMoveGetReq(cmd="move_get", agent="a", move_id=move_id, offset=offset)
        )
        return base64.b64decode(chunk.data)


@asynccontextmanager
async def hosts(tmp_path: Path) -> AsyncIterator[Hosts]:
    async with linked_hive(tmp_path, {"a": AgentConfig()}, HIVE_TOML) as (c, op, add):
        h1, h2 = Pushes(), Pushes()
        async with registered(await add("h1"), h1) as link1:
            await h1.activation("a")
            async with registered(await add("h2"), h2) as link2:
                yield Hosts(c, op, h1, h2, link1, link2)


async def play_the_move(
    h: Hosts, shown: Callable[[str, MoveProgress | None], Awaitable[None]]
) -> None:
    """Both hosts' side of a move the operator started; ``shown(step, progress)`` after
    each step, with the coordinator's progress when it is checked here."""
    move_id = (await h.h1.command("move_out", "a", within=SEEN_WITHIN))["move_id"]
    p = await h.progress()
    assert (p.moving, p.phase, p.source, p.target) == (True, "draining", "h1", "h2")
    assert (p.uploaded, p.size, p.fetched) == (0, None, 0)
    await shown("draining", p)
    sent = 0
    for part in (ARCHIVE[:MOVE_CHUNK], ARCHIVE[MOVE_CHUNK : 2 * MOVE_CHUNK], ARCHIVE[-1000:]):
        await h.upload(move_id, sent, part)
        sent += len(part)
        p = await h.progress(p.version)
        assert (p.phase, p.uploaded, p.size) == ("uploading", sent, None)
        await shown("uploading", p)
    await h.link1.call(
        LinkMovePackedReq(
            cmd="move_packed", agent="a", move_id=move_id, size=len(ARCHIVE), sha256=_sha(ARCHIVE)
        )
    )
    await h.h2.command("move_in", "a", within=SEEN_WITHIN)
    p = await h.progress()
    assert (p.phase, p.uploaded, p.size, p.fetched) == ("copying", len(ARCHIVE), len(ARCHIVE), 0)
    await shown("copying", p)
    got = b""
    while len(got) < len(ARCHIVE):
        got += await h.fetch(move_id, len(got))
        p = await h.progress(p.version)
        assert (p.phase, p.fetched) == ("copying", len(got))
        await shown("copying", p)
    assert got == ARCHIVE
    await h.link2.call(LinkMoveUnpackedReq(cmd="move_unpacked", agent="a", move_id=move_id))
    await h.h1.command("move_drop", "a", within=SEEN_WITHIN)
    p = await h.progress()
    assert (p.phase, p.fetched) == ("cleanup", len(ARCHIVE))
    await shown("cleanup", p)
    await h.link1.call(LinkMoveDroppedReq(cmd="move_dropped", agent="a", move_id=move_id))


def _move_cli(home: Path, to: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "agents", "move", "a", "--to", to],
        capture_output=True,
        text=True,
        timeout=MOVE_TIMEOUT,
        env=hivectl_env(home),
    )


async def test_the_coordinator_reports_each_phase_and_the_bytes_so_far(tmp_path: Path) -> None:
    async with hosts(tmp_path) as h:
        before = await h.progress()
        assert not before.moving and before.phase is None
        # A refused move says why in one line, with its class's exit code.
        for to, code, why in (
            ("ghost", 4, "no agent host named 'ghost'"),
            ("h1", 5, "a is already on agent host 'h1'"),
        ):
            out = await anyio.to_thread.run_sync(_move_cli, tmp_path, to)
            assert (out.returncode, out.stdout) == (code, ""), out.stderr
            assert out.stderr.strip() == f"hivectl: {why}" or why in out.stderr, out.stderr
            assert len(out.stderr.strip().splitlines()) == 1

        async def shown(step: str, _: MoveProgress | None) -> None:
            return None

        moved: list[Moved] = []
        async with anyio.create_task_group() as tg:

            async def move() -> None:
                req = OpAgentMoveReq(cmd="agent_move", agent="a", to="h2")
                moved.append(await h.op.call(req))

            tg.start_soon(move)
            await play_the_move(h, shown)
        assert moved[0].copied_bytes == len(ARCHIVE) and moved[0].target == "h2"
        after = await h.progress()
        assert not after.moving and after.version > before.version


class Terminal:
    """``hivectl ARGS`` with a pseudo-terminal for stdout and stderr (as in a shell)."""

    def __init__(self, home: Path, *args: str) -> None:
        master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
            env=hivectl_env(home),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
        )
        os.close(slave)
        self._master = master
        self.text = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 4096)
            except OSError:  # EIO: the other end is closed
                return
            if not data:
                return
            self.text += data.decode(errors="replace")

    def finish(self) -> int:
        code = self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        os.close(self._master)
        return code


def _size(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


async def test_a_terminal_sees_the_phases_and_bytes(tmp_path: Path) -> None:
    async with hosts(tmp_path) as h:
        term = Terminal(tmp_path, "agents", "move", "a", "--to", "h2")
        try:

            async def drawn(step: str, p: MoveProgress | None) -> None:
                assert p is not None
                if step == "draining":
                    want = "moving a to h2: its turn finishes, then h1 packs it"
                elif step == "uploading":
                    want = f"uploading from h1: {_size(p.uploaded)}"
                elif step == "copying":
                    share = p.fetched * 100 // len(ARCHIVE)
                    want = f"copying to h2: {_size(p.fetched) if p.fetched else '0 B'} of "
                    want += f"{_size(len(ARCHIVE))} ({share}%)"
                else:
                    want = "moving a to h2: h1 drops its copy"
                await until(lambda: want in term.text, SEEN_WITHIN)

            await play_the_move(h, drawn)
            code = await anyio.to_thread.run_sync(term.finish)
        finally:
            if term.proc.poll() is None:
                term.proc.kill()
        assert code == 0, term.text
        # Drawn in place (carriage return, erase line), then the result on a clean line.
        assert "\r\x1b[K" in term.text
        last = term.text.rsplit("\r\x1b[K", 1)[1]
        assert last.strip() == f"moved a to h2 (from h1, {len(ARCHIVE)} bytes copied); running"


async def test_a_pipe_sees_only_the_result(tmp_path: Path) -> None:
    """No progress drawn: the result alone. (A hive of its own, so on PostgreSQL a
    database of its own: one test's hives share the test's database.)"""
    async with hosts(tmp_path / "piped") as h:
        out: list[subprocess.CompletedProcess[str]] = []

        def run() -> None:
            out.append(_move_cli(tmp_path / "piped", "h2"))

        async def quiet(step: str, p: MoveProgress | None) -> None:
            return None

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, run)
            await play_the_move(h, quiet)
        assert out[0].returncode == 0, out[0].stderr
        assert out[0].stdout == f"moved a to h2 (from h1, {len(ARCHIVE)} bytes copied); running\n"
        assert out[0].stderr == ""
