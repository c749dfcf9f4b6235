"""The tree, applied configs and deploy log live in the store, not on one coordinator's disk.

An older home's ``meta/`` files are adopted into the store once; afterwards
the files are only the store's mirror: a hand edit of them changes nothing,
and the next start rewrites them. A second coordinator with a home of its own
on the same PostgreSQL store sees the same tree, configs and log, and its own
meta repo mirrors that log commit by commit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, load_agent_config
from hyperhive.errors import RouteRefused
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import SendReq
from tests.support.hive import agent, coordinator, op_call, operator, seed_home

pytestmark = pytest.mark.anyio

TREE = {"queen": None, "alice": None, "bob": "alice", "dave": None}


def _git_subjects(meta: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(meta), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


async def test_an_older_home_is_adopted_once_and_its_files_become_a_mirror(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    paths = seed_home(tmp_path, {n: AgentConfig() for n in TREE}, TREE, store_url=hive_store_url)
    (paths.meta / "inputs.toml").write_text('claude_code = "2.0.0"\n')
    async with coordinator(tmp_path) as c:
        assert await c.store.topology.get() == TREE
        assert set(await c.store.meta.configs()) == set(TREE)
        adopted = await c.store.meta.log(limit=100)
        assert {e.action for e in adopted} == {"import", "topology", "inputs"}
        async with agent(paths, "dave") as dave:
            with pytest.raises(RouteRefused):  # bob is alice's child, not dave's sibling
                await dave.call(SendReq(cmd="send", to="bob", body="hi"))
            # A hand edit of the mirror is no way to change the hive.
            paths.topology.write_text(json.dumps(dict.fromkeys(TREE)))
            paths.applied_config("queen").unlink()
            with pytest.raises(RouteRefused):
                await dave.call(SendReq(cmd="send", to="bob", body="hi"))
        assert c.registry.exists("queen")
    history = _git_subjects(paths.meta)
    assert history[0].startswith("adopt ")

    async with coordinator(tmp_path) as c:
        # Not adopted again: the store is the truth, and the mirror is rewritten from it.
        assert len(await c.store.meta.log(limit=100)) == len(adopted)
        assert json.loads(paths.topology.read_text()) == TREE
        assert paths.applied_config("queen").exists()
        assert c.mirror.git.clean_tree()
        assert _git_subjects(paths.meta) == history  # the edits were undone, not committed


async def test_a_second_coordinator_on_the_same_postgres_store_sees_the_same_hive(
    tmp_path: Path, pg_url: str
) -> None:
    first_home, second_home = tmp_path / "a", tmp_path / "b"
    first_home.mkdir()
    second_home.mkdir()
    seed_home(first_home, {n: AgentConfig() for n in TREE}, TREE, store_url=pg_url)
    async with coordinator(first_home) as c, operator(c.paths) as op:
        await op_call(op, "spawn", name="worker", parent="bob")
        await op_call(op, "set_parent", child="dave", new_parent="alice")
        # An applied change (perms set needs the agent's host, #14: none runs here).
        await c.lifecycle.apply(
            "worker", AgentConfig(tool_groups=[ToolGroup.MESSAGING]), "apply worker (operator)"
        )
        await op_call(op, "agent_destroy", agent="queen")
        first_log = await c.store.meta.log(limit=100)
        first_tree = c.topology_store.read_cached()
        first_configs = c.registry.texts()
        first_subjects = _git_subjects(c.paths.meta)

    # A fresh home: no meta files, only the store's URL.
    paths = seed_home(second_home, {}, store_url=pg_url)
    async with coordinator(second_home) as c:
        assert c.topology_store.read_cached() == first_tree
        assert first_tree["worker"] == "bob" and first_tree["dave"] == "alice"
        assert "queen" not in first_tree
        assert c.registry.texts() == first_configs and c.registry.known() == sorted(first_configs)
        assert c.registry.config("worker").tool_groups == [ToolGroup.MESSAGING]
        assert await c.store.meta.log(limit=100) == first_log
        # Its own mirror carries the same files and the same history.
        assert json.loads(paths.topology.read_text()) == first_tree
        assert not paths.applied_config("queen").exists()
        assert load_agent_config(paths.applied_config("worker")).tool_groups == [
            ToolGroup.MESSAGING
        ]
        subjects = _git_subjects(paths.meta)
        for wanted in (
            "spawn worker (operator)",
            "reparent dave: (root) -> alice",
            "destroy queen",
        ):
            assert wanted in subjects and wanted in first_subjects
        assert c.mirror.git.clean_tree()
        # And it carries the hive on: its change is in the store for the next one.
        async with operator(c.paths) as op:
            await op_call(op, "set_parent", child="dave", new_parent=None)
        assert (await c.store.topology.get())["dave"] is None
