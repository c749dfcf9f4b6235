"""A remote host's lease: heartbeats renew it, a dropped link keeps its agents until it
expires, then they are ``lost``; a returning host is fenced by its link epoch.

A real coordinator serves the network host link on loopback (plain TCP, which
is allowed there); hosts are real WebSocket dials with real credentials, and
the agents' frames are the harness's own (attach, wait, turn_end).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig
from hyperhive.errors import HiveError, PermissionDenied
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.protocol import (
    AgentView,
    HiveStatus,
    HostCapacity,
    HostView,
    LinkForwardReq,
    LinkHeartbeatReq,
    LinkRegisterReq,
    Message,
    OpAgentsReq,
    OpHostsListReq,
    OpInboxReq,
    OpLifecycleReq,
    OpSendReq,
    OpStatusReq,
    Registered,
)
from tests.support.hostlink import Linked, Pushes, linked_hive
from tests.support.surfaces import until, until_async

pytestmark = pytest.mark.anyio


def hive_toml(lease: float) -> str:
    # An inline table: seed_home appends the store's settings after it, at top level.
    return f'hostlink = {{ listen = "127.0.0.1:0", lease_seconds = {lease} }}\n'


CAPACITY = HostCapacity(claude_slots=4, slots_in_use=1, mem_total=8 << 30, mem_available=3 << 30)


@asynccontextmanager
async def host(
    target: LinkTarget, pushes: Pushes | None = None, agents: tuple[str, ...] = ()
) -> AsyncIterator[tuple[RpcClient, Registered]]:
    """A dialled host registered as ``target.name``, saying it runs ``agents``."""
    async with dial(target, on_push=pushes) as link:
        reg = await link.call(
            LinkRegisterReq(cmd="register", host_id=target.name, agents=list(agents))
        )
        yield link, reg


async def beat(link: RpcClient, every: float) -> None:
    """Heartbeat like a live host, until cancelled."""
    while True:  # paced: a live host's heartbeat
        await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
        await anyio.sleep(every)


Linker = Callable[..., AbstractAsyncContextManager[Linked]]


@pytest.fixture
def linked(tmp_path: Path) -> Linker:
    """``linked(lease, configs=…, store_url=…)``: a hive serving the host link whose
    host leases last ``lease`` seconds, with those agents (default: alice)."""

    def make(
        lease: float, configs: dict[str, AgentConfig] | None = None, store_url: str | None = None
    ) -> AbstractAsyncContextManager[Linked]:
        agents = configs or {"alice": AgentConfig()}
        return linked_hive(tmp_path, agents, hive_toml(lease), store_url)

    return make


def forward(agent: str, incarnation: int, frame: dict[str, Any]) -> LinkForwardReq:
    return LinkForwardReq(cmd="forward", agent=agent, incarnation=incarnation, frame=frame)


async def agents(op: RpcClient) -> dict[str, AgentView]:
    return {a.name: a for a in await op.call(OpAgentsReq(cmd="agents"))}


async def hosts(op: RpcClient) -> dict[str, HostView]:
    return {h.name: h for h in await op.call(OpHostsListReq(cmd="hosts_list"))}


async def lease_notices(op: RpcClient) -> list[Message]:
    """The operator's notices that a host's lease expired."""
    return [m for m in await op.call(OpInboxReq(cmd="inbox")) if "lease expired" in m.body]


async def test_heartbeats_renew_the_lease_durably_and_report_capacity(
    linked: Linker, hive_store_url: str | None
) -> None:
    async with linked(30, store_url=hive_store_url) as (c, op, add):
        target = await add("h1")
        pushes = Pushes()
        async with host(target, pushes) as (link, reg):
            assert reg.epoch == 1 and reg.heartbeat_seconds == 10
            await pushes.activation("alice")
            lease = await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
            assert lease.epoch == 1
            view = (await hosts(op))["h1"]
            assert view.link == "connected" and view.remote and view.agents == ["alice"]
            assert view.capacity == CAPACITY and view.last_heartbeat_at is not None
            assert view.lease_expires_at == lease.expires_at
            # The lease is the store's (a standby coordinator reads the same row).
            row = await c.store.hosts.get("h1")
            assert row is not None and row.lease_expires_at == lease.expires_at
            assert row.capacity is not None
            assert HostCapacity.model_validate_json(row.capacity) == CAPACITY
        again = Pushes()
        async with host(target, again) as (link, reg):
            assert reg.epoch == 2  # monotonic per host, one per registration
            # The registration is let finish (its activations pushed) before the link drops
            # (a coordinator stopping mid-registration: test_coordinator_stop.py).
            await again.activation("alice")


async def test_a_link_that_drops_inside_the_lease_keeps_its_agents_without_a_restart(
    linked: Linker,
) -> None:
    async with linked(60) as (c, op, add):
        target = await add("h1")
        pushes = Pushes()
        async with host(target, pushes) as (link, _):
            inc = (await pushes.activation("alice"))["incarnation"]
            await link.call(forward("alice", inc, {"cmd": "attach", "id": 1}))
        await until(lambda: "h1" in c.hostlink.absent, 10)
        # Still placed and running as far as anyone can tell; its host's view says why.
        listed = await agents(op)
        assert listed["alice"].running and listed["alice"].host == "h1"
        assert listed["alice"].lost_on is None
        assert (await hosts(op))["h1"].link == "disconnected"
        await op.call(OpSendReq(cmd="send", to="alice", body="while you were away"))
        again = Pushes()
        async with host(target, again, agents=("alice",)) as (link, reg):
            assert reg.epoch == 2
            woke = await link.call(forward("alice", inc, {"cmd": "wait", "id": 2, "timeout": 5}))
            assert woke.ok and isinstance(woke.result, dict), woke
            assert [m["body"] for m in woke.result["messages"]] == ["while you were away"]
            # Nothing was restarted or fenced: the same incarnation goes on. (Asks about
            # its agents' disks, e.g. ``repos_missing`` on registering, are no restart.)
            lifecycle = {"activate", "deactivate", "place"}
            assert [f["cmd"] for f in again.frames if f["cmd"] in lifecycle] == []
            assert (await hosts(op))["h1"].link == "connected"


async def test_an_expired_lease_makes_agents_lost_and_the_returning_host_is_fenced(
    linked: Linker, hive_store_url: str | None
) -> None:
    async with linked(1, store_url=hive_store_url) as (c, op, add):
        target = await add("h1")
        pushes = Pushes()
        # Alive (beating) while set up: the 1 s lease must not run out mid-setup on a slow
        # machine; it runs from the last beat once the host goes silent below.
        async with host(target, pushes) as (link, _), anyio.create_task_group() as live:
            live.start_soon(beat, link, 0.2)
            inc = (await pushes.activation("alice"))["incarnation"]
            await link.call(forward("alice", inc, {"cmd": "attach", "id": 1}))
            await op.call(OpSendReq(cmd="send", to="alice", body="m1"))
            woke = await link.call(forward("alice", inc, {"cmd": "wait", "id": 2, "timeout": 5}))
            assert isinstance(woke.result, dict)
            [m1] = woke.result["messages"]
            assert "alice" in c.hostlink.cached_apis()
            live.cancel_scope.cancel()
        # No heartbeat, no link: one lease later alice is lost.
        await until(lambda: c.hostlink.lost.get("alice") == "h1", 15)
        assert "alice" not in c.hostlink.cached_apis()
        listed = await agents(op)
        assert not listed["alice"].running and listed["alice"].lost_on == "h1"
        status = await op.call(OpStatusReq(cmd="status"))
        assert isinstance(status, HiveStatus) and status.lost == {"alice": "h1"}
        view = (await hosts(op))["h1"]
        assert view.link == "expired" and view.lost_agents == ["alice"] and view.agents == []
        # The operator is told after the agents show lost: wait for it, not a fixed time.
        [notice] = await until_async(lambda: lease_notices(op), 15)
        assert "alice" in notice.body and "wait" in notice.body

        again = Pushes()
        async with (
            host(target, again, agents=("alice",)) as (link, _),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(beat, link, 0.2)
            # Fenced first (no graceful ack), then, waiting for its own host, started again.
            fenced = await again.index("deactivate", "alice")
            started = await again.index("activate", "alice")
            assert fenced < started
            assert again.frames[fenced]["graceful"] is False
            assert "lease expired" in again.frames[fenced]["fenced"]
            new_inc = again.frames[started]["incarnation"]
            assert new_inc > inc
            # The zombie turn's late ack is refused; m1 is still pending.
            with pytest.raises(PermissionDenied, match="stale"):
                await link.call(
                    forward(
                        "alice",
                        inc,
                        {"cmd": "turn_end", "id": 3, "outcome": "ok", "handled": [m1["id"]]},
                    )
                )
            await link.call(forward("alice", new_inc, {"cmd": "attach", "id": 4}))
            woke = await link.call(
                forward("alice", new_inc, {"cmd": "wait", "id": 5, "timeout": 5})
            )
            assert isinstance(woke.result, dict)
            assert [m["body"] for m in woke.result["messages"]] == ["m1"]
            assert (await agents(op))["alice"].lost_on is None
            tg.cancel_scope.cancel()
        assert len(await lease_notices(op)) == 1  # told once


async def test_a_silent_connected_host_expires_and_its_redial_replaces_the_dead_link(
    linked: Linker,
) -> None:
    async with linked(6) as (c, op, add):
        target = await add("h1")
        pushes = Pushes()
        async with host(target, pushes) as (old, _):
            inc = (await pushes.activation("alice"))["incarnation"]
            # Heartbeating: a second dial under its name is someone else, refused.
            await old.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
            with pytest.raises(LinkRefused, match="409"):
                async with host(target):
                    pass
            # Silent for two heartbeats (a partition): the same host redialling wins.
            await until(lambda: not c.hostlink.name_taken("h1"), 10)
            async with host(target, agents=("alice",)) as (new, reg):
                assert reg.epoch == 2
                await until(lambda: old.closed, 10)  # the dead link is ended, not trusted
                with pytest.raises(HiveError):
                    await old.call(forward("alice", inc, {"cmd": "attach", "id": 1}))
                assert c.hostlink.host_of("alice") == "h1" and not c.hostlink.lost
                got = await new.call(forward("alice", inc, {"cmd": "attach", "id": 2}))
                assert got.ok, got
                # Now silent while connected: the lease expires and the link is cut.
                await until(lambda: c.hostlink.lost.get("alice") == "h1", 20)
                await until(lambda: new.closed, 10)


async def test_replace_moves_a_lost_agent_to_another_host_and_fences_the_old_one(
    linked: Linker,
) -> None:
    configs = {"alice": AgentConfig(on_host_loss="replace"), "bob": AgentConfig()}
    async with linked(1, configs) as (c, op, add):
        h1, h2 = await add("h1"), await add("h2")
        first, second = Pushes(), Pushes()
        async with dial(h2, on_push=second) as link2, anyio.create_task_group() as tg:
            # h1 beats until h2 is up: its 1 s lease must not run out mid-setup.
            async with host(h1, first) as (link1, _), anyio.create_task_group() as live:
                live.start_soon(beat, link1, 0.1)
                await first.activation("alice")
                await first.activation("bob")
                await link2.call(LinkRegisterReq(cmd="register", host_id="h2"))
                tg.start_soon(beat, link2, 0.1)
                live.cancel_scope.cancel()
            # h1 is gone: one lease later alice is re-placed on h2, bob waits for h1.
            await second.activation("alice")
            await until(lambda: c.hostlink.lost.get("bob") == "h1", 15)
            assert c.hostlink.host_of("alice") == "h2" and "alice" not in c.hostlink.lost
            # The operator's notice is written after alice's re-placement and bob's loss.
            [notice] = await until_async(lambda: lease_notices(op), 15)
            assert "re-placed on h2" in notice.body and "bob" in notice.body
            # h1 comes back still running both: alice is fenced for good, bob restarts there.
            again = Pushes()
            async with host(h1, again, agents=("alice", "bob")) as (link1, _):
                tg.start_soon(beat, link1, 0.1)
                await again.index("deactivate", "alice")
                await again.index("activate", "bob")
                assert not [
                    f for f in again.frames if f["cmd"] == "activate" and f["agent"] == "alice"
                ]
                assert c.hostlink.host_of("alice") == "h2" and c.hostlink.host_of("bob") == "h1"
                tg.cancel_scope.cancel()


async def test_a_killed_agents_api_is_evicted(linked: Linker) -> None:
    async with linked(60) as (c, op, add):
        target = await add("h1")
        pushes = Pushes()
        async with host(target, pushes) as (link, _):
            inc = (await pushes.activation("alice"))["incarnation"]
            await link.call(forward("alice", inc, {"cmd": "attach", "id": 1}))
            assert "alice" in c.hostlink.cached_apis()
            await op.call(OpLifecycleReq(cmd="agent_kill", agent="alice"))
            assert "alice" not in c.hostlink.cached_apis()
