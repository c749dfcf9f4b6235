"""``hivectl agents move`` between agent hosts on separate network stacks AND separate
disks: each host sees its own private directory at ``<home>/agents`` (a bind mount in
its own mount namespace), so nothing of an agent reaches the other host except over
the link. The real claude CLI runs each turn against the scripted model server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import test_netns_hosts as netns_hosts
from tests.e2e.test_netns_hosts import Hive
from tests.support.hive import hivectl_env
from tests.support.hostlink import start_remote_host
from tests.support.model_server import ModelServer, text
from tests.support.netns import Lan
from tests.support.procs import agent_rows, hivectl, hivectl_json, stop, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), *netns_hosts.pytestmark[2:]]

# The netns hive (coordinator, TLS link, scripted model on the LAN) of the host-link suite.
net, lan_model, hive = netns_hosts.net, netns_hosts.lan_model, netns_hosts.hive
# A host frozen on purpose (SIGSTOP) keeps its lease only this long: the move must start
# (a hivectl process) and drain its source inside it, or the frozen target is dropped
# first and the move refused. 4 s (the host-link suite's) was too short on a loaded
# machine; a killed target fails its move one lease after its link drops.
LEASE_S = 20


@pytest.fixture
def lease_seconds() -> float:
    return LEASE_S


class Disks:
    """Each host's private agents directory, mounted over the shared home's in its own
    mount namespace (``ip netns exec`` gives every process one)."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.creds = {name: hive.add_host(name) for name in ("h1", "h2")}
        self.moves: list[subprocess.Popen[str]] = []  # `hivectl agents move` runs, reaped after

    def private(self, name: str) -> Path:
        path = self.hive.home / "disks" / name
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def start(self, name: str) -> subprocess.Popen[bytes]:
        # The mount point: the coordinator itself no longer makes agents' directories.
        (self.hive.home / "agents").mkdir(exist_ok=True, mode=0o700)
        prefix = [
            *self.hive.net.exec_prefix(name),
            "sh",
            "-c",
            'mount --bind "$0" "$1" && shift && exec "$@"',
            str(self.private(name)),
            str(self.hive.home / "agents"),
        ]
        proc = start_remote_host(
            self.hive.home, name, self.hive.url, self.creds[name], self.hive.ca_file, prefix
        )
        self.hive.hosts[name] = proc
        return proc

    def connected(self, name: str) -> None:
        wait_until(
            lambda: any(
                h["connected"] and h["name"] == name
                for h in json.loads(hivectl(self.hive.home, "hosts", "list", "--json").stdout)
            ),
            30,
            f"{name} connected",
        )


def row(hive: Hive, agent: str) -> dict[str, Any]:
    return agent_rows(hive.home)[agent]


def spent(hive: Hive, agent: str) -> float:
    """``agent``'s spend so far, as ``hivectl spend --json`` reports it."""
    report = hivectl_json(hive.home, "spend")
    return float(next(r for r in report["agents"] if r["agent"] == agent)["all_time"]["usd"])


