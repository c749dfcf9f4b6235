"""Agent log files rotate by size and keep a bounded history."""

from __future__ import annotations

from pathlib import Path

from hyperhive.agent.agentlog import AgentLog
from hyperhive.core.fleet.logs import tail_lines


def test_rotation_keeps_a_bounded_history(tmp_path: Path) -> None:
    log = AgentLog(tmp_path / "a.log", max_bytes=100, keep=2)
    for i in range(30):
        log.line(f"event {i}")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["a.log", "a.log.1", "a.log.2"]
    assert all(p.stat().st_size <= 100 + 60 for p in tmp_path.iterdir())
    assert tail_lines(tmp_path / "a.log", 1)[0].endswith("hyperhive: event 29")


def test_open_rotates_before_a_child_writes(tmp_path: Path) -> None:
    log = AgentLog(tmp_path / "a.log", max_bytes=10, keep=3)
    (tmp_path / "a.log").write_bytes(b"x" * 50)
    with log.open() as fh:
        fh.write(b"new")
    assert (tmp_path / "a.log").read_bytes() == b"new"
    assert (tmp_path / "a.log.1").read_bytes() == b"x" * 50
