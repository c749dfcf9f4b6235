"""The spend page and its JSON API: spend per agent, a chart over days, budget editing.

The page reads and changes exactly what ``hivectl spend`` / ``hivectl
budget`` do (the same operator requests); editing posts through the guarded
JSON API like every dashboard form (operator token and CSRF header).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from hyperhive.budgets import HIVE_SCOPE, LIMIT_KEYS, WARN_AT, LimitKey
from hyperhive.core.dashboard.pages import waiting_count
from hyperhive.core.dashboard.pictures.chart import spend_chart
from hyperhive.core.dashboard.pictures.gauges import budget_bars
from hyperhive.core.dashboard.state import Dashboard, dashboard
from hyperhive.core.dashboard.views import budget_rows
from hyperhive.errors import InvalidRequest
from hyperhive.protocol import (
    BudgetView,
    OpBudgetReq,
    OpBudgetSetReq,
    OpSpendReq,
    OpSpendSeriesReq,
    SpendReport,
    SpendSeries,
)

__all__ = ["api", "pages"]

Dash = Annotated[Dashboard, Depends(dashboard)]
api = APIRouter(prefix="/api", tags=["spend"])
pages = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

CHART_DAYS = 14


class BudgetForm(BaseModel):
    """The spend page's form: each limit a number, ``none`` (unlimited) or blank (unchanged)."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(min_length=1, max_length=64, description='an agent, or "*" for the hive')
    usd_per_day: str = ""
    usd_total: str = ""
    tokens_per_day: str = ""
    tokens_total: str = ""
    reset: bool = Field(default=False, description="drop earlier run-time changes first")

    def limits(self) -> dict[LimitKey, float | None]:
        out: dict[LimitKey, float | None] = {}
        for key in LIMIT_KEYS:
            raw = str(getattr(self, key)).strip()
            if not raw:
                continue
            if raw.lower() in ("none", "unlimited"):
                out[key] = None
                continue
            try:
                out[key] = float(raw.replace(",", "").lstrip("$"))
            except ValueError:
                raise InvalidRequest(
                    f"{key}: {raw!r} is not a number; write e.g. 5 or 2.50, 'none' for "
                    "unlimited, or leave it blank to keep it"
                ) from None
        return out


@api.get("/spend")
async def spend_report(d: Dash) -> SpendReport:
    """Per agent and in total: today, this week, all time; the top spenders."""
    return await d.ops.request(OpSpendReq)


@api.get("/spend/series")
async def spend_series(d: Dash, days: int = CHART_DAYS) -> SpendSeries:
    """USD per agent per operator day (the chart's data)."""
    return await d.ops.request(OpSpendSeriesReq, days=days)


@api.get("/budget")
async def budget_view(d: Dash) -> BudgetView:
    """Every scope's limits (configured, run-time overrides, in effect) and spend."""
    return await d.ops.request(OpBudgetReq)


@api.post("/budget")
async def budget_set(d: Dash, body: BudgetForm) -> BudgetView:
    """Change a scope's limits now (kept across restarts); a held agent resumes at once."""
    limits = body.limits()
    if not limits and not body.reset:
        raise InvalidRequest("nothing to change: fill in a limit, or tick reset")
    return await d.ops.request(OpBudgetSetReq, scope=body.scope, limits=limits, reset=body.reset)


async def _context(d: Dashboard) -> dict[str, Any]:
    series: SpendSeries = await d.ops.request(OpSpendSeriesReq, days=CHART_DAYS)
    report: SpendReport = await d.ops.request(OpSpendReq)
    view: BudgetView = await d.ops.request(OpBudgetReq)
    rows, unlimited = budget_rows(view)
    return {
        "report": report,
        "budget": view,
        "chart": spend_chart(series.days, series.usd),
        "bars": budget_bars(rows, WARN_AT),
        "unlimited": unlimited,
        "hive_scope": HIVE_SCOPE,
        "limit_keys": LIMIT_KEYS,
        "warn_at": WARN_AT,
    }


def _render(d: Dashboard, request: Request, name: str, **context: Any) -> Response:
    return d.templates.TemplateResponse(request, name, context)


@pages.get("/spend")
async def spend_page(request: Request, d: Dash) -> Response:
    return _render(
        d, request, "spend.html", nav="spend", waiting=await waiting_count(d), **await _context(d)
    )


@pages.get("/fragments/spend")
async def spend_fragment(request: Request, d: Dash) -> Response:
    return _render(d, request, "_spend.html", **await _context(d))
