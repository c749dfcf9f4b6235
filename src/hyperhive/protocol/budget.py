"""Spend and budgets on the wire: what a claude run cost, and the operator's views."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from hyperhive.budgets import LimitKey
from hyperhive.protocol.base import Req, _Out
from hyperhive.runcost import Figures

__all__ = [
    "BudgetScope",
    "BudgetView",
    "ModelSpend",
    "OpBudgetReq",
    "OpBudgetSetReq",
    "OpSpendReq",
    "OpSpendSeriesReq",
    "RecordSpendReq",
    "RunSpend",
    "SpendFigures",
    "SpendRecorded",
    "SpendReport",
    "SpendRow",
    "SpendSeries",
]


_MAX_USD = 1e9
_MAX_TOKENS = 1 << 50


class ModelSpend(BaseModel):
    """One model's figures: USD and the four kinds of tokens."""

    model_config = ConfigDict(extra="forbid")

    # Bounded so a stored sum stays exact (and fits a 64-bit column) whatever is reported.
    cost_usd: float = Field(default=0.0, ge=0, le=_MAX_USD, allow_inf_nan=False)
    input_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    output_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    cache_read_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    cache_creation_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)

    def figures(self) -> Figures:
        return Figures(
            self.cost_usd,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_creation_tokens,
        )

    @classmethod
    def of(cls, figures: Figures) -> ModelSpend:
        return cls(
            cost_usd=figures.usd,
            input_tokens=figures.input_tokens,
            output_tokens=figures.output_tokens,
            cache_read_tokens=figures.cache_read_tokens,
            cache_creation_tokens=figures.cache_creation_tokens,
        )


ModelName = Annotated[str, StringConstraints(max_length=200)]


class RunSpend(BaseModel):
    """What one claude run reported about its cost: its session's totals after it.

    ``session_totals`` is claude's ``modelUsage`` as the run's ``result``
    reported it — per model, what the *session* has cost so far (empty: the
    run reported none). The coordinator counts the run's own figures, the
    difference to the session's previous totals (:mod:`hyperhive.runcost`).
    ``run_id`` is the harness's name for the run (random, per run): the
    coordinator counts a run once however often its report is resent.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=8, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: Literal["turn", "compaction", "subagent"] = "turn"
    session_id: str | None = Field(default=None, max_length=200)
    session_totals: dict[ModelName, ModelSpend] = Field(default_factory=dict, max_length=64)

    def totals(self) -> dict[str, Figures]:
        return {model: spend.figures() for model, spend in self.session_totals.items()}


class SpendRecorded(_Out):
    recorded: bool  # False: this run was already counted
    spend: ModelSpend  # what the run was counted at (its own figures, summed over models)


class RecordSpendReq(Req[SpendRecorded]):
    """A subagent run's spend, counted to the agent whose socket reports it."""

    cmd: Literal["record_spend"]
    spend: RunSpend


# ---- operator ---------------------------------------------------------------


class SpendFigures(_Out):
    usd: float = 0.0
    tokens: int = 0


class BudgetScope(_Out):
    """One agent's (or, as ``"*"``, the whole hive's) limits and where it stands."""

    scope: str
    configured: dict[LimitKey, float | None]
    overrides: dict[LimitKey, float | None]
    effective: dict[LimitKey, float | None]
    today: SpendFigures
    total: SpendFigures
    over: str | None  # the limit hit, said for a person; None = within budget


class BudgetView(_Out):
    timezone: str
    day: str
    scopes: list[BudgetScope]


class SpendRow(_Out):
    agent: str
    today: SpendFigures
    week: SpendFigures
    all_time: SpendFigures
    over_budget: str | None = None


class SpendReport(_Out):
    """``hivectl spend --json`` (keys promised by docs/cli-json.md)."""

    timezone: str
    day: str
    day_start: float
    week_start: float
    agents: list[SpendRow]
    total: SpendRow
    top_spenders: list[str]  # agents by spend today, then all time; most first


class OpBudgetReq(Req[BudgetView]):
    cmd: Literal["budget"]


class OpBudgetSetReq(Req[BudgetView]):
    """Change limits at run time (persisted); ``reset`` drops the scope's overrides first."""

    cmd: Literal["budget_set"]
    scope: str = Field(min_length=1, max_length=64)
    limits: dict[LimitKey, float | None] = Field(default_factory=dict)
    reset: bool = False


class OpSpendReq(Req[SpendReport]):
    cmd: Literal["spend"]


class SpendSeries(_Out):
    """USD per agent per operator day, oldest day first (the dashboard's chart)."""

    timezone: str
    days: list[str]
    usd: dict[str, list[float]]


class OpSpendSeriesReq(Req[SpendSeries]):
    cmd: Literal["spend_series"]
    days: int = Field(default=14, ge=1, le=366)
