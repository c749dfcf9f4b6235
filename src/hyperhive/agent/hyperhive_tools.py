"""The ``hyperhive`` MCP surface: each declared tool forwarded to the coordinator.

A tool declared with a ``wire`` request (:mod:`hyperhive.tools`) needs no code
here: its arguments are validated by the surface, the request goes over the
agent's own coordinator socket — where the same declaration gates it again and
the topology rules are enforced — and the answer is rendered as the
declaration says. Only ``create_repo`` runs on the host (the forge client).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.mcp_surface import Handler, Surface, SurfaceAgent
from hyperhive.forge.tool import create_repo
from hyperhive.permissions import HYPERHIVE_SERVER
from hyperhive.tools.catalog import served_by
from hyperhive.tools.decl import Tool
from hyperhive.tools.meta import MetaArgs, StatusSet

__all__ = ["forward", "hyperhive_handlers", "hyperhive_surface", "own_meta"]


def forward(tool: Tool[Any, Any]) -> Handler:
    """The handler of a forwarded tool: request, call, render."""

    async def call(agent: ActiveAgent, args: Any) -> str:
        result = await agent.call(tool.request(args))
        if isinstance(result, StatusSet):  # the agent's own page shows it at once
            agent.bus.set_status_text(result.status_text)
            agent.meta.forget()  # the coordinator pushes this too; ours cannot race the answer
        return tool.text(args, result)

    return call


def own_meta(tool: Tool[Any, Any]) -> Handler:
    """``get_agent_meta``: the agent's own from its host's cache (see metacache), others'
    from the coordinator. A stopping agent asks: its ``running`` is about to change."""
    ask = forward(tool)

    async def call(agent: ActiveAgent, args: MetaArgs) -> str:
        if args.name not in (None, agent.name) or agent.lifetime.stopping.is_set():
            return await ask(agent, args)
        meta = await agent.meta.get(lambda: agent.call(tool.request(args)))
        return agent.meta.rendered(meta, lambda m: tool.text(args, m))

    return call


def hyperhive_handlers() -> dict[str, Handler]:
    """Every ``hyperhive`` tool's handler: the forwarded ones, then the host-local one."""
    tools = {t.name: t for t in served_by(HYPERHIVE_SERVER)}
    handlers = {name: forward(t) for name, t in tools.items() if t.wire is not None}
    handlers["get_agent_meta"] = own_meta(tools["get_agent_meta"])
    handlers["create_repo"] = create_repo
    return handlers


def _config_repo(hive_home: Path | None) -> str:
    return f"{hive_home}/agents/<agent>/config" if hive_home else "agents/<agent>/config"


def hyperhive_surface(
    lookup: Callable[[str], SurfaceAgent | None], hive_home: Path | None = None
) -> Surface:
    """The host's ``hyperhive`` surface; ``hive_home`` puts the real config repo path in a
    description."""
    return Surface(
        HYPERHIVE_SERVER,
        served_by(HYPERHIVE_SERVER),
        hyperhive_handlers(),
        lookup,
        text={"config_repo": _config_repo(hive_home)},
    )
