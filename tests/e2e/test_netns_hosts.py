"""Agent hosts on separate network stacks, dialling the coordinator over TCP + TLS.

Three network namespaces on a private LAN (``tests/support/netns``): the
coordinator (``hivectl serve`` with ``[hostlink]`` on its own address, a
trustme certificate) in one, two ``hivectl host --coordinator wss://…`` in the
others; the real claude CLI on each host talks to the scripted model server,
which listens on the test process's own leg of the LAN. The hosts share the
hive home's filesystem with the coordinator (this slice does not move disk
work over the link), but their network is their own: the only way an agent's
frame reaches the coordinator is the host's WebSocket.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent_env, op_call, seed_home, start_serve
from tests.support.hostlink import (
    credential_from,
    link_tls,
    start_remote_host,
    write_credential,
)
from tests.support.model_server import ModelServer, Stall, text, tool_call
from tests.support.netns import Lan, lan, netns_available
from tests.support.procs import agent_rows, hivectl, hivectl_json, stop, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
]


@dataclass
class Hive:
    home: Path
    net: Lan
    ca_file: Path
    url: str = ""
    serve: subprocess.Popen[bytes] | None = None
    hosts: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def logs(self) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in sorted(self.home.glob("*.log"))
        )

    def add_host(self, name: str) -> Path:
        made = hivectl(self.home, "hosts", "add", name)
        return write_credential(self.home / "creds" / name, credential_from(made.stdout))

    def start_host(self, name: str, credential: Path) -> subprocess.Popen[bytes]:
        proc = start_remote_host(
            self.home, name, self.url, credential, self.ca_file, self.net.exec_prefix(name)
        )
        self.hosts[name] = proc
        return proc

    def host_of(self, agent: str) -> str | None:
        row = agent_rows(self.home)[agent]
        return row["host"] if row["running"] else None

    def wait_host_of(self, agent: str, host: str) -> None:
        try:
            wait_until(lambda: self.host_of(agent) == host, 60, f"{agent} running on {host}")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def host_log(self, name: str) -> str:
        return (self.home / f"host-{name}.log").read_text(errors="replace")

    def close(self) -> None:
        for proc in self.hosts.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.hosts.values(), *([self.serve] if self.serve else [])]:
            stop(proc)


@pytest.fixture
def net() -> Iterator[Lan]:
    with lan(["coord", "h1", "h2"]) as made:
        yield made


@pytest.fixture
def lan_model(net: Lan) -> Iterator[ModelServer]:
    with ModelServer(host=net.own_address) as server:
        yield server


@pytest.fixture
def lease_seconds() -> float:
    """Short, so a partition is over in seconds (hosts beat every third of it)."""
    return 4


@pytest.fixture
def bob_on_host_loss() -> Literal["wait", "replace"]:
    """bob's ``on_host_loss`` (alice always waits); a suite replacing him overrides it."""
    return "wait"


@pytest.fixture
def hive(
    tmp_path: Path,
    net: Lan,
    lan_model: ModelServer,
    claude_bin: Path,
    lease_seconds: float,
    bob_on_host_loss: Literal["wait", "replace"],
) -> Iterator[Hive]:
    ca_file = link_tls(tmp_path / "tls", net.addresses["coord"], tmp_path / "ca.pem")
    env = agent_env(lan_model.url)
    seed_home(
        tmp_path,
        {
            "alice": AgentConfig(env=env),
            "bob": AgentConfig(env=env, on_host_loss=bob_on_host_loss),
        },
        hive_toml=(
            f'claude_bin = "{claude_bin}"\n[hostlink]\n'
            f'listen = "{net.addresses["coord"]}:0"\n'
            'tls_cert = "tls/link.pem"\ntls_key = "tls/link.pem"\n'
            f"lease_seconds = {lease_seconds}\n"
        ),
    )
    made = Hive(tmp_path, net, ca_file)
    try:
        made.serve = start_serve(tmp_path, argv_prefix=net.exec_prefix("coord"))
        info = HivePaths(tmp_path).run / "hostlink.json"
        made.url = wait_until(
            lambda: json.loads(info.read_text())["url"] if info.exists() else None,
            30,
            "the host link listening",
        )
        yield made
    finally:
        made.close()


