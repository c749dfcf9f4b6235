"""The dashboard's API page (/docs) works on a machine that reaches nothing but itself."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from hyperhive.config import AgentConfig
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(90)

LOCAL = {"127.0.0.1", "localhost", "::1", "[::1]"}


def test_the_api_page_lists_the_operations_with_the_network_blocked(
    tmp_path: Path, page: Page
) -> None:
    seed_home(
        tmp_path,
        {"queen": AgentConfig()},
        {"queen": None},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n',
    )
    token = tmp_path / "run" / "dashboard-token"
    blocked: list[str] = []

    def only_this_machine(route: Route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in LOCAL:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    page.context.route("**/*", only_this_machine)
    with live_hive(tmp_path) as hive:
        page.context.set_extra_http_headers(
            {"Authorization": f"Bearer {token.read_text().strip()}"}
        )
        page.goto(f"{hive.url}/docs")
        # Swagger UI rendered the OpenAPI document: operations, by method and path.
        expect(page.locator(".opblock").first).to_be_visible()
        expect(page.locator(".opblock-summary-path", has_text="/api/agents").first).to_be_visible()
        assert page.locator(".opblock").count() >= 20
        assert blocked == [], f"the API page reached off the machine: {blocked}"
