"""HIVE_HOME on a tiny tmpfs that fills up mid-run: clear errors, nothing corrupt, recovery.

``hivectl serve`` runs as a process on a home inside a small tmpfs (mounted
for the test; it needs root). Messages flow from the operator and an agent;
then a filler file takes the rest of the filesystem. Writes keep going until
the disk refuses one: from then on every send — the agent's on its socket,
the operator's on ``run/host.sock`` and through ``hivectl`` — fails with a
``StorageError`` telling the operator to free disk space, while hive.db,
topology.json and the meta repo stay sound. (The disk that fills is the
home's, so this is a SQLite test: a hive on PostgreSQL keeps its store on
the database server's disk.) Deleting the filler brings
sends back, and every send answered ``ok`` before, during or after is
still there — also after a restart.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hyperhive.client import call_once, connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import HiveError, StorageError
from hyperhive.protocol import (
    AckUntilReq,
    OpSendReq,
    OpSetParentReq,
    OpSpawnReq,
    RecvReq,
    RemindReq,
    SendReq,
)
from tests.chaos.test_soak import check_store
from tests.support.hive import seed_home, start_serve
from tests.support.procs import hivectl, log_tail, stop
from tests.support.stores import read_hive

# The disk that fills is the home's: SQLite's (see above).
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300), pytest.mark.sqlite_only]

FS_SIZE = "24m"
FREE_DISK = "free disk space"
MAX_SENDS_TO_FILL = 20_000  # the WAL reuses its pages: keep writing until one needs new space


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A fresh tmpfs of ``FS_SIZE`` at ``tmp_path/mnt``, unmounted at teardown."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE},mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(path: Path) -> int:
    """Write zeros to ``path`` until the filesystem is full; the bytes written."""
    chunk = b"\0" * (1 << 16)
    written = 0
    with path.open("wb", buffering=0) as fh:
        while True:
            try:
                written += fh.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        # Top off to the last block: smaller writes until not even one byte fits.
        for size in (4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    written += fh.write(b"\0" * size)
    return written


class Hive:
    """The coordinator process and the calls the test makes, with their outcomes."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.paths = HivePaths(home)
        self.serve = start_serve(home)
        self.ok: dict[int, tuple[str, str, str]] = {}  # id → (sender, recipient, body)
        self.n = 0

    async def agent_send(self, sender: str, to: str) -> HiveError | None:
        self.n += 1
        body = f"{sender} #{self.n}"
        try:
            got = await call_once(
                self.paths.agent_sock(sender), SendReq(cmd="send", to=to, body=body)
            )
        except HiveError as exc:
            return exc
        self.ok[got.id] = (sender, to, body)
        return None

    async def operator_send(self, to: str) -> HiveError | None:
        self.n += 1
        body = f"operator #{self.n}"
        try:
            got = await call_once(self.paths.host_sock, OpSendReq(cmd="send", to=to, body=body))
        except HiveError as exc:
            return exc
        self.ok[got.id] = ("operator", to, body)
        return None

    def logs(self) -> str:
        return log_tail(self.home, "serve.log", 4000)


@pytest.fixture
def hive(tiny_fs: Path) -> Iterator[Hive]:
    home = tiny_fs / "hive"
    home.mkdir()
    seed_home(
        home, {"alice": AgentConfig(), "bob": AgentConfig()}, hive_toml="dashboard_port = 0\n"
    )
    running = Hive(home)
    try:
        yield running
    finally:
        stop(running.serve)


def _assert_clear(error: HiveError | None, what: str) -> None:
    assert error is not None, f"{what} succeeded on a full disk"
    assert isinstance(error, StorageError), f"{what}: {type(error).__name__}: {error}"
    assert FREE_DISK in error.message, f"{what}: the error does not say what to do: {error}"


async def test_a_full_disk_refuses_clearly_corrupts_nothing_and_recovers(hive: Hive) -> None:
    paths = hive.paths
    for _ in range(20):
        assert await hive.agent_send("alice", "bob") is None
        assert await hive.operator_send("bob") is None
    filler = paths.home / "filler"

    # -- the disk fills up mid-run ------------------------------------------------
    fill(filler)
    first_error: HiveError | None = None
    for i in range(MAX_SENDS_TO_FILL):
        first_error = await (
            hive.agent_send("alice", "bob") if i % 2 else hive.operator_send("bob")
        )
        if first_error is not None:
            break
    _assert_clear(first_error, "a send")
    _assert_clear(await hive.agent_send("alice", "bob"), "alice's send to bob")
    _assert_clear(await hive.agent_send("bob", "operator"), "bob's send to the operator")
    _assert_clear(await hive.operator_send("alice"), "the operator's send")
    with pytest.raises(StorageError, match=FREE_DISK):
        await call_once(
            paths.agent_sock("alice"), RemindReq(cmd="remind", message="x", delay_seconds=1)
        )
    cli = await anyio.to_thread.run_sync(
        lambda: hivectl(paths.home, "send", "alice", "from the cli", check=False)
    )
    assert cli.returncode != 0 and FREE_DISK in cli.stderr, cli.stderr
    # The tree is in the store: a reparent is refused like a send, its mirror untouched.
    topology_before = paths.topology.read_text()
    with pytest.raises(StorageError, match=FREE_DISK):
        await call_once(
            paths.host_sock, OpSetParentReq(cmd="set_parent", child="bob", new_parent="alice")
        )
    assert paths.topology.read_text() == topology_before
    with pytest.raises(StorageError):
        await call_once(paths.host_sock, OpSpawnReq(cmd="spawn", name="carol"))
    assert hive.serve.poll() is None, hive.logs()
    problems = await anyio.to_thread.run_sync(check_store, paths)
    assert not problems, problems

    # -- space returns --------------------------------------------------------------
    filler.unlink()
    assert await hive.agent_send("alice", "bob") is None, hive.logs()
    assert await hive.operator_send("bob") is None
    assert await hive.agent_send("bob", "operator") is None
    await call_once(
        paths.host_sock, OpSetParentReq(cmd="set_parent", child="bob", new_parent="alice")
    )
    assert json.loads(paths.topology.read_text())["bob"] == "alice"
    cli = await anyio.to_thread.run_sync(lambda: hivectl(paths.home, "send", "alice", "again"))
    assert cli.stdout.startswith("sent #")

    # -- nothing answered ok is lost, across a restart too -------------------------------
    hive.serve.send_signal(signal.SIGTERM)
    assert hive.serve.wait(timeout=30) == 0, hive.logs()
    hive.serve = await anyio.to_thread.run_sync(start_serve, paths.home)
    problems = await anyio.to_thread.run_sync(check_store, paths)
    assert not problems, problems
    stored = {m.id: (m.sender, m.recipient, m.body) for m in (await read_hive(paths)).messages}
    lost = {i: m for i, m in hive.ok.items() if stored.get(i) != m}
    assert not lost, f"answered ok, then lost: {lost}"
    to_bob = sorted(i for i, (_, to, _) in hive.ok.items() if to == "bob")
    received: list[int] = []
    async with connect(paths.agent_sock("bob")) as bob:
        while rows := await bob.call(RecvReq(cmd="recv", max=5)):
            ids = [r.id for r in rows]
            received += ids
            await bob.call(AckUntilReq(cmd="ack_until", up_to=max(ids)))
    assert set(to_bob) <= set(received)

    # The spawn the full disk refused goes through now (its half-made repo must not block it).
    spawned = await call_once(paths.host_sock, OpSpawnReq(cmd="spawn", name="carol"))
    assert spawned.name == "carol"
    problems = await anyio.to_thread.run_sync(check_store, paths)
    assert not problems, problems
