"""What every dashboard request shares: the coordinator, its operator calls,
the host proxy, the security settings, the templates, and what the
dashboard itself remembers (agents that crashed since it started).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from fastapi import Request
from fastapi.templating import Jinja2Templates

from hyperhive.core.dashboard.hostproxy import HostProxy
from hyperhive.core.dashboard.logincode import LoginCodes
from hyperhive.core.dashboard.ops import Ops
from hyperhive.core.dashboard.security import Security

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["Dashboard", "dashboard"]

HERE = Path(__file__).parent


class Dashboard:
    def __init__(self, coord: Coordinator, security: Security) -> None:
        self.coord = coord
        self.ops = Ops(coord)
        self.proxy = HostProxy(coord.paths.run)
        self.security = security
        self.codes = None if security.token is None else LoginCodes(security.token, time.time())
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.crashed: dict[str, str] = {}
        # Set when the server shuts down: every open event stream ends.
        self.closing = anyio.Event()

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Remember crashes (the coordinator's view has no such flag) until a restart."""
        async with self.coord.bus.subscribe() as bus:
            task_status.started()
            async for event in bus:
                if event["kind"] != "agent":
                    continue
                name = str(event.get("agent"))
                if event.get("crashed"):
                    self.crashed[name] = str(event.get("reason") or "crashed")
                elif event.get("running"):
                    self.crashed.pop(name, None)

    async def agents(self) -> list[dict[str, Any]]:
        rows = await self.ops.agents()
        for row in rows:
            row["crashed"] = self.crashed.get(row["name"])
        return rows


def dashboard(request: Request) -> Dashboard:
    """FastAPI dependency: the app's shared state."""
    dash: Dashboard = request.app.state.dash
    return dash
