"""The meta mirror exports a backlog in a few commits: the first ``serve`` on an older home
with hundreds of agents adopts them all in O(1) git commits (not one per config), and
the mirror still equals the store's log, idempotently by sequence number."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig
from hyperhive.core.state.mirror import runs_of_one_change
from hyperhive.store.rows import DeployEntry
from tests.support.hive import coordinator, op_call, operator, seed_home

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

AGENTS = 200


def _git(meta: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(meta), *args], capture_output=True, text=True, check=True
    ).stdout


def _commits(meta: Path) -> int:
    return int(_git(meta, "rev-list", "--count", "HEAD"))


def _seq(meta: Path) -> int:
    return int((meta / ".git" / "hyperhive-mirror-seq").read_text())


async def test_first_serve_adopts_hundreds_of_agents_in_a_few_commits(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    names = [f"a{i:03}" for i in range(AGENTS)]
    tree = {n: (None if i % 10 == 0 else names[i - i % 10]) for i, n in enumerate(names)}
    paths = seed_home(
        tmp_path,
        {n: AgentConfig(tool_groups=["messaging"]) for n in names},
        tree,
        store_url=hive_store_url,
    )
    async with coordinator(tmp_path) as c:
        log = await c.store.meta.log(limit=AGENTS + 10)
        assert len(log) >= AGENTS + 1  # a config each, and the tree
        # The files the adoption committed are the store's, and nothing is left over.
        assert _commits(paths.meta) <= 4, _git(paths.meta, "log", "--format=%s")
        assert _seq(paths.meta) == max(e.seq for e in log)
        configs = await c.store.meta.configs()
        assert len(configs) == AGENTS
        for name, text in configs.items():
            assert paths.applied_config(name).read_text() == text
        assert json.loads(paths.topology.read_text()) == await c.store.topology.get()
        assert c.mirror.git.clean_tree()
        adoption = _git(paths.meta, "log", "--format=%s%n%b", "--grep", "^adopt ")
        assert f"deploy log entries, seq {min(e.seq for e in log)} to " in adoption

        before, adopted_seq = _commits(paths.meta), _seq(paths.meta)
        assert await c.mirror.sync() is not None
        assert _commits(paths.meta) == before  # nothing new: nothing committed
        # A change afterwards is its own commit, as before.
        async with operator(c.paths) as op:
            await op_call(op, "spawn", name="late", parent="a000")
        assert _commits(paths.meta) == before + 1
        assert "spawn late" in _git(paths.meta, "log", "-1", "--format=%s")
        last = (await c.store.meta.log(limit=1))[0]
        assert _seq(paths.meta) == last.seq
        assert f"Deploy-Seq: {last.seq}" in _git(paths.meta, "log", "-1", "--format=%b")

    # An export cut short after its commit, before its sequence number was kept: the
    # next start repeats it, and the repeat commits nothing.
    (paths.meta / ".git" / "hyperhive-mirror-seq").write_text(f"{adopted_seq}\n")
    count = _commits(paths.meta)
    async with coordinator(tmp_path) as c:
        assert _commits(paths.meta) == count
        assert _seq(paths.meta) == (await c.store.meta.log(limit=1))[0].seq
        assert c.mirror.git.clean_tree()


def _entry(seq: int, message: str) -> DeployEntry:
    return DeployEntry(
        seq=seq, at=0.0, action="apply", agent=f"a{seq}", message=message, config="x"
    )


def test_runs_group_consecutive_entries_of_one_change_only() -> None:
    entries = [_entry(1, "adopt"), _entry(2, "adopt"), _entry(3, "spawn"), _entry(4, "adopt")]
    runs = runs_of_one_change(entries)
    assert [[e.seq for e in run] for run in runs] == [[1, 2], [3], [4]]
    assert runs_of_one_change([]) == []
