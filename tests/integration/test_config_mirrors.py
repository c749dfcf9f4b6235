"""A manager edits the config repo of a child held by another host, through a mirror (#14).

The manager runs on the local host (the coordinator's home is its disk); its
child is pinned to a remote host over loopback TCP with a home of its own.
The manager's host keeps a mirror of the child's repo at the path its
sandbox binds (``agents/<child>/config``); the manager commits there and asks
``request_apply_commit`` as it would with the child beside it; the commit
lands in the child's real repo on its host, and that is what the operator
approves. Only an ancestor may; a bad commit or an oversized file is refused
with a message naming the agent and the host; moving the child back beside
its manager takes the mirror away.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import InvalidRequest, NotFound, PermissionDenied
from hyperhive.gitrepo import GitRepo
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import (
    OpApprovalShowReq,
    OpLifecycleReq,
    OpPermsSetReq,
    OpResolveReq,
    OpSetParentReq,
    OpSpawnReq,
)
from hyperhive.protocol.move import OpAgentMoveReq
from tests.support.hive import agent, agent_call, operator, running_hive, seed_home
from tests.support.hostlink import add_host, inprocess_remote_host
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


def _head_text(repo: Path) -> str:
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", "HEAD:agent.toml"], capture_output=True, text=True
    )
    return shown.stdout if shown.returncode == 0 else ""


def _mirror_source(paths: HivePaths, agent_name: str) -> str | None:
    marker = paths.agent_dir(agent_name) / "mirror.json"
    try:
        return str(json.loads(marker.read_text())["source"])
    except (OSError, ValueError):
        return None


def _commit(repo: Path, text: str, message: str) -> None:
    (repo / "agent.toml").write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=alice", "-c", "user.email=a@h"]
    subprocess.run([*git, "commit", "-qam", message], check=True)


async def test_a_manager_edits_its_childs_config_held_by_another_host(
    tmp_path: Path, claude_bin: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"alice": MANAGER, "carol": MANAGER},
        topology={"alice": None, "carol": None},
        hive_toml='hostlink = { listen = "127.0.0.1:0", lease_seconds = 60 }\n',
        store_url=hive_store_url,
    )
    a = HivePaths(tmp_path)  # the local host's disk (the coordinator's home)
    b = HivePaths(tmp_path / "h2-disk")
    async with running_hive(tmp_path, claude_bin) as (c, local), operator(c.paths) as op:
        cred = await add_host(op, "h2", tmp_path / "creds")
        async with inprocess_remote_host(c.paths, b.home, cred):
            await until(lambda: "h2" in c.hostlink.hosts)
            await op.call(OpSpawnReq(cmd="spawn", name="bob", parent="alice", host="h2"))
            for name in ("alice", "bob", "carol"):
                await op.call(OpLifecycleReq(cmd="agent_kill", agent=name))  # no turns here
            real = GitRepo(b.agent_config_repo("bob"))
            await until(lambda: _head_text(real.path) == c.registry.text("bob"))

            # The manager's host mirrors bob's repo where its sandbox binds it.
            mirror = a.agent_config_repo("bob")
            await until(lambda: _mirror_source(a, "bob") == real.head())
            assert _head_text(mirror) == c.registry.text("bob")
            assert not (a.agent_dir("bob") / "state").exists()  # a mirror, not bob's dirs

            # alice commits there and asks, as if bob were beside her.
            _commit(mirror, 'tool_groups = ["messaging", "web_tools"]\n', "bob: the web")
            mirrored = GitRepo(mirror).head()
            async with agent(c.paths, "alice") as alice:
                asked = await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")
                assert isinstance(asked, dict)
                # The approval records the commit in bob's real repo, on h2.
                assert asked["commit"] == real.head() != mirrored
                assert "web_tools" in _head_text(real.path)
                assert real._git("log", "-1", "--format=%s").stdout.strip() == "bob: the web"
                shown = await op.call(
                    OpApprovalShowReq(cmd="approval_show", approval_id=asked["approval_id"])
                )
                assert shown.diff is not None and '+    "web_tools",' in (shown.diff)
                await op.call(OpResolveReq(cmd="approve", approval_id=asked["approval_id"]))
                assert ToolGroup.WEB_TOOLS in c.registry.config("bob").tool_groups
                await until(lambda: _mirror_source(a, "bob") == real.head())

                # A commit id the mirror lacks, and a file over the limit: said, naming both.
                with pytest.raises(
                    NotFound, match=f"no commit 'deadbeef' in .*bob.* {local.host_id}"
                ):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="deadbeef")
                big = 'tool_groups = ["messaging"]\n' + "#" * (300 * 1024) + "\n"
                _commit(mirror, big, "too big")
                with pytest.raises(InvalidRequest, match="bob's agent.toml .* 256 KiB"):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")
                assert "#" * 100 not in _head_text(real.path)

            # carol, on the same host but not bob's ancestor, is refused.
            async with agent(c.paths, "carol") as carol:
                with pytest.raises(PermissionDenied, match="not a descendant"):
                    await agent_call(carol, "request_apply_commit", agent="bob", commit="HEAD")

            # The operator's change in the real repo reaches the mirror (a fresh base).
            await op.call(OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["messaging"]))
            await until(lambda: _mirror_source(a, "bob") == real.head())
            assert "web_tools" not in _head_text(mirror) and "#" not in _head_text(mirror)

            # A reparent out of this host's reach takes the mirror away; one back into it
            # (under carol now) brings it back, for carol alone.
            await op.call(OpSetParentReq(cmd="set_parent", child="bob", new_parent=None))
            await until(lambda: not a.agent_dir("bob").exists())
            await op.call(OpSetParentReq(cmd="set_parent", child="bob", new_parent="carol"))
            await until(lambda: _mirror_source(a, "bob") == real.head())
            async with agent(c.paths, "alice") as alice:
                with pytest.raises(PermissionDenied, match="not a descendant"):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")

            # bob moved beside its manager: its own directories replace the mirror.
            latest = _head_text(real.path)
            await op.call(OpAgentMoveReq(cmd="agent_move", agent="bob", to=local.host_id))
            await until(lambda: (a.agent_dir("bob") / "state").is_dir())
            assert _mirror_source(a, "bob") is None
            assert _head_text(a.agent_config_repo("bob")) == latest
