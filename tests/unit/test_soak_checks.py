"""The soak's own bookkeeping: a claude is named by its pid *and* its start time.

A full soak on a busy machine wraps pids (``pid_max`` is 32768 here): a claude
started later can get the pid of one started earlier. Named by pid alone, the
later claude's requests were filed under the earlier claude's turn, so the
messages that woke it looked never delivered, and the earlier turn's messages
looked shown again after their ack (the later claude's start time stood for
both). These run the wrapper for real and the message check on a ledger built
by the soak's model from the requests two such claudes send.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

from hyperhive.config import HivePaths
from hyperhive.store.rows import MessageRow
from tests.chaos.rig import Spawn, chaos_wrapper, claude_starts, live_claudes
from tests.chaos.soak_model import SoakModel, _new_tool_results
from tests.chaos.test_soak import PLAN, Operator, Tally, _check_messages
from tests.support.procs import wait_until
from tests.support.stores import HiveRows


def _start_ticks(pid: int) -> str:
    """Field 22 of ``/proc/<pid>/stat``, read here independently of the wrapper."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[19]


def test_the_wrapper_names_each_claude_by_pid_and_start_time(tmp_path: Path) -> None:
    work = tmp_path / "home" / "agents" / "a01" / "work"
    work.mkdir(parents=True)
    seen = tmp_path / "extra-body"
    # The "real claude" here: says what it was told, then lives until killed.
    fake = tmp_path / "claude"
    fake.write_text(
        f'#!/bin/bash\nprintf "%s" "$CLAUDE_CODE_EXTRA_BODY" > {seen}\nexec sleep 600\n'
    )
    fake.chmod(0o755)
    record = tmp_path / "claudes"
    wrapper = chaos_wrapper(tmp_path, fake, record)
    with subprocess.Popen([str(wrapper)], cwd=work) as proc:
        try:
            wait_until(lambda: seen.exists() and seen.read_text() != "", what="claude started")
            name = json.loads(seen.read_text())["chaos_claude"]
            assert name == f"{proc.pid}:{_start_ticks(proc.pid)}"
            with record.open("a") as out:  # an earlier claude that had the same pid
                out.write(f"{proc.pid} 1.0 1\n")
            starts = claude_starts(record)
            assert set(starts) == {name, f"{proc.pid}:1"}
            assert starts[name].pid == proc.pid
            assert live_claudes(record, tmp_path / "home") == [proc.pid]  # once, the live one
        finally:
            proc.kill()
    assert live_claudes(record, tmp_path / "home") == []


def _request(claude: str, agent: str, msg_id: int) -> dict[str, Any]:
    """A claude's first API request, as the wrapper tags it and claude sends it."""
    wake = (
        f"You were woken by these messages:\n[msg #{msg_id}] from operator: chain=o{msg_id} hops=0"
    )
    return {
        "chaos_claude": claude,
        "system": f"Your working directory: /hive/agents/{agent}/work",
        "messages": [{"role": "user", "content": wake}],
    }


def test_a_claude_reusing_an_earlier_claudes_pid_is_another_turn(tmp_path: Path) -> None:
    # The soak's finding: a01's claude (pid 30082) was woken by #210, which a01's clean turn
    # acked at t=50; much later a15's claude got pid 30082 again, woken by #1648 (acked at 150).
    earlier, later = Spawn(30082, 10.0, "1000"), Spawn(30082, 100.0, "90000")
    model = SoakModel(["a01", "a15"], seed=1, p_stall=0.0)
    model(_request(earlier.key, "a01", 210))
    model(_request(later.key, "a15", 1648))
    db = HiveRows(
        messages=[
            MessageRow(210, "operator", "a01", "chain=o210 hops=0", None, 5.0, 10.5, 50.0),
            MessageRow(1648, "operator", "a15", "chain=o1648 hops=0", None, 95.0, 100.5, 150.0),
        ],
        reminders=[],
        todos=[],
        approvals=[],
        questions=[],
        schedules=[],
        agents=[],
        topology={},
        configs={},
        integrity="ok",
    )
    operator = Operator(HivePaths(tmp_path), ["a01", "a15"], random.Random(1), PLAN)
    tally = Tally()
    spawned = {s.key: s for s in (earlier, later)}
    assert _check_messages(db, ["a01", "a15"], operator, model.ledger, spawned, tally) == []
    assert {t.claude: (t.agent, t.wake_ids) for t in model.ledger.turns.values()} == {
        earlier.key: ("a01", [210]),
        later.key: ("a15", [1648]),
    }
    assert tally.deliveries_per_message == {1: 2}


def test_a_task_end_shown_beside_mid_turn_mail_is_counted_as_shown() -> None:
    """claude sends mail taken in while a step ran as a ``system`` message after that
    step's tool results (as 2.1.328 does): the tool results before it count as shown."""

    messages = [
        {"role": "user", "content": "wake"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "task ab12: done"}],
        },
        {
            "role": "system",
            "content": [{"type": "text", "text": "The user sent a new message while you …"}],
        },
    ]
    assert _new_tool_results(messages) == ["task ab12: done"]
    # Results an earlier request showed (before the last assistant message) are not new.
    assert _new_tool_results([*messages, {"role": "assistant", "content": "ok"}]) == []
