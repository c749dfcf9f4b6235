"""Nothing answered ``ok`` is lost when ``hivectl serve`` is ``kill -9``ed mid-run,
on either store backend."""

from __future__ import annotations

import random
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import HiveError, Unavailable
from hyperhive.protocol import AckUntilReq, AttachReq, RecvReq, SendReq
from tests.support.hive import seed_home, start_serve
from tests.support.stores import read_hive

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SENDERS = 10
PER_SENDER = 1000
KILLS = 6


class _Server:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        self.proc = start_serve(self.home)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


async def _sender(paths: HivePaths, name: str, confirmed: list[int], done: anyio.Event) -> None:
    seq = 0
    while seq < PER_SENDER:  # paced: a sender retrying while the coordinator restarts
        try:
            async with connect(paths.agent_sock(name)) as client:
                while seq < PER_SENDER:
                    await client.call(SendReq(cmd="send", to="sink", body=f"{name}:{seq}"))
                    confirmed.append(seq)
                    seq += 1
        except (Unavailable, OSError):
            await anyio.sleep(0.02)  # the coordinator is restarting: retry this seq
    done.set()


async def _consumer(paths: HivePaths, acked: set[int], stop: anyio.Event) -> None:
    """Drains sink during the chaos; an acked id must never come back."""
    while not stop.is_set():  # paced: a consumer reconnecting while the coordinator restarts
        try:
            async with connect(paths.agent_sock("sink")) as client:
                await client.call(AttachReq(cmd="attach"))
                while not stop.is_set():  # paced: a consumer draining, idle when empty
                    rows = await client.call(RecvReq(cmd="recv", max=5))
                    ids = [r.id for r in rows]
                    again = acked.intersection(ids)
                    assert not again, f"acked rows delivered again: {sorted(again)}"
                    if ids:
                        await client.call(AckUntilReq(cmd="ack_until", up_to=max(ids)))
                        acked.update(ids)
                    else:
                        await anyio.sleep(0.01)
        except (Unavailable, OSError):
            await anyio.sleep(0.02)
        except HiveError:
            await anyio.sleep(0.02)


# Several kill -9 and restart rounds of a real coordinator (PostgreSQL starts slower).
@pytest.mark.timeout(300)
async def test_kill_9_mid_run_loses_no_confirmed_send(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    names = [f"s{i}" for i in range(SENDERS)]
    seed_home(tmp_path, {n: AgentConfig() for n in [*names, "sink"]}, store_url=hive_store_url)
    paths = HivePaths(tmp_path)
    server = _Server(tmp_path)
    server.start()
    confirmed: dict[str, list[int]] = {n: [] for n in names}
    acked: set[int] = set()
    rng = random.Random(20261130)
    try:
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                dones = []
                for name in names:
                    done = anyio.Event()
                    dones.append(done)
                    tg.start_soon(_sender, paths, name, confirmed[name], done)
                stop_consumer = anyio.Event()
                tg.start_soon(_consumer, paths, acked, stop_consumer)
                # paced: kill -9 rounds at random gaps
                while server.kills < KILLS and not all(d.is_set() for d in dones):
                    await anyio.sleep(rng.uniform(0.2, 0.6))
                    await anyio.to_thread.run_sync(server.kill9)
                    await anyio.to_thread.run_sync(server.start)
                for done in dones:
                    await done.wait()
                stop_consumer.set()
    finally:
        server.stop()
    assert server.kills >= 3, "the run ended before the coordinator was killed enough times"

    hive = await read_hive(paths)
    # SQLite's own check; PostgreSQL has none to run (None) and recovers by its WAL.
    assert hive.integrity == ("ok" if hive_store_url is None else None)
    stored: dict[str, list[int]] = {n: [] for n in names}
    for m in hive.messages:
        if m.recipient == "sink":
            stored[m.sender].append(int(m.body.split(":")[1]))
    for name in names:
        assert confirmed[name] == list(range(PER_SENDER))
        seen = set(stored[name])
        missing = [s for s in confirmed[name] if s not in seen]
        assert not missing, f"{name}: confirmed sends lost: {missing[:10]}"
        first_seen: list[int] = []
        for seq in stored[name]:
            if seq not in first_seen[-1:] and seq not in set(first_seen):
                first_seen.append(seq)
        assert first_seen == sorted(first_seen), f"{name}: per-sender order broken"
    acked_in_db = {m.id for m in hive.messages if m.recipient == "sink" and m.acked}
    assert acked <= acked_in_db  # every ack the consumer saw confirmed is durable
