"""Repairing spend rows recorded at claude's session totals instead of each run's own cost.

Pure module: no I/O; each backend's migration reads the old rows, calls
:func:`repair` and writes what it returns.

Before runs were counted by :mod:`hyperhive.runcost`, each was recorded at the
cost claude's ``result`` reported, which is the *session's* total so far: three
turns of one session costing ``c`` each were recorded as ``c, 2c, 3c``. What
the old rows hold, by kind (none says which session it belongs to):

- ``turn``: its session's total after the run (0: the run reported nothing);
- ``compaction``: the sum of two totals of the agent's session, the
  notes-checkpoint run's and then ``/compact``'s;
- ``subagent``: the total of that subagent's session after the run.

**Repaired.** An agent's turns and compactions run one at a time, in one
session at a time, so its ``turn`` and ``compaction`` rows, in the order they
were recorded, are its sessions' runs in order. Within a session claude's
total never goes down, so a lower total starts a new session. Each row then
counts the session's total after it minus the total before it:

- a turn's total after is its recorded cost;
- a compaction's is half its recorded sum when that sum is at least twice the
  total before (both of its runs reported: the half lies between their two
  totals, so the compaction and the turn after it share their exact sum, split
  by estimate), else its sum (only one of them reported);
- a row that reported nothing (0) stays 0 and changes no total;
- the first row of a session keeps its whole total (what came before is unknown).

**Not repaired, or not exactly.** A new session whose first total is not
below the previous session's last is taken for that session going on (the
run is counted short by that total). A session already running when spend
began to be recorded has its earlier runs in its first recorded row.
``subagent`` rows stay as recorded: one agent's subagents interleave and the
rows do not say which is which (a subagent's first run is right; each
``continue`` also counts its session's earlier runs).

Each agent's last total is returned too: the migration keeps it as the
agent's current session's previous total (USD only,
:data:`~hyperhive.runcost.UNKNOWN_MODEL`), so the next run of that session
counts from it instead of counting the whole session again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["OldRun", "Plan", "Repair", "feed_title", "plan", "repair"]

_MAIN_KINDS = ("turn", "compaction")


@dataclass(frozen=True, slots=True)
class OldRun:
    """A spend row as the old code wrote it."""

    id: int
    agent: str
    key: str  # "<kind>:<run id>"
    kind: str
    cost_usd: float


@dataclass
class Repair:
    """Per row, the run's own USD and claude's session total; per agent, its last total."""

    own: dict[int, float] = field(default_factory=dict)
    session_usd: dict[int, float] = field(default_factory=dict)
    last_total: dict[str, float] = field(default_factory=dict)


def repair(rows: Iterable[OldRun]) -> Repair:
    """The repair of ``rows`` (every old spend row, in the order they were recorded)."""
    out = Repair()
    before: dict[str, float] = {}  # agent → its session's total before its next row
    for row in rows:
        if row.cost_usd <= 0:
            continue  # reported nothing: 0 is right, and no session total changed
        if row.kind not in _MAIN_KINDS:
            out.session_usd[row.id] = row.cost_usd
            continue
        previous = before.get(row.agent)
        after = _total_after(row, previous)
        if previous is None or after < previous:
            previous = 0.0  # a new session: what came before it in the session is unknown
        out.own[row.id] = after - previous
        out.session_usd[row.id] = after
        before[row.agent] = out.last_total[row.agent] = after
    return out


def _total_after(row: OldRun, previous: float | None) -> float:
    if row.kind == "turn":
        return row.cost_usd
    if previous is not None and previous <= row.cost_usd < 2 * previous:
        return row.cost_usd  # the sum of one total only: the other run reported nothing
    return row.cost_usd / 2


def feed_title(title: str, usd: float) -> str:
    """A feed row's title (``"alice: turn ok · $0.9148"``) with its cost set to ``usd``."""
    head, sep, _ = title.rpartition(" · $")
    return f"{head} · ${usd:.4f}" if sep else title


@dataclass(frozen=True)
class Plan:
    """The writes of the migration, the same on every backend."""

    spend: list[tuple[float, float, int]]  # (cost_usd, session_usd, id)
    feed: list[tuple[str, str, str]]  # (title, detail as JSON, key)
    seeds: list[tuple[str, str, float]]  # (agent, session id, its total in USD)
    recounted: int  # spend rows whose cost changed
    rows: int
    subagent_rows: int  # left as recorded

    def summary(self) -> str:
        return (
            f"spend repair: {self.recounted} of {self.rows} spend rows recounted at their "
            f"run's own cost ({len(self.feed)} feed rows with them), {len(self.seeds)} "
            f"current sessions' totals kept; {self.subagent_rows} subagent rows left as "
            "recorded (their sessions cannot be told apart)"
        )


def plan(
    rows: Sequence[OldRun],
    feed: Mapping[str, tuple[str, str]],
    sessions: Mapping[str, str],
) -> Plan:
    """The migration's writes from the old spend ``rows`` (in recorded order), the feed's
    turn rows by key (title, detail JSON) and each agent's current session id."""
    fixed = repair(rows)
    spend: list[tuple[float, float, int]] = []
    moved: list[tuple[OldRun, float]] = []
    for row in rows:
        if row.id not in fixed.session_usd:
            continue
        own = fixed.own.get(row.id, row.cost_usd)
        spend.append((own, fixed.session_usd[row.id], row.id))
        if own != row.cost_usd:
            moved.append((row, own))
    writes: list[tuple[str, str, str]] = []
    for row, own in moved:
        key = f"turn:{row.agent}:{row.key.partition(':')[2]}"
        if key not in feed:
            continue  # pruned from the feed, or never there
        title, detail = feed[key]
        data = json.loads(detail)
        if isinstance(data, dict) and "cost_usd" in data:
            data["cost_usd"] = own
        writes.append((feed_title(title, own), json.dumps(data), key))
    seeds = [
        (agent, sessions[agent], total)
        for agent, total in sorted(fixed.last_total.items())
        if sessions.get(agent)
    ]
    return Plan(
        spend=spend,
        feed=writes,
        seeds=seeds,
        recounted=len(moved),
        rows=len(rows),
        subagent_rows=sum(1 for r in rows if r.kind not in _MAIN_KINDS),
    )
