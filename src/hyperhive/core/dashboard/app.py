"""The dashboard's Starlette app.

A first page (the agent tree with live state) until the full dashboard
lands; it reads the coordinator in-process, never through the body of a
request.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["build_dashboard"]


def build_dashboard(coord: Coordinator) -> Starlette:
    async def index(request: Request) -> Response:
        rows = await coord.agents_view()
        items = "".join(
            f"<li><b>{html.escape(a['name'])}</b> parent={html.escape(a['parent'] or '-')} "
            f"{'running' if a['running'] else 'stopped'} {html.escape(a['turn_state'])} "
            f"{html.escape(a['status_text'] or '')}</li>"
            for a in rows
        )
        return HTMLResponse(
            "<!doctype html><title>hyperhive</title><h1>hyperhive</h1>"
            f"<p>{len(rows)} agents</p><ul>{items}</ul>"
        )

    async def agents(request: Request) -> Response:
        return JSONResponse(await coord.agents_view())

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/agents", agents),
            Route("/healthz", health),
        ]
    )
