"""``hivectl inbox --follow`` and ``hivectl activity -f`` against a real ``hivectl serve``:
what happens in the hive appears in the terminal as it happens, once, and Ctrl-C
ends the follower cleanly (exit 0, nothing on stderr)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent, agent_call, hivectl_env, seed_home, start_serve
from tests.support.procs import hivectl, wait_until

pytestmark = pytest.mark.timeout(300)

SEEN_WITHIN = 60  # seconds: a bound on the test, far past a long-poll's wake-up


class Follower:
    """A following hivectl whose stdout lines are collected as they come."""

    def __init__(self, home: Path, *args: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
            env=hivectl_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def sees(self, fragment: str) -> str:
        return wait_until(
            lambda: next((ln for ln in self.lines if fragment in ln), ""),
            SEEN_WITHIN,
            f"{fragment!r} in {self.lines}",
        )

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: its exit code and stderr."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def hive(tmp_path: Path) -> Iterator[Path]:
    seed_home(
        tmp_path,
        {"alice": AgentConfig(), "bob": AgentConfig()},
        {"alice": None, "bob": None},
        hive_toml="dashboard_port = 0\n",
    )
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, (tmp_path / "serve.log").read_text()


def _send_as(home: Path, sender: str, to: str, body: str) -> Any:
    async def go() -> Any:
        async with agent(HivePaths(home), sender) as client:
            return await agent_call(client, "send", to=to, body=body)

    return anyio.run(go)


def test_inbox_and_activity_follow_the_hive_live_and_stop_on_ctrl_c(hive: Path) -> None:
    _send_as(hive, "alice", "operator", "before anyone followed")
    followers = {
        "inbox": Follower(hive, "inbox", "--follow"),
        "activity": Follower(hive, "activity", "-f"),
        "json": Follower(hive, "activity", "-f", "--json", "--kind", "message"),
    }
    try:
        # What was there first: the inbox's last messages, the feed's last events.
        followers["inbox"].sees("from alice: before anyone followed")
        followers["activity"].sees("alice → operator: before anyone followed")

        _send_as(hive, "bob", "operator", "news from bob")
        _send_as(hive, "alice", "bob", "between agents")
        hivectl(hive, "agents", "set-parent", "bob", "--parent", "alice")
        hivectl(hive, "send", "alice", "from the operator")

        followers["inbox"].sees("from bob: news from bob")
        feed = followers["activity"]
        feed.sees("bob → operator: news from bob")
        feed.sees("alice → bob: between agents")
        feed.sees("bob moved: (root) → alice")
        feed.sees("operator → alice: from the operator")
        batches = followers["json"]
        batches.sees("from the operator")

        for name, follower in followers.items():
            code, err = follower.interrupt()
            assert (code, err) == (0, ""), (name, err)

        # Once each, in the order they happened; the inbox holds only mail to the operator.
        inbox = followers["inbox"].lines
        assert [ln.split(": ", 1)[1] for ln in inbox] == [
            "before anyone followed",
            "news from bob",
        ]
        titles = [ln.split(maxsplit=2)[2] for ln in feed.lines]
        assert titles == [
            "alice → operator: before anyone followed",
            "bob → operator: news from bob",
            "alice → bob: between agents",
            "bob moved: (root) → alice",
            "operator → alice: from the operator",
        ]
        # --json -f: JSON Lines, each an ActivityFeed of new messages only.
        items = [i for line in batches.lines for i in json.loads(line)["items"]]
        assert {i["kind"] for i in items} == {"message"}
        bodies = [i["body"] for i in sorted(items, key=lambda i: i["at"])]
        assert bodies == [
            "before anyone followed",
            "news from bob",
            "between agents",
            "from the operator",
        ]
    finally:
        for follower in followers.values():
            follower.kill()