def test_an_agent_on_one_host_wakes_an_agent_on_another_and_hears_back(
    hive: Hive, net: Lan, lan_model: ModelServer
) -> None:
    assert hive.url.startswith(f"wss://{net.addresses['coord']}:")
    lan_model.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "bob", "body": "hello from h1"}),
            text("done"),
            tool_call("mcp__hyperhive__send", {"to": "alice", "body": "hello back from h2"}),
            text("done"),
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "bob answered"}),
            text("done"),
        ]
    )
    h1, h2 = hive.add_host("h1"), hive.add_host("h2")
    hive.start_host("h1", h1)
    hive.wait_host_of("alice", "h1")
    hive.wait_host_of("bob", "h1")
    hive.start_host("h2", h2)
    wait_until(
        lambda: any(
            h["connected"] for h in hivectl_json(hive.home, "hosts", "list") if h["name"] == "h2"
        ),
        30,
        "h2 connected",
    )
    # Placed on h1 (the only host then), bob stays there until the operator moves it;
    # these hosts share one disk, so the move copies nothing.
    hivectl(hive.home, "agents", "kill", "bob")
    hivectl(hive.home, "agents", "start", "bob")
    hive.wait_host_of("bob", "h1")
    moved = hivectl(hive.home, "agents", "move", "bob", "--to", "h2")
    assert "one disk for both" in moved.stdout, moved.stdout
    hive.wait_host_of("bob", "h2")

    hivectl(hive.home, "send", "alice", "talk to bob")
    try:
        [reply] = wait_until(
            lambda: [m for m in hivectl_json(hive.home, "inbox") if m["from"] == "alice"] or None,
            120,
            "alice's reply to the operator",
        )
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{hive.logs()}") from None
    assert reply["body"] == "bob answered"
    # The reply is stored during alice's send call; her last model request follows it.
    wait_until(lambda: len(lan_model.main_requests) >= 6, 60, "alice's last model request")
    mains = lan_model.main_requests
    assert len(mains) == 6, hive.logs()
    # Each turn's claude ran in its host's namespace: alice on h1, bob on h2, alice again.
    callers = [m.client for m in mains[::2]]
    assert callers == [net.addresses["h1"], net.addresses["h2"], net.addresses["h1"]]
    assert "hello from h1" in json.dumps(mains[2].messages)
    assert "hello back from h2" in json.dumps(mains[4].messages)
    listed = {h["name"]: h for h in hivectl_json(hive.home, "hosts", "list")}
    assert listed["h1"]["agents"] == ["alice"] and listed["h2"]["agents"] == ["bob"]
    assert listed["h1"]["connected"] and listed["h1"]["last_seen_at"] is not None


def test_a_wrong_credential_is_refused_and_a_revoked_host_is_cut(hive: Hive) -> None:
    good = hive.add_host("h1")
    wrong = write_credential(hive.home / "creds" / "wrong", "hhc1_" + "x" * 43)
    refused = hive.start_host("h1", wrong)
    wait_until(
        lambda: "credential refused for agent host 'h1'" in hive.host_log("h1"),
        30,
        "the refusal on the host's console",
    )
    assert refused.poll() is None  # it keeps retrying (with backoff), it does not exit
    refused.send_signal(signal.SIGTERM)
    stop(refused)

    hive.start_host("h1", good)
    hive.wait_host_of("alice", "h1")
    revoked = hivectl(hive.home, "hosts", "revoke", "h1")
    assert "link is cut" in revoked.stdout
    # Cut at once: its agents are no longer running anywhere, and its redials are refused.
    rows = agent_rows(hive.home)
    assert not rows["alice"]["running"] and not rows["bob"]["running"]
    wait_until(lambda: "is revoked" in hive.host_log("h1"), 30, "the revocation on the host")
    [h1] = hivectl_json(hive.home, "hosts", "list")
    assert h1["revoked"] and not h1["connected"]


