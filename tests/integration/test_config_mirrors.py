"""A manager edits the config repo of a child held by another host, through a mirror (#14).

The manager runs on the local host (the coordinator's home is its disk); its
child is pinned to a remote host over loopback TCP with a home of its own.
The manager's host keeps a mirror of the child's repo at the path its
sandbox binds (``agents/<child>/config``); the manager commits there and asks
``request_apply_commit`` as it would with the child beside it; the commit
lands in the child's real repo on its host, and that is what the operator
approves. Only an ancestor may; a bad commit or an oversized file is refused
with a message naming the agent and the host; moving the child back beside
its manager takes the mirror away, and so does a reparent out of its reach. Under
bubblewrap, the mirror is bound into the manager's sandbox and its user alone (of
the two) may write it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import HiveError, InvalidRequest, NotFound, PermissionDenied, Unavailable
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
from hyperhive.repoacl import named_uids
from hyperhive.sysusers import existing_uid
from tests.support.hive import agent, agent_call, operator, running_hive, seed_home
from tests.support.hostlink import add_host, inprocess_remote_host
from tests.support.sandboxed import agent_enclosed, run_sandboxed, traversable_home
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

MANAGER = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))


def _head_text(repo: Path) -> str | None:
    """``agent.toml`` at the repo's head (None: no such commit or file yet)."""
    shown = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(repo), "show", "HEAD:agent.toml"],
        capture_output=True,
        text=True,
    )
    return shown.stdout if shown.returncode == 0 else None


def _head(repo: GitRepo) -> str | None:
    try:
        return repo.resolve("HEAD")
    except HiveError:
        return None


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
            await until(lambda: _mirror_source(a, "bob") == _head(real))
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
                assert "web_tools" in (_head_text(real.path) or "")
                assert real._git("log", "-1", "--format=%s").stdout.strip() == "bob: the web"
                shown = await op.call(
                    OpApprovalShowReq(cmd="approval_show", approval_id=asked["approval_id"])
                )
                assert shown.diff is not None and '+    "web_tools",' in (shown.diff)
                await op.call(OpResolveReq(cmd="approve", approval_id=asked["approval_id"]))
                assert ToolGroup.WEB_TOOLS in c.registry.config("bob").tool_groups
                await until(lambda: _mirror_source(a, "bob") == _head(real))

                # A commit id the mirror lacks, and a file over the limit: said, naming both.
                with pytest.raises(
                    NotFound, match=f"no commit 'deadbeef' in .*bob.* {local.host_id}"
                ):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="deadbeef")
                big = 'tool_groups = ["messaging"]\n' + "#" * (300 * 1024) + "\n"
                _commit(mirror, big, "too big")
                with pytest.raises(InvalidRequest, match="bob's agent.toml .* 256 KiB"):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")
                assert "#" * 100 not in (_head_text(real.path) or "")

            # carol, on the same host but not bob's ancestor, is refused.
            async with agent(c.paths, "carol") as carol:
                with pytest.raises(PermissionDenied, match="not a descendant"):
                    await agent_call(carol, "request_apply_commit", agent="bob", commit="HEAD")

            # The operator's change in the real repo reaches the mirror (a fresh base).
            await op.call(OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["messaging"]))
            await until(lambda: _mirror_source(a, "bob") == _head(real))
            text = _head_text(mirror) or ""
            assert "web_tools" not in text and "#" not in text

            # A reparent out of this host's reach takes the mirror away; one back into it
            # (under carol now) brings it back, for carol alone.
            await op.call(OpSetParentReq(cmd="set_parent", child="bob", new_parent=None))
            await until(lambda: not a.agent_dir("bob").exists())
            await op.call(OpSetParentReq(cmd="set_parent", child="bob", new_parent="carol"))
            await until(lambda: _mirror_source(a, "bob") == _head(real))
            async with agent(c.paths, "alice") as alice:
                with pytest.raises(PermissionDenied, match="not a descendant"):
                    await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")

            # bob moved beside its manager: its own directories replace the mirror.
            latest = _head_text(real.path)
            await op.call(OpAgentMoveReq(cmd="agent_move", agent="bob", to=local.host_id))
            await until(lambda: (a.agent_dir("bob") / "state").is_dir())
            assert _mirror_source(a, "bob") is None
            assert latest is not None and _head_text(a.agent_config_repo("bob")) == latest


async def test_a_request_through_a_mirror_waits_for_the_childs_host_and_names_it(
    tmp_path: Path, claude_bin: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"alice": MANAGER},
        topology={"alice": None},
        hive_toml='hostlink = { listen = "127.0.0.1:0", lease_seconds = 60 }\n',
        store_url=hive_store_url,
    )
    a = HivePaths(tmp_path)
    b = HivePaths(tmp_path / "h2-disk")
    async with running_hive(tmp_path, claude_bin) as (c, _local), operator(c.paths) as op:
        c.disks.wait = 1.0  # what "briefly" is for a host that is away, in a test
        cred = await add_host(op, "h2", tmp_path / "creds")
        real = GitRepo(b.agent_config_repo("bob"))
        mirror = a.agent_config_repo("bob")
        async with inprocess_remote_host(c.paths, b.home, cred):
            await until(lambda: "h2" in c.hostlink.hosts)
            await op.call(OpSpawnReq(cmd="spawn", name="bob", parent="alice", host="h2"))
            for name in ("alice", "bob"):
                await op.call(OpLifecycleReq(cmd="agent_kill", agent=name))  # no turns here
            await until(lambda: _head(real) is not None and _mirror_source(a, "bob") == _head(real))
        await until(lambda: "h2" not in c.hostlink.hosts)
        before = _head(real)

        # bob's host is away: alice's commit in the mirror is kept, her request refused
        # after a short wait, naming the host; nothing reached an approval.
        _commit(mirror, 'tool_groups = ["messaging", "web_tools"]\n', "bob: the web")
        mirrored = GitRepo(mirror).head()
        async with agent(c.paths, "alice") as alice:
            with pytest.raises(Unavailable, match="agent host h2 holding bob's config repo"):
                await agent_call(alice, "request_apply_commit", agent="bob", commit="HEAD")
        assert GitRepo(mirror).head() == mirrored
        assert await c.store.approvals.list() == []

        # It comes back: the same request goes through, into bob's real repo on h2.
        async with inprocess_remote_host(c.paths, b.home, cred):
            await until(lambda: "h2" in c.hostlink.hosts)
            async with agent(c.paths, "alice") as alice:
                asked = await agent_call(
                    alice, "request_apply_commit", agent="bob", commit=mirrored
                )
            assert isinstance(asked, dict)
            assert asked["commit"] == real.head() != before
            assert "web_tools" in (_head_text(real.path) or "")


