"""Reading ``--expires`` (``hyperhive.netlink.expiry``): pure, so tested directly."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.errors import InvalidRequest
from hyperhive.netlink.expiry import expired_message, parse_expires, when

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "after"),
    [("30d", 30 * 86400), ("12h", 12 * 3600), ("2w", 14 * 86400), ("90m", 5400), ("5s", 5)],
)
def test_a_span_counts_from_now(text: str, after: int) -> None:
    assert parse_expires(text, NOW) == NOW + after


def test_a_date_is_midnight_utc_and_a_time_keeps_its_offset() -> None:
    assert when(parse_expires("2027-01-31", NOW)) == "2027-01-31T00:00:00Z"
    assert when(parse_expires("2027-01-31T12:30", NOW)) == "2027-01-31T12:30:00Z"
    assert when(parse_expires("2027-01-31T12:30+02:00", NOW)) == "2027-01-31T10:30:00Z"


@pytest.mark.parametrize("text", ["soon", "30", "d30", "-5d", "30 days", "", "2027-13-01"])
def test_anything_else_is_refused_with_what_to_give(text: str) -> None:
    with pytest.raises(InvalidRequest, match="not a span or a date: give a span"):
        parse_expires(text, NOW)


@pytest.mark.parametrize("text", ["0s", "0d", "2026-12-01", "2026-12-02T12:00"])
def test_a_time_not_after_now_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest, match="not in the future"):
        parse_expires(text, NOW)


@given(st.integers(1, 10_000), st.sampled_from("smhdw"))
def test_every_positive_span_is_in_the_future(n: int, unit: str) -> None:
    assert parse_expires(f"{n}{unit}", NOW) > NOW


def test_the_refusal_says_when_and_what_to_run() -> None:
    assert expired_message("h1", NOW) == (
        "credential for agent host 'h1' expired at 2026-12-02T12:00:00Z; run "
        "`hivectl hosts rotate h1` on the coordinator and give this host the new one"
    )
