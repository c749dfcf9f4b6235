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

import pytest

from hyperhive.config import HivePaths
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

            # Spawned: each repo is its own agent's and its ancestors', nobody else's.
            await until(lambda: acl("grandkid") == {uid["grandkid"], uid["kid"], uid["p1"]})
            assert acl("kid") == {uid["kid"], uid["p1"]}

            moved = await op_call(op, "set_parent", child="kid", new_parent="p2")
            assert isinstance(moved, dict) and moved["changed"] is True

            # The whole moved subtree follows: p2 in, p1 out; p1's and p2's own untouched.
            await until(lambda: acl("grandkid") == {uid["grandkid"], uid["kid"], uid["p2"]})
            assert acl("kid") == {uid["kid"], uid["p2"]}
            assert acl("p1") == {uid["p1"]} and acl("p2") == {uid["p2"]}
            toml = paths.agent_config_repo("grandkid") / "agent.toml"
            assert uid["p1"] not in named_uids(toml) and uid["p2"] in named_uids(toml)

            assert c.mirror.git.log(1)[0]["subject"] == "reparent kid: p1 -> p2"
    finally:
        for agent in AGENTS:
            remove_user(paths, agent)
