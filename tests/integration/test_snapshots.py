"""An agent's snapshots through the real chain: its host collects and packs them, the
host link carries them in chunks, the coordinator checks who sends and keeps them in
the store; a replacement's host reads them back and restores them."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import anyio
import pytest

from hyperhive.agent.activation import RESTORE_PENDING
from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.host import AgentHost
from hyperhive.agent.snapshotfiles import claude_slug, collect, pack
from hyperhive.agent.snapshots import LinkSnapshots, Packed, restore
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.errors import PermissionDenied
from tests.support.hive import op_call, operator, running_hive, seed_home
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

SID = "5f1d0c3a-aaaa-4bbb-8ccc-ddddeeeeffff"


def seed_state(spec: AgentSpec) -> Path:
    """Notes, the harness's session id and claude's session file, as a turn leaves them."""
    (spec.state_dir / "notes.md").write_text("the answer is 42\n")
    (spec.state_dir / "harness").mkdir(exist_ok=True)
    (spec.state_dir / "harness" / "session.json").write_text(json.dumps({"session_id": SID}))
    sessions = spec.home_dir / ".claude" / "projects" / claude_slug(spec.work_dir)
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / f"{SID}.jsonl").write_text('{"type":"user","message":"first prompt"}\n')
    return sessions / f"{SID}.jsonl"


def durable_files(spec: AgentSpec) -> dict[str, int]:
    """What the snapshot must carry, found independently: every regular file of state/
    and the resumed session's file, with its size."""
    found: dict[str, int] = {}
    for root, _dirs, files in os.walk(spec.state_dir):
        for name in files:
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                found[str(path.relative_to(spec.state_dir))] = path.stat().st_size
    session = spec.home_dir / ".claude" / "projects" / claude_slug(spec.work_dir) / f"{SID}.jsonl"
    found["<session>"] = session.stat().st_size
    return found


async def running(c: Coordinator, local: AgentHost, name: str) -> ActiveAgent:
    await until(lambda: name in local.agents and c.hostlink.placement.get(name), 60)
    return local.agents[name]


