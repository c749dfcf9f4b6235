"""Reading agent hosts on the operator's behalf.

An agent's turn state and live turn stream come from the host that holds it,
over that host's link (``HostLink.calls``): hosts may be other machines with
disks of their own, and the dashboard talks to none of them directly. ``work``
(for ``/metrics``) still reads the per-agent HTTP API of every host whose
endpoint file is on this machine (``run/agent-host.json`` for the local
host, ``run/hosts/NAME/agent-host.json`` for a host run with the hive's run
dir); their operator tokens stay in this process.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.errors import Unavailable
from hyperhive.protocol.hostapi import HostWork
from hyperhive.protocol.hostreads import EventsFollowCmd

__all__ = ["HostProxy"]


class HostProxy:
    def __init__(self, run_dir: Path, link: HostLink) -> None:
        self._run = run_dir
        self._file = run_dir / "agent-host.json"
        self._link = link

    def _files(self) -> list[Path]:
        """Every host endpoint file on this machine: the local host's, then named hosts'."""
        return [self._file, *sorted((self._run / "hosts").glob("*/agent-host.json"))]

    async def state(self, agent: str) -> dict[str, Any]:
        """``agent``'s authoritative turn state, from the host that holds it."""
        return (await self._link.snapshot(agent)).model_dump(mode="json")

    async def work(self) -> HostWork:
        """The bash tasks and subagents running on every host reachable here, per agent
        (``Unavailable`` only if none answers)."""
        merged: dict[str, Any] = {}
        problems: list[str] = []
        async with httpx.AsyncClient(timeout=5) as http:
            for file in self._files():
                try:
                    data = json.loads(file.read_text())
                    url = str(data["url"]).rstrip("/")
                    headers = {"authorization": f"Bearer {data['token']}"}
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # that host is not running
                try:
                    got = await http.get(f"{url}/api/host/work", headers=headers)
                except httpx.HTTPError as exc:
                    problems.append(f"the agent host at {url} did not answer: {exc}")
                    continue
                if got.status_code != 200:
                    problems.append(f"the agent host at {url} refused /api/host/work")
                    continue
                merged.update(HostWork.model_validate_json(got.content).agents)
        if not merged and problems:
            raise Unavailable("; ".join(problems))
        if not merged and not problems:
            raise Unavailable("no agent host is running (run/agent-host.json is missing)")
        return HostWork(agents=merged)

    async def events(self, agent: str) -> AsyncIterator[dict[str, Any]]:
        """``agent``'s turn events (its host's kept history first), relayed from its host
        until the agent stops there (``StreamEnded``) or the host goes (``Unavailable``)."""
        host = self._link.serving(agent)
        async with self._link.calls.stream(
            host, lambda n: EventsFollowCmd(cmd="events_follow", stream=n, agent=agent)
        ) as batches:
            async for batch in batches:
                for event in batch:
                    yield dict(event)
