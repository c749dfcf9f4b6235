"""The dashboard reads each agent's state from the host that holds it (over that host's
link), and the work of every host it can reach (real HTTP): a local host and a second
one (dialled over the network link, with a run dir of its own) in-process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hyperhive.agent.host import AgentHost
from hyperhive.config import AgentConfig, HivePaths, load_hive_config
from hyperhive.core.dashboard.hostproxy import HostProxy
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.protocol import OpSpawnReq
from tests.support.hive import operator, running_hive, seed_home
from tests.support.hostlink import add_host, link_url
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_state_comes_from_the_agents_own_host_and_work_from_every_host(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig(), "bob": AgentConfig()},
        hive_toml='hostlink = { listen = "127.0.0.1:0" }\n',
    )
    async with running_hive(tmp_path, claude_bin) as (c, local), operator(c.paths) as op:
        await until(lambda: {"alice", "bob"} <= set(local.agents), 30)
        cred = await add_host(op, "h2", tmp_path / "creds")
        run2 = tmp_path / "run" / "hosts" / "h2"
        second = AgentHost(
            HivePaths(tmp_path, run2),
            load_hive_config(tmp_path, {}),
            remote=LinkTarget(link_url(c.paths), "h2", cred),
        )
        async with anyio.create_task_group() as tg:
            await tg.start(second.run)
            await until(lambda: "h2" in c.hostlink.hosts, 30)
            # carol is pinned to h2 by the operator; alice and bob stay on the local host.
            await op.call(OpSpawnReq(cmd="spawn", name="carol", host="h2"))
            await until(lambda: "carol" in second.agents, 30)
            proxy = HostProxy(c.paths.run, c.hostlink)
            assert (await proxy.state("carol"))["agent"] == "carol"
            assert (await proxy.state("alice"))["agent"] == "alice"
            # The local host alone does not know carol; the proxy asked h2.
            assert "carol" not in local.agents
            work = await proxy.work()
            assert {"alice", "bob", "carol"} <= set(work.agents)
            with anyio.move_on_after(10):
                await second.stop_all(graceful=False)
            tg.cancel_scope.cancel()
