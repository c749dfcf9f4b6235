"""The store's failures while PostgreSQL is away: a log line per ten seconds, not per request."""

from __future__ import annotations

import logging

import psycopg
import pytest

from hyperhive.errors import Unavailable
from hyperhive.store.postgres.errors import LogThrottle, translate

URL = "postgresql://hive:s3cret@db.example:5432/hive"


def test_a_database_away_is_logged_once_for_a_burst_of_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "hyperhive.store.postgres.errors")
    # A URL of its own: the module's throttle is keyed by the masked URL.
    url = URL.replace("db.example", "burst.example")
    errors = [translate(psycopg.OperationalError("connection refused"), url) for _ in range(200)]
    assert all(isinstance(e, Unavailable) for e in errors)
    assert "s3cret" not in errors[0].message
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "unavailable: connection refused" in lines[0], lines
    assert "s3cret" not in lines[0]


def test_the_throttle_counts_what_it_held_back_per_key() -> None:
    now = [0.0]
    throttle = LogThrottle(every=10.0, clock=lambda: now[0])
    assert throttle.due("a") == 0
    for _ in range(5):
        now[0] += 1.0
        assert throttle.due("a") is None
    assert throttle.due("b") == 0  # another store's line is its own
    now[0] = 10.0
    assert throttle.due("a") == 5
    assert throttle.due("a") is None
    now[0] = 25.0
    assert throttle.due("a") == 1
