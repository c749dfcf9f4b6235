"""Admission control's rules: the pure slot queue, the default slot count, the async wrapper."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.agent.admission import (
    BYTES_PER_CLAUDE,
    CLAUDES_PER_CORE,
    Abandoned,
    Admission,
    SlotQueue,
    default_slots,
    machine_slots,
)

AGENTS = st.sampled_from(["a", "b", "c", "d", "e"])
# An operation: ask for a slot (agent), release the i-th holder, or cancel the i-th waiter.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("ask"), AGENTS),
        st.tuples(st.just("release"), st.integers(0, 20)),
        st.tuples(st.just("cancel"), st.integers(0, 20)),
    ),
    max_size=60,
)


def _holders(q: SlotQueue) -> list[str]:
    return [agent for agent, n in sorted(q.held.items()) for _ in range(n)]


def _apply(q: SlotQueue, op: tuple[str, object]) -> None:
    """One random step: ask for a slot, release a held one, or cancel a waiter."""
    kind, arg = op
    if kind == "ask":
        assert isinstance(arg, str)
        q.enqueue(arg, "turn", 0.0)
    elif kind == "release" and q.held:
        holders = _holders(q)
        assert isinstance(arg, int)
        q.release(holders[arg % len(holders)])
    elif kind == "cancel" and q.waiting:
        assert isinstance(arg, int)
        assert q.cancel(sorted(q.waiting)[arg % len(q.waiting)])


@given(st.integers(1, 4), OPS)
def test_slots_are_never_exceeded_nor_left_idle_while_someone_waits(
    capacity: int, ops: list[tuple[str, object]]
) -> None:
    q = SlotQueue(capacity)
    for op in ops:
        _apply(q, op)
        q.admit()
        assert q.in_use <= capacity
        assert not q.waiting or q.in_use == capacity
        assert all(n > 0 for n in q.held.values())


@given(st.integers(1, 4), OPS)
def test_a_waiter_is_passed_over_only_by_an_earlier_ticket_or_a_less_served_agent(
    capacity: int, ops: list[tuple[str, object]]
) -> None:
    q = SlotQueue(capacity)
    for op in ops:
        _apply(q, op)
        held = dict(q.held)
        passed_over = dict(q.waiting)
        for w in q.admit():
            del passed_over[w.ticket]
            for other in passed_over.values():
                assert (held.get(w.agent, 0), w.ticket) < (held.get(other.agent, 0), other.ticket)
            held[w.agent] = held.get(w.agent, 0) + 1


@given(st.integers(1, 4), OPS)
def test_every_waiter_is_admitted_once_holders_release(
    capacity: int, ops: list[tuple[str, object]]
) -> None:
    """No starvation: drain the holders one by one; every live request gets a slot, once."""
    q = SlotQueue(capacity)
    asked: set[int] = set()
    cancelled: set[int] = set()
    admitted: list[int] = []
    for kind, arg in ops:
        if kind == "ask":
            assert isinstance(arg, str)
            asked.add(q.enqueue(arg, "turn", 0.0).ticket)
        elif kind == "cancel" and q.waiting:
            assert isinstance(arg, int)
            ticket = sorted(q.waiting)[arg % len(q.waiting)]
            q.cancel(ticket)
            cancelled.add(ticket)
        admitted += [w.ticket for w in q.admit()]
    steps = 0
    while q.held:
        q.release(_holders(q)[0])
        admitted += [w.ticket for w in q.admit()]
        steps += 1
        assert steps <= len(asked)
    assert sorted(admitted) == sorted(asked - cancelled)
    assert not q.waiting


@given(st.integers(1, 5), st.permutations(["a", "b", "c", "d", "e", "f", "g"]))
def test_a_herd_of_agents_holding_nothing_runs_in_wake_order(
    capacity: int, order: list[str]
) -> None:
    q = SlotQueue(capacity)
    started: list[str] = []
    for name in order:
        q.enqueue(name, "turn", 0.0)
        started += [w.agent for w in q.admit()]
    while q.held:
        q.release(next(iter(q.held)))
        started += [w.agent for w in q.admit()]
    assert started == order


def test_an_agent_with_queued_subagents_does_not_hold_back_another_agents_turn() -> None:
    q = SlotQueue(2)
    for _ in range(4):
        q.enqueue("busy", "subagent", 0.0)
    assert [w.agent for w in q.admit()] == ["busy", "busy"]
    q.enqueue("quiet", "turn", 0.0)  # asked after busy's remaining two
    q.release("busy")
    assert [w.agent for w in q.admit()] == ["quiet"]
    q.release("busy")
    assert [w.agent for w in q.admit()] == ["busy"]


def test_asking_again_queues_behind_everyone_already_waiting() -> None:
    q = SlotQueue(1)
    q.enqueue("a", "turn", 0.0)
    q.admit()
    b = q.enqueue("b", "turn", 0.0)
    c = q.enqueue("c", "turn", 0.0)
    assert q.cancel(b.ticket)
    q.enqueue("b", "turn", 0.0)  # b re-wakes: a new ticket, after c's
    q.release("a")
    assert [w.ticket for w in q.admit()] == [c.ticket]


def test_the_queue_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SlotQueue(0)
    with pytest.raises(ValueError, match="holds no claude slot"):
        SlotQueue(1).release("nobody")


@given(st.integers(0, 1 << 40), st.integers(0, 256))
def test_default_slots_follow_memory_and_cores(mem: int, cores: int) -> None:
    slots = default_slots(mem, cores)
    assert slots >= 1
    assert slots <= CLAUDES_PER_CORE * max(1, cores)
    if mem >= BYTES_PER_CLAUDE:
        assert slots <= mem // BYTES_PER_CLAUDE
    assert default_slots(mem + BYTES_PER_CLAUDE, cores + 1) >= slots


def test_machine_slots_read_available_memory(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:  99999999 kB\nMemAvailable: {BYTES_PER_CLAUDE * 3 // 1024} kB\n")
    assert machine_slots(meminfo) == min(3, CLAUDES_PER_CORE * len(os.sched_getaffinity(0)))
    assert machine_slots(tmp_path / "absent") >= 1


# ---- the async wrapper ----------------------------------------------------------


@pytest.mark.anyio
async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_gets_the_slot() -> None:
    adm = Admission(1)
    first = adm.enqueue("a", "turn")
    assert first.granted.is_set()
    second = adm.enqueue("b", "turn")
    third = adm.enqueue("c", "turn")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await adm.wait(second)
    assert [w.agent for w in adm.waiting()] == ["c"]
    adm.release(first)
    assert third.granted.is_set() and adm.in_use == 1


@pytest.mark.anyio
async def test_abandoning_a_wait_raises_and_frees_the_place() -> None:
    adm = Admission(1)
    holder = adm.enqueue("a", "turn")
    stop = anyio.Event()
    waiting: list[str] = []

    async def turn() -> None:
        async with adm.slot("b", "turn", on_wait=lambda w: waiting.append(w.agent), abandon=stop):
            raise AssertionError("b must not run")

    async with anyio.create_task_group() as tg:

        async def expect_abandoned() -> None:
            with pytest.raises(Abandoned):
                await turn()

        tg.start_soon(expect_abandoned)
        await anyio.wait_all_tasks_blocked()
        stop.set()
    assert waiting == ["b"] and adm.waiting() == [] and adm.in_use == 1
    adm.release(holder)
    adm.release(holder)  # idempotent
    assert adm.in_use == 0


@pytest.mark.anyio
async def test_a_slot_granted_as_its_holder_is_cancelled_is_given_back() -> None:
    adm = Admission(1)
    holder = adm.enqueue("a", "turn")
    ran: list[str] = []

    async def turn() -> None:
        async with adm.slot("b", "turn"):
            ran.append("b")
            await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await anyio.wait_all_tasks_blocked()
        after = adm.enqueue("c", "turn")
        adm.release(holder)  # b is granted ...
        tg.cancel_scope.cancel()  # ... and cancelled in the same instant
    assert after.granted.is_set() and adm.in_use == 1
    assert [w.agent for w in adm.waiting()] == []
