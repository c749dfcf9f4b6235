"""The dashboard's FastAPI app: pages, the JSON API, SSE, static files, security.

It reads and steers the coordinator in-process through the operator's own
requests (``ops.Ops``), never trusting the body of a request for who is
asking: whoever passes :mod:`security` is the operator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from hyperhive import __version__
from hyperhive.core.api.dashboard import activity, api, hosts, metrics, pages, spend, turnpages
from hyperhive.core.api.dashboard.errors import hive_error_handler
from hyperhive.core.api.dashboard.frontdoor import token_required
from hyperhive.core.api.dashboard.security import Guard, Security, ensure_token
from hyperhive.core.api.dashboard.state import HERE, Dashboard, DashboardParts
from hyperhive.errors import HiveError

__all__ = ["build_dashboard", "security_for"]


def security_for(parts: DashboardParts, require_token: bool | None = None) -> Security:
    """The operator token, when :func:`.frontdoor.token_required` says so (or the caller)."""
    bind = parts.config.bind
    if require_token is None:
        require_token = token_required(parts.config.dashboard_auth, bind)
    return Security(ensure_token(parts.paths.run) if require_token else None, bind)


def build_dashboard(parts: DashboardParts, *, require_token: bool | None = None) -> FastAPI:
    dash = Dashboard(parts, security_for(parts, require_token))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            await tg.start(dash.watch)
            yield
            tg.cancel_scope.cancel()

    # /docs serves Swagger UI's files itself (FastAPI's own page loads them from a CDN,
    # which a machine without internet cannot reach: a blank page).
    app = FastAPIOffline(
        redoc_url=None,
        title="hyperhive dashboard",
        version=__version__,
        description="Everything the operator's dashboard does, as JSON. Errors are "
        "`{ok: false, error: {code, message}}`; `/api/events` and "
        "`/api/agents/{name}/events` are server-sent event streams.",
        lifespan=lifespan,
    )
    app.state.dash = dash
    app.add_exception_handler(HiveError, hive_error_handler)
    app.include_router(api.router)
    app.include_router(spend.api)
    app.include_router(activity.api)
    app.include_router(pages.router)
    app.include_router(spend.pages)
    app.include_router(hosts.api)
    app.include_router(hosts.pages)
    app.include_router(metrics.router)
    app.include_router(activity.router)
    app.include_router(turnpages.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.get("/healthz", include_in_schema=False)
    async def health() -> dict[str, bool]:
        return {"ok": True}

    app.add_middleware(Guard, security=dash.security)
    return app
