"""What every dashboard request shares: the hive's parts it reads, its operator calls,
the host proxy, the security settings, the templates, and what the
dashboard itself remembers (agents that crashed since it started).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus
from fastapi import Request
from fastapi.templating import Jinja2Templates

from hyperhive.config import HiveConfig, HivePaths
from hyperhive.core.api.dashboard.hostproxy import HostProxy
from hyperhive.core.api.dashboard.logincode import LoginCodes
from hyperhive.core.api.dashboard.ops import Ops
from hyperhive.core.api.dashboard.security import Security
from hyperhive.core.api.operator_api import OperatorApi
from hyperhive.core.fleet.hostlink import HostLink
from hyperhive.core.infra.notify import EventBus, Notifier
from hyperhive.core.state.registry import AgentRegistry
from hyperhive.store import Store
from hyperhive.telemetry.metrics import TurnMeter

__all__ = ["Dashboard", "DashboardParts", "dashboard"]

HERE = Path(__file__).parent


@dataclass(frozen=True)
class DashboardParts:
    """The narrow things the dashboard uses; everything it changes goes through ``ops``."""

    paths: HivePaths
    config: HiveConfig
    ops: OperatorApi
    bus: EventBus
    notifier: Notifier
    registry: AgentRegistry
    hostlink: HostLink
    store: Store  # read-only here: /metrics counts


class Dashboard:
    def __init__(self, parts: DashboardParts, security: Security) -> None:
        self.parts = parts
        self.ops = Ops(parts.ops)
        self.proxy = HostProxy(parts.paths.run, parts.hostlink)
        self.security = security
        self.codes = None if security.token is None else LoginCodes(security.token, time.time())
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.crashed: dict[str, str] = {}
        self.meter = TurnMeter()
        # Set when the server shuts down: every open event stream ends.
        self.closing = anyio.Event()

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Remember crashes (the coordinator's view has no such flag) until a restart;
        count turns for ``/metrics``."""
        async with self.parts.bus.subscribe() as bus:
            task_status.started()
            async for event in bus:
                self.meter.observe(event)
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
