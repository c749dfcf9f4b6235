"""The operator's view of an agent's forge: its page on the dashboard and `hivectl agents show`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from hyperhive.config import AgentConfig
from hyperhive.forge.agent import AgentForge
from hyperhive.forge.service import Forge
from hyperhive.permissions import ToolGroup
from tests.browser.conftest import live_hive
from tests.support.forgejo_server import FakeForgejo
from tests.support.hive import hivectl_env, seed_home

pytestmark = pytest.mark.timeout(90)

AGENT = "fgv-vera"


def test_agent_page_and_hivectl_show_the_forge_user_and_repositories(tmp_path: Path) -> None:
    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        token_file = tmp_path / "forge-admin-token"
        token_file.write_text(forgejo.admin_token)
        token_file.chmod(0o600)
        seed_home(
            tmp_path,
            {
                AGENT: AgentConfig(tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]),
                "fgv-plain": AgentConfig(),
            },
            hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n'
            f'[forge]\nurl = "{forgejo.url}"\nadmin_token_file = "{token_file}"\n',
        )
        with live_hive(tmp_path) as hive:
            assert hive.coord.config.forge is not None

            async def make_repo() -> None:
                forge = Forge.from_config(hive.coord.config.forge)  # type: ignore[arg-type]
                try:
                    state = hive.paths.agent_state(AGENT)
                    state.mkdir(parents=True, exist_ok=True)
                    await AgentForge(forge, AGENT, state, None).create_repo("viewed", "", False)
                finally:
                    await forge.aclose()

            hive.call(make_repo)
            token = (hive.paths.run / "dashboard-token").read_text().strip()
            auth = {"authorization": f"Bearer {token}"}
            with httpx.Client(base_url=hive.url, headers=auth) as http:
                page = http.get(f"/agents/{AGENT}")
                plain = http.get("/agents/fgv-plain")
                forgejo.down = True
                down = http.get(f"/agents/{AGENT}")
                forgejo.down = False
            assert page.status_code == 200
            assert f'href="{forgejo.url}/{AGENT}"' in page.text
            assert f'href="{forgejo.url}/agents/viewed"' in page.text and "active" in page.text
            assert plain.status_code == 200 and 'id="forge"' not in plain.text
            # A forge that is down does not take the page down; it says why.
            assert down.status_code == 200 and "HTTP 503" in down.text

            shown = subprocess.run(
                [sys.executable, "-m", "hyperhive", "agents", "show", AGENT],
                env=hivectl_env(tmp_path),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert shown.returncode == 0, shown.stderr
            assert f"user: {AGENT} active" in shown.stdout
            assert f"repo: {forgejo.url}/agents/viewed" in shown.stdout
            assert f"forge: {forgejo.url} (org agents)" in shown.stdout.splitlines()
            missing = subprocess.run(
                [sys.executable, "-m", "hyperhive", "agents", "show", "nobody"],
                env=hivectl_env(tmp_path),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert missing.returncode != 0 and "no agent named 'nobody'" in missing.stderr
