"""The one place an active agent is built (``agent.activation``): found only once whole,
gone with its services, its turn state told as of its current incarnation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import pytest

from hyperhive.agent.activation import Activation, HostParts, activated
from hyperhive.agent.admission import Admission
from hyperhive.agent.enclosure import UNSANDBOXED_NOTE
from hyperhive.agent.events import TurnStateName
from hyperhive.agent.spec import AgentSpec
from hyperhive.bash.records import TaskReport
from hyperhive.config import AgentConfig
from hyperhive.errors import Unavailable
from hyperhive.protocol import GetAgentMetaReq
from tests.support.hive import coordinator, seed_home

pytestmark = pytest.mark.anyio


async def test_an_agent_is_found_only_once_whole_and_not_after_its_services(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    async with coordinator(tmp_path) as c:
        spec = AgentSpec("alice", c.registry.config("alice"), c.paths, c.config, incarnation=3)
        reports: list[tuple[int | None, TurnStateName]] = []
        parts = HostParts(
            Admission(),
            "http://127.0.0.1:1",
            lambda s, state, _: reports.append((s.incarnation, state)),
        )
        activation = Activation(spec)
        # A place given before it is whole is the place it is built with.
        activation.respec(spec.placed("queen", ()))
        # Not whole yet: nothing finds the agent, but its turn state reads (idle).
        assert activation.agent is None and activation.snapshot().turn_state == "idle"
        with anyio.fail_after(30):
            async with activated(activation, parts) as agent:
                assert activation.agent is agent
                assert agent.spec.hive_env()["HIVE_PARENT"] == "queen"
                assert agent.enclosure.notes == (UNSANDBOXED_NOTE,)
                assert agent.spec.state_dir.is_dir() and agent.spec.runtime_dir.is_dir()
                # Whole: its tasks serve at once, and it speaks on its own socket.
                ran = await agent.bash_tasks.run("echo hi", wait_seconds=10)
                assert isinstance(ran, TaskReport) and ran.stdout_tail == "hi\n"
                assert (await agent.call(GetAgentMetaReq(cmd="get_agent_meta"))).name == "alice"
                # Its turn state is told as of the incarnation it serves at that moment: a
                # replaced incarnation's report cannot pass for the current one's.
                agent.bus.set_state("thinking")
                agent.respec(dataclasses.replace(agent.spec, incarnation=4))
                agent.bus.set_state("idle")
                assert reports == [(3, "thinking"), (4, "idle")]
                assert activation.snapshot() == agent.snapshot()
        assert activation.agent is None and activation.spec.incarnation == 4
        with pytest.raises(Unavailable):
            await agent.bash_tasks.run("echo late")


async def test_a_spec_of_another_agent_is_refused(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig(), "bob": AgentConfig()})
    async with coordinator(tmp_path) as c:
        alice = AgentSpec("alice", c.registry.config("alice"), c.paths, c.config)
        parts = HostParts(Admission(), "http://127.0.0.1:1", lambda *_: None)
        with anyio.fail_after(30):
            async with activated(Activation(alice), parts) as agent:
                with pytest.raises(ValueError, match="cannot take bob's spec"):
                    agent.respec(dataclasses.replace(alice, name="bob"))
                assert agent.name == "alice"