async def test_a_snapshot_is_sent_when_something_changed_and_comes_back_whole(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    async with running_hive(tmp_path, claude_bin) as (c, local):
        agent = await running(c, local, "alice")
        seed_state(agent.spec)
        expected = durable_files(agent.spec)

        assert await agent.snapshots.take()
        first = await c.store.snapshots.head("alice")
        assert first is not None and first.host == "test-host"
        assert (first.files, first.raw_bytes) == (len(expected), sum(expected.values()))

        async with operator(c.paths) as op:
            shown = await op_call(op, "agent_last_snapshot", agent="alice")
        assert shown == {
            "host": "test-host",
            "taken_at": first.taken_at,
            "size": first.size,
            "raw_bytes": first.raw_bytes,
            "files": first.files,
        }

        # Nothing changed: nothing sent, the store's row untouched.
        assert not await agent.snapshots.take()
        assert await c.store.snapshots.head("alice") == first

        (agent.spec.state_dir / "todo.md").write_text("call bob\n")
        expected = durable_files(agent.spec)
        assert await agent.snapshots.take()
        second = await c.store.snapshots.head("alice")
        assert second is not None and second.sha256 != first.sha256
        assert (second.files, second.raw_bytes) == (len(expected), sum(expected.values()))
        told = [e for e in agent.bus.history if e["kind"] == "snapshot"]
        assert [e["size"] for e in told] == [first.size, second.size]

        # A replacement's host (another disk: another home) restores it, read over the link.
        elsewhere = dataclasses.replace(agent.spec, paths=HivePaths(tmp_path / "other"))
        for d in (elsewhere.state_dir, elsewhere.home_dir, elsewhere.work_dir):
            d.mkdir(parents=True)
        link = LinkSnapshots(lambda: local.uplink.link)
        assert await restore(elsewhere, None, link, anyio.Event())
        assert durable_files(elsewhere) == expected
        assert (elsewhere.state_dir / "todo.md").read_text() == "call bob\n"

    # After a restart of the hive the store still has it, and the figures still add up.
    async with running_hive(tmp_path, claude_bin) as (c, local):
        assert await c.store.snapshots.head("alice") == second
        agent = await running(c, local, "alice")
        (agent.spec.state_dir / "notes.md").write_text("the answer is 43, after all\n")
        expected = durable_files(agent.spec)
        assert await agent.snapshots.take()
        third = await c.store.snapshots.head("alice")
        assert third is not None and third.sha256 != second.sha256
        assert (third.files, third.raw_bytes) == (len(expected), sum(expected.values()))
        assert not await agent.snapshots.take()


async def test_an_oversized_state_is_refused_told_and_the_previous_snapshot_kept(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml="snapshot_max_bytes = 20000\n")
    async with running_hive(tmp_path, claude_bin) as (c, local):
        agent = await running(c, local, "alice")
        seed_state(agent.spec)
        assert await agent.snapshots.take()
        kept = await c.store.snapshots.get("alice")
        assert kept is not None

        (agent.spec.state_dir / "dump.bin").write_bytes(b"z" * 30000)
        total = sum(durable_files(agent.spec).values())
        assert not await agent.snapshots.take()
        [refused] = [e for e in agent.bus.history if e["kind"] == "snapshot_refused"]
        assert (refused["size"], refused["limit"]) == (total, 20000)
        assert "previous snapshot is kept" in refused["reason"]
        assert "snapshot refused" in agent.spec.log_file.read_text()
        assert await c.store.snapshots.get("alice") == kept

        # Pruned back under the bound: the next turn's snapshot goes through.
        (agent.spec.state_dir / "dump.bin").unlink()
        (agent.spec.state_dir / "notes.md").write_text("pruned\n")
        assert await agent.snapshots.take()
        after = await c.store.snapshots.head("alice")
        assert after is not None and after.sha256 != kept.head.sha256


async def test_a_host_speaking_for_a_stale_incarnation_neither_writes_nor_reads(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    async with running_hive(tmp_path, claude_bin) as (c, local):
        agent = await running(c, local, "alice")
        seed_state(agent.spec)
        assert await agent.snapshots.take()
        kept = await c.store.snapshots.get("alice")
        link = LinkSnapshots(lambda: local.uplink.link)
        stale = dataclasses.replace(agent.spec, incarnation=(agent.spec.incarnation or 0) - 1)
        (agent.spec.state_dir / "notes.md").write_text("from a stale host\n")
        with pytest.raises(PermissionDenied, match="stale"):
            await link.download(stale)
        collected = collect(agent.spec, 1 << 20)
        packed = Packed(pack(collected), collected.raw_bytes, len(collected.files), 1.0)
        with pytest.raises(PermissionDenied, match="stale"):
            await link.upload(stale, packed)
        other = dataclasses.replace(agent.spec, name="bob")
        with pytest.raises(PermissionDenied, match="not running"):
            await link.upload(other, packed)
        assert await c.store.snapshots.get("alice") == kept


async def test_a_restore_owed_on_this_disk_is_done_at_the_next_start(
    tmp_path: Path, claude_bin: Path
) -> None:
    # A replacement's host that died (or whose agent crashed) before restoring keeps the
    # order on its disk: the next start restores, rather than start fresh and overwrite
    # the snapshot with nothing at its first turn's end.
    seed_home(tmp_path, {"alice": AgentConfig()})
    async with running_hive(tmp_path, claude_bin) as (c, local), operator(c.paths) as op:
        agent = await running(c, local, "alice")
        seed_state(agent.spec)
        assert await agent.snapshots.take()
        notes = agent.spec.state_dir / "notes.md"
        notes.write_text("an edit the store never saw\n")
        pending = c.paths.agent_dir("alice") / RESTORE_PENDING
        pending.touch()
        await op_call(op, "agent_restart", agent="alice")
        await until(lambda: local.agents.get("alice") not in (None, agent), 60)
        assert notes.read_text() == "the answer is 42\n"
        assert not pending.exists()

        # Restarted again with no order owed: its disk is its own, nothing restored.
        notes.write_text("kept\n")
        again = local.agents["alice"]
        await op_call(op, "agent_restart", agent="alice")
        await until(lambda: local.agents.get("alice") not in (None, again), 60)
        assert notes.read_text() == "kept\n"


async def test_a_destroyed_agent_leaves_no_snapshot_for_its_name(
    tmp_path: Path, claude_bin: Path
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    async with running_hive(tmp_path, claude_bin) as (c, local), operator(c.paths) as op:
        agent = await running(c, local, "alice")
        seed_state(agent.spec)
        assert await agent.snapshots.take()
        await op_call(op, "agent_destroy", agent="alice")
        assert await c.store.snapshots.get("alice") is None
        none = await op_call(op, "agent_last_snapshot", agent="alice")
        assert isinstance(none, dict) and none["taken_at"] is None
