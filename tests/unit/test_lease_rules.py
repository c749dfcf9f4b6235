"""The lease rules (``hyperhive.netlink.lease``): pure, so tested exhaustively."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.netlink.lease import (
    HeldLease,
    expired,
    fenced_agents,
    heartbeat_seconds,
    restore,
    silent,
)

HOSTS = st.sampled_from(["h1", "h2", "h3"])
AGENTS = st.sampled_from(["a", "b", "c", "d"])


def test_a_lease_expires_at_its_time_and_a_local_host_has_none() -> None:
    assert not expired(None, 1e12)
    assert not expired(10.0, 9.99)
    assert expired(10.0, 10.0) and expired(10.0, 11.0)


def test_silence_is_two_missed_heartbeats() -> None:
    assert heartbeat_seconds(15) == 5
    assert not silent(last_heard=100.0, lease_seconds=15, now=110.0)
    assert silent(last_heard=100.0, lease_seconds=15, now=110.01)


@given(
    host=HOSTS,
    reported=st.sets(AGENTS),
    placement=st.dictionaries(AGENTS, HOSTS),
    lost=st.dictionaries(AGENTS, HOSTS),
)
def test_a_returning_host_stops_exactly_what_it_may_not_hold(
    host: str, reported: set[str], placement: dict[str, str], lost: dict[str, str]
) -> None:
    fenced = fenced_agents(host, reported, placement, lost)
    assert fenced == sorted(fenced) and set(fenced) <= reported
    for agent in reported:
        elsewhere = agent in placement and placement[agent] != host
        lost_here = lost.get(agent) == host
        assert (agent in fenced) == (elsewhere or lost_here)


def test_what_the_coordinator_knows_nothing_against_is_kept() -> None:
    # A fresh coordinator (restart, failover): nothing placed, nothing lost.
    assert fenced_agents("h1", ["a", "b"], {}, {}) == []
    assert fenced_agents("h1", ["a"], {"a": "h1"}, {}) == []
    assert fenced_agents("h1", ["a", "b"], {"a": "h2"}, {"b": "h1"}) == ["a", "b"]


def test_restore_holds_a_live_leases_agents_and_shows_an_old_loss_lost() -> None:
    leases = [
        HeldLease("h1", epoch=3, expires_at=50.0),  # dialled a previous coordinator
        HeldLease("h2", epoch=2, expires_at=40.0, lost_epoch=2),  # its loss was handled
        HeldLease("h3", epoch=0, expires_at=None),  # never registered: no lease
        HeldLease("h4", epoch=5, expires_at=60.0, revoked=True),  # cut: holds nothing
        HeldLease("h5", epoch=4, expires_at=70.0, lost_epoch=3),  # lost, back, not lost now
    ]
    assigned = {"a": "h1", "b": "h1", "c": "h2", "d": "h3", "e": "h4", "f": "h5", "g": "h2"}
    restored = restore(leases, assigned, desired={"a", "c", "d", "e", "f"})
    assert set(restored.away) == {"h1", "h5"}
    assert restored.holds == {"h1": ["a"], "h5": ["f"]}  # b is not meant to run
    assert restored.away["h1"].expires_at == 50.0
    assert restored.lost == {"c": "h2"}


@given(
    leases=st.lists(
        st.builds(
            HeldLease,
            HOSTS,
            st.integers(0, 3),
            st.none() | st.floats(0, 100),
            st.none() | st.integers(0, 3),
            st.booleans(),
        ),
        unique_by=lambda h: h.host,
    ),
    assigned=st.dictionaries(AGENTS, HOSTS),
    desired=st.sets(AGENTS),
)
def test_restore_never_both_holds_and_loses_an_agent(
    leases: list[HeldLease], assigned: dict[str, str], desired: set[str]
) -> None:
    restored = restore(leases, assigned, desired)
    held = {a for agents in restored.holds.values() for a in agents}
    assert not held & set(restored.lost)
    assert held | set(restored.lost) <= desired
    for agent in held | set(restored.lost):
        assert agent in assigned
    assert set(restored.holds) == set(restored.away)
