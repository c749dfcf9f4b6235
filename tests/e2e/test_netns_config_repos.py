"""An agent's config repo lives on its host's disk, never the coordinator's (#14).

The coordinator and agent host h1 on separate network stacks, each with its
own home (``tests/support/netns_remote``). The operator spawns bob on h1,
proposes and approves a config change, is told ``choom`` must not open bob's
session here, then destroys bob: the proposed repo is
seeded, committed to and read (for the approval's diff) on h1 through the host
link, bob's directories go to h1's trash, and the coordinator's home never
holds an ``agents/bob`` directory at any step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.gitrepo import GitRepo
from tests.support.model_server import ModelServer
from tests.support.netns_remote import NETNS_E2E, RemoteHive, remote_hive
from tests.support.procs import agent_rows, hivectl, hivectl_json, wait_until

pytestmark = NETNS_E2E


@pytest.fixture
def hive(tmp_path: Path, claude_bin: Path) -> Iterator[tuple[RemoteHive, ModelServer]]:
    with remote_hive(tmp_path, claude_bin, []) as made:
        yield made


def test_spawn_propose_approve_and_destroy_on_a_remote_hosts_disk(
    hive: tuple[RemoteHive, ModelServer],
) -> None:
    h, _model = hive
    coord, remote = HivePaths(h.home), HivePaths(h.host_home)
    h.start_h1()
    try:
        wait_until(
            lambda: any(row["name"] == "h1" for row in hivectl_json(h.home, "hosts", "list")),
            60,
            "h1 registered",
        )
        spawned = hivectl(h.home, "agents", "spawn", "bob", "--host", "h1")
        # Confirmed by h1 through the coordinator: hivectl cannot reach h1 itself.
        assert "spawned bob (running)" in spawned.stdout, spawned.stdout
        assert agent_rows(h.home)["bob"]["host"] == "h1"
        repo = GitRepo(remote.agent_config_repo("bob"))
        wait_until(lambda: (repo.path / "agent.toml").exists() or None, 60, "bob's repo on h1")
        seeded = repo.head()

        proposed = hivectl(h.home, "perms", "set", "bob", "--groups", "messaging,web_tools")
        assert "approval #1 created" in proposed.stdout
        # The proposal is a commit on h1's disk, and the diff the operator reads came from there.
        assert repo.head() != seeded
        assert "web_tools" in (repo.path / "agent.toml").read_text()
        shown = hivectl_json(h.home, "approvals", "show", "1")
        assert "+++ proposed/bob.toml" in shown["diff"] and "web_tools" in shown["diff"]
        approved = hivectl(h.home, "approvals", "approve", "1", "--json")
        assert json.loads(approved.stdout)["state"] == "approved"
        assert "web_tools" in hivectl_json(h.home, "perms", "show", "bob")["tool_groups"]
        assert not coord.agent_dir("bob").exists()

        # An operator's claude session in bob's sandbox would start in empty dirs here.
        choom = hivectl(h.home, "choom", "bob", check=False)
        assert choom.returncode != 0 and "on agent host h1's disk" in choom.stderr, choom.stderr
        assert not coord.agent_dir("bob").exists()

        hivectl(h.home, "agents", "destroy", "bob", "--yes")
        trash = remote.home / "agents" / ".trash"
        wait_until(
            lambda: not remote.agent_dir("bob").exists() or None, 60, "bob's dirs gone on h1"
        )
        [trashed] = [p for p in trash.iterdir() if p.name.startswith("bob-")]
        # The whole history went to the trash: the seed and the approved proposal.
        assert seeded in {c["commit"] for c in GitRepo(trashed / "config").log()}
        assert "bob" not in agent_rows(h.home)
    except (TimeoutError, AssertionError) as exc:
        raise AssertionError(f"{exc}\n{h.logs()}") from None
    assert not coord.agent_dir("bob").exists()
    assert not (coord.home / "agents" / ".trash").exists() or not any(
        (coord.home / "agents" / ".trash").iterdir()
    )
