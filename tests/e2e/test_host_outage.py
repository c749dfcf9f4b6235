"""A host whose coordinator died: it says so once per agent, and a SIGTERM still stops it
at once. Real ``hivectl serve`` and ``hivectl host`` processes.

Before: every agent logged a warning per redial (two a second each; a 1,000-agent host
wrote 737 MB of log in 27 minutes), and a graceful stop waited out the 120 s grace for
agents that had nothing left to finish.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig
from tests.support.hive import seed_home, start_serve
from tests.support.procs import agent_rows, start_host, stop, wait_until

pytestmark = pytest.mark.timeout(180)

AGENTS = [f"a{i:02d}" for i in range(12)]
WATCH_S = 3.0  # at the old rate, 6 warnings per agent


def test_a_host_whose_coordinator_died_warns_once_per_agent_and_stops_at_once(
    tmp_path: Path,
) -> None:
    seed_home(
        tmp_path,
        {name: AgentConfig() for name in AGENTS},
        hive_toml='runtime = "unsandboxed"\nclaude_bin = "/bin/false"\n',
    )
    serve = start_serve(tmp_path)
    host = start_host(tmp_path)
    try:
        wait_until(
            lambda: sum(r["running"] for r in agent_rows(tmp_path).values()) == len(AGENTS),
            60,
            "every agent running",
        )
        log = tmp_path / "host.log"
        mark = log.stat().st_size
        serve.kill()
        serve.wait(timeout=30)
        time.sleep(WATCH_S)  # the redials of this window are what is counted
        said = log.read_bytes()[mark:].decode(errors="replace")
        per_agent = Counter(re.findall(r"(a\d\d): coordinator unavailable", said))
        assert set(per_agent) <= set(AGENTS)
        assert max(per_agent.values(), default=0) <= 1, per_agent
        assert said.count("coordinator link down") <= 1, said[-2000:]

        host.send_signal(signal.SIGTERM)
        host.wait(timeout=60)  # a bound, not a speed claim: the old grace alone was 120 s
        assert host.returncode == 0, log.read_text()[-2000:]
    finally:
        stop(host)
        stop(serve)
