"""Outage: one warning per outage (plus reminders), debug lines between, one line at its end."""

from __future__ import annotations

import logging

import pytest

from hyperhive.agent.outage import Outage, redial_delay

LOG = logging.getLogger("test.outage")


def _levels(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOG.name]


def test_an_outage_warns_once_then_reminds_then_says_it_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outage = Outage(LOG, "link down", remind=60.0, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, LOG.name)
    for _ in range(121):  # a minute of attempts, one every half second, and one more
        outage.failed("no socket")
        now[0] += 0.5
    outage.ended()
    lines = _levels(caplog)
    warnings = [m for level, m in lines if level == "WARNING"]
    assert warnings == [
        "link down: no socket; retrying",
        "link down: still away after 60 s (121 attempts): no socket; retrying",
    ]
    assert sum(1 for level, _ in lines if level == "DEBUG") == 119
    assert lines[-1] == ("INFO", "link down: back after 60.5 s (121 failed attempts)")

    caplog.clear()
    outage.ended()  # connected with no outage: nothing to say
    outage.failed("again")  # a new outage warns again
    assert _levels(caplog) == [("WARNING", "link down: again; retrying")]


def test_without_reminders_an_outage_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    outage = Outage(LOG, "alice: coordinator unavailable", clock=lambda: now[0])
    caplog.set_level(logging.INFO, LOG.name)
    for _ in range(1000):
        outage.failed("gone")
        now[0] += 1.0
    assert len(_levels(caplog)) == 1


def test_redial_delay_doubles_to_its_cap_with_jitter() -> None:
    for failures, base in [(0, 0.5), (1, 0.5), (2, 1.0), (3, 2.0), (4, 2.0), (50, 2.0)]:
        delays = [redial_delay(failures, 0.5, 2.0) for _ in range(200)]
        assert all(0.6 * base <= d <= 1.4 * base for d in delays), (failures, base)
        assert max(delays) - min(delays) > 0.2 * base  # jittered, not in step
