"""The pure budget rules: limits met or near, the operator's calendar, config parsing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.budgets import (
    BudgetLimits,
    LimitHit,
    Spent,
    check_limits,
    day_id,
    day_start,
    describe,
    effective_limits,
    week_start,
)
from hyperhive.config import load_hive_config, parse_agent_config
from hyperhive.errors import ConfigError

BERLIN = ZoneInfo("Europe/Berlin")

amounts = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(limit=amounts, spent=amounts)
def test_a_limit_is_reached_exactly_when_spent_meets_it(limit: float, spent: float) -> None:
    over, warnings = check_limits("a", BudgetLimits(usd_per_day=limit), Spent(usd=spent), Spent())
    assert bool(over) == (spent >= limit)
    assert bool(warnings) == (0.8 * limit <= spent < limit)
    assert not (over and warnings)


def test_total_limits_come_first_and_unset_ones_never_hold() -> None:
    limits = BudgetLimits(usd_per_day=1, tokens_total=10)
    over, _ = check_limits("a", limits, Spent(2.0, 0), Spent(2.0, 10))
    assert [h.key for h in over] == ["tokens_total", "usd_per_day"]
    assert check_limits("a", BudgetLimits(), Spent(1e9, 10**12), Spent(1e9, 10**12)) == ([], [])
    # The day's figures count for daily limits, the total's for total ones.
    assert check_limits("a", BudgetLimits(usd_total=5), Spent(9.0), Spent(1.0)) == ([], [])


def test_overrides_win_and_none_means_unlimited() -> None:
    configured = BudgetLimits(usd_per_day=5, tokens_total=100)
    merged = effective_limits(configured, {"usd_per_day": 7.5, "tokens_total": None})
    assert merged == BudgetLimits(usd_per_day=7.5)
    with pytest.raises(ValueError):
        effective_limits(configured, {"usd_total": -1})


def test_days_and_weeks_follow_the_operators_zone_across_dst() -> None:
    # 2026-03-29 is the spring change in Berlin: that day is 23 hours long.
    noon = dt.datetime(2026, 3, 29, 12, tzinfo=BERLIN).timestamp()
    start = day_start(noon, BERLIN)
    assert dt.datetime.fromtimestamp(start, BERLIN) == dt.datetime(2026, 3, 29, tzinfo=BERLIN)
    assert day_start(noon + 86400, BERLIN) - start == 23 * 3600
    assert day_id(start - 1, BERLIN) == "2026-03-28" and day_id(start, BERLIN) == "2026-03-29"
    monday = dt.datetime.fromtimestamp(week_start(noon, BERLIN), BERLIN)
    assert (monday.date().isoformat(), monday.hour) == ("2026-03-23", 0)


def test_describe_says_who_what_and_which_period() -> None:
    assert describe(LimitHit("alice", "usd_per_day", 5.0, 5.02)) == (
        "alice: $5.02 of its $5.00 daily limit"
    )
    assert describe(LimitHit("*", "tokens_total", 1000.0, 1200.0)) == (
        "the whole hive: 1,200 tokens of its 1,000 tokens total limit"
    )
    hit = LimitHit("alice", "usd_total", 5.0, 1.0)
    assert hit.marker("2026-12-01") == "usd_total=5@total"  # a total limit: one period


def test_agent_toml_budget_is_validated_with_file_and_line() -> None:
    config = parse_agent_config("[budget]\nusd_per_day = 2.5\ntokens_total = 1000\n")
    assert config.budget == BudgetLimits(usd_per_day=2.5, tokens_total=1000)
    with pytest.raises(ConfigError, match=r"budget.usd_per_day: .*greater than or equal to 0"):
        parse_agent_config("[budget]\nusd_per_day = -1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        parse_agent_config("[budget]\nusd_per_week = 1\n")


def test_hive_toml_timezone_must_be_a_known_zone(tmp_path: Path) -> None:
    home = tmp_path
    (home / "hive.toml").write_text('[budget]\ntimezone = "Mars/Olympus"\n')
    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus'"):
        load_hive_config(home, {})
    (home / "hive.toml").write_text('[budget]\ntimezone = "UTC"\nusd_total = 3\n')
    assert load_hive_config(home, {}).budget.limits() == BudgetLimits(usd_total=3)
