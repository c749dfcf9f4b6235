"""hivectl's exit codes, one class per test, against a real ``hivectl serve`` (and a home
where nothing runs): what a script branches on, with and without ``--json``.

0 ok, 1 error, 2 usage, 3 unreachable, 4 not found, 5 refused, 6 timed out
(``docs/cli-json.md``). Under ``--json`` the error is one JSON object on stderr with
the same exit code, and stdout stays empty.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent, agent_call, hivectl_env, seed_home, start_serve

# One hive for the module: each class is a handful of hivectl processes against it.
pytestmark = pytest.mark.timeout(300)


def hivectl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=hivectl_env(home),
    )


def fails(out: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    """Exit ``code``, one line on stderr naming ``fragment``, nothing on stdout."""
    assert out.returncode == code, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hivectl: ") and fragment in lines[0], lines


def fails_json(out: subprocess.CompletedProcess[str], code: int, error_code: str) -> dict[str, Any]:
    """Under --json: exit ``code``, one JSON object on stderr, nothing on stdout."""
    assert out.returncode == code, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    error: dict[str, Any] = json.loads(lines[0])["error"]
    assert error["code"] == error_code and error["exit"] == code, error
    return error


@pytest.fixture(scope="module")
def hive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("exit-codes")
    seed_home(
        home,
        {"queen": AgentConfig(), "alice": AgentConfig(), "bob": AgentConfig()},
        {"queen": None, "alice": "queen", "bob": None},
        hive_toml="dashboard_port = 0\n",
    )
    proc = start_serve(home)
    try:
        yield home
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (home / "serve.log").read_text()


def test_ok_is_0(hive: Path) -> None:
    out = hivectl(hive, "status", "--json")
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["agents"] == 3


def test_usage_is_2(hive: Path) -> None:
    # click's own usage errors, as text and as JSON.
    missing = hivectl(hive, "agents", "show")
    assert missing.returncode == 2 and "Missing argument 'NAME'" in missing.stderr
    fails_json(hivectl(hive, "agents", "show", "--json"), 2, "usage")
    # Bad input the coordinator refuses (an invalid name, a body over the limit)...
    fails(hivectl(hive, "agents", "spawn", "Bad Name"), 2, "Bad Name")
    fails_json(hivectl(hive, "send", "alice", "x" * 70_000, "--json"), 2, "limit_exceeded")
    # ... and a value the request's own model refuses before anything is sent.
    fails(hivectl(hive, "logs", "alice", "-n", "99999"), 2, "lines")


def test_unreachable_is_3(hive: Path, tmp_path: Path) -> None:
    # No hive at all on this home.
    fails(hivectl(tmp_path, "agents", "list"), 3, "is the coordinator running")
    fails_json(hivectl(tmp_path, "status", "--json"), 3, "not_listening")
    fails(hivectl(tmp_path, "down"), 3, "no hive is running")
    # A running hive, but the part the command needs is away: no agent host is connected.
    fails(hivectl(hive, "logs", "alice"), 3, "no agent host is connected")


def test_not_found_is_4(hive: Path) -> None:
    fails(hivectl(hive, "agents", "show", "ghost"), 4, "no agent named 'ghost'")
    fails_json(hivectl(hive, "send", "ghost", "hi", "--json"), 4, "not_found")
    fails(hivectl(hive, "approvals", "show", "42"), 4, "no approval #42")
    fails(hivectl(hive, "reply", "999", "x"), 4, "no message #999")
    # A reparent under an agent that does not exist: a topology error, but "not found".
    fails_json(
        hivectl(hive, "agents", "set-parent", "bob", "--parent", "ghost", "--json"),
        4,
        "unknown_parent",
    )


def test_refused_is_5(hive: Path) -> None:
    fails_json(
        hivectl(hive, "agents", "set-parent", "queen", "--parent", "alice", "--json"),
        5,
        "cycle_refused",
    )
    fails(hivectl(hive, "agents", "spawn", "alice"), 5, "already exists")
    # A serve without `up`: `down` will not stop what it did not start.
    fails(hivectl(hive, "down"), 5, "not started by `hivectl up`")

    # A spend limit holds bob: a send that waits for his reply is refused before it is
    # sent (no turn could write one); without --wait the mail is taken, and waits.
    assert hivectl(hive, "budget", "set", "bob", "--usd-total", "0").returncode == 0
    fails_json(hivectl(hive, "send", "bob", "hi", "--wait", "--json"), 5, "over_budget")
    assert hivectl(hive, "send", "bob", "hi").returncode == 0
    assert hivectl(hive, "budget", "set", "bob", "--reset").returncode == 0
    # A stopped agent, likewise.
    assert hivectl(hive, "agents", "kill", "queen").returncode == 0
    fails(hivectl(hive, "send", "queen", "hi", "--wait"), 5, "queen is stopped")

    # An answered question cannot be answered again.
    async def ask() -> Any:
        async with agent(HivePaths(hive), "alice") as client:
            return await agent_call(client, "ask_operator", question="which branch?")

    anyio.run(ask)
    qid = json.loads(hivectl(hive, "questions", "list", "--json").stdout)[0]["id"]
    assert hivectl(hive, "questions", "answer", str(qid), "main").returncode == 0
    fails(hivectl(hive, "questions", "answer", str(qid), "dev"), 5, "already answered")


def test_error_is_1(hive: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("tool_groups = [\n")
    fails(hivectl(hive, "agents", "spawn", "carol", "--config", str(bad)), 1, "not valid TOML")
    fails_json(
        hivectl(hive, "agents", "spawn", "carol", "--config", str(bad), "--json"), 1, "config_error"
    )


def test_timed_out_is_6(hive: Path) -> None:
    # No agent host runs here: alice's turn never comes, so neither does her reply.
    out = hivectl(hive, "send", "alice", "are you there?", "--wait", "--timeout", "1")
    fails(out, 6, "no reply to #")
    sent = int(out.stderr.split("no reply to #")[1].split()[0])
    inbox = json.loads(hivectl(hive, "inbox", "--json").stdout)
    assert all(m["in_reply_to"] != sent for m in inbox)  # and none came
    error = fails_json(
        hivectl(hive, "send", "alice", "still there?", "--wait", "--timeout", "1", "--json"),
        6,
        "timed_out",
    )
    assert "it was delivered" in error["message"]
