"""An agent on a remote host whose disk the coordinator never sees: logs, live stream,
reminders, turn records.

The coordinator (``hivectl serve``) runs in one network namespace, agent
host h1 (``hivectl host --coordinator wss://…``) in another, with a hive home
of its own: the agent's log, state and session are on h1's disk only. So
``hivectl logs``, ``logs -f``, ``hivectl turns``, the dashboard's live turn stream and
a long reminder all have to travel the host link (#14: no shared disk). The real
claude CLI runs each turn against the scripted model server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hyperhive.tools.inbox import REMIND_MAX_BYTES
from tests.support.hive import hivectl_env
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.netns_remote import NETNS_E2E, RemoteHive, remote_hive
from tests.support.procs import agent_rows, hivectl, hivectl_json, wait_until

pytestmark = NETNS_E2E


@pytest.fixture
def hive(tmp_path: Path, claude_bin: Path) -> Iterator[tuple[RemoteHive, ModelServer]]:
    with remote_hive(tmp_path, claude_bin, ["alice"]) as made:
        yield made


class Follower:
    """``hivectl logs NAME -f`` as a real process, its lines collected as they come."""

    def __init__(self, home: Path, agent: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "logs", agent, "-n", "1", "-f"],
            env=hivectl_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def finish(self, within: float) -> tuple[int, str]:
        """Its exit code and stderr once it exits by itself (killed if it does not)."""
        try:
            code = self.proc.wait(timeout=within)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self._reader.join(timeout=10)
            assert self.proc.stdout is not None and self.proc.stderr is not None
            err = self.proc.stderr.read()
            self.proc.stdout.close()
            self.proc.stderr.close()
        return code, err


class LiveStream:
    """The dashboard's ``/api/agents/NAME/events`` (SSE), read on a thread."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.events: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()

    def _read(self, url: str, headers: dict[str, str]) -> None:
        with (
            httpx.Client(timeout=httpx.Timeout(10, read=None)) as http,
            http.stream("GET", url, headers=headers) as resp,
        ):
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    self.events.append(json.loads(line[6:]))
                if self._stop.is_set():
                    return

    def close(self) -> None:
        self._stop.set()


def test_logs_follow_live_stream_and_a_long_reminder_cross_the_link(
    hive: tuple[RemoteHive, ModelServer],
) -> None:
    h, model = hive
    big = ("remember this, all of it. " * 3000)[: REMIND_MAX_BYTES - 100]
    model.set_script(
        [
            tool_call("mcp__hyperhive__remind", {"message": big, "delay_seconds": 0}),
            text("reminder set on h1"),
            text("read my reminder"),
        ]
    )
    h.start_h1()
    try:
        wait_until(
            lambda: (
                agent_rows(h.home)["alice"]["host"] == "h1"
                and agent_rows(h.home)["alice"]["running"]
            ),
            60,
            "alice running on h1",
        )
        url, headers = h.dashboard()
        live = LiveStream(f"{url}/api/agents/alice/events", headers)

        hivectl(h.home, "send", "alice", "set yourself a long reminder")
        # Turn one: remind, then text; turn two, woken by the reminder: text.
        mains = wait_until(lambda: model.main_requests[2:] or None, 120, "alice's second turn")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{h.logs()}") from None
    # The reminder came back whole in the message that woke alice's second turn.
    assert "from reminder: [reminder #" in json.dumps(mains[0].messages)
    assert big in "".join(
        block.get("text", "") if isinstance(block, dict) else str(block)
        for message in mains[0].messages
        for block in (
            message["content"] if isinstance(message["content"], list) else [message["content"]]
        )
    )
    # The live stream relayed alice's turns from h1, through the coordinator.
    wait_until(
        lambda: any(e.get("text") == "reminder set on h1" for e in live.events),
        30,
        "the turn's text on the dashboard's live stream",
    )
    live.close()
    assert any(e.get("kind") == "state" and e.get("turn_state") == "thinking" for e in live.events)

    # alice's log is on h1's disk alone; the coordinator's home has none.
    host_log = h.host_home / "logs" / "agents" / "alice.log"
    assert host_log.exists()
    assert not (h.home / "logs" / "agents" / "alice.log").exists()
    tail = hivectl(h.home, "logs", "alice", "-n", "50").stdout
    assert "turn start: You were woken by these messages:" in tail

    # Its turn records too: on h1's disk alone, read over the link.
    assert (h.host_home / "agents" / "alice" / "turns" / "turns.db").is_file()
    assert not (h.home / "agents" / "alice" / "turns").exists()
    # The reminder fires while its first turn runs: it reaches that running turn as a
    # mid-turn message (claude's streaming input), or wakes a second turn if the first
    # had ended; either way every turn is recorded, and all of them end.
    turns = wait_until(
        lambda: (
            (ts := hivectl_json(h.home, "turns", "list", "alice"))
            and all(t["outcome"] for t in ts)
            and ts
        ),
        60,
        "alice's turns recorded and ended",
    )
    assert turns[-1]["wake_reason"] == "mail from operator"
    assert [t["wake_reason"] for t in turns[:-1]] in ([], ["a reminder"])
    turns = [turns[0], turns[-1]]  # [the last, the first]: the first holds the remind call
    # The reminder's input is past the index's size: cut in the list, whole with --full.
    cut = hivectl_json(h.home, "turns", "show", turns[1]["id"])
    [cut_remind] = [s for s in cut["steps"] if s["kind"] == "tool_use"]
    assert cut_remind["truncated"] and cut_remind["size"] > len(cut_remind["text"])
    first = hivectl_json(h.home, "turns", "show", turns[1]["id"], "--full")
    [remind] = [s for s in first["steps"] if s["kind"] == "tool_use"]
    assert remind["name"] == "mcp__hyperhive__remind" and json.loads(remind["text"]) == {
        "message": big,
        "delay_seconds": 0,
    }
    found = hivectl_json(h.home, "turns", "search", "reminder set on h1")
    assert [hit["turn"]["id"] for hit in found] == [turns[1]["id"]]

    follower = Follower(h.home, "alice")
    try:
        wait_until(lambda: follower.lines, 30, "the follower's first line")
        with host_log.open("a") as fh:
            fh.write("a line written on h1 after the follow began\n")
        wait_until(
            lambda: "a line written on h1 after the follow began" in follower.lines,
            30,
            "the new line on hivectl logs -f",
        )
        # h1 goes away mid-follow: the follow ends with the reason, not a hang.
        h.procs[-1].send_signal(signal.SIGTERM)
    finally:
        code, err = follower.finish(60)
    assert code != 0
    assert "stopped following alice's log" in err and "agent host h1" in err, err
