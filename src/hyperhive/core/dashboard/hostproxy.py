"""Reading an agent's host on the operator's behalf.

An agent's turn state and live turn stream come from the host that holds it,
over that host's link (``HostLink.calls``): hosts may be other machines, and
the dashboard talks to none of them directly. ``work`` still reads the local
host's HTTP API (its operator token, ``run/agent-host.json``, stays in this
process).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from hyperhive.core.hostlink import HostLink
from hyperhive.errors import Unavailable
from hyperhive.protocol.hostapi import HostWork
from hyperhive.protocol.hostreads import AgentSnapshotAsk, EventsFollowCmd

__all__ = ["HostProxy"]


# How long a host has to answer for an agent's turn state.
STATE_WITHIN = 5.0


class HostProxy:
    def __init__(self, run_dir: Path, link: HostLink) -> None:
        self._file = run_dir / "agent-host.json"
        self._link = link

    def _endpoint(self) -> tuple[str, dict[str, str]]:
        # Read every time: a restarted host writes a new URL and token.
        try:
            data = json.loads(self._file.read_text())
            url, token = str(data["url"]), str(data["token"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Unavailable("no agent host is running (run/agent-host.json is missing)") from exc
        return url.rstrip("/"), {"authorization": f"Bearer {token}"}

    def _holder(self, agent: str) -> str:
        host = self._link.host_of(agent)
        if host is None:
            raise Unavailable(f"{agent} is not running on any agent host")
        return host

    async def state(self, agent: str) -> dict[str, Any]:
        """``agent``'s authoritative turn state, from the host that holds it."""
        host = self._holder(agent)
        got = await self._link.calls.ask(
            host,
            lambda n: AgentSnapshotAsk(cmd="agent_snapshot", ask=n, agent=agent),
            STATE_WITHIN,
            f"{agent}'s turn state",
        )
        if not isinstance(got, dict):
            raise Unavailable(f"agent host {host} answered {agent}'s state with no object")
        return dict(got)

    async def work(self) -> HostWork:
        """The bash tasks and subagents running on the host, per agent."""
        url, headers = self._endpoint()
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                got = await http.get(f"{url}/api/host/work", headers=headers)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the agent host at {url} did not answer: {exc}") from exc
        if got.status_code != 200:
            raise Unavailable(f"the agent host refused /api/host/work ({got.status_code})")
        return HostWork.model_validate_json(got.content)

    async def events(self, agent: str) -> AsyncIterator[dict[str, Any]]:
        """``agent``'s turn events (its host's kept history first), relayed from its host
        until the agent stops there (``StreamEnded``) or the host goes (``Unavailable``)."""
        host = self._holder(agent)
        async with self._link.calls.stream(
            host, lambda n: EventsFollowCmd(cmd="events_follow", stream=n, agent=agent)
        ) as batches:
            async for batch in batches:
                for event in batch:
                    yield dict(event)
