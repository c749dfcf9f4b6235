"""The Hosts page and its JSON API: every agent host's link and lease, last heartbeat,
agents, running turns and capacity — what ``hivectl hosts list`` shows, from the
coordinator's own view (no host is asked: a lost host could not answer)."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from hyperhive.core.api.dashboard.pages import waiting_count
from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.protocol import HostView, OpHostsListReq

__all__ = ["api", "pages"]

Dash = Annotated[Dashboard, Depends(dashboard)]
api = APIRouter(prefix="/api", tags=["hosts"])
pages = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)


@api.get("/hosts")
async def hosts_list(d: Dash) -> list[HostView]:
    """Every agent host: link and lease state, heartbeat, agents, turns, capacity."""
    return await d.ops.request(OpHostsListReq)


async def _render(d: Dashboard, request: Request, name: str, **extra: object) -> Response:
    rows: list[HostView] = await d.ops.request(OpHostsListReq)
    context = {"nav": "hosts", "hosts": rows, "now": time.time(), **extra}
    return d.templates.TemplateResponse(request, name, context)


@pages.get("/hosts")
async def hosts_page(request: Request, d: Dash) -> Response:
    return await _render(d, request, "hosts.html", waiting=await waiting_count(d))


@pages.get("/fragments/hosts")
async def hosts_fragment(request: Request, d: Dash) -> Response:
    return await _render(d, request, "_hosts.html")
