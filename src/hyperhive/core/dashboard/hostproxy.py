"""Reading the agent host's per-agent API on the operator's behalf.

The host's operator token (``run/agent-host.json``) stays in this process:
the browser talks to the dashboard, the dashboard to the host.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from hyperhive.errors import Unavailable
from hyperhive.protocol.hostapi import HostWork

__all__ = ["HostProxy"]


class HostProxy:
    def __init__(self, run_dir: Path) -> None:
        self._file = run_dir / "agent-host.json"

    def _endpoint(self) -> tuple[str, dict[str, str]]:
        # Read every time: a restarted host writes a new URL and token.
        try:
            data = json.loads(self._file.read_text())
            url, token = str(data["url"]), str(data["token"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Unavailable("no agent host is running (run/agent-host.json is missing)") from exc
        return url.rstrip("/"), {"authorization": f"Bearer {token}"}

    async def state(self, agent: str) -> dict[str, Any]:
        url, headers = self._endpoint()
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
        """The host's SSE stream for ``agent`` (history first), until the host closes it."""
        url, headers = self._endpoint()
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
