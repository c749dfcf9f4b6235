"""The activity feed's cursor and k-way merge (pure)."""

from __future__ import annotations

import pytest

from hyperhive.core.state.feed import Cursor, FeedItem, merge, parse_cursor
from hyperhive.errors import InvalidRequest


def item(at: float, source: int, row: int) -> FeedItem:
    return FeedItem(
        at, "turn" if source == 0 else "message", ("a",), f"{source}/{row}", Cursor(at, source, row)
    )


def test_the_merge_orders_by_time_then_source_then_id_and_says_where_to_go_on() -> None:
    log = [item(30.0, 0, 7), item(20.0, 0, 6), item(10.0, 0, 5)]
    mail = [item(30.0, 1, 2), item(20.0, 1, 1)]
    page = merge([log, mail], 3)
    assert [i.title for i in page.items] == ["1/2", "0/7", "1/1"]
    assert page.older == Cursor(20.0, 1, 1)
    assert merge([log[:1], mail[:1]], 3).older is None  # all there is: no older page


def test_a_cursor_turns_into_each_sources_strict_bound() -> None:
    at = Cursor(20.0, 0, 6)  # an activity row at t=20
    # Messages rank after the log: at the same time they sort newer, so only earlier ones.
    assert at.before_in(1) == (20.0, 0)
    assert at.before_in(0) == (20.0, 6)
    assert Cursor(20.0, 1, 1).before_in(0) == (20.0, 2**63 - 1)


def test_a_cursor_survives_its_url_form_and_bad_ones_are_refused() -> None:
    c = Cursor(1764570000.123456, 1, 42)
    assert parse_cursor(str(c)) == c
    for bad in ("", "x", "1.0_2_3", "nan_0_1", "1.0_0_-1", "1.0_0"):
        with pytest.raises(InvalidRequest, match="cursor"):
            parse_cursor(bad)
