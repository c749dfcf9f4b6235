"""hivectl: Turns: every turn an agent took, kept on its host: list, show, search."""

from __future__ import annotations

import re
import time
from datetime import datetime

import click

from hyperhive.cli.base import _Ctx, agent_argument, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.protocol.turns import (
    OpTurnShowReq,
    OpTurnsListReq,
    OpTurnsSearchReq,
    TurnHit,
    TurnRecord,
    TurnStep,
    TurnSummary,
)

_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_since(value: str, now: float) -> float:
    """``--since``: a duration back from now (``90m``, ``2h``, ``3d``) or an ISO date/time
    (local time unless it says otherwise), as epoch seconds."""
    if m := _AGO.match(value.strip()):
        return now - float(m.group(1)) * _UNIT[m.group(2)]
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a duration (30m, 2h, 7d) nor a date (2026-01-31T08:00)"
        ) from None


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at is not None else "-"


def _cost(turn: TurnSummary) -> str:
    return f"${turn.cost_usd:.4f}" if turn.cost_usd is not None else "-"


def _line(turn: TurnSummary) -> str:
    outcome = turn.outcome or "running"
    tools = ",".join(turn.tools) or "-"
    reason = turn.wake_reason if turn.kind == "turn" else "compaction"
    return f"{turn.id}  {_when(turn.started)}  {outcome:<11} {_cost(turn):>9}  {reason}  [{tools}]"


@main.group()
def turns() -> None:
    """Every turn an agent took (steps, tool calls and results, cost), kept on its host."""


@turns.command("list")
@agent_argument()
@click.option("--since", help="Only turns started since: 30m, 2h, 7d, or 2026-01-31T08:00.")
@click.option("-n", "--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@json_output(list[TurnSummary])
@pass_ctx
def turns_list(obj: _Ctx, name: str, since: str | None, limit: int, as_json: bool) -> None:
    """Agent NAME's turns, newest first: id, start, outcome, cost, why it woke, tools used."""
    after = parse_since(since, time.time()) if since else None
    found = obj.call(OpTurnsListReq(cmd="turns_list", agent=name, since=after, limit=limit))

    def human(rows: list[TurnSummary]) -> None:
        if not rows:
            click.echo(f"no turns of {name} recorded" + (" since then" if since else ""))
        for row in rows:
            click.echo(_line(row))

    emit(found, human)


def _step(step: TurnStep) -> str:
    head = {
        "prompt": "prompt",
        "text": "model",
        "tool_use": f"call {step.name} ({step.call_id})",
        "tool_result": f"{'error' if step.is_error else 'result'} ({step.call_id})",
    }[step.kind]
    sub = f" [subagent of {step.parent}]" if step.parent else ""
    cut = f"\n    … cut at {len(step.text)} of {step.size} characters" if step.truncated else ""
    body = "\n".join("    " + line for line in step.text.splitlines())
    return f"#{step.seq} {head}{sub}\n{body}{cut}"


@turns.command("show")
@click.argument("turn_id")
@click.option("--full", is_flag=True, help="Tool results whole, not cut at the index's size.")
@json_output(TurnRecord)
@pass_ctx
def turns_show(obj: _Ctx, turn_id: str, full: bool, as_json: bool) -> None:
    """Turn TURN_ID step by step: its wake, prompt, texts, tool calls and results."""
    record = obj.call(OpTurnShowReq(cmd="turn_show", turn=turn_id, full=full))
    steps = list(record.steps)
    while record.next_seq is not None:  # the host answers in pages that fit a frame
        record = obj.call(
            OpTurnShowReq(cmd="turn_show", turn=turn_id, after_seq=record.next_seq, full=full)
        )
        steps += record.steps
    whole = record.model_copy(update={"steps": steps, "next_seq": None})

    def human(r: TurnRecord) -> None:
        t = r.turn
        click.echo(f"turn {t.id} of {t.agent} ({t.kind})")
        click.echo(f"  started {_when(t.started)}, ended {_when(t.ended)}")
        click.echo(f"  outcome {t.outcome or 'running'}, cost {_cost(t)}, {t.model_calls} call(s)")
        click.echo(f"  woke for: {t.wake_reason}")
        if r.subagents:
            click.echo(f"  subagent runs: {', '.join(r.subagents)}")
        for step in r.steps:
            click.echo(_step(step))

    emit(whole, human)


@turns.command("search")
@click.argument("text")
@click.option("--agent", help="Only this agent's turns.")
@click.option("-n", "--limit", default=50, show_default=True, type=click.IntRange(1, 500))
@json_output(list[TurnHit])
@pass_ctx
def turns_search(obj: _Ctx, text: str, agent: str | None, limit: int, as_json: bool) -> None:
    """Turns whose tool inputs, results or replies contain TEXT (a phrase), newest first."""
    hits = obj.call(OpTurnsSearchReq(cmd="turns_search", text=text, agent=agent, limit=limit))

    def human(rows: list[TurnHit]) -> None:
        if not rows:
            click.echo("no turn matches")
        for hit in rows:
            click.echo(f"{_line(hit.turn)}\n    #{hit.seq} {hit.kind}: {hit.snippet}")

    emit(hits, human)
