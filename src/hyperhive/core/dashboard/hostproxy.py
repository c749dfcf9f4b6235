"""Reading agent hosts' per-agent API on the operator's behalf.

Each host's operator token (``run/agent-host.json`` for the local host,
``run/hosts/NAME/agent-host.json`` for a host run with the hive's run dir)
stays in this process: the browser talks to the dashboard, the dashboard to
the host that holds the agent. A host whose endpoint file is not on this
machine (a remote host with a disk of its own) is not reachable this way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from hyperhive.errors import Unavailable
from hyperhive.protocol.hostapi import HostWork

__all__ = ["HostProxy"]


class HostProxy:
    def __init__(self, run_dir: Path, host_of: Callable[[str], str | None] | None = None) -> None:
        """``host_of``: the host an agent runs on (``None``: ask the local host)."""
        self._run = run_dir
        self._file = run_dir / "agent-host.json"
        self._host_of = host_of

    def _files(self) -> list[Path]:
        """Every host endpoint file on this machine: the local host's, then named hosts'."""
        return [self._file, *sorted((self._run / "hosts").glob("*/agent-host.json"))]

    def _endpoint(self, agent: str | None = None) -> tuple[str, dict[str, str]]:
        # Read every time: a restarted host writes a new URL and token.
        file = self._file
        host = self._host_of(agent) if agent is not None and self._host_of else None
        if host is not None and (self._run / "hosts" / host / "agent-host.json").exists():
            file = self._run / "hosts" / host / "agent-host.json"
        try:
            data = json.loads(file.read_text())
            url, token = str(data["url"]), str(data["token"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Unavailable(f"no agent host is running ({file} is missing)") from exc
        return url.rstrip("/"), {"authorization": f"Bearer {token}"}

    async def state(self, agent: str) -> dict[str, Any]:
        url, headers = self._endpoint(agent)
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                got = await http.get(f"{url}/api/agents/{agent}/state", headers=headers)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the agent host at {url} did not answer: {exc}") from exc
        if got.status_code != 200:
            raise Unavailable(f"{agent} is not active on the agent host ({got.status_code})")
        data: dict[str, Any] = got.json()
        return data

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
        """The host's SSE stream for ``agent`` (history first), until the host closes it."""
        url, headers = self._endpoint(agent)
        timeout = httpx.Timeout(5, read=None)
        try:
            async with (
                httpx.AsyncClient(timeout=timeout) as http,
                http.stream("GET", f"{url}/api/agents/{agent}/events", headers=headers) as resp,
            ):
                if resp.status_code != 200:
                    raise Unavailable(f"{agent} is not active on the agent host")
                async for line in resp.aiter_lines():
                    if line.startswith("data: "):
                        try:
                            event = json.loads(line[6:])
                        except ValueError:
                            continue
                        if isinstance(event, dict):
                            yield event
        except httpx.HTTPError as exc:
            raise Unavailable(f"the agent host at {url} went away: {exc}") from exc
