"""Placement over real host links: three hosts dial in (TCP, real credentials) and
report their capacity; spawned agents go by the rules (parent's host while it has
room, else least loaded), a pin is honoured and waits for its host, an unknown
host is refused before anything is made."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig
from hyperhive.errors import NotFound
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.protocol import OpAgentsReq, OpSpawnReq
from tests.support.hive import coordinator, operator, seed_home
from tests.support.hostlink import Pushes, add_host, link_url, registered
from tests.support.surfaces import until_async

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def host(
    url: str, name: str, cred: Path, slots: int, max_agents: int | None = None
) -> AsyncIterator[Pushes]:
    pushes = Pushes()
    async with registered(
        LinkTarget(url, name, cred), pushes, claude_slots=slots, max_agents=max_agents
    ):
        yield pushes


async def where(op: RpcClient) -> dict[str, str | None]:
    return {a.name: a.host for a in await op.call(OpAgentsReq(cmd="agents"))}


async def _on(op: RpcClient, agent: str, host: str) -> bool:
    return (await where(op))[agent] == host


async def spawn(op: RpcClient, name: str, parent: str | None = None, pin: str | None = None) -> str:
    await op.call(OpSpawnReq(cmd="spawn", name=name, parent=parent, host=pin))
    placed = (await where(op))[name]
    assert placed is not None
    return placed


async def test_parents_and_children_together_capacity_respected_and_a_pin_honoured(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {}, hive_toml='[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = {n: await add_host(op, n, tmp_path / "creds") for n in ("h1", "h2", "h3", "h4")}
        async with (
            host(url, "h1", creds["h1"], slots=2, max_agents=2),
            host(url, "h2", creds["h2"], slots=4),
            host(url, "h3", creds["h3"], slots=1) as h3,
        ):
            assert await spawn(op, "boss") == "h1"  # all empty: by name
            assert await spawn(op, "kid1", parent="boss") == "h1"  # with its parent
            # h1 is at its max_agents: the child goes to the least loaded host instead.
            assert await spawn(op, "kid2", parent="boss") == "h2"
            assert await spawn(op, "grandkid", parent="kid2") == "h2"
            assert await spawn(op, "pinned", pin="h3") == "h3"
            # h2: 2 agents on 4 slots (0.5 each) beats h3's 1 on 1.
            assert await spawn(op, "loner") == "h2"
            await h3.activation("pinned")

            with pytest.raises(NotFound, match="no agent host named 'ghost'"):
                await op.call(OpSpawnReq(cmd="spawn", name="lost", host="ghost"))
            assert "lost" not in await where(op)  # refused before anything was made

            # Pinned to a host that is not connected: it waits for that host rather than
            # go to one with room, and starts when it comes.
            await op.call(OpSpawnReq(cmd="spawn", name="waiter", host="h4"))
            views = {a.name: a for a in await op.call(OpAgentsReq(cmd="agents"))}
            assert views["waiter"].host is None
            assert (views["waiter"].assigned_host, views["waiter"].pinned) == ("h4", True)
            async with host(url, "h4", creds["h4"], slots=8) as h4:
                assert (await h4.activation("waiter"))["agent"] == "waiter"
                await until_async(lambda: _on(op, "waiter", "h4"), 10)


async def test_two_hosts_registering_at_once_start_each_agent_once(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    # Each registration starts the agents not running yet. Both passes found the same
    # agent not yet placed and both started it: two runtimes, one a ghost on its host.
    agents = [f"a{i:02d}" for i in range(24)]
    seed_home(
        tmp_path,
        {name: AgentConfig() for name in agents},
        hive_toml='hostlink = { listen = "127.0.0.1:0" }\n',
        store_url=hive_store_url,
    )
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = {n: await add_host(op, n, tmp_path / "creds") for n in ("h1", "h2")}
        pushes = {"h1": Pushes(), "h2": Pushes()}
        done = anyio.Event()

        async def dial_in(name: str) -> None:
            async with registered(LinkTarget(url, name, creds[name]), pushes[name]):
                await done.wait()

        async with anyio.create_task_group() as tg:
            for name in ("h1", "h2"):  # both register at the same time
                tg.start_soon(dial_in, name)
            await until_async(lambda: _all_running(op, agents), 30)
            await anyio.sleep(0.5)  # a second start, if any, would be pushed by now
            started = [
                f["agent"] for p in pushes.values() for f in p.frames if f.get("cmd") == "activate"
            ]
            assert sorted(started) == agents, sorted(started)
            placed = await where(op)
            for name in agents:
                host_of = c.hostlink.host_of(name)
                assert host_of == placed[name] and host_of in ("h1", "h2")
            done.set()


async def _all_running(op: RpcClient, agents: list[str]) -> bool:
    placed = await where(op)
    return all(placed.get(name) is not None for name in agents)


async def test_an_agent_started_on_another_host_is_stopped_where_it_ran(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig()},
        hive_toml='hostlink = { listen = "127.0.0.1:0" }\n',
        store_url=hive_store_url,
    )
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = {n: await add_host(op, n, tmp_path / "creds") for n in ("h1", "h2")}
        async with host(url, "h1", creds["h1"], slots=2) as h1:
            await h1.activation("alice")
            async with host(url, "h2", creds["h2"], slots=2) as h2:
                await c.placement.activate("alice", host="h2")
                await h2.activation("alice")
                stopped = await h1.command("deactivate", "alice")
                assert stopped["graceful"] is False and "does not hold alice" in stopped["fenced"]
                assert c.hostlink.host_of("alice") == "h2"
                assert "alice" not in c.hostlink.hosts["h1"].agents
