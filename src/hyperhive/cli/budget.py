"""hivectl: spend budgets (show and change limits at run time) and spend so far."""

from __future__ import annotations

import click

from hyperhive.budgets import HIVE_SCOPE, LIMIT_KEYS, LimitKey
from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.protocol import (
    BudgetView,
    OpBudgetReq,
    OpBudgetSetReq,
    OpSpendReq,
    SpendFigures,
    SpendReport,
)

__all__ = ["budget", "spend"]


def _limit(key: LimitKey, value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.2f}" if key.startswith("usd") else f"{int(value):,}"


def _figures(f: SpendFigures) -> str:
    return f"${f.usd:.4f} {f.tokens:,} tok"


def _show(view: BudgetView) -> None:
    click.echo(f"day {view.day} ({view.timezone})")
    click.echo(f"{'scope':16} " + " ".join(f"{k:>15}" for k in LIMIT_KEYS) + "  today / total")
    for s in view.scopes:
        name = "hive (all)" if s.scope == HIVE_SCOPE else s.scope
        limits = " ".join(
            f"{_limit(k, s.effective.get(k)) + ('*' if k in s.overrides else ''):>15}"
            for k in LIMIT_KEYS
        )
        line = f"{name:16} {limits}  {_figures(s.today)} / {_figures(s.total)}"
        if s.over:
            line += f"  OVER BUDGET ({s.over})"
        click.echo(line)
    click.echo("* = set at run time (hivectl budget set); - = unlimited")


@main.group(invoke_without_command=True)
@json_output(BudgetView)
@click.pass_context
def budget(ctx: click.Context, as_json: bool) -> None:
    """Spend limits per agent and for the whole hive; without a subcommand, show them."""
    if ctx.invoked_subcommand is None:
        obj = ctx.find_object(_Ctx)
        assert obj is not None
        emit(obj.call(OpBudgetReq(cmd="budget")), _show)


def _amount(text: str) -> float | None:
    if text.strip().lower() in ("none", "unlimited", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (or 'none' for unlimited)") from None
    if value < 0:
        raise click.BadParameter("a limit cannot be negative (0 stops the agent's turns)")
    return value


@budget.command("set")
@click.argument("agent", required=False)
@click.option("--hive", "whole_hive", is_flag=True, help="The whole hive's limits.")
@click.option("--usd-per-day", help="USD per day (operator's zone); 'none' = unlimited.")
@click.option("--usd-total", help="USD in total; 'none' = unlimited.")
@click.option("--tokens-per-day", help="Tokens per day; 'none' = unlimited.")
@click.option("--tokens-total", help="Tokens in total; 'none' = unlimited.")
@click.option("--reset", is_flag=True, help="Drop earlier run-time changes (back to the configs).")
@json_output(BudgetView)
@pass_ctx
def budget_set(
    obj: _Ctx,
    agent: str | None,
    whole_hive: bool,
    usd_per_day: str | None,
    usd_total: str | None,
    tokens_per_day: str | None,
    tokens_total: str | None,
    reset: bool,
    as_json: bool,
) -> None:
    """Change AGENT's (or, with --hive, the hive's) limits now; kept across restarts."""
    if whole_hive == (agent is not None):
        raise click.UsageError("name one AGENT or pass --hive")
    given = {
        "usd_per_day": usd_per_day,
        "usd_total": usd_total,
        "tokens_per_day": tokens_per_day,
        "tokens_total": tokens_total,
    }
    limits: dict[LimitKey, float | None] = {
        k: _amount(v) for k, v in given.items() if v is not None and k in LIMIT_KEYS
    }
    if not limits and not reset:
        raise click.UsageError("nothing to change: pass a limit (e.g. --usd-per-day 5) or --reset")
    view = obj.call(
        OpBudgetSetReq(cmd="budget_set", scope=agent or HIVE_SCOPE, limits=limits, reset=reset)
    )
    emit(view, _show)


@main.command()
@json_output(SpendReport)
@pass_ctx
def spend(obj: _Ctx, as_json: bool) -> None:
    """Spend per agent and in total: today, this week, all time; the top spenders."""
    data = obj.call(OpSpendReq(cmd="spend"))

    def human(r: SpendReport) -> None:
        click.echo(f"day {r.day} ({r.timezone})")
        click.echo(f"{'agent':16} {'today':>24} {'this week':>24} {'all time':>24}")
        for row in [*r.agents, r.total]:
            name = "total" if row.agent == HIVE_SCOPE else row.agent
            line = (
                f"{name:16} {_figures(row.today):>24} {_figures(row.week):>24} "
                f"{_figures(row.all_time):>24}"
            )
            if row.over_budget:
                line += f"  OVER BUDGET ({row.over_budget})"
            click.echo(line)
        click.echo("top spenders: " + (", ".join(r.top_spenders) or "none yet"))

    emit(data, human)
