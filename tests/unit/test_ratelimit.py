"""Token buckets: a burst, then a steady rate; keys apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.ratelimit import RateLimiter


def test_a_burst_then_one_per_interval() -> None:
    limiter = RateLimiter(capacity=3, per_minute=3)
    assert [limiter.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a", 0.0) == pytest.approx(20.0)
    assert limiter.take("a", 10.0) == pytest.approx(10.0)  # half a token back, not one
    assert limiter.take("a", 20.0) == 0.0
    assert limiter.take("a", 20.0) == pytest.approx(20.0)
    # Another key has its own bucket.
    assert limiter.take("b", 20.0) == 0.0


def test_a_long_pause_refills_no_more_than_the_capacity() -> None:
    limiter = RateLimiter(capacity=2, per_minute=6)
    assert limiter.take("a", 0.0) == 0.0
    allowed = [limiter.take("a", 3600.0) == 0.0 for _ in range(5)]
    assert allowed == [True, True, False, False, False]


def test_a_limit_needs_a_capacity_and_a_rate() -> None:
    with pytest.raises(ValueError):
        RateLimiter(capacity=0, per_minute=1)
    with pytest.raises(ValueError):
        RateLimiter(capacity=1, per_minute=0)


@given(st.lists(st.floats(min_value=0, max_value=30), min_size=1, max_size=60))
def test_never_more_than_the_burst_plus_the_rate_over_any_run(gaps: list[float]) -> None:
    limiter = RateLimiter(capacity=3, per_minute=3)
    now, allowed = 0.0, 0
    for gap in gaps:
        now += gap
        allowed += limiter.take("a", now) == 0.0
    assert allowed <= 3 + now / 20.0 + 1e-9


@pytest.mark.anyio
async def test_matrix_sign_ins_are_limited_per_agent_before_anything_is_asked() -> None:
    from hyperhive.core.state.identities import ASKS_BURST, AgentIdentities
    from hyperhive.errors import LimitExceeded
    from hyperhive.matrix.errors import MatrixNotConfigured

    identities = AgentIdentities(None, None)  # no homeserver: each admitted ask says so
    for _ in range(ASKS_BURST):
        with pytest.raises(MatrixNotConfigured):
            await identities.matrix_account("alice")
    with pytest.raises(LimitExceeded, match="Matrix sign-in too often"):
        await identities.matrix_account("alice")
    with pytest.raises(MatrixNotConfigured):
        await identities.matrix_account("bob")
