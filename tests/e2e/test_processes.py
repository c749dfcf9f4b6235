"""The hive as an operator runs it: ``serve`` and ``host`` as two real processes.

Nothing runs in the test's own process but the scripted model server: the
coordinator and the agent host are ``python -m hyperhive serve|host`` on a
temp ``HIVE_HOME``, claude is the real CLI, and every observation goes
through the CLI, a socket or a file, polled under a deadline.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from hyperhive.client import call_once
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.protocol import Message, OpMessagesReq, RecvReq, Req
from tests.support.hive import agent_env, seed_home, start_serve
from tests.support.model_server import ModelServer, Reply, Stall, text, tool_call
from tests.support.procs import (
    agent_rows,
    claude_wrapper,
    exec_records,
    group_gone,
    hivectl,
    hivectl_json,
    log_tail,
    process_gone,
    start_host,
    stop,
    wait_until,
)

R = TypeVar("R")

# A hang guard, not a speed limit: a restart test takes ~60 s alone (on either store) and
# went past 150 s beside a loaded two-worker run.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


class Hive:
    """A seeded home with ``serve`` and ``host`` running; killed at teardown if still up."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.paths = HivePaths(home)
        self.serve = start_serve(home)
        try:
            self.host = start_host(home)
        except BaseException:
            stop(self.serve)
            raise

    @property
    def host_id(self) -> str:
        return f"{socket.gethostname()}-{self.host.pid}"

    def logs(self) -> str:
        return (
            f"--- serve.log\n{log_tail(self.home, 'serve.log')}\n"
            f"--- host.log\n{log_tail(self.home)}"
        )

    def running_here(self, agent: str) -> bool:
        row = agent_rows(self.home)[agent]
        return bool(row["running"] and row["host"] == self.host_id)

    def wait_running(self, agent: str) -> None:
        wait_until(lambda: self.running_here(agent), 30, f"{agent} running on {self.host_id}")

    def restart_serve(self) -> None:
        self.serve.send_signal(signal.SIGTERM)
        assert self.serve.wait(timeout=30) == 0, self.logs()
        self.serve = start_serve(self.home)

    def operator_replies(self) -> list[dict[str, Any]]:
        return [m for m in hivectl_json(self.home, "inbox") if m["from"] != "operator"]

    def wait_replies(self, count: int, within: float = 60) -> list[dict[str, Any]]:
        try:
            return wait_until(
                lambda: r if len(r := self.operator_replies()) >= count else None,
                within,
                f"{count} replies in the operator's inbox",
            )
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def call(self, sock: Path, request: Req[R]) -> R:
        result: R = anyio.run(call_once, sock, request)
        return result

    def inbox_of(self, agent: str) -> list[Message]:
        return self.call(self.paths.host_sock, OpMessagesReq(cmd="messages", agent=agent)).inbox

    def all_acked(self, agent: str) -> bool:
        return all(m.acked for m in self.inbox_of(agent))

    def fenced(self, agent: str) -> bool:
        """What an in-sandbox process of ``agent`` sees: recv answers the graceful stop."""
        got = self.call(self.paths.agent_sock(agent), RecvReq(cmd="recv", max=1))
        return any(m.sender == "graceful-stop" for m in got)

    def close(self) -> None:
        # Two SIGTERMs kill any claude still running (its own session outlives a
        # SIGKILLed host); SIGKILL is for a host that does not answer them.
        for _ in range(2):
            if self.host.poll() is None:
                self.host.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.host.wait(timeout=5)
        for proc in (self.host, self.serve):
            stop(proc)


def seed(home: Path, model: ModelServer, claude: Path, *agents: str) -> None:
    env = agent_env(model.url)
    seed_home(
        home,
        {name: AgentConfig(env=env) for name in agents},
        hive_toml=f'claude_bin = "{claude}"\n',
    )


@pytest.fixture
def start_hive() -> Iterator[Callable[[Path], Hive]]:
    """Start serve + host on a home; whatever is still running is killed at teardown."""
    started: list[Hive] = []

    def start(home: Path) -> Hive:
        hive = Hive(home)
        started.append(hive)
        return hive

    yield start
    for hive in started:
        hive.close()


def test_operator_message_is_answered_by_the_agent(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}), text("done")]
    )
    seed(tmp_path, model_server, claude_bin, "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")

    sent = hivectl(tmp_path, "send", "alice", "ping")
    assert sent.stdout.startswith("sent #")

    [reply] = hive.wait_replies(1)
    assert (reply["from"], reply["body"]) == ("alice", "pong")
    wait_until(lambda: hive.all_acked("alice"), 30, "the waking message acked")
    assert "from operator: ping" in str(model_server.main_requests[0].messages)


def _restart_script() -> list[Reply]:
    return [
        tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong 1"}),
        text("done"),
        tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong 2"}),
        text("done"),
    ]


