"""``on_host_loss = "replace"`` keeps the agent's memory with no shared disk: its host,
in its own network namespace AND with its own private disk, is killed after a turn;
one lease later the agent is re-placed on the other host, which restores the
snapshot its old host sent after that turn. The real claude CLI runs both turns
against the scripted model: the second, on the new host, resumes the first's session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import test_netns_hosts as netns_hosts
from tests.e2e import test_netns_move as netns_move
from tests.e2e.test_netns_hosts import Hive
from tests.e2e.test_netns_move import Disks, row
from tests.support.model_server import ModelServer, text
from tests.support.netns import Lan
from tests.support.procs import hivectl, hivectl_json, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300), *netns_hosts.pytestmark[2:]]

net, lan_model, hive = netns_hosts.net, netns_hosts.lan_model, netns_hosts.hive
disks = netns_move.disks


@pytest.fixture
def lease_seconds() -> float:
    return 8  # long enough for a loaded machine's heartbeats, short enough to wait out


@pytest.fixture
def bob_on_host_loss() -> str:
    return "replace"


def after_turn(home: Path) -> dict[str, Any] | None:
    """bob's last snapshot as `hivectl agents show` reports it, once it holds a turn's
    files (notes, session id, session)."""
    snapshot: dict[str, Any] = hivectl_json(home, "agents", "show", "bob")["snapshot"]
    return snapshot if snapshot["files"] >= 3 else None


def test_a_replaced_agent_resumes_on_another_host_with_its_notes_and_session(
    hive: Hive, disks: Disks, net: Lan, lan_model: ModelServer
) -> None:
    lan_model.set_script([text("first answer"), text("second answer")])
    h1 = disks.start("h1")
    hive.wait_host_of("bob", "h1")
    disks.start("h2")
    disks.connected("h2")
    h1_bob = disks.private("h1") / "bob"
    (h1_bob / "state" / "notes.md").write_text("the answer is 42\n")
    try:
        hivectl(hive.home, "send", "bob", "first prompt")
        wait_until(lambda: len(lan_model.main_requests) >= 1, 120, "bob's first turn")
        # After the turn: its notes, the harness's session id and claude's session file.
        head = wait_until(lambda: after_turn(hive.home), 120, "bob's snapshot in the store")
        assert head is not None and head["host"] == "h1" and head["size"] > 0
        assert not (disks.private("h2") / "bob" / "state" / "notes.md").exists()

        h1.kill()  # kill -9: no goodbye; nothing of h1's disk reaches h2
        h1.wait(timeout=30)
        wait_until(
            lambda: row(hive, "bob")["host"] == "h2" and row(hive, "bob")["running"],
            120,
            "bob replaced on h2",
        )
        h2_bob = disks.private("h2") / "bob"
        assert (h2_bob / "state" / "notes.md").read_text() == "the answer is 42\n"

        hivectl(hive.home, "send", "bob", "second prompt")
        wait_until(lambda: len(lan_model.main_requests) >= 2, 120, "bob's turn on h2")
    except (TimeoutError, AssertionError) as exc:
        raise AssertionError(f"{exc}\n{hive.logs()}") from None
    second = lan_model.main_requests[1]
    assert second.client == net.addresses["h2"]
    history = json.dumps(second.messages)
    # The same claude session, restored on h2: the first turn is in its history.
    assert "first prompt" in history and "first answer" in history, history
    assert "second prompt" in json.dumps(second.messages[-1])