def start_move(disks: Disks, agent: str, to: str) -> subprocess.Popen[str]:
    move = subprocess.Popen(
        [sys.executable, "-m", "hyperhive", "agents", "move", agent, "--to", to],
        env=hivectl_env(disks.hive.home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    disks.moves.append(move)
    return move


def copying(hive: Hive, move: subprocess.Popen[str]) -> bool:
    """Whether the move reached its copy; a move that already ended is a failure here."""
    if move.poll() is not None:
        out, err = move.communicate()
        raise AssertionError(f"the move ended before its copy ({move.returncode}): {out}{err}")
    return bool(row(hive, "bob")["move_phase"] == "copying")


@pytest.fixture
def disks(hive: Hive) -> Iterator[Disks]:
    made = Disks(hive)
    yield made
    for move in made.moves:  # a test that failed before communicate(): no leaked pipes
        if move.poll() is None:
            move.kill()
        move.communicate(timeout=30)
    for proc in hive.hosts.values():  # a frozen host must be able to die
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)


def test_an_agent_moves_with_its_inbox_notes_and_session(
    hive: Hive, disks: Disks, net: Lan, lan_model: ModelServer
) -> None:
    lan_model.set_script([text("first answer"), text("second answer")])
    disks.start("h1")
    hive.wait_host_of("bob", "h1")
    disks.start("h2")
    disks.connected("h2")
    hivectl(hive.home, "send", "bob", "first prompt")
    wait_until(lambda: len(lan_model.main_requests) >= 1, 120, "bob's first turn")
    wait_until(lambda: row(hive, "bob")["turn_state"] == "idle", 60, "bob idle again")
    wait_until(lambda: spent(hive, "bob") > 0, 60, "bob's first turn counted")
    first_turn = spent(hive, "bob")
    h1_bob = disks.private("h1") / "bob"
    (h1_bob / "state" / "notes.md").write_text("the answer is 42\n")
    assert (h1_bob / "state" / "harness" / "session.json").exists(), hive.logs()
    assert not (disks.private("h2") / "bob").exists()

    # Mail while it is stopped waits in its inbox, and moves with it.
    hivectl(hive.home, "agents", "kill", "bob")
    hivectl(hive.home, "send", "bob", "mail sent before the move")
    moved = hivectl(hive.home, "agents", "move", "bob", "--to", "h2")
    assert "moved bob to h2 (from h1," in moved.stdout and "bytes copied" in moved.stdout
    h2_bob = disks.private("h2") / "bob"
    assert (h2_bob / "state" / "notes.md").read_text() == "the answer is 42\n"
    assert not h1_bob.exists(), "the source dropped its copy once the target had it"
    after = row(hive, "bob")
    assert (after["assigned_host"], after["move_phase"]) == ("h2", None)

    hivectl(hive.home, "agents", "start", "bob")
    hive.wait_host_of("bob", "h2")
    try:
        wait_until(lambda: len(lan_model.main_requests) >= 2, 120, "bob's turn on h2")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{hive.logs()}") from None
    second = lan_model.main_requests[1]
    assert second.client == net.addresses["h2"]
    history = json.dumps(second.messages)
    # The same claude session, resumed on h2: the first turn is in its history.
    assert "first prompt" in history and "first answer" in history, history
    assert "mail sent before the move" in json.dumps(second.messages[-1])
    # claude on h2 reports the session's totals, h1's turn included: the coordinator's
    # stored totals (not h1's, which stayed behind) make it one turn's cost again.
    wait_until(lambda: spent(hive, "bob") > first_turn, 60, "bob's turn on h2 counted")
    assert spent(hive, "bob") == pytest.approx(2 * first_turn, rel=1e-9)


def test_a_target_killed_mid_copy_leaves_the_agent_on_its_source(hive: Hive, disks: Disks) -> None:
    disks.start("h1")
    hive.wait_host_of("bob", "h1")
    (disks.private("h1") / "bob" / "state" / "notes.md").write_text("keep me\n")
    h2 = disks.start("h2")
    disks.connected("h2")
    # Frozen, h2 takes the copy command but never fetches: the move waits mid-copy.
    os.kill(h2.pid, signal.SIGSTOP)
    move = start_move(disks, "bob", "h2")
    wait_until(lambda: copying(hive, move), 60, "the copy under way")
    h2.kill()
    h2.wait(timeout=30)
    _, err = move.communicate(timeout=LEASE_S + 60)
    assert move.returncode != 0 and "went away mid-move" in err and "stays on h1" in err, err
    hive.wait_host_of("bob", "h1")
    assert (row(hive, "bob")["assigned_host"], row(hive, "bob")["move_phase"]) == ("h1", None)
    assert (disks.private("h1") / "bob" / "state" / "notes.md").read_text() == "keep me\n"
    assert not (disks.private("h2") / "bob").exists()


# Here the target stays frozen from before the move until after the source is killed (two
# hivectl processes and the drain on the way): on a loaded machine that outlasted 20 s.
@pytest.mark.parametrize("lease_seconds", [60])
def test_a_source_killed_after_the_copy_drops_its_copy_when_it_returns(
    hive: Hive, disks: Disks
) -> None:
    h1 = disks.start("h1")
    hive.wait_host_of("bob", "h1")
    (disks.private("h1") / "bob" / "state" / "notes.md").write_text("moving on\n")
    h2 = disks.start("h2")
    disks.connected("h2")
    os.kill(h2.pid, signal.SIGSTOP)
    move = start_move(disks, "bob", "h2")
    wait_until(lambda: copying(hive, move), 60, "the copy uploaded")
    h1.kill()  # the archive is with the coordinator already
    h1.wait(timeout=30)
    os.kill(h2.pid, signal.SIGCONT)
    out, err = move.communicate(timeout=120)
    assert move.returncode == 0, err
    assert "moved bob to h2" in out
    hive.wait_host_of("bob", "h2")
    assert (disks.private("h2") / "bob" / "state" / "notes.md").read_text() == "moving on\n"
    # h1 is away: its copy is still on its disk, and the move waits to clean it up.
    assert (disks.private("h1") / "bob").exists()
    assert row(hive, "bob")["move_phase"] == "cleanup"

    stop(h1)
    disks.start("h1")
    wait_until(lambda: row(hive, "bob")["move_phase"] is None, 60, "h1 dropped its copy")
    assert not (disks.private("h1") / "bob").exists()
    # Never both: bob still runs on h2 only.
    assert row(hive, "bob")["host"] == "h2"
    assert "moving bob in" not in hive.host_log("h1")