def test_a_coordinator_restart_interrupts_no_agent(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    model_server.set_script(_restart_script())
    seed(tmp_path, model_server, claude_bin, "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")
    hivectl(tmp_path, "send", "alice", "first")
    hive.wait_replies(1)
    wait_until(lambda: hive.all_acked("alice"), 30, "the first message acked")

    hive.restart_serve()
    assert hive.host.poll() is None, hive.logs()

    hivectl(tmp_path, "send", "alice", "second")
    replies = hive.wait_replies(2)
    assert [r["body"] for r in replies] == ["pong 1", "pong 2"]
    wait_until(lambda: hive.all_acked("alice"), 30, "the second message acked")
    mains = model_server.main_requests
    # Two turns of two model calls each: nothing was delivered twice.
    assert len(mains) == 4 and model_server.unscripted == 0
    second_wake = str(mains[2].messages[-1])
    assert "second" in second_wake and "first" not in second_wake
    assert hive.host.poll() is None, hive.logs()


def test_tool_calls_reach_a_coordinator_restarted_in_the_middle_of_a_turn(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    # The harness reconnects only once its turn is over; the turn's tool calls
    # must not ride its dead connection (a send failing, a bash todo retried for minutes).
    stall = Stall(then=tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}))
    model_server.set_script(
        [
            stall,
            # Long enough that its completion (which wakes a turn of its own) comes after
            # the count below: a 3 s task finished first on a loaded machine (4 requests).
            tool_call("mcp__bash__run", {"cmd": "sleep 60", "wait_seconds": 0}),
            text("done"),
        ]
    )
    seed(tmp_path, model_server, claude_bin, "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")
    hivectl(tmp_path, "send", "alice", "ping")
    wait_until(lambda: model_server.main_requests, 60, "the turn's first model call")

    hive.restart_serve()
    stall.release.set()

    [reply] = hive.wait_replies(1, within=30)
    assert reply["body"] == "pong"
    # The bash task's "running" todo went out at once, so the turn ended and acked.
    wait_until(lambda: hive.all_acked("alice"), 30, "the waking message acked")
    assert len(model_server.main_requests) == 3 and model_server.unscripted == 0


def test_the_host_links_up_again_after_a_coordinator_restart(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    model_server.set_script(_restart_script())
    seed(tmp_path, model_server, claude_bin, "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")

    hive.restart_serve()
    # Same host id, alice placed on it again: the restarted coordinator knows
    # where alice runs, and the host did not restart her (no new incarnation).
    hive.wait_running("alice")
    hivectl(tmp_path, "send", "alice", "first")
    [reply] = hive.wait_replies(1)
    assert reply["body"] == "pong 1"
    assert agent_rows(tmp_path)["alice"]["running"]


def test_sigterm_lets_the_turn_finish_then_the_host_exits_cleanly(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [
            Stall(release=gate, then=tool_call("mcp__hyperhive__recv", {"max": 5})),
            text("flushed my notes"),
        ]
    )
    seed(tmp_path, model_server, claude_bin, "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")
    hivectl(tmp_path, "send", "alice", "start")
    model_server.wait_for(lambda reqs: any(r.main for r in reqs), 60)

    hive.host.send_signal(signal.SIGTERM)
    wait_until(lambda: hive.fenced("alice"), 30, "alice's inbox fenced")
    assert hive.host.poll() is None  # the turn is still running, so is the host
    gate.set()

    assert hive.host.wait(timeout=60) == 0, hive.logs()
    recv_result = str(model_server.main_requests[1].messages[-1])
    assert "stopping you gracefully" in recv_result, recv_result
    assert hive.all_acked("alice")  # the turn ended cleanly, so its mail is done
    wait_until(lambda: not agent_rows(tmp_path)["alice"]["running"], 30, "alice stopped")


def test_a_second_sigterm_kills_a_stalled_turn_at_once(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    gate = threading.Event()
    model_server.set_script([Stall(release=gate, then=text("never seen"))])
    record = tmp_path / "claude-execs"
    seed(tmp_path, model_server, claude_wrapper(tmp_path, claude_bin, record), "alice")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")
    hivectl(tmp_path, "send", "alice", "start")
    model_server.wait_for(lambda reqs: any(r.main for r in reqs), 60)
    # The turn's claude is the last the wrapper started (the host ran `claude --version`
    # once before, at its start).
    claude_pid, _ = exec_records(record)[-1]

    hive.host.send_signal(signal.SIGTERM)
    wait_until(lambda: hive.fenced("alice"), 30, "alice's inbox fenced")
    assert not process_gone(claude_pid)  # a graceful stop waits for the turn
    hive.host.send_signal(signal.SIGTERM)

    # The model's answer is still held back: only the kill can have ended claude.
    wait_until(lambda: group_gone(claude_pid), 30, "claude's process group gone")
    assert not gate.is_set()
    try:
        code = hive.host.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the host did not exit\n{hive.logs()}") from None
    assert code == 0, hive.logs()
    assert not hive.all_acked("alice")  # the killed turn's mail waits for the next start
    gate.set()


def test_a_killed_host_leaves_its_agents_not_running(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    start_hive: Callable[[Path], Hive],
) -> None:
    seed(tmp_path, model_server, claude_bin, "alice", "bob")
    hive = start_hive(tmp_path)
    hive.wait_running("alice")
    hive.wait_running("bob")

    hive.host.send_signal(signal.SIGKILL)
    hive.host.wait(timeout=30)

    def stopped() -> bool:
        rows = agent_rows(tmp_path)
        return all(not rows[a]["running"] and rows[a]["host"] is None for a in ("alice", "bob"))

    wait_until(stopped, 30, "alice and bob marked not running")
    assert hive.serve.poll() is None, hive.logs()
