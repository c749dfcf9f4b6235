"""``hivectl serve`` on PostgreSQL loads the dashboard after the lease on a first start,
and before it says it stands by when it must wait.

FastAPI's import costs seconds on a busy machine. A first start must not pay it
between opening the store and taking the lease; a standby must have paid it
before a takeover, which has 10 s. Each serve runs under ``python -X importtime``,
whose lines land on stderr in order with the log's, so the log shows which came
first.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.unixsock import is_listening
from tests.support.hive import hivectl_env, seed_home
from tests.support.procs import stop, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

LEASE = "holds the coordinator lease"
FASTAPI = re.compile(r"^import time: +\d+ \| +\d+ \| +fastapi$", re.MULTILINE)


def _serve(home: Path) -> subprocess.Popen[bytes]:
    with (home / "serve.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "hyperhive", "serve"],
            env=hivectl_env(home),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _log(home: Path) -> str:
    return (home / "serve.log").read_text(errors="replace")


def _at(home: Path, what: str | re.Pattern[str]) -> int:
    """Where ``what`` first appears in ``home``'s serve log (-1: not yet)."""
    text = _log(home)
    if isinstance(what, str):
        return text.find(what)
    found = what.search(text)
    return found.start() if found else -1


def _up(home: Path) -> bool:
    paths = HivePaths(home)
    return "coordinator up" in _log(home) and is_listening(paths.host_sock)


async def test_the_lease_comes_before_the_dashboard_unless_standing_by(
    tmp_path: Path, pg_url: str
) -> None:
    # Two homes on one database: the second serve waits for the lease, not a home lock.
    homes = [tmp_path / "one", tmp_path / "two"]
    for home in homes:
        home.mkdir()
        seed_home(
            home, {"alice": AgentConfig()}, hive_toml="dashboard_port = 0\n", store_url=pg_url
        )
    first = _serve(homes[0])
    second: subprocess.Popen[bytes] | None = None
    try:
        await anyio.to_thread.run_sync(wait_until, lambda: _up(homes[0]), 120, "first serve up")
        first_log = _log(homes[0])
        assert 0 <= _at(homes[0], LEASE) < _at(homes[0], FASTAPI), first_log[-3000:]

        second = _serve(homes[1])
        await anyio.to_thread.run_sync(
            wait_until, lambda: _at(homes[1], "standing by") >= 0, 120, "the standby waits"
        )
        # Loaded once it knew it must wait, before it said so, and before its turn.
        assert 0 <= _at(homes[1], FASTAPI) < _at(homes[1], "standing by"), _log(homes[1])[-3000:]
        assert _at(homes[1], LEASE) == -1

        first.send_signal(signal.SIGTERM)  # a clean stop releases the lease at once
        assert first.wait(timeout=60) == 0, _log(homes[0])[-3000:]
        await anyio.to_thread.run_sync(wait_until, lambda: _up(homes[1]), 60, "takeover")
        assert _at(homes[1], FASTAPI) < _at(homes[1], LEASE)
        # Both ways to serve (active at once, and a standby taking over) run on uvloop.
        assert "event loop uvloop" in first_log and "event loop uvloop" in _log(homes[1])
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)
