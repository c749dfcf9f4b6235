"""Agents' directories are reached through the host that holds them (#14: no shared disk).

Config repos are seeded, read, committed and given their ACLs by the agent's
host, and trashed there on destroy; the coordinator never touches them. The
local host (``hivectl up``'s, in-process here on ``run/hosts.sock``) goes the
same way as a remote one; a remote host here has a home of its own, so
anything the coordinator wrote to its own disk would show. A destroy while
the host is away is kept in the store and carried out when it comes back,
across a coordinator restart.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.errors import PermissionDenied, Unavailable
from hyperhive.gitrepo import GitRepo
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    OpLifecycleReq,
    OpPermsSetReq,
    OpResolveReq,
    OpSpawnReq,
)
from hyperhive.protocol.hostdisk import RepoFile
from hyperhive.protocol.hostreads import LinkAnswerReq
from hyperhive.sysusers import hive_id
from tests.support.hive import (
    agent,
    agent_call,
    coordinator,
    operator,
    running_hive,
    seed_home,
)
from tests.support.hostlink import Pushes, add_host, inprocess_remote_host, link_url, registered
from tests.support.repos import seeded
from tests.support.surfaces import until, until_async

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


def _head_text(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", "HEAD:agent.toml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


async def test_local_host_seeds_reads_commits_and_trashes_config_repos(
    tmp_path: Path, claude_bin: Path, hive_store_url: str | None
) -> None:
    paths = seed_home(
        tmp_path,
        {"alice": MANAGER, "bob": AgentConfig()},
        topology={"alice": None, "bob": "alice"},
        store_url=hive_store_url,
    )
    async with running_hive(tmp_path, claude_bin) as (c, _host), operator(c.paths) as op:
        # Seeded by the host when it registered (the coordinator no longer does it).
        await until(lambda: seeded(paths.agent_config_repo("bob")))
        assert _head_text(paths.agent_config_repo("bob")) == c.registry.text("bob")
        for name in ("alice", "bob"):
            await op.call(OpLifecycleReq(cmd="agent_kill", agent=name))  # no turns here

        # A parent's commit in its child's repo, read back through the host.
        repo = GitRepo(paths.agent_config_repo("bob"))
        (repo.path / "agent.toml").write_text('tool_groups = ["messaging", "web_tools"]\n')
        git = ["git", "-C", str(repo.path), "-c", "user.name=alice", "-c", "user.email=a@h"]
        await anyio.run_process([*git, "commit", "-qam", "give bob the web"])
        async with agent(c.paths, "alice") as alice:
            asked = await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")
        assert isinstance(asked, dict) and asked["commit"] == repo.head()
        await op.call(OpResolveReq(cmd="approve", approval_id=asked["approval_id"]))
        assert ToolGroup.WEB_TOOLS in c.registry.config("bob").tool_groups

        # The operator's perms set is committed by the host.
        proposal = await op.call(
            OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["messaging"])
        )
        assert proposal.commit == repo.head()
        assert "web_tools" not in _head_text(repo.path)

        # A spawn makes the new agent's directories and repo on the host it is placed on.
        await op.call(OpSpawnReq(cmd="spawn", name="carol", parent="alice"))
        await until(lambda: seeded(paths.agent_config_repo("carol")))
        assert (await c.store.placements.get("carol")) is not None
        assert paths.agent_work("carol").is_dir()

        destroyed = await op.call(OpLifecycleReq(cmd="agent_destroy", agent="carol"))
        assert destroyed.trash_waits_for is None and destroyed.data_moved_to is not None
        moved = Path(destroyed.data_moved_to)
        assert moved.parent == paths.home / "agents" / ".trash"
        assert (moved / "config" / ".git").exists()
        assert not paths.agent_dir("carol").exists()
        assert await c.store.trash.all() == []


async def test_a_remote_hosts_agents_live_on_its_disk_and_trash_waits_for_it(
    tmp_path: Path, claude_bin: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"alice": MANAGER},
        hive_toml=f'claude_bin = "{claude_bin}"\nruntime = "unsandboxed"\n'
        'hostlink = { listen = "127.0.0.1:0", lease_seconds = 60 }\n',
        store_url=hive_store_url,
    )
    coord_paths = HivePaths(tmp_path)
    h2_home = tmp_path / "h2-disk"
    h2 = HivePaths(h2_home)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        c.disks.wait = 1.0  # what "briefly" is for a host that is away, in a test
        cred = await add_host(op, "h2", tmp_path / "creds")
        async with inprocess_remote_host(coord_paths, h2_home, cred) as host:
            await until(lambda: "h2" in c.hostlink.hosts)
            # The host took the hive's id: its users would be hh-<hive id>-<agent>.
            await until(lambda: (h2_home / "hive-id").exists())
            assert (h2_home / "hive-id").read_text().strip() == hive_id(coord_paths)

            await op.call(OpSpawnReq(cmd="spawn", name="bob", host="h2"))
            await until(lambda: seeded(h2.agent_config_repo("bob")))
            assert h2.agent_state("bob").is_dir()
            assert not coord_paths.agent_dir("bob").exists()  # never on the coordinator
            await until(lambda: "bob" in host.agents)
            await op.call(OpLifecycleReq(cmd="agent_kill", agent="bob"))

            proposal = await op.call(
                OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["messaging", "web_tools"])
            )
            repo = GitRepo(h2.agent_config_repo("bob"))
            assert proposal.commit == repo.head() and "web_tools" in _head_text(repo.path)
            shown = await c.disks.show("bob", proposal.commit[:10])
            assert shown.commit == proposal.commit and "web_tools" in shown.text
            await op.call(OpResolveReq(cmd="approve", approval_id=proposal.approval_id))
            assert ToolGroup.WEB_TOOLS in c.registry.config("bob").tool_groups
            assert not coord_paths.agent_dir("bob").exists()

        # The host is away: what needs bob's disk is refused, naming the host.
        await until(lambda: "h2" not in c.hostlink.hosts)
        with pytest.raises(Unavailable, match="agent host h2 holding bob's config repo"):
            await op.call(OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["messaging"]))
        # A destroy is not: its trash waits for the host, durably.
        destroyed = await op.call(OpLifecycleReq(cmd="agent_destroy", agent="bob"))
        assert destroyed.trash_waits_for == "h2" and destroyed.data_moved_to is None
        assert [(p.agent, p.host) for p in await c.store.trash.all()] == [("bob", "h2")]
        assert h2.agent_dir("bob").exists()
        # The name is not reused while the old directories wait for trash.
        with pytest.raises(Exception, match="still to be trashed on agent host h2"):
            await op.call(OpSpawnReq(cmd="spawn", name="bob"))

    # A coordinator restart keeps it; the host's return carries it out.
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        assert [p.agent for p in await c.store.trash.all()] == ["bob"]
        async with inprocess_remote_host(coord_paths, h2_home, cred):
            await until_async(lambda: _no_trash(c), 30)
            assert not h2.agent_dir("bob").exists()
            trashed = list((h2_home / "agents" / ".trash").iterdir())
            assert [t.name.split("-")[0] for t in trashed] == ["bob"]
            assert (trashed[0] / "config" / ".git").exists()


async def _no_trash(c: Coordinator) -> bool:
    return not await c.store.trash.all()


async def test_a_host_cannot_answer_a_disk_ask_made_of_another(
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
        t1 = LinkTarget(url, "h1", await add_host(op, "h1", tmp_path / "c"))
        t2 = LinkTarget(url, "h2", await add_host(op, "h2", tmp_path / "c"))
        p1, p2 = Pushes(), Pushes()
        async with registered(t1, p1) as h1, registered(t2, p2) as h2:
            await c.store.placements.assign("alice", "h1", pinned=True)
            shown: list[RepoFile] = []

            async def show() -> None:
                shown.append(await c.disks.show("alice", "HEAD"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(show)
                ask = (await p1.command("repo_show", "alice"))["ask"]
                assert not [f for f in p2.frames if f.get("cmd") == "repo_show"]
                forged = RepoFile(commit="f" * 40, text="tool_groups = []\n")
                with pytest.raises(PermissionDenied, match="was not made of agent host h2"):
                    await h2.call(LinkAnswerReq(cmd="answer", ask=ask, result=forged.model_dump()))
                real = RepoFile(commit="a" * 40, text='tool_groups = ["messaging"]\n')
                await h1.call(LinkAnswerReq(cmd="answer", ask=ask, result=real.model_dump()))
            assert shown == [real]
