"""The placement rules: parent first, else least loaded by agents per slot, never a full host."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.core.state.placing import TURN_MEMORY, HostLoad, capacity_of, choose_host, has_room

hosts_st = st.lists(
    st.builds(
        HostLoad,
        name=st.sampled_from(["h1", "h2", "h3", "h4", "h5"]),
        slots=st.integers(1, 16),
        agents=st.integers(0, 50),
        max_agents=st.none() | st.integers(0, 50),
        memory_free=st.none() | st.integers(0, 4 * TURN_MEMORY),
    ),
    max_size=5,
    unique_by=lambda h: h.name,
)


def test_the_parents_host_wins_while_it_has_room() -> None:
    busy = HostLoad("h1", slots=1, agents=9)
    empty = HostLoad("h2", slots=8, agents=0)
    assert choose_host([busy, empty], parent_host="h1") == "h1"
    assert choose_host([busy, empty]) == "h2"
    full = HostLoad("h1", slots=1, agents=9, max_agents=9)
    assert choose_host([full, empty], parent_host="h1") == "h2"


def test_load_is_agents_per_slot_and_memory_or_a_cap_excludes() -> None:
    big = HostLoad("big", slots=8, agents=4)  # 0.5 per slot
    small = HostLoad("small", slots=1, agents=1)  # 1 per slot
    assert choose_host([small, big]) == "big"
    starved = HostLoad("big", slots=8, agents=0, memory_free=TURN_MEMORY - 1)
    assert choose_host([small, starved]) == "small"
    assert choose_host([HostLoad("a", 1, 3, max_agents=3)]) is None
    assert choose_host([]) is None


def test_capacity_reads_registration_or_heartbeat_figures() -> None:
    load = capacity_of("h1", {"claude_slots": 4, "max_agents": 10}, agents=2)
    assert (load.slots, load.max_agents, load.memory_free) == (4, 10, None)
    later = capacity_of("h1", {"claude_slots": 4, "memory_free": 1 << 30}, agents=2)
    assert later.memory_free == 1 << 30
    assert capacity_of("old", {"claude_slots": None}, agents=0).slots == 1  # never / 0


@given(hosts_st, st.none() | st.sampled_from(["h1", "h2", "h3", "h9"]))
def test_choice_is_a_live_host_with_room_and_none_only_when_none_has_it(
    hosts: list[HostLoad], parent: str | None
) -> None:
    chosen = choose_host(hosts, parent)
    roomy = {h.name for h in hosts if has_room(h)}
    if not roomy:
        assert chosen is None
        return
    assert chosen in roomy
    if parent in roomy:
        assert chosen == parent
    else:
        by_name = {h.name: h for h in hosts}
        best = min(by_name[n].agents / by_name[n].slots for n in roomy)
        assert by_name[chosen].agents / by_name[chosen].slots == best


@given(hosts_st)
def test_placing_repeatedly_never_exceeds_a_cap_and_stays_balanced(hosts: list[HostLoad]) -> None:
    current = {h.name: h for h in hosts}
    for _ in range(30):
        chosen = choose_host(list(current.values()))
        if chosen is None:
            assert not any(has_room(h) for h in current.values())
            break
        h = current[chosen]
        current[chosen] = HostLoad(h.name, h.slots, h.agents + 1, h.max_agents, h.memory_free)
    for h in current.values():
        original = next(o for o in hosts if o.name == h.name)
        if original.max_agents is not None:
            assert h.agents <= max(original.max_agents, original.agents)
