"""The operator's view of an agent's Matrix account: its dashboard page (a real Synapse)."""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import httpx
import pytest

from hyperhive.config import AgentConfig
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.matrix.identity import read_sync_state
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home
from tests.support.procs import wait_until
from tests.support.synapse import Person, Synapse, register

pytestmark = pytest.mark.timeout(120)

AGENT = "mxv-vera"


def test_agent_page_shows_the_matrix_id_and_pending_invitations(
    tmp_path: Path, claude_bin: Path, synapse: Synapse
) -> None:
    secret = synapse.write_secret(tmp_path / "matrix-secret")
    hive = f"t{secrets.token_hex(3)}"
    agent_id = f"@{hive}-{AGENT}:{synapse.server_name}"
    seed_home(
        tmp_path,
        {AGENT: AgentConfig(matrix=AgentMatrixConfig(enabled=True)), "mxv-plain": AgentConfig()},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n'
        f'[matrix]\nhomeserver = "{synapse.url}"\nserver_name = "{synapse.server_name}"\n'
        f'registration_shared_secret_file = "{secret}"\nhive = "{hive}"\n'
        "sync_timeout_seconds = 1\n",
    )
    stranger = register(synapse, f"stranger-{secrets.token_hex(3)}")
    with live_hive(tmp_path, claude_bin) as live:
        state = live.paths.agent_state(AGENT)
        wait_until(lambda: read_sync_state(state).since, 60, "the agent's first sync")

        async def invite() -> str:
            person = Person(synapse, stranger)
            try:
                return await person.room([agent_id], "a stranger's room")
            finally:
                await person.close()

        room_id = anyio.run(invite)
        wait_until(lambda: read_sync_state(state).pending_invites, 60, "the pending invitation")
        token = (live.paths.run / "dashboard-token").read_text().strip()
        with httpx.Client(base_url=live.url, headers={"authorization": f"Bearer {token}"}) as http:
            page = http.get(f"/agents/{AGENT}")
            plain = http.get("/agents/mxv-plain")
    assert page.status_code == 200 and 'id="matrix"' in page.text
    assert f"{agent_id} on {synapse.url}" in page.text
    assert f"{room_id} from {stranger.user_id}" in page.text
    assert plain.status_code == 200 and 'id="matrix"' not in plain.text
