"""An MCP surface (``hyperhive``, ``bash``, ``subagent``) serving every agent of a host.

One low-level MCP server and one streamable-HTTP session manager per surface,
shared by all agents: a sleeping agent costs no server of its own. The web
layer authenticates each request (path + bearer token) and stamps the agent
into the ASGI scope; every list and call reads the agent from there, so the
tool set is per agent and enforced here, server-side:

- a tool of a group the agent lacks is not listed, and a call to it anyway is
  an error *result* naming the group (tool failures are results the model
  can read; an unknown tool is a protocol error);
- every call is put on the agent's events bus once it is done (the tool
  envelope: arguments, outcome, duration); a refused or failed one is also
  logged at INFO, an ordinary one only at DEBUG.

The tools are the surface's declarations (:mod:`hyperhive.tools`); the
surface binds each one's handler by name and refuses to be built with a
declared tool it cannot serve or a handler for a tool nobody declared.

An ordinary ``tools/call`` at the single-exchange protocol claude speaks is
answered by :mod:`hyperhive.agent.mcp_fastpath` (the same :meth:`Surface.answer`,
without the SDK's per-request machinery); everything else is the SDK's.

Two hooks let a surface differ from the default: ``authenticate`` decides
which bearer token opens it and *who* the caller is (the agent itself by
default; one subagent for ``subagent_control``), and ``gate`` refuses a whole
surface to an agent (e.g. ``bash`` when its ``agent.toml`` disabled it).
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import ValidationError

from hyperhive import __version__
from hyperhive.agent.events import EventsBus
from hyperhive.agent.mcp_fastpath import FastCall, sdk_spans
from hyperhive.config import AgentConfig
from hyperhive.errors import HiveError
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.telemetry import tracer, tracing
from hyperhive.tools.decl import Tool, lean_schema

__all__ = [
    "AGENT_SCOPE_KEY",
    "Authenticate",
    "Gate",
    "Handler",
    "Surface",
    "SurfaceAgent",
    "agent_token",
    "builtin_gate",
    "describe",
    "lean_schema",
]

log = logging.getLogger(__name__)

AGENT_SCOPE_KEY = "hyperhive.agent"
MAX_MCP_BODY = 512 << 10
PREVIEW = 300


class SurfaceAgent(Protocol):
    """What a surface needs to know about the agent a request is for (read-only)."""

    @property
    def name(self) -> str: ...

    @property
    def groups(self) -> tuple[ToolGroup, ...]: ...

    @property
    def capabilities(self) -> tuple[Capability, ...]: ...

    @property
    def bus(self) -> EventsBus: ...


class TokenHolder(Protocol):
    """An active agent as the web layer sees it: its name and its bearer token."""

    @property
    def name(self) -> str: ...

    @property
    def token(self) -> str: ...


Handler = Callable[[Any, Any], Awaitable[str]]
Authenticate = Callable[[Any, str], str | None]
"""``(active agent, bearer token) -> principal`` for ``lookup``, or None: refused."""
Gate = Callable[[Any], str | None]
"""``agent -> why this whole surface is refused to it`` (None: it is not)."""


def agent_token(runtime: TokenHolder, token: str) -> str | None:
    """The default: the agent's own token, and the caller is the agent."""
    return runtime.name if hmac.compare_digest(token.encode(), runtime.token.encode()) else None