@pytest.mark.xdist_group("sysusers")
@pytest.mark.skipif(os.geteuid() != 0, reason="per-agent users need root (CI runs as root)")
async def test_the_mirror_is_bound_into_the_managers_sandbox_and_writable_by_it_alone(
    tmp_path: Path, claude_bin: Path
) -> None:
    """Under bubblewrap with real per-agent users: the mirror belongs to the child's user,
    the manager's sandbox binds it and its user commits there; a non-ancestor's sandbox
    has no such path and its user cannot write the mirror."""
    names = ("alice", "bob", "carol")
    with (
        traversable_home("hh-mirror-", names) as home,
        traversable_home("hh-mirror-h2-", ()) as h2_home,
    ):
        seed_home(
            home,
            {"alice": MANAGER, "carol": MANAGER},
            topology={"alice": None, "carol": None},
            hive_toml='runtime = "bwrap"\n'
            'hostlink = { listen = "127.0.0.1:0", lease_seconds = 60 }\n',
        )
        a, b = HivePaths(home), HivePaths(h2_home)
        async with (
            running_hive(home, claude_bin, runtime="bwrap") as (c, _local),
            operator(c.paths) as op,
        ):
            cred = await add_host(op, "h2", tmp_path / "creds")
            async with inprocess_remote_host(c.paths, h2_home, cred):
                await until(lambda: "h2" in c.hostlink.hosts)
                await op.call(OpSpawnReq(cmd="spawn", name="bob", parent="alice", host="h2"))
                for name in names:
                    await op.call(OpLifecycleReq(cmd="agent_kill", agent=name))
                real = GitRepo(b.agent_config_repo("bob"))
                await until(lambda: _head_text(real.path) == c.registry.text("bob"), 60)
                await until(lambda: _mirror_source(a, "bob") == _head(real), 60)
                mirror = a.agent_config_repo("bob")
                assert mirror.stat().st_uid == existing_uid(a, "bob")
                carol_uid = existing_uid(a, "carol")
                # Its writers, and its own user (it writes in what they made), as a real repo.
                assert {existing_uid(a, "alice"), existing_uid(a, "bob")} <= named_uids(mirror)
                assert carol_uid not in named_uids(mirror)

                alice = await anyio.to_thread.run_sync(
                    lambda: agent_enclosed(c, "alice", descendants=("bob",))
                )
                assert (
                    alice.enclosure.isolation is not None and mirror in alice.enclosure.isolation.rw
                )
                edit = (
                    f"printf '# by alice\\n' >> {mirror}/agent.toml && "
                    f"git -C {mirror} commit -qam 'alice, from her sandbox' && echo done"
                )
                code, out = await run_sandboxed(alice, ["sh", "-c", edit])
                assert code == 0 and "done" in out, out

                carol = await anyio.to_thread.run_sync(lambda: agent_enclosed(c, "carol"))
                assert (
                    carol.enclosure.isolation is not None
                    and mirror not in carol.enclosure.isolation.rw
                )
                code, out = await run_sandboxed(carol, ["sh", "-c", f"ls {mirror} || true"])
                assert "agent.toml" not in out
                assert carol_uid is not None and carol.enclosure.isolation.gid is not None
                as_carol = await anyio.run_process(
                    [
                        "setpriv",
                        f"--reuid={carol_uid}",
                        f"--regid={carol.enclosure.isolation.gid}",
                        "--clear-groups",
                        "--",
                        "touch",
                        str(mirror / "agent.toml"),
                    ],
                    check=False,
                )
                assert as_carol.returncode != 0 and b"denied" in as_carol.stderr

                async with agent(c.paths, "alice") as alice_sock:
                    asked = await agent_call(
                        alice_sock, "request_apply_commit", agent="bob", commit="HEAD"
                    )
                assert isinstance(asked, dict) and asked["commit"] == real.head()
                assert "# by alice" in (_head_text(real.path) or "")
                assert "# by alice" in (_head_text(mirror) or "")

                # The host brings the mirror alice wrote in to a new head, as bob's user.
                await op.call(
                    OpPermsSetReq(cmd="perms_set", agent="bob", tool_groups=["web_tools"])
                )
                await until(lambda: _mirror_source(a, "bob") == _head(real), 60)
                assert "web_tools" in (_head_text(mirror) or "")
                assert "# by alice" not in (_head_text(mirror) or "")

                # bob destroyed: its mirror here goes too (and its trash on h2).
                await op.call(OpLifecycleReq(cmd="agent_destroy", agent="bob"))
                await until(lambda: not a.agent_dir("bob").exists())
                assert not b.agent_dir("bob").exists()
