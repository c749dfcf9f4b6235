"""A real hive (coordinator + dashboard, and an agent host where needed) in a
background event loop, and Debian's Chromium driven by Playwright.

The tests are synchronous (Playwright's sync API); the hive runs in an anyio
blocking portal, so in-process calls into the coordinator go through
``hive.call``. Playwright never downloads a browser: it launches
``/usr/bin/chromium`` (installed by ``scripts/bootstrap --dev``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from hyperhive.client import connect
from hyperhive.config import HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.core.dashboard.server import serve_dashboard
from tests.support.hive import agent_call, coordinator, hive_with_idle_host, op_call, running_hive

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The tests take screenshots into a scratch dir (a test run leaves the working tree
# clean); the documentation's own come from scripts/screenshots.
SCREENSHOTS = Path(tempfile.gettempdir()) / "hyperhive-screenshots"

_T = TypeVar("_T")


@dataclass
class LiveHive:
    portal: BlockingPortal
    coord: Coordinator
    host: Any
    url: str

    @property
    def paths(self) -> HivePaths:
        return self.coord.paths

    def call(self, fn: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        return self.portal.call(fn, *args)

    def op(self, cmd: str, /, **fields: Any) -> Any:
        async def go() -> Any:
            async with connect(self.paths.host_sock) as client:
                return await op_call(client, cmd, **fields)

        return self.portal.call(go)

    def as_agent(self, agent: str, cmd: str, /, **fields: Any) -> Any:
        async def go() -> Any:
            async with connect(self.paths.agent_sock(agent)) as client:
                return await agent_call(client, cmd, **fields)

        return self.portal.call(go)


@asynccontextmanager
async def _serve(
    home: Path, claude_bin: Path | None, idle_host: bool
) -> AsyncIterator[tuple[Coordinator, Any]]:
    if claude_bin is None:
        async with coordinator(home) as coord:
            yield coord, None
    elif idle_host:
        async with hive_with_idle_host(home, claude_bin) as coord:
            yield coord, None
    else:
        async with running_hive(home, claude_bin) as (coord, host):
            yield coord, host


@asynccontextmanager
async def _with_dashboard(
    home: Path, claude_bin: Path | None, idle_host: bool
) -> AsyncIterator[tuple[Coordinator, Any, str]]:
    async with (
        _serve(home, claude_bin, idle_host) as (coord, host),
        anyio.create_task_group() as tg,
    ):
        url = await tg.start(serve_dashboard, coord.dashboard_parts())
        try:
            yield coord, host, url
        finally:
            tg.cancel_scope.cancel()


@contextmanager
def live_hive(
    home: Path, claude_bin: Path | None = None, *, idle_host: bool = False
) -> Iterator[LiveHive]:
    """The hive in ``home`` (seeded with ``dashboard_port = 0``), served for the block.

    ``idle_host``: with a real agent host holding every agent's directories, its agents
    stopped — what a config change needs (#14: config repos live on the agent's host).
    """
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(_with_dashboard(home, claude_bin, idle_host)) as (
            coord,
            host,
            url,
        ),
    ):
        yield LiveHive(portal, coord, host, url)


# Module-scoped, not session: Playwright's sync API drives an event loop in the
# main thread while it is open, which anyio's pytest plugin cannot share.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} not found: run scripts/bootstrap --dev (installs Debian chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# Actions and assertions alike: a loaded machine runs chromium beside the whole hive
# (``expect`` keeps its own 5 s default, which the context's timeout does not change).
TIMEOUT_MS = 15_000
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    yield pg
    context.close()


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def dashboard_url(home: Path) -> str:
    return str(json.loads((home / "run" / "dashboard.json").read_text())["url"])
