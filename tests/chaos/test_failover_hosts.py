"""A remote host's loss survives a coordinator failover on PostgreSQL.

Two ``hivectl serve`` processes share one database: A active, B standing by.
Two remote hosts dial A's network link for real (credentials from ``hosts
add``, the harness's frames); h1 runs alice (``on_host_loss = "replace"``) and
bob (``"wait"``). h1 dies without a goodbye and A is ``kill -9``ed. B takes
over and learns h1's lease from the store alone (h1 never dials B): once it
expires, bob shows ``lost`` on h1, alice is re-placed on h2, and the operator
is told once — also when A had already told it before it died.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig
from hyperhive.errors import HiveError
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import (
    HostCapacity,
    LinkHeartbeatReq,
    LinkRegisterReq,
    OpAgentsReq,
    OpInboxReq,
)
from tests.chaos.test_failover import _all_logs, _standing_by, _took_over
from tests.support.hive import operator, seed_home, start_serve
from tests.support.hostlink import Pushes, add_host, link_url
from tests.support.procs import stop
from tests.support.surfaces import until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

LEASE = 12.0  # past the coordinator takeover (its own lease is 5 s)
CAPACITY = HostCapacity(claude_slots=4, slots_in_use=0, mem_total=8 << 30, mem_available=4 << 30)


def _free_port() -> int:
    # The standby binds the same address once it takes over: hosts redial one URL.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _beat(link: RpcClient) -> None:
    while True:  # paced: a live host's heartbeat
        await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
        await anyio.sleep(LEASE / 6)


@asynccontextmanager
async def _live_host(
    target: LinkTarget, pushes: Pushes, agents: tuple[str, ...] = ()
) -> AsyncIterator[RpcClient]:
    """A host dialled, registered (saying it runs ``agents``) and heartbeating."""
    async with dial(target, on_push=pushes) as link, anyio.create_task_group() as tg:
        await link.call(LinkRegisterReq(cmd="register", host_id=target.name, agents=list(agents)))
        tg.start_soon(_beat, link)
        yield link
        tg.cancel_scope.cancel()


async def _lost_notices(op: RpcClient) -> list[str]:
    return [m.body for m in await op.call(OpInboxReq(cmd="inbox")) if "lease expired" in m.body]


async def _agents(op: RpcClient) -> dict[str, tuple[str | None, str | None]]:
    """Agent -> (the host it runs on, the host it is lost with)."""
    return {a.name: (a.host, a.lost_on) for a in await op.call(OpAgentsReq(cmd="agents"))}


def _pushed(pushes: Pushes, cmd: str, agent: str) -> bool:
    return any(f.get("cmd") == cmd and f.get("agent") == agent for f in pushes.frames)


@pytest.mark.parametrize("told_before", [False, True], ids=["expires-after", "expired-before"])
async def test_the_standby_shows_a_dead_hosts_agents_lost_and_tells_once(
    tmp_path: Path, pg_url: str, told_before: bool
) -> None:
    paths = seed_home(
        tmp_path,
        {"alice": AgentConfig(on_host_loss="replace"), "bob": AgentConfig()},
        hive_toml=(
            f'hostlink = {{ listen = "127.0.0.1:{_free_port()}", lease_seconds = {LEASE} }}\n'
        ),
        store_url=pg_url,
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        active = start_serve(tmp_path, log_name="serve-1.log")
        standby = start_serve(tmp_path, wait=False, log_name="serve-2.log")
        procs += [active, standby]
        await anyio.to_thread.run_sync(_standing_by, tmp_path, "serve-2.log")
        async with operator(paths) as op:
            h1 = LinkTarget(link_url(paths), "h1", await add_host(op, "h1", tmp_path / "c"))
            h2 = LinkTarget(link_url(paths), "h2", await add_host(op, "h2", tmp_path / "c"))
        first, second = Pushes(), Pushes()
        h1_dies, h2_up = anyio.Event(), anyio.Event()

        async def h1_lives() -> None:
            async with _live_host(h1, first):
                await h1_dies.wait()  # then its link just ends: no goodbye

        async def h2_lives() -> None:
            # h2 stays up throughout: it redials whichever coordinator serves the link,
            # saying what it runs.
            while True:  # paced: a host's redial, as the real one backs off
                held = ("alice",) if _pushed(second, "activate", "alice") else ()
                try:
                    async with _live_host(h2, second, held):
                        h2_up.set()
                        await anyio.sleep_forever()
                except* (OSError, HiveError):  # its coordinator died (or is not up yet)
                    pass
                await anyio.sleep(0.2)

        async with anyio.create_task_group() as tg:
            tg.start_soon(h1_lives)
            await first.activation("alice")
            await first.activation("bob")
            tg.start_soon(h2_lives)
            await h2_up.wait()
            h1_dies.set()
            if told_before:
                async with operator(paths) as op:
                    await until_async(lambda: _lost_notices(op), LEASE * 3)
            active.send_signal(signal.SIGKILL)
            active.wait(timeout=30)
            await anyio.to_thread.run_sync(_took_over, tmp_path, "serve-2.log")
            async with operator(paths) as op:

                async def settled() -> bool:
                    agents = await _agents(op)
                    return agents["bob"] == (None, "h1") and agents["alice"] == ("h2", None)

                await until_async(settled, LEASE * 4)
                # A lease and a few watch ticks later: still the one notice.
                await anyio.sleep(LEASE / 2)
                [notice] = await _lost_notices(op)
                assert "agent host h1's lease expired" in notice, notice
                assert "bob (lost" in notice and "alice (lost" in notice, notice
            tg.cancel_scope.cancel()
        standby.send_signal(signal.SIGTERM)
        assert standby.wait(timeout=60) == 0, _all_logs(tmp_path)
        log = (tmp_path / "serve-2.log").read_text()
        # B learnt h1's loss from the store (expired-before), or found it itself.
        assert ("lost with agent host h1 before this coordinator" in log) == told_before
    finally:
        for proc in procs:
            stop(proc)
