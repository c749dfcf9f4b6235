"""The dashboard says when an agent needs login, and what to do about it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hyperhive.config import AgentConfig
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(60)


def test_an_agent_that_needs_login_shows_the_remedy(tmp_path: Path) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig(), "bob": AgentConfig()},
        {"alice": None, "bob": None},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n',
    )
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        hive.as_agent("alice", "turn_end", outcome="needs_login")
        page = http.get("/agents/alice")
        assert page.status_code == 200
        assert "needs login" in page.text
        assert "hivectl login" in page.text and "CLAUDE_CODE_OAUTH_TOKEN" in page.text
        assert "claude setup-token" in page.text and "ANTHROPIC_API_KEY" in page.text
        healthy = http.get("/agents/bob")
        assert "hivectl login" not in healthy.text  # only where it applies
