"""The turn meter's reading of coordinator events, and a snapshot's exposition."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from hyperhive.protocol.hostapi import AgentWork, HostWork
from hyperhive.store.rows import MessageCounts, SpendTotal
from hyperhive.telemetry.metrics import HiveSnapshot, TurnMeter, render


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def _snapshot(work: HostWork | None) -> HiveSnapshot:
    return HiveSnapshot(
        messages=[MessageCounts("alice", 2, 1, 1)],
        approvals_pending=0,
        questions_open=3,
        hosts=["h1"],
        turn_states={"alice": "thinking", "bob": "idle", "carol": "idle"},
        work=work,
    )


def test_a_turn_that_goes_straight_on_to_compaction_is_two_durations() -> None:
    meter = TurnMeter()
    for state, since in [
        ("waiting_slot", 5.0),
        ("thinking", 10.0),
        ("compacting", 25.0),
        ("idle", 26.5),
        ("idle", 40.0),  # a repeated report measures nothing
    ]:
        meter.observe({"kind": "turn", "agent": "alice", "turn_state": state, "since": since})
    meter.observe({"kind": "turn_end", "agent": "alice", "outcome": "ok", "cost_usd": 0.25})
    meter.observe({"kind": "turn_end", "agent": "alice", "outcome": "error", "cost_usd": None})
    meter.observe({"kind": "agent", "agent": "alice", "running": True})
    got = samples(render(_snapshot(None), meter))
    alice = (("agent", "alice"),)
    assert got[("hyperhive_turn_duration_seconds_count", alice)] == 2
    assert got[("hyperhive_turn_duration_seconds_sum", alice)] == 16.5
    assert got[("hyperhive_turn_duration_seconds_bucket", (*alice, ("le", "1.0")))] == 0
    assert got[("hyperhive_turn_duration_seconds_bucket", (*alice, ("le", "2.5")))] == 1
    assert got[("hyperhive_turn_duration_seconds_bucket", (*alice, ("le", "20.0")))] == 2
    assert got[("hyperhive_turns_total", (*alice, ("outcome", "ok")))] == 1
    assert got[("hyperhive_turns_total", (*alice, ("outcome", "error")))] == 1
    assert meter.totals() == (2, 0.25)  # the activity glance: turns and USD since start
    # Spend is the store's, per scrape: the meter exports none of its own.
    assert not any(name.startswith("hyperhive_spend") for name, _ in got)


def test_spend_is_read_from_the_snapshot() -> None:
    snap = _snapshot(None)
    spend = [SpendTotal("alice", usd=1.5, tokens=1200, runs=3), SpendTotal("bob", 0.0, 0, 0)]
    got = samples(render(HiveSnapshot(**{**snap.__dict__, "spend": spend}), TurnMeter()))
    assert got[("hyperhive_spend_usd_total", (("agent", "alice"),))] == 1.5
    assert got[("hyperhive_spend_tokens_total", (("agent", "alice"),))] == 1200
    assert got[("hyperhive_spend_usd_total", (("agent", "bob"),))] == 0


def test_a_snapshot_without_a_host_says_so_and_keeps_the_rest() -> None:
    got = samples(render(_snapshot(None), TurnMeter()))
    assert got[("hyperhive_host_up", ())] == 0
    assert not any(name == "hyperhive_bash_tasks_running" for name, _ in got)
    assert got[("hyperhive_queue_depth", (("agent", "alice"),))] == 1
    assert got[("hyperhive_questions_open", ())] == 3
    assert got[("hyperhive_agents", (("state", "idle"),))] == 2
    assert got[("hyperhive_agents", (("state", "thinking"),))] == 1
    work = HostWork(agents={"alice": AgentWork(bash_tasks_running=2, subagents_running=1)})
    got = samples(render(_snapshot(work), TurnMeter()))
    assert got[("hyperhive_host_up", ())] == 1
    assert got[("hyperhive_bash_tasks_running", (("agent", "alice"),))] == 2
    assert got[("hyperhive_subagents_running", (("agent", "alice"),))] == 1
