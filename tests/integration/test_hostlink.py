"""The agent-host link: registration, pushed activations, loss of a host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig
from hyperhive.errors import InvalidRequest
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import LinkAgentCrashedReq, LinkAgentStateReq, LinkRegisterReq
from tests.support.hive import agent, agent_call, coordinator, op_call, operator, seed_home

pytestmark = pytest.mark.anyio


async def test_host_registration_activation_and_loss(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    seed_home(
        tmp_path,
        {"queen": manager, "alice": AgentConfig()},
        {"queen": None, "alice": None},
        store_url=hive_store_url,
    )
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        pushed: list[dict[str, Any]] = []
        got_all = anyio.Event()

        def on_push(frame: dict[str, Any]) -> None:
            pushed.append(frame)
            # Three activations; the host also gets asks about its agents' disks (#14), in
            # an order that differs by store.
            if sum(p["cmd"] == "activate" for p in pushed) == 3:
                got_all.set()

        # Spawned with no host: recorded, and started once a host registers.
        spawned = await op_call(op, "spawn", name="early")
        assert isinstance(spawned, dict) and spawned["running"] is False
        async with (
            c.bus.subscribe() as events,
            connect(c.paths.hosts_sock, on_push=on_push) as host,
        ):
            with pytest.raises(InvalidRequest, match="register first"):
                await host.call(
                    LinkAgentStateReq(cmd="agent_state", agent="alice", turn_state="idle", since=0)
                )
            await host.call(LinkRegisterReq(cmd="register", host_id="h1"))
            with anyio.fail_after(5):
                await got_all.wait()
            activated = sorted(p["agent"] for p in pushed if p["cmd"] == "activate")
            assert activated == ["alice", "early", "queen"]
            first = next(p for p in pushed if p["cmd"] == "activate")
            assert first["config"]["tool_groups"]  # the applied config travels along
            listed = await op_call(op, "agents")
            assert isinstance(listed, list)
            assert {a["name"]: a["running"] for a in listed} == {
                "alice": True,
                "queen": True,
                "early": True,
            }
            await host.call(
                LinkAgentStateReq(
                    cmd="agent_state", agent="alice", turn_state="thinking", since=123.0
                )
            )
            listed = await op_call(op, "agents")
            assert isinstance(listed, list)
            alice = next(a for a in listed if a["name"] == "alice")
            assert alice["turn_state"] == "thinking" and alice["turn_state_since"] == 123.0
            # A replaced incarnation's last report (its "stopped", after a restart) is not
            # the agent's state: the current one's stands.
            live = next(p["incarnation"] for p in pushed if p.get("agent") == "alice")
            for incarnation, state in ((live - 1, "stopped"), (live, "idle")):
                await host.call(
                    LinkAgentStateReq(
                        cmd="agent_state",
                        agent="alice",
                        turn_state=state,
                        since=124.0,
                        incarnation=incarnation,
                    )
                )
                listed = await op_call(op, "agents")
                assert isinstance(listed, list)
                alice = next(a for a in listed if a["name"] == "alice")
                assert alice["turn_state"] == ("thinking" if state == "stopped" else "idle")
            async with agent(c.paths, "alice") as alice_sock:
                meta = await agent_call(alice_sock, "get_agent_meta")
                assert isinstance(meta, dict) and meta["running"] is True
            # A crash of an incarnation the coordinator has since replaced is not this one's.
            await host.call(
                LinkAgentCrashedReq(
                    cmd="agent_crashed", agent="alice", reason="stale", incarnation=live - 1
                )
            )
            assert c.hostlink.running("alice")
            # A crash report: not running, and queen (root manager) hears of it.
            await host.call(
                LinkAgentCrashedReq(
                    cmd="agent_crashed",
                    agent="alice",
                    reason="harness exploded",
                    incarnation=live,
                )
            )
            assert not c.hostlink.running("alice")
            async with agent(c.paths, "queen") as queen:
                woke = await agent_call(queen, "wait", timeout=5)
            assert isinstance(woke, dict) and "harness exploded" in woke["messages"][0]["body"]
            with pytest.raises(InvalidRequest, match="already connected"):
                async with connect(c.paths.hosts_sock) as second:
                    await second.call(LinkRegisterReq(cmd="register", host_id="h1"))
            await host.aclose()
            # The host's connection ended: everything it ran is no longer running.
            with anyio.fail_after(5):
                async for event in events:
                    if event["kind"] == "host" and not event["connected"]:
                        break
        assert not c.hostlink.running("queen")
        assert c.hostlink.hosts == {}


async def test_a_registering_hosts_pass_leaves_an_agent_being_spawned_to_its_spawn(
    tmp_path: Path,
) -> None:
    # A spawn writes the agent (its row makes it "desired running") before it starts it.
    # A host registering in between found it not running and started it too, before the
    # spawn had opened its socket: the harness's first connection failed, and the spawn's
    # own start then restarted it. The spawn claims the agent until it has started it.
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with coordinator(tmp_path) as c:
        pushed: list[dict[str, Any]] = []
        bob_started = anyio.Event()

        def on_push(frame: dict[str, Any]) -> None:
            pushed.append(frame)
            if frame == {**frame, "cmd": "activate", "agent": "bob"}:
                bob_started.set()

        with c.placement.starting("alice"):
            async with connect(c.paths.hosts_sock, on_push=on_push) as host:
                await host.call(LinkRegisterReq(cmd="register", host_id="h1"))
                with anyio.fail_after(10):
                    await bob_started.wait()
                # The pass goes by name: alice's turn came (and went) before bob's.
                assert [p["agent"] for p in pushed if p["cmd"] == "activate"] == ["bob"]
                assert not c.hostlink.running("alice")
