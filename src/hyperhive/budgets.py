"""Spend budgets: the limits, the operator's calendar, and what a spend figure means.

Pure module: no I/O. ``[budget]`` in ``agent.toml`` limits one agent, in
``hive.toml`` the whole hive (the sum over every agent). Each limit is in
USD or in tokens, per day (midnight to midnight in the operator's time zone)
or in total. Tokens are everything a model call is billed for: input,
output, cache writes and cache reads.

An agent at a limit finishes its turn and takes no new one until the limit
is raised or, for a daily limit, the day turns. At :data:`WARN_AT` of a limit
the operator is warned once per period (and again if the limit changes).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "HIVE_SCOPE",
    "LIMIT_KEYS",
    "WARN_AT",
    "BudgetLimits",
    "HiveBudget",
    "LimitHit",
    "LimitKey",
    "Spent",
    "check_limits",
    "day_id",
    "day_start",
    "describe",
    "effective_limits",
    "operator_zone",
    "week_start",
]

#: The scope name of the whole hive's limits (never an agent name: names are lowercase).
HIVE_SCOPE = "*"
WARN_AT = 0.8

LimitKey = Literal["usd_per_day", "usd_total", "tokens_per_day", "tokens_total"]
LIMIT_KEYS: tuple[LimitKey, ...] = ("usd_per_day", "usd_total", "tokens_per_day", "tokens_total")


class BudgetLimits(BaseModel):
    """``[budget]`` of an ``agent.toml`` (and the limit part of ``hive.toml``'s).

    Unset means unlimited. Zero is allowed: an agent with a zero limit takes no turns.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    usd_per_day: float | None = Field(
        default=None,
        ge=0,
        description="Spend limit in USD per day (midnight to midnight in the operator's zone).",
    )
    usd_total: float | None = Field(default=None, ge=0, description="Spend limit in USD, all time.")
    tokens_per_day: int | None = Field(
        default=None,
        ge=0,
        description="Token limit per day (input, output, cache writes and reads together).",
    )
    tokens_total: int | None = Field(default=None, ge=0, description="Token limit, all time.")

    def get(self, key: LimitKey) -> float | None:
        value: float | None = getattr(self, key)
        return value

    def any_set(self) -> bool:
        return any(self.get(k) is not None for k in LIMIT_KEYS)


class HiveBudget(BudgetLimits):
    """``hive.toml`` ``[budget]``: the whole hive's limits and the operator's time zone."""

    timezone: str | None = Field(
        default=None,
        description="The operator's time zone, an IANA name such as Europe/Berlin; unset: the "
        "machine's local zone.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone {v!r}: use an IANA name such as 'Europe/Berlin' or 'UTC'"
            ) from exc
        return v

    def limits(self) -> BudgetLimits:
        return BudgetLimits(**{k: self.get(k) for k in LIMIT_KEYS})


def effective_limits(
    configured: BudgetLimits, overrides: Mapping[str, float | int | None]
) -> BudgetLimits:
    """The configured limits with the run-time ``overrides`` (``None`` = unlimited) on top."""
    merged = {k: overrides[k] if k in overrides else configured.get(k) for k in LIMIT_KEYS}
    return BudgetLimits.model_validate(merged)


def operator_zone(name: str | None) -> dt.tzinfo:
    """The operator's zone: ``name``, else the machine's local zone."""
    if name:
        return ZoneInfo(name)
    local = dt.datetime.now().astimezone().tzinfo
    assert local is not None
    return local


def day_start(now: float, zone: dt.tzinfo) -> float:
    """The Unix time of the last midnight before ``now`` in ``zone``."""
    local = dt.datetime.fromtimestamp(now, zone)
    midnight = dt.datetime.combine(local.date(), dt.time(), zone)
    return midnight.timestamp()


def week_start(now: float, zone: dt.tzinfo) -> float:
    """The Unix time of the last Monday midnight before ``now`` in ``zone``."""
    local = dt.datetime.fromtimestamp(now, zone)
    monday = local.date() - dt.timedelta(days=local.weekday())
    return dt.datetime.combine(monday, dt.time(), zone).timestamp()


def day_id(now: float, zone: dt.tzinfo) -> str:
    """The operator's calendar day of ``now``, e.g. ``2026-12-01``."""
    return dt.datetime.fromtimestamp(now, zone).date().isoformat()


@dataclass(frozen=True, slots=True)
class Spent:
    """What was spent in one period."""

    usd: float = 0.0
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class LimitHit:
    """One limit reached (or, for a warning, nearly reached)."""

    scope: str  # an agent name, or HIVE_SCOPE
    key: LimitKey
    limit: float
    spent: float

    @property
    def daily(self) -> bool:
        return self.key.endswith("_per_day")

    @property
    def fraction(self) -> float:
        return 1.0 if self.limit <= 0 else self.spent / self.limit

    def marker(self, day: str) -> str:
        """Names the period and the limit: one notice per marker."""
        return f"{self.key}={self.limit:g}@{day if self.daily else 'total'}"


def _spent_for(key: LimitKey, day: Spent, total: Spent) -> float:
    period = day if key.endswith("_per_day") else total
    return period.usd if key.startswith("usd") else float(period.tokens)


def check_limits(
    scope: str, limits: BudgetLimits, day: Spent, total: Spent, *, warn_at: float = WARN_AT
) -> tuple[list[LimitHit], list[LimitHit]]:
    """``(over, warnings)``: limits reached, and limits at ``warn_at`` or more but not reached.

    Reached means spent ≥ limit: a turn that crosses the limit is the last one.
    Total limits come first: no new day lifts them, so they are the one to show.
    """
    over: list[LimitHit] = []
    warnings: list[LimitHit] = []
    for key in _CHECK_ORDER:
        limit = limits.get(key)
        if limit is None:
            continue
        hit = LimitHit(scope, key, float(limit), _spent_for(key, day, total))
        if hit.spent >= hit.limit:
            over.append(hit)
        elif hit.spent >= warn_at * hit.limit:
            warnings.append(hit)
    return over, warnings


_CHECK_ORDER: tuple[LimitKey, ...] = ("usd_total", "tokens_total", "usd_per_day", "tokens_per_day")


def _amount(key: LimitKey, value: float) -> str:
    return f"${value:.2f}" if key.startswith("usd") else f"{int(value):,} tokens"


def describe(hit: LimitHit) -> str:
    """One line a person can act on, e.g. "alice: $5.02 of its $5.00 daily limit"."""
    who = "the whole hive" if hit.scope == HIVE_SCOPE else hit.scope
    period = "daily" if hit.daily else "total"
    return (
        f"{who}: {_amount(hit.key, hit.spent)} of its {_amount(hit.key, hit.limit)} {period} limit"
    )