class ConfiguredAgent(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config(self) -> AgentConfig: ...


def builtin_gate(server: str) -> Gate:
    """Refuse the host's own ``server`` surface to an agent whose config turned it off.

    The MCP config already leaves such a surface out (``AgentConfig.servers``);
    this is the server-side half, for a caller that dials the URL anyway.
    """

    def gate(agent: ConfiguredAgent) -> str | None:
        entry = agent.config.servers().get(server)
        if entry is None:
            return (
                f"the {server} surface is disabled for {agent.name} by its agent.toml "
                f"([mcp_servers.{server}] enabled = false)"
            )
        if not entry.builtin:
            return (
                f"{agent.name}'s agent.toml replaces the {server} surface with its own "
                f"[mcp_servers.{server}] server; use that one"
            )
        return None

    return gate


def describe(tool: Tool[Any, Any], text: Mapping[str, str] | None = None) -> types.Tool:
    """A declaration as ``tools/list`` shows it (``text`` fills its description)."""
    return types.Tool(name=tool.name, description=tool.described(text), input_schema=tool.schema())


def _refusal(tool: Tool[Any, Any], agent: SurfaceAgent) -> str | None:
    return tool.refusal(agent.name, agent.groups, agent.capabilities)


def _preview(value: object) -> str:
    text = str(value)
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"


class Surface:
    """One MCP server name, all agents, per-agent tool sets.

    ``lookup`` maps the principal ``authenticate`` returned (stamped into the
    request scope by the web layer) to the caller the tools receive.
    """

    def __init__(
        self,
        name: str,
        tools: Sequence[Tool[Any, Any]],
        handlers: Mapping[str, Handler],
        lookup: Callable[[str], SurfaceAgent | None],
        *,
        authenticate: Authenticate = agent_token,
        gate: Gate | None = None,
        text: Mapping[str, str] | None = None,
    ) -> None:
        foreign = [t.name for t in tools if t.server != name]
        unbound = [t.name for t in tools if t.name not in handlers]
        undeclared = [n for n in handlers if n not in {t.name for t in tools}]
        if foreign or unbound or undeclared:
            raise ValueError(
                f"surface {name}: declared for another server {foreign}, declared but no "
                f"handler {unbound}, a handler but no declaration {undeclared}"
            )
        self.name = name
        self.tools = {t.name: t for t in tools}
        self.handlers = dict(handlers)
        self._lookup = lookup
        self.authenticate = authenticate
        self._gate = gate
        self._described = {t.name: describe(t, text) for t in tools}
        self.server: Server[Any] = Server(
            name,
            version=__version__,
            on_list_tools=self._list,
            on_call_tool=self._call,
            # Else the SDK lists every tool, per call with arguments, to find one schema.
            get_tool_input_schema=self._input_schema,
        )
        # The SDK's default middleware is its span, on OpenTelemetry's global provider,
        # which the hive leaves unset (telemetry.tracing): a no-op span built per request.
        self.server.middleware = [_WhenSdkSpans(m) for m in self.server.middleware]
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            # Under the coordinator's frame cap, so an oversized call is refused here
            # with a status instead of travelling on as a frame nobody can answer.
            max_request_body_size=MAX_MCP_BODY,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            ),
        )
        # None sends every request through the SDK (the fast path's equivalence test).
        self.fast: FastCall | None = FastCall(self)

    def describe(self, name: str) -> types.Tool:
        """Tool ``name`` as ``tools/list`` shows it."""
        return self._described[name]

    def run(self) -> AbstractAsyncContextManager[None]:
        """The session manager's lifespan (enter once, in the web app's lifespan)."""
        return self.manager.run()

    def agent(self, principal: str) -> SurfaceAgent | None:
        """The caller the web layer authenticated as ``principal``, if still active."""
        return self._lookup(principal)

    def _agent(self, ctx: ServerRequestContext[Any, Any]) -> SurfaceAgent:
        scope: Mapping[str, Any] = getattr(ctx.request, "scope", {}) or {}
        name = scope.get(AGENT_SCOPE_KEY)
        agent = self._lookup(name) if isinstance(name, str) else None
        if agent is None:
            raise MCPError(types.INVALID_REQUEST, "no active agent for this request")
        return agent

    def _input_schema(self, name: str) -> Any:
        tool = self._described.get(name)
        return tool.input_schema if tool is not None else None

    def refusal(self, agent: SurfaceAgent) -> str | None:
        """Why the whole surface is closed to ``agent`` (None: it is open)."""
        return self._gate(agent) if self._gate is not None else None

    def listed_for(self, agent: SurfaceAgent) -> list[str]:
        if self.refusal(agent) is not None:
            return []
        return [n for n, t in self.tools.items() if _refusal(t, agent) is None]

    async def _list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        agent = self._agent(ctx)
        return types.ListToolsResult(tools=[self._described[n] for n in self.listed_for(agent)])

    async def _call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await self.answer(self._agent(ctx), params)

    async def answer(
        self, agent: SurfaceAgent, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """``agent``'s call: the tool's result, or MCPError for a tool this surface lacks."""
        if params.name not in self.tools:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r} on {self.name}")
        ok, text = await self.outcome(agent, params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=not ok
        )

    async def outcome(
        self, agent: SurfaceAgent, name: str, arguments: dict[str, Any]
    ) -> tuple[bool, str]:
        """``agent``'s call of declared tool ``name``: (ok, the text the model reads)."""
        spec = self.tools[name]
        if not tracing():  # no span to build: the no-op one still costs a context switch
            return await self._run(agent, spec, arguments)
        # A child of the agent's open turn (claude carries no trace context to us).
        with tracer().start_as_current_span(
            f"tool {self.name}.{spec.name}",
            context=agent.bus.trace_context,
            kind=SpanKind.SERVER,
            attributes={"hyperhive.agent": agent.name, "mcp.server": self.name},
        ) as span:
            ok, text = await self._run(agent, spec, arguments)
            if not ok:
                span.set_status(Status(StatusCode.ERROR, _preview(text)))
        return ok, text

    async def _run(
        self, agent: SurfaceAgent, spec: Tool[Any, Any], arguments: dict[str, Any]
    ) -> tuple[bool, str]:
        """Gate, validate, handle, log and emit one call; (ok, text for the model)."""
        started = time.perf_counter()
        # One record per call, once it is done; the start only when debugging a hang.
        log.debug("%s → %s.%s", agent.name, self.name, spec.name)
        ok = False
        try:
            refusal = self.refusal(agent) or _refusal(spec, agent)
            if refusal is not None:
                text = refusal
            else:
                try:
                    args = spec.args.model_validate(arguments)
                except ValidationError as exc:
                    text = f"bad arguments for {spec.name}: " + "; ".join(
                        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                        for e in exc.errors()[:3]
                    )
                else:
                    text = await self.handlers[spec.name](agent, args)
                    ok = True
        except HiveError as exc:
            text = exc.message
        except Exception as exc:  # a bug in one tool must not take the surface down
            log.exception("%s.%s failed for %s", self.name, spec.name, agent.name)
            text = f"internal error in {spec.name} ({type(exc).__name__}); the host logged it"
        duration_ms = (time.perf_counter() - started) * 1000
        # A refused or failed call is the host log's; an ordinary one only when debugging:
        # every call is on the agent's events bus (below: the dashboard's live view) and
        # in claude's session, and a line per call cost ~10% of the host's CPU per call
        # and crowded everything else out of the journal ring (get_host_journal).
        level = logging.DEBUG if ok else logging.INFO
        if log.isEnabledFor(level):
            log.log(
                level,
                "%s ← %s.%s %s %s in %.1f ms: %s",
                agent.name,
                self.name,
                spec.name,
                _preview(arguments),
                "ok" if ok else "error",
                duration_ms,
                _preview(text),
            )
        agent.bus.emit(
            "tool_call",
            server=self.name,
            tool=spec.name,
            arguments=arguments,
            ok=ok,
            duration_ms=round(duration_ms, 2),
            result=_preview(text),
        )
        return ok, text


class _WhenSdkSpans:
    """An SDK middleware (its OpenTelemetry span) run only while :func:`sdk_spans`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if sdk_spans():
            result: HandlerResult = await self.inner(ctx, call_next)
            return result
        return await call_next(ctx)
