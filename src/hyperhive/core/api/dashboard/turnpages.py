"""The agent's Turns tab and a turn's page: every turn it took, replayed step by step.

Read through the operator's own requests (``turns_list``, ``turn_show``,
``turns_search``), so the records come over the link of the host that keeps
them. The list refreshes on the hive's ``activity`` events (a turn's end is
one); a running turn's page refetches its steps on each of the agent's turn
events (the agent page's stream, reused) and stays as it is once the turn ends.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from hyperhive.core.api.dashboard.pages import waiting_count
from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.errors import HiveError, NotFound
from hyperhive.protocol.turns import (
    OpTurnShowReq,
    OpTurnsListReq,
    OpTurnsSearchReq,
    TurnRecord,
    TurnSummary,
    agent_of_turn,
)

__all__ = ["router"]

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)
Dash = Annotated[Dashboard, Depends(dashboard)]
Filter = Annotated[str, Query(max_length=200)]
SINCE_HOURS = {"": None, "1h": 1, "24h": 24, "7d": 24 * 7, "30d": 24 * 30}


async def _agent(d: Dashboard, name: str) -> dict[str, Any]:
    for row in await d.agents():
        if row["name"] == name:
            return row
    raise NotFound(f"no agent named {name!r}")


async def _rows(
    d: Dashboard, name: str, outcome: str, tool: str, since: str, q: str
) -> tuple[list[TurnSummary], str | None]:
    """The agent's turns under the filters (``q``: a text search), or why none can be read."""
    hours = SINCE_HOURS.get(since)
    after = time.time() - hours * 3600 if hours else None
    try:
        if q:
            hits = await d.ops.request(OpTurnsSearchReq, text=q, agent=name, limit=200)
            rows = [h.turn for h in hits if after is None or h.turn.started >= after]
        else:
            rows = await d.ops.request(OpTurnsListReq, agent=name, since=after, limit=200)
    except HiveError as exc:
        return [], exc.message
    if outcome:
        rows = [r for r in rows if (r.outcome or "running") == outcome]
    if tool:
        rows = [r for r in rows if tool in r.tools]
    return rows, None


def _filters(outcome: str, tool: str, since: str, q: str) -> dict[str, str]:
    return {"outcome": outcome, "tool": tool, "since": since, "q": q}


@router.get("/agents/{name}/turns")
async def turns_page(
    request: Request,
    d: Dash,
    name: str,
    outcome: Filter = "",
    tool: Filter = "",
    since: Filter = "",
    q: Filter = "",
) -> Response:
    a = await _agent(d, name)
    rows, problem = await _rows(d, name, outcome, tool, since, q)
    query = request.url.query
    return d.templates.TemplateResponse(
        request,
        "turns.html",
        {
            "waiting": await waiting_count(d),
            "nav": "tree",
            "tab": "turns",
            "a": a,
            "rows": rows,
            "problem": problem,
            "filters": _filters(outcome, tool, since, q),
            "since_choices": list(SINCE_HOURS),
            "fragment": f"/fragments/agents/{name}/turns" + (f"?{query}" if query else ""),
        },
    )


@router.get("/fragments/agents/{name}/turns")
async def turns_fragment(
    request: Request,
    d: Dash,
    name: str,
    outcome: Filter = "",
    tool: Filter = "",
    since: Filter = "",
    q: Filter = "",
) -> Response:
    rows, problem = await _rows(d, name, outcome, tool, since, q)
    return d.templates.TemplateResponse(
        request, "_turns.html", {"a": {"name": name}, "rows": rows, "problem": problem}
    )


async def _record(d: Dashboard, turn: str, full: bool) -> TurnRecord:
    """The whole turn (the host answers in pages that fit a frame)."""
    record: TurnRecord = await d.ops.request(OpTurnShowReq, turn=turn, full=full)
    steps = list(record.steps)
    while record.next_seq is not None:
        record = await d.ops.request(OpTurnShowReq, turn=turn, after_seq=record.next_seq, full=full)
        steps += record.steps
    return record.model_copy(update={"steps": steps, "next_seq": None})


def _replay(record: TurnRecord) -> list[dict[str, Any]]:
    """Steps as the page shows them: each tool call with its result beside it, and a
    subagent's steps under the call that ran it."""
    results = {s.call_id: s for s in record.steps if s.kind == "tool_result" and s.call_id}
    out: list[dict[str, Any]] = []
    for step in record.steps:
        if step.kind == "tool_result" and step.call_id in {
            s.call_id for s in record.steps if s.kind == "tool_use"
        }:
            continue  # shown with its call
        item: dict[str, Any] = {"step": step, "result": None}
        if step.kind == "tool_use" and step.call_id:
            item["result"] = results.get(step.call_id)
        out.append(item)
    return out


@router.get("/turns/{turn}")
async def turn_page(request: Request, d: Dash, turn: str, full: bool = False) -> Response:
    record = await _record(d, turn, full)
    a = await _agent(d, agent_of_turn(turn))
    return d.templates.TemplateResponse(
        request,
        "turn.html",
        {
            "waiting": await waiting_count(d),
            "nav": "tree",
            "tab": "turns",
            "a": a,
            "r": record,
            "items": _replay(record),
            "full": full,
        },
    )


@router.get("/fragments/turns/{turn}")
async def turn_fragment(request: Request, d: Dash, turn: str, full: bool = False) -> Response:
    record = await _record(d, turn, full)
    return d.templates.TemplateResponse(
        request, "_turn.html", {"r": record, "items": _replay(record), "full": full}
    )
