"""``hivectl agents move`` from ``hivectl up``'s local host (the unix-socket link) to a
remote host on the same machine and disk, dialled over loopback TLS.

This hung before: the local host shares the coordinator's run dir, and both
spooled the move's archive at ``run/moves/<id>.tar``: the coordinator appended
each uploaded chunk to the very file the source was reading, so the upload never
reached its end. The real claude CLI runs a turn on each side of the move.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from hyperhive.config import AgentConfig, HivePaths
from tests.e2e.test_up import Up, _finish
from tests.support.hive import agent_env, hivectl_env, seed_home
from tests.support.hostlink import credential_from, start_remote_host, write_credential
from tests.support.model_server import ModelServer, text
from tests.support.procs import agent_rows, hivectl, stop, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MOVE_WITHIN = 120  # seconds: a bound on the test, far past what a move of a few KB takes


@pytest.fixture
def hive(tmp_path: Path, claude_bin: Path, model_server: ModelServer) -> Iterator[tuple[Up, Path]]:
    ca = trustme.CA()
    tls = tmp_path / "tls"
    tls.mkdir(mode=0o700)
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tls / "link.pem"))
    (tls / "link.pem").chmod(0o600)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    seed_home(
        tmp_path,
        {"alice": AgentConfig(env=agent_env(model_server.url))},
        hive_toml=(
            f'claude_bin = "{claude_bin}"\ndashboard_port = 0\n'
            'hostlink = { listen = "127.0.0.1:0", tls_cert = "tls/link.pem", '
            'tls_key = "tls/link.pem" }\n'
        ),
    )
    running = Up(tmp_path)
    try:
        yield running, ca_file
    finally:
        _finish(running)


def _row(home: Path, agent: str) -> dict[str, object]:
    return agent_rows(home)[agent]


def test_an_agent_moves_from_the_local_host_to_a_remote_one_on_the_same_disk(
    hive: tuple[Up, Path], model_server: ModelServer
) -> None:
    up, ca_file = hive
    home = up.home
    # The move stops alice while idle: her flush turn answers between her two turns.
    model_server.set_script([text("first answer"), text("notes flushed"), text("second answer")])
    # Up once `agents list` answers with alice placed on the local host.
    up.wait_for(lambda: next((a["host"] for a in up.agents() if a["name"] == "alice"), None), 90)
    local = str(_row(home, "alice")["host"])
    hivectl(home, "send", "alice", "first prompt")
    wait_until(lambda: len(model_server.main_requests) >= 1, 120, "alice's first turn")
    wait_until(lambda: _row(home, "alice")["turn_state"] == "idle", 60, "alice idle again")
    notes = HivePaths(home).agent_dir("alice") / "state" / "notes.md"
    notes.write_text("the answer is 42\n")

    info = HivePaths(home).run / "hostlink.json"
    url = wait_until(
        lambda: json.loads(info.read_text())["url"] if info.exists() else None,
        30,
        "the host link listening",
    )
    assert str(url).startswith("wss://127.0.0.1:")
    credential = write_credential(
        home / "creds" / "h1", credential_from(hivectl(home, "hosts", "add", "h1").stdout)
    )
    remote = start_remote_host(home, "h1", str(url), credential, ca_file)
    try:
        wait_until(
            lambda: any(
                h["name"] == "h1" and h["connected"]
                for h in json.loads(hivectl(home, "hosts", "list", "--json").stdout)
            ),
            30,
            "h1 connected",
        )
        try:
            moved = subprocess.run(
                [sys.executable, "-m", "hyperhive", "agents", "move", "alice", "--to", "h1"],
                capture_output=True,
                text=True,
                timeout=MOVE_WITHIN,
                env=hivectl_env(home),
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"the move hung:\n{_logs(home, up)}") from exc
        assert moved.returncode == 0, moved.stderr + _logs(home, up)
        assert f"moved alice to h1 (from {local}; one disk for both" in moved.stdout, moved.stdout
        wait_until(lambda: _row(home, "alice")["host"] == "h1", 60, "alice running on h1")
        row = _row(home, "alice")
        assert (row["assigned_host"], row["move_phase"]) == ("h1", None)
        # One disk: nothing copied into place, nothing dropped; the notes are where they were.
        assert notes.read_text() == "the answer is 42\n"
        run = HivePaths(home).run
        assert not list((run / "moves").glob("*.tar"))  # the source's archive, gone
        assert not list((run / "coordinator-moves").glob("*.tar"))  # and the spool

        hivectl(home, "send", "alice", "second prompt")
        on_h1 = wait_until(
            lambda: [
                r for r in model_server.main_requests if "second prompt" in json.dumps(r.messages)
            ],
            120,
            "alice's turn on h1",
        )
        history = json.dumps(on_h1[0].messages)
        # The same claude session, resumed by h1: the first turn is in its history.
        assert "first prompt" in history and "first answer" in history, history
    finally:
        stop(remote)


def _logs(home: Path, up: Up) -> str:
    logs = sorted(home.glob("*.log")) + sorted((home / "logs").glob("*.log"))
    parts = [f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs]
    return "\n".join(["\n".join(up.lines[-40:]), *parts])
