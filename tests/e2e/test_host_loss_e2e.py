"""A lost host wakes its agents' manager once, listing them: one turn per host loss.

The manager runs on the real claude CLI (against the scripted model) on an
in-process local host; its children run on two remote hosts that dial the
coordinator's network link for real and heartbeat, then fall silent one after
the other. Each silence outlives the lease: the manager gets one message and
one turn for the three agents of the first host, then one for the two of the
second; a probe afterwards shows no turn left over.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.permissions import ToolGroup
from tests.integration.test_host_lease import beat, host
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.hostlink import Pushes, add_host, link_url
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import until
from tests.support.turn_scenarios import said, starts_turn

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(240)]

CHILDREN = {"h1": ("w1", "w2", "w3"), "h2": ("v1", "v2")}
PROBE = "probe: anything left over?"


async def test_each_lost_host_is_one_message_and_one_turn_for_the_manager(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(always(text("noted")))
    manager = AgentConfig(
        tool_groups=list(ToolGroup.MANAGER_DEFAULT), env=agent_env(model_server.url)
    )
    seed_home(
        tmp_path,
        {"queen": manager},
        hive_toml='hostlink = { listen = "127.0.0.1:0", lease_seconds = 2 }\n',
    )
    async with (
        running_hive(tmp_path, claude_bin) as (c, local),
        operator(c.paths) as op,
        anyio.create_task_group() as tg,
    ):
        await until(lambda: "queen" in local.agents)
        beating: dict[str, anyio.CancelScope] = {}

        async def remote(name: str, ready: anyio.Event) -> None:
            cred = await add_host(op, name, tmp_path / "creds")
            pushes = Pushes()
            async with host(LinkTarget(link_url(c.paths), name, cred), pushes) as (link, _):
                with anyio.CancelScope() as beating[name]:
                    async with anyio.create_task_group() as live:
                        live.start_soon(beat, link, 0.2)
                        for child in CHILDREN[name]:
                            await op_call(op, "spawn", name=child, parent="queen", host=name)
                            await pushes.activation(child)
                        ready.set()
            # Silent and gone: its lease runs out 2 s after the last beat.

        for name in CHILDREN:
            ready = anyio.Event()
            tg.start_soon(remote, name, ready)
            await ready.wait()

        def turns() -> list[str]:
            return [said(r) for r in model_server.main_requests if starts_turn(r)]

        assert turns() == []  # spawned by the operator: the manager was not woken
        for i, (name, children) in enumerate(CHILDREN.items(), start=1):
            beating[name].cancel()
            await until(lambda n=name: all(c.hostlink.lost.get(a) == n for a in CHILDREN[n]), 30)
            await until(lambda i=i: len(turns()) >= i, 60)
            await until(lambda: local.agents["queen"].bus.turn_state == "idle", 60)
            woke = turns()[i - 1]
            assert f"[host_lost] Agent host {name} is lost" in woke
            assert f"{', '.join(children)} wait for it to come back" in woke

        mailbox = await op_call(op, "messages", agent="queen")
        assert isinstance(mailbox, dict)
        notices = [m["body"] for m in mailbox["inbox"] if m["from"] == "system"]  # type: ignore[index]
        assert len(notices) == 2 and all("[host_lost]" in n for n in notices)

        await op_call(op, "send", to="queen", body=PROBE)
        await until(lambda: any(PROBE in t for t in turns()), 60)
        assert len(turns()) == 3 and PROBE in turns()[2]  # nothing else woke it
        tg.cancel_scope.cancel()
