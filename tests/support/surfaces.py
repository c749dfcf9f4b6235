"""Talking to the agent host's MCP surfaces and the coordinator's loose ends in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from hyperhive.config import HivePaths
from hyperhive.protocol import OpLooseEndsReq
from tests.support.hive import operator

__all__ = [
    "eventually",
    "loose_todos",
    "mcp_client",
    "result_text",
    "surface_client",
    "until",
    "until_async",
]


async def until(check: Callable[[], Any], within: float = 30.0) -> Any:
    """Poll a cheap in-process condition under a deadline (no bare sleeps)."""
    with anyio.fail_after(within):
        while True:
            value = check()
            if value:
                return value
            await anyio.sleep(0.02)


async def until_async(check: Callable[[], Awaitable[Any]], within: float = 30.0) -> Any:
    """:func:`until` for a condition that must itself be awaited (a store read, a call)."""
    with anyio.fail_after(within):
        while True:
            value = await check()
            if value:
                return value
            await anyio.sleep(0.02)


@asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


@asynccontextmanager
async def surface_client(host: Any, agent: str, surface: str) -> AsyncIterator[Client]:
    """An MCP client on ``agent``'s ``surface``, with the agent's own token."""
    url = f"{host.base_url}/agents/{agent}/mcp/{surface}"
    async with mcp_client(url, host.agents[agent].token) as client:
        yield client


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def loose_todos(paths: HivePaths, agent: str, subsystem: str) -> dict[str, str]:
    """``agent``'s open todos of ``subsystem`` as ``{key: summary}``, via the operator socket."""
    async with operator(paths) as op:
        rows = await op.call(OpLooseEndsReq(cmd="get_loose_ends", agent=agent))
    return {
        r.key: r.body
        for r in rows
        if r.kind == "todo" and r.subsystem == subsystem and r.key is not None
    }


async def eventually(
    paths: HivePaths,
    agent: str,
    subsystem: str,
    check: Callable[[dict[str, str]], bool],
    within: float = 30.0,
) -> dict[str, str]:
    """Poll ``agent``'s todos until ``check`` holds; returns them."""
    with anyio.fail_after(within):
        while True:
            todos = await loose_todos(paths, agent, subsystem)
            if check(todos):
                return todos
            await anyio.sleep(0.05)
