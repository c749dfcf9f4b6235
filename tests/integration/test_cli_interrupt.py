"""``hivectl agents interrupt``'s exit codes and --json shape, against a real ``hivectl serve``.

The hive here has no agent host, so no agent runs a turn: the refusal (5), an
unknown agent (4), no hive at all (3), and ``--tell`` becoming a message (0).
What an interrupt does to a running turn is in ``tests/e2e/test_steer_e2e.py``.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.integration.test_cli_commands import HIVE_TOML, hivectl, one_line_error
from tests.support.hive import op_call, operator, seed_home, start_serve


@pytest.fixture
def hive(tmp_path: Path, hive_store_url: str | None) -> Iterator[Path]:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml=HIVE_TOML, store_url=hive_store_url)
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "serve.log").read_text()


def _inbox(home: Path) -> list[tuple[int, str]]:
    async def read() -> Any:
        async with operator(HivePaths(home)) as op:
            return await op_call(op, "messages", agent="alice")

    return [(m["id"], m["body"]) for m in anyio.run(read)["inbox"]]


def test_interrupt_exit_codes_by_class(hive: Path) -> None:
    unknown = hivectl(hive, "agents", "interrupt", "nobody")
    assert unknown.returncode == 4
    one_line_error(unknown, "nobody")

    idle = hivectl(hive, "agents", "interrupt", "alice")
    assert idle.returncode == 5
    one_line_error(idle, "alice is not running a turn")

    told = hivectl(hive, "agents", "interrupt", "alice", "--tell", "look at the logs", "--json")
    assert told.returncode == 0, told.stderr
    got = json.loads(told.stdout)
    assert got["agent"] == "alice" and got["interrupted"] is False and got["told"] == "message"
    assert _inbox(hive) == [(got["message_id"], "look at the logs")]


def test_interrupt_without_a_hive_exits_3(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml=HIVE_TOML)
    out = hivectl(tmp_path, "agents", "interrupt", "alice")
    assert out.returncode == 3, out.stderr