def loose_ends(home: Path, agent: str) -> list[dict[str, Any]]:
    """The agent's todos and other loose ends, over the operator socket."""

    async def go() -> list[dict[str, Any]]:
        async with connect(HivePaths(home).host_sock) as op:
            got = await op_call(op, "get_loose_ends", agent=agent)
            assert isinstance(got, list)
            return [row for row in got if isinstance(row, dict)]

    return anyio.run(go)


def test_a_host_killed_mid_turn_gets_its_mail_again_and_its_bash_task_is_interrupted(
    hive: Hive, lan_model: ModelServer
) -> None:
    stall = Stall()  # the turn's second model call hangs: the host dies mid-turn
    lan_model.set_script(
        [
            tool_call("mcp__bash__run", {"cmd": "sleep 300", "wait_seconds": 0, "name": "long"}),
            stall,
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "did the thing"}),
            text("done"),
        ]
    )
    cred = hive.add_host("h1")
    first = hive.start_host("h1", cred)
    hive.wait_host_of("alice", "h1")
    hivectl(hive.home, "send", "alice", "do the thing")
    try:
        wait_until(lambda: len(lan_model.main_requests) >= 2, 120, "alice mid-turn")
        first.kill()  # kill -9: no goodbye, no graceful stop, nothing acked
        first.wait(timeout=30)
        hive.start_host("h1", cred)
        hive.wait_host_of("alice", "h1")
        # The waking message was never acked: it wakes the new incarnation again...
        [reply] = wait_until(
            lambda: [m for m in hivectl_json(hive.home, "inbox") if m["from"] == "alice"] or None,
            120,
            "alice's reply after the host came back",
        )
        assert reply["body"] == "did the thing"
        redelivered = lan_model.main_requests[2]
        assert "do the thing" in json.dumps(redelivered.messages)
        # ...and the bash task the dead host ran is interrupted, with a todo saying so.
        todos = wait_until(
            lambda: (
                [t for t in loose_ends(hive.home, "alice") if "interrupted" in json.dumps(t)]
                or None
            ),
            60,
            "the interrupted task's todo",
        )
        assert "long" in json.dumps(todos)
    except (TimeoutError, AssertionError) as exc:
        raise AssertionError(f"{exc}\n{hive.logs()}") from None
    finally:
        stall.release.set()


def test_a_partitioned_host_loses_its_lease_and_is_fenced_when_it_heals(
    hive: Hive, net: Lan, lan_model: ModelServer
) -> None:
    lan_model.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "back, and read it"}),
            text("done"),
        ]
    )
    hive.start_host("h1", hive.add_host("h1"))
    hive.wait_host_of("alice", "h1")
    try:
        net.partition("h1")
        # No heartbeat gets through: one lease later its agents are lost, once, with a notice.
        wait_until(lambda: agent_rows(hive.home)["alice"]["lost_on"] == "h1", 60, "alice lost")
        rows = agent_rows(hive.home)
        assert not rows["alice"]["running"] and rows["bob"]["lost_on"] == "h1"
        [h1] = hivectl_json(hive.home, "hosts", "list")
        assert h1["link"] == "expired" and h1["lost_agents"] == ["alice", "bob"]
        assert hivectl_json(hive.home, "status")["lost"] == {"alice": "h1", "bob": "h1"}
        listed = hivectl(hive.home, "agents", "list").stdout
        assert "lost" in listed
        # Mail for a lost agent waits (nothing acks it, nothing drops it).
        hivectl(hive.home, "send", "alice", "while you were cut off")
        net.heal("h1")
        # The host redials; what it still runs is fenced, then (on_host_loss = wait)
        # its agents start on it again as new incarnations and read their mail.
        hive.wait_host_of("alice", "h1")
        [reply] = wait_until(
            lambda: [m for m in hivectl_json(hive.home, "inbox") if m["from"] == "alice"] or None,
            120,
            "alice's reply after the heal",
        )
        assert reply["body"] == "back, and read it"
        assert "fenced by the coordinator" in hive.host_log("h1")
        notices = [m for m in hivectl_json(hive.home, "inbox") if "lease expired" in m["body"]]
        assert len(notices) == 1
        assert agent_rows(hive.home)["alice"]["lost_on"] is None
    except (TimeoutError, AssertionError) as exc:
        raise AssertionError(f"{exc}\n{hive.logs()}") from None
