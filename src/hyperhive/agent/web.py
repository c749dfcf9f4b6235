"""The agent host's one loopback HTTP server: MCP surfaces and the per-agent API.

``/agents/<X>/mcp/<surface>`` needs a token the surface accepts for X — X's
own bearer token by default (another agent's token on X's path is refused
like no token at all); ``subagent_control`` accepts only the per-run token of
one of X's subagents, and the surface learns from it which one is calling.
``/api/agents/<X>/state`` and ``/api/agents/<X>/events`` (SSE, replaying
recent history) accept X's token or the host's operator token
(``run/agent-host.json``, 0600), so an agent cannot watch another agent's turns.
``/api/host/work`` (the bash tasks and subagents running, per agent; the
dashboard's ``/metrics``) accepts only the operator token.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.mcp_surface import AGENT_SCOPE_KEY, Surface, agent_token
from hyperhive.protocol.hostapi import AgentWork, HostWork

__all__ = ["build_app"]


def _first(scope: Scope, name: bytes) -> str:
    """Header ``name``'s first value (as Starlette's ``Headers.get`` reads it), or ""."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _unauthorized(why: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": "unauthorized", "message": why}},
        status_code=401,
        headers={"www-authenticate": "Bearer"},
    )


class _McpEndpoint:
    """Authenticates, stamps the agent into the scope, hands over to the surface."""

    def __init__(
        self, surfaces: Mapping[str, Surface], lookup: Callable[[str], ActiveAgent | None]
    ) -> None:
        self.surfaces = surfaces
        self.lookup = lookup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Read off the scope, not a Request: this runs on every tool call.
        params: Mapping[str, str] = scope["path_params"]
        agent_name = params["agent"]
        surface = self.surfaces.get(params["surface"])
        runtime = self.lookup(agent_name)
        token = _bearer(_first(scope, b"authorization"))
        authenticate = surface.authenticate if surface is not None else agent_token
        principal = None
        if runtime is not None and token is not None:
            principal = authenticate(runtime, token)
        if principal is None:
            await _unauthorized(f"a valid bearer token for agent {agent_name!r} is required")(
                scope, receive, send
            )
            return
        if surface is None:
            await JSONResponse(
                {"error": {"code": "not_found", "message": "no such surface"}}, status_code=404
            )(scope, receive, send)
            return
        scope[AGENT_SCOPE_KEY] = principal  # the scope is this request's own
        if surface.fast is not None:
            got = await surface.fast(principal, scope, receive, send)
            if got is None:
                return
            receive = got
        await surface.manager.handle_request(scope, receive, send)


def build_app(
    surfaces: Mapping[str, Surface],
    lookup: Callable[[str], ActiveAgent | None],
    operator_token: str,
    active: Callable[[], Iterable[ActiveAgent]] = tuple,
) -> Starlette:
    def authorized(request: Request) -> ActiveAgent | Response:
        name = request.path_params["agent"]
        runtime = lookup(name)
        token = _bearer(request.headers.get("authorization", ""))
        if token is None:
            return _unauthorized("a bearer token is required")
        if _same(token, operator_token) or (runtime is not None and _same(token, runtime.token)):
            if runtime is None:
                return JSONResponse(
                    {
                        "error": {
                            "code": "not_found",
                            "message": f"{name} is not active on this host",
                        }
                    },
                    status_code=404,
                )
            return runtime
        return _unauthorized(f"this token may not read {name!r}")

    async def state(request: Request) -> Response:
        got = authorized(request)
        if isinstance(got, Response):
            return got
        return JSONResponse(got.snapshot().model_dump(mode="json"))

    async def events(request: Request) -> Response:
        got = authorized(request)
        if isinstance(got, Response):
            return got

        async def stream() -> AsyncIterator[bytes]:
            async with got.bus.subscribe(replay=True) as receive:
                async for event in receive:
                    yield f"id: {event['seq']}\ndata: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    async def work(request: Request) -> Response:
        token = _bearer(request.headers.get("authorization", ""))
        if token is None or not _same(token, operator_token):
            return _unauthorized("the host's operator token is required")
        agents = {
            agent.name: AgentWork(
                bash_tasks_running=agent.bash_tasks.running_count(),
                subagents_running=agent.subagents.running_count(),
            )
            for agent in active()
        }
        return JSONResponse(HostWork(agents=agents).model_dump(mode="json"))

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for surface in surfaces.values():
                await stack.enter_async_context(surface.run())
            yield

    endpoint: Any = _McpEndpoint(surfaces, lookup)
    return Starlette(
        routes=[
            Route("/agents/{agent}/mcp/{surface}", endpoint, methods=["GET", "POST", "DELETE"]),
            Route("/api/agents/{agent}/state", state),
            Route("/api/agents/{agent}/events", events),
            Route("/api/host/work", work),
            Route("/healthz", health),
        ],
        lifespan=lifespan,
    )
