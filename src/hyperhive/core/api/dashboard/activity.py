"""The front page: what the hive did, live, filterable, paged; and one thread.

``/`` shows counts at a glance and the feed (:mod:`.feed`), read from the
store a page at a time (a ``(at, source, id)`` cursor over index walks, so a
hive with a million messages pages as fast as an empty one). The feed box
refreshes over the dashboard's event stream on any store change and on every
``activity`` event the coordinator's activity log emits. ``/activity`` (its
old address) redirects here.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from hyperhive.core.api.dashboard.pages import waiting_count
from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.core.api.dashboard.turns import HOURS, HOURS_MAX, WINDOWS, timeline_svg
from hyperhive.core.api.dashboard.views import thread_messages
from hyperhive.core.state.feed import KINDS, FeedPage, feed_page, parse_cursor
from hyperhive.errors import InvalidRequest, NotFound
from hyperhive.protocol import FeedEntry, OpSpendReq

__all__ = ["PAGE", "api", "router"]

PAGE = 50
router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)
api = APIRouter(prefix="/api")
Dash = Annotated[Dashboard, Depends(dashboard)]
Agent = Annotated[str | None, Query(max_length=64)]
Kind = Annotated[str, Query(max_length=16)]
Before = Annotated[str | None, Query(max_length=64)]
Hours = Annotated[int, Query(ge=1, le=HOURS_MAX, description="the timeline's window")]


async def _glance(d: Dashboard) -> dict[str, Any]:
    store, link = d.parts.store, d.parts.hostlink
    turns, spend = d.meter.totals()
    return {
        "running": sum(1 for t in link.running_turns().values() if t.state == "thinking"),
        "approvals": len(await store.approvals.list(pending_only=True)),
        "questions": len(await store.loose_ends.questions(open_only=True)),
        "turns": turns,
        "spend": spend,
        # Durable and by the operator's day (the budgets' figure), unlike the meter's.
        "spend_today": (await d.ops.request(OpSpendReq)).total.today.usd,
    }


def _kind(kind: str) -> str | None:
    """The filter's kind ("" = everything); an unknown one is refused by name."""
    if kind and kind not in KINDS:
        raise InvalidRequest(f"unknown kind {kind!r}; one of: {', '.join(KINDS)} (or empty)")
    return kind or None


async def _page(
    d: Dashboard, agent: str | None, kind_name: str, before: str | None, limit: int = PAGE
) -> FeedPage:
    return await feed_page(
        d.parts.store,
        limit=limit,
        before=parse_cursor(before) if before else None,
        agent=agent or None,
        kind=_kind(kind_name),
    )


async def _feed(d: Dashboard, agent: str | None, kind_name: str, before: str | None) -> Any:
    kind = _kind(kind_name)
    agent = agent or None
    page = await _page(d, agent, kind_name, before)
    return {
        "items": page.items,
        "older": str(page.older) if page.older else None,
        "before": before,  # an older page stays on its cursor when repainted live
        "agent": agent or "",
        "kind": kind or "",
        "kinds": KINDS,
        "agents": d.parts.registry.configured(),
    }


def _render(d: Dashboard, request: Request, name: str, **context: Any) -> Response:
    return d.templates.TemplateResponse(request, name, context)


async def _timeline(d: Dashboard, hours: int, agent: str | None) -> dict[str, Any]:
    return {
        "timeline": await timeline_svg(d, hours, agent or None),
        "hours": hours,
        "default_hours": HOURS,
        "windows": WINDOWS,
    }


@router.get("/activity")
async def old_activity_page(request: Request) -> Response:
    """The feed's old address: the front page, same filters."""
    query = request.url.query
    return RedirectResponse("/" + (f"?{query}" if query else ""), status_code=307)


@router.get("/")
async def front_page(
    request: Request,
    d: Dash,
    agent: Agent = None,
    kind: Kind = "",
    before: Before = None,
    hours: Hours = HOURS,
) -> Response:
    return _render(
        d,
        request,
        "activity.html",
        nav="activity",
        waiting=await waiting_count(d),
        glance=await _glance(d),
        **await _feed(d, agent, kind, before),
        **await _timeline(d, hours, agent),
    )


@router.get("/fragments/timeline")
async def timeline_fragment(
    request: Request, d: Dash, agent: Agent = None, kind: Kind = "", hours: Hours = HOURS
) -> Response:
    return _render(
        d,
        request,
        "_timeline.html",
        agent=agent or "",
        kind=_kind(kind) or "",
        **await _timeline(d, hours, agent),
    )


@router.get("/fragments/activity")
async def activity_fragment(
    request: Request,
    d: Dash,
    agent: Agent = None,
    kind: Kind = "",
    before: Before = None,
    hours: Hours = HOURS,
) -> Response:
    return _render(
        d,
        request,
        "_activity.html",
        glance=await _glance(d),
        hours=hours,  # the older link keeps the timeline's window
        **await _feed(d, agent, kind, before),
    )


@router.get("/activity/thread/{message_id}")
async def thread_page(request: Request, d: Dash, message_id: int) -> Response:
    rows = await d.parts.store.messages.thread(message_id)
    if not rows:
        raise NotFound(f"no message #{message_id}")
    messages = [
        {
            "id": m.id,
            "from": m.sender,
            "to": m.recipient,
            "body": m.body,
            "in_reply_to": m.in_reply_to,
            "created_at": m.created_at,
            "acked": m.acked,
        }
        for m in rows
    ]
    flat = [pair for t in thread_messages(messages) for pair in t.messages]
    return _render(
        d,
        request,
        "thread.html",
        nav="activity",
        message_id=message_id,
        thread=flat,
        agents=sorted({m.sender for m in rows} | {m.recipient for m in rows}),
    )


class Feed(BaseModel):
    items: list[FeedEntry]
    older: str | None = Field(description="the cursor of the next, older page (none: the end)")


@api.get("/activity")
async def activity_api(
    d: Dash,
    agent: Agent = None,
    kind: Kind = "",
    before: Before = None,
    limit: Annotated[int, Query(ge=1, le=500)] = PAGE,
) -> Feed:
    """The front page's feed, newest first: every kind (``kind`` narrows it), ``agent``'s
    when given, ``limit`` items strictly older than the ``before`` cursor."""
    page = await _page(d, agent, kind, before, limit)
    return Feed(
        items=[i.entry() for i in page.items], older=str(page.older) if page.older else None
    )
