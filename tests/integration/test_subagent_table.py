"""The subagent table across a host crash, with real processes (hyperhive.proctable's rules).

What the claude runs do is tests/e2e/test_subagents.py's; here only what a new host does
with the table a crashed one left: every running subagent becomes ``interrupted`` with a
todo, its claude is killed if that very process survived, and an unreadable table is moved
aside.
"""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from hyperhive.agent.active import AgentSite
from hyperhive.agent.admission import Admission
from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.events import EventsBus
from hyperhive.agent.lifetime import Lifetime
from hyperhive.agent.sandbox import process_identity
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.errors import NotFound
from hyperhive.subagent.records import SubagentTable
from hyperhive.subagent.session import SUBAGENTS_SUBDIR, SubagentManager
from tests.support.todos import RecordingTodos


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytestmark = pytest.mark.anyio


def _site(home: Path) -> AgentSite:
    spec = AgentSpec(
        name="alice",
        config=AgentConfig(),
        paths=HivePaths(home),
        hive=HiveConfig(runtime="unsandboxed"),
    )
    return AgentSite(spec, Lifetime(), Enclosure(None), EventsBus(), Admission(), "http://x")


def _record(sid: str, status: str, **fields: object) -> dict[str, object]:
    return {"id": sid, "task": "t", "cwd": "/w", "started_at": 1.0, "status": status, **fields}


async def _sleeper() -> Process:
    return await anyio.open_process(["sleep", "100"], start_new_session=True)


async def test_a_crashed_hosts_subagents_are_interrupted_and_their_survivor_killed(
    tmp_path: Path,
) -> None:
    site = _site(tmp_path)
    survivor, stranger = await _sleeper(), await _sleeper()
    try:
        records = [
            _record("alive", "running", pid=survivor.pid, identity=process_identity(survivor.pid)),
            _record("reused", "running", pid=stranger.pid, identity="other-boot:1:1"),
            _record("older", "running"),  # written before runs recorded their pid
            _record("done", "finished", ended_at=2.0, last_output="all good"),
        ]
        table_dir = site.state_dir / SUBAGENTS_SUBDIR
        table_dir.mkdir(parents=True)
        (table_dir / "subagents.json").write_text(json.dumps({"version": 1, "subagents": records}))
        todos = RecordingTodos()
        async with SubagentManager(site, todos) as subagents:
            assert todos.events == []  # owed until the owner is published
            await subagents.report_recovered()
            assert set(todos.open()) == {"alive", "reused", "older"}
            assert "subagent alive interrupted" in todos.open()["alive"]
            for sid in ("alive", "reused", "older"):
                rec = await subagents.status(sid)
                assert rec.status == "interrupted" and "host stopped" in (rec.error or "")
            assert (await subagents.status("done")).status == "finished"
            with anyio.fail_after(10):
                assert await survivor.wait() == -signal.SIGKILL  # our leftover: killed
            assert stranger.returncode is None and process_identity(stranger.pid)  # not ours
        stored = SubagentTable.model_validate_json((table_dir / "subagents.json").read_bytes())
        assert {r.id: r.status for r in stored.subagents} == {
            "alive": "interrupted",
            "reused": "interrupted",
            "older": "interrupted",
            "done": "finished",
        }
    finally:
        for process in (survivor, stranger):
            if process.returncode is None:
                process.kill()
            await process.aclose()


async def test_an_unreadable_subagent_table_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site = _site(tmp_path)
    table_dir = site.state_dir / SUBAGENTS_SUBDIR
    table_dir.mkdir(parents=True)
    truncated = b'{"version": 1, "subagents": [{"id": "x", "ta'
    (table_dir / "subagents.json").write_bytes(truncated)
    with caplog.at_level(logging.WARNING, logger="hyperhive.proctable"):
        async with SubagentManager(site, RecordingTodos()) as subagents:
            with pytest.raises(NotFound, match="no subagent 'x'"):
                await subagents.status("x")
    (aside,) = table_dir.glob("subagents.json.corrupt-*")
    assert aside.read_bytes() == truncated
    assert str(table_dir / "subagents.json") in caplog.text and str(aside) in caplog.text
    assert "inspect the copy, then delete it" in caplog.text
