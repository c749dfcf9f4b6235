"""Prometheus metrics for the dashboard's ``/metrics``.

Two sources, kept apart on purpose:

- what lives in the store or in the coordinator's live view (messages sent,
  delivered and queued per agent, approvals pending, questions open, hosts
  connected, agents per turn state, bash tasks and subagents running) is read
  at scrape time into a :class:`HiveSnapshot` and exposed by
  :class:`SnapshotCollector`: nothing to drift, nothing lost on a restart;
- what only passes by as an event (a turn ended, how long it took, what it
  cost) is counted by :class:`TurnMeter` from the coordinator's event bus, the
  way Prometheus expects counters to be kept (a restart resets them, and
  ``rate()`` copes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hyperhive.protocol.hostapi import HostWork
from hyperhive.store.rows import MessageCounts, SpendTotal

__all__ = ["TURN_BUCKETS", "HiveSnapshot", "SnapshotCollector", "TurnMeter", "render"]

# A turn is seconds to tens of minutes (a long tool run inside it).
TURN_BUCKETS = (1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, float("inf"))


@dataclass(frozen=True)
class HiveSnapshot:
    """Everything ``/metrics`` reads at scrape time."""

    messages: list[MessageCounts]
    approvals_pending: int
    questions_open: int
    hosts: list[str]
    turn_states: Mapping[str, str]  # agent → idle / thinking / … as its host reports it
    work: HostWork | None  # None: no agent host answered
    # All-time spend per agent from the store (durable; a subagent's counts to its parent).
    spend: Sequence[SpendTotal] = ()


class SnapshotCollector(Collector):
    """One scrape's snapshot as metric families. Pure."""

    def __init__(self, snapshot: HiveSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        sent = CounterMetricFamily(
            "hyperhive_messages_sent", "Messages stored with this sender.", labels=["agent"]
        )
        delivered = CounterMetricFamily(
            "hyperhive_messages_delivered",
            "Messages handed to this recipient (a turn received them).",
            labels=["agent"],
        )
        queued = GaugeMetricFamily(
            "hyperhive_queue_depth", "Messages to this recipient not yet acked.", labels=["agent"]
        )
        for row in snap.messages:
            sent.add_metric([row.agent], row.sent)
            delivered.add_metric([row.agent], row.delivered)
            queued.add_metric([row.agent], row.queued)
        yield from (sent, delivered, queued)
        yield GaugeMetricFamily(
            "hyperhive_approvals_pending",
            "Approvals waiting for the operator.",
            value=snap.approvals_pending,
        )
        yield GaugeMetricFamily(
            "hyperhive_questions_open",
            "Questions waiting for an answer.",
            value=snap.questions_open,
        )
        hosts = GaugeMetricFamily(
            "hyperhive_host_connected",
            "1 for each agent host linked to the coordinator.",
            labels=["host"],
        )
        for host in snap.hosts:
            hosts.add_metric([host], 1)
        yield hosts
        yield GaugeMetricFamily(
            "hyperhive_hosts_connected", "Agent hosts linked now.", value=len(snap.hosts)
        )
        states = GaugeMetricFamily(
            "hyperhive_agents", "Active agents per turn state.", labels=["state"]
        )
        by_state: dict[str, int] = {}
        for state in snap.turn_states.values():
            by_state[state] = by_state.get(state, 0) + 1
        for state, n in sorted(by_state.items()):
            states.add_metric([state], n)
        yield states
        yield GaugeMetricFamily(
            "hyperhive_host_up",
            "1 if the agent host answered this scrape (bash and subagent figures are from it).",
            value=0 if snap.work is None else 1,
        )
        bash = GaugeMetricFamily(
            "hyperhive_bash_tasks_running", "Background bash tasks running.", labels=["agent"]
        )
        subagents = GaugeMetricFamily(
            "hyperhive_subagents_running", "Subagents in a run.", labels=["agent"]
        )
        if snap.work is not None:
            for name, work in sorted(snap.work.agents.items()):
                bash.add_metric([name], work.bash_tasks_running)
                subagents.add_metric([name], work.subagents_running)
        yield from (bash, subagents)
        usd = CounterMetricFamily(
            "hyperhive_spend_usd",
            "Cost claude reported for the agent's runs (turns, compactions, subagents), in USD.",
            labels=["agent"],
        )
        tokens = CounterMetricFamily(
            "hyperhive_spend_tokens",
            "Tokens of the agent's runs: input, output, cache writes and cache reads.",
            labels=["agent"],
        )
        for total in snap.spend:
            usd.add_metric([total.agent], total.usd)
            tokens.add_metric([total.agent], total.tokens)
        yield from (usd, tokens)


@dataclass
class TurnMeter:
    """Turns and their durations, counted from the coordinator's events.

    Spend is not counted here: ``/metrics`` reads it from the store per scrape
    (durable, and it includes subagents' and compaction runs).
    """

    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )
    _thinking_since: dict[str, float] = field(default_factory=dict)
    _spent: float = 0.0  # USD of turns since this coordinator started (the activity glance)

    def __post_init__(self) -> None:
        self.turns = Counter(
            "hyperhive_turns",
            "Turns ended (compaction turns too), by outcome.",
            ["agent", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "hyperhive_turn_duration_seconds",
            "Wall time of a turn, from taking a claude slot to the turn's end.",
            ["agent"],
            buckets=TURN_BUCKETS,
            registry=self.registry,
        )

    def totals(self) -> tuple[int, float]:
        """Turns ended and USD spent since the coordinator started (the activity page)."""
        turns = sum(
            s.value for m in self.turns.collect() for s in m.samples if s.name.endswith("_total")
        )
        return int(turns), self._spent

    def observe(self, event: Mapping[str, Any]) -> None:
        """Count one coordinator event (others are ignored)."""
        kind = event.get("kind")
        agent = event.get("agent")
        if not isinstance(agent, str):
            return
        if kind == "turn_end":
            self.turns.labels(agent, str(event.get("outcome"))).inc()
            cost = event.get("cost_usd")
            if isinstance(cost, int | float) and cost > 0:
                self._spent += cost
        elif kind == "turn":
            state, since = event.get("turn_state"), event.get("since")
            if not isinstance(since, int | float):
                return
            # Busy → anything (a turn may go straight on to its compaction) ends a turn.
            started = self._thinking_since.pop(agent, None)
            if started is not None and since >= started:
                self.duration.labels(agent).observe(since - started)
            if state in ("thinking", "compacting"):
                self._thinking_since[agent] = since


def render(snapshot: HiveSnapshot, meter: TurnMeter) -> bytes:
    """The Prometheus text exposition of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry) + generate_latest(meter.registry)
