"""A reparent moves who may write the moved subtree's proposed config repos (root only).

Real system users (``useradd``), real ``setfacl``/``getfacl`` on the repos the
agent host seeds and sets (asked over its link: the coordinator has no disk of
them), the operator socket's ``spawn`` and ``set_parent``. The
hive's users are named after its own hive id, so they never collide with
another suite's; every one is removed at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.permissions import ToolGroup
from hyperhive.repoacl import named_uids
from hyperhive.sysusers import existing_uid, remove_user
from tests.support.hive import op_call, operator, running_hive, seed_home
from tests.support.surfaces import until

pytestmark = [
    # Makes system users: one xdist worker for all such tests (concurrent useradd/userdel
    # contend for /etc/passwd's lock).
    pytest.mark.xdist_group("sysusers"),
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="per-agent users need root"),
    pytest.mark.skipif(shutil.which("setfacl") is None, reason="needs Debian's acl"),
]

AGENTS = ("p1", "p2", "kid", "grandkid")


@pytest.fixture
def open_home() -> Iterator[Path]:
    """A home agent users can traverse (pytest's tmp dirs are 0700): git runs as them."""
    path = Path(tempfile.mkdtemp(prefix="hh-acl-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_new_ancestors_gain_the_acl_and_old_ones_lose_it(
    open_home: Path, claude_bin: Path
) -> None:
    seed_home(open_home, {}, hive_toml='runtime = "bwrap"\n')
    paths = HivePaths(open_home)
    try:
        async with (
            running_hive(open_home, claude_bin, runtime="bwrap") as (c, _host),
            operator(c.paths) as op,
        ):
            for name, parent in (("p1", None), ("p2", None), ("kid", "p1"), ("grandkid", "kid")):
                await op_call(op, "spawn", name=name, parent=parent)
            await until(lambda: None not in {existing_uid(paths, a) for a in AGENTS})
            uid = {a: existing_uid(paths, a) for a in AGENTS}

            def acl(agent: str) -> frozenset[int]:
                return named_uids(paths.agent_config_repo(agent))

            # Spawned: each repo is its own agent's and its ancestors', nobody else's (each
            # spawn's seed and ACL sync is its own background task: wait for all of them).
            spawned = {
                "grandkid": {uid["grandkid"], uid["kid"], uid["p1"]},
                "kid": {uid["kid"], uid["p1"]},
                "p1": {uid["p1"]},
                "p2": {uid["p2"]},
            }
            await until(lambda: all(acl(a) == want for a, want in spawned.items()))

            moved = await op_call(op, "set_parent", child="kid", new_parent="p2")
            assert isinstance(moved, dict) and moved["changed"] is True

            # The whole moved subtree follows: p2 in, p1 out; p1's and p2's own untouched.
            # (One sync, repo after repo: wait for the last of them, then check the rest.)
            moved_to = {
                "grandkid": {uid["grandkid"], uid["kid"], uid["p2"]},
                "kid": {uid["kid"], uid["p2"]},
                "p1": {uid["p1"]},
                "p2": {uid["p2"]},
            }
            toml = paths.agent_config_repo("grandkid") / "agent.toml"
            await until(
                lambda: (
                    all(acl(a) == want for a, want in moved_to.items())
                    and uid["p2"] in named_uids(toml)
                )
            )
            assert uid["p1"] not in named_uids(toml)

            assert c.mirror.git.log(1)[0]["subject"] == "reparent kid: p1 -> p2"
    finally:
        for agent in AGENTS:
            remove_user(paths, agent)


async def test_the_host_answers_while_a_slow_setfacl_grants_a_repo(
    open_home: Path, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Granting a running agent its new descendant's repo runs ``setfacl`` off the host's
    event loop: a real ``setfacl``, held by a wrapper until the test lets it go, and the
    host's HTTP server answers meanwhile (on the loop, it would wait for the wrapper's
    own time-out, and the test could not release it).

    A real reparent (the operator's ``set_parent``): the coordinator's own ACL syncs
    (its registration's, the reparent's) then agree with the host's grant, whichever
    lands last. The wrapper holds only calls on alice's own repo, which the reparent's
    sync does not touch: the held one is the host's re-binding of alice's sandbox."""
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    seed_home(
        open_home,
        {"alice": manager, "bob": AgentConfig()},
        topology={"alice": None, "bob": None},
        hive_toml='runtime = "bwrap"\n',
    )
    paths = HivePaths(open_home)
    alice_repo = paths.agent_config_repo("alice")
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "setfacl").write_text(
        "#!/bin/sh\n"
        "for last; do :; done\n"
        f'if [ "$last" = "{alice_repo}" ]; then\n'
        f"  touch {gate}/started\n"
        "  i=0\n"
        f'  while [ ! -e {gate}/release ] && [ "$i" -lt 150 ]; do sleep 0.1; i=$((i+1)); done\n'
        f"  [ -e {gate}/release ] || touch {gate}/timed-out\n"
        "fi\n"
        f'exec {shutil.which("setfacl")} "$@"\n'
    )
    (gate / "setfacl").chmod(0o755)
    try:
        async with (
            running_hive(open_home, claude_bin, runtime="bwrap") as (c, host),
            operator(c.paths) as op,
        ):
            bob_repo = paths.agent_config_repo("bob")

            def ready() -> bool:
                rt = host.agents.get("alice")
                return rt is not None and rt.enclosure.isolation is not None and bob_repo.is_dir()

            await until(ready, 60)
            alice = host.agents["alice"]
            assert (
                alice.enclosure.isolation is not None
                and bob_repo not in alice.enclosure.isolation.rw
            )
            monkeypatch.setenv("PATH", f"{gate}:{os.environ['PATH']}")

            moved = await op_call(op, "set_parent", child="bob", new_parent="alice")
            assert isinstance(moved, dict) and moved["changed"] is True
            await until(lambda: (gate / "started").exists(), 90)
            async with httpx.AsyncClient(base_url=host.base_url) as http:
                assert (await http.get("/healthz")).status_code == 200
            assert not (gate / "timed-out").exists()  # answered while setfacl still waited
            assert bob_repo not in alice.enclosure.isolation.rw  # not re-bound before the grant
            (gate / "release").touch()

            await until(
                lambda: (
                    alice.enclosure.isolation is not None
                    and bob_repo in alice.enclosure.isolation.rw
                )
            )
            uid = existing_uid(paths, "alice")
            await until(lambda: uid in named_uids(bob_repo))
            # ... and it stays: no sync from an older tree takes it away afterwards.
            await c.disks.sync_acls(["alice", "bob"])
            assert uid in named_uids(bob_repo)
    finally:
        for agent in ("alice", "bob"):
            remove_user(paths, agent)
