"""``/metrics`` after a known scenario, parsed with prometheus_client's own parser.

A real hive in-process (coordinator, dashboard, agent host, the real claude
against the scripted model): one operator message, one turn that replies,
then a question, an approval and a background bash task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hyperhive.config import AgentConfig
from hyperhive.core.dashboard.server import serve_dashboard
from hyperhive.permissions import ToolGroup
from tests.support.hive import (
    agent,
    agent_call,
    agent_env,
    op_call,
    operator,
    running_hive,
    seed_home,
)
from tests.support.model_server import ModelServer, text, tool_call
from tests.support.surfaces import result_text, surface_client, until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(body: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@asynccontextmanager
async def dashboard_client(coord: object) -> AsyncIterator[httpx.AsyncClient]:
    async with anyio.create_task_group() as tg:
        url = await tg.start(serve_dashboard, coord.dashboard_parts())  # type: ignore[attr-defined]
        token = (coord.paths.run / "dashboard-token").read_text().strip()  # type: ignore[attr-defined]
        async with httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=10
        ) as http:
            yield http
        tg.cancel_scope.cancel()


async def test_metrics_after_a_known_scenario(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}), text("done")]
    )
    env = agent_env(model_server.url)
    seed_home(
        tmp_path,
        {
            "queen": AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT), env=env),
            "alice": AgentConfig(env=env),
        },
        {"queen": None, "alice": "queen"},
        hive_toml="dashboard_port = 0\n",
    )
    async with (
        running_hive(tmp_path, claude_bin) as (c, host),
        dashboard_client(c) as http,
    ):
        await until(lambda: {"queen", "alice"} <= set(host.agents))
        refused = await http.get("/metrics", headers={"authorization": "Bearer wrong"})
        assert refused.status_code == 401, "same auth as the rest of the dashboard"
        # The host's per-agent work is the operator's to read, not an agent's.
        async with httpx.AsyncClient(base_url=host.base_url) as direct:
            alice_token = host.agents["alice"].token
            own = {"authorization": f"Bearer {alice_token}"}
            assert (await direct.get("/api/host/work", headers=own)).status_code == 401

        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="ping")

        async def scrape() -> Samples:
            got = await http.get("/metrics")
            assert got.status_code == 200
            assert got.headers["content-type"].startswith("text/plain; version=")
            return parse(got.text)

        async def scrape_until(name: str, want: float, **labels: str) -> Samples:
            with anyio.fail_after(30):
                while True:
                    s = await scrape()
                    if value(s, name, **labels) == want:
                        return s
                    await anyio.sleep(0.05)

        # The turn is over once the coordinator answered its turn_end (acks, spend) and
        # its duration is observed (its host reported idle): the two come in either order.
        await scrape_until("hyperhive_turns_total", 1, agent="alice", outcome="ok")
        s = await scrape_until("hyperhive_turn_duration_seconds_count", 1, agent="alice")
        cost = host.agents["alice"].bus.last_turn["cost_usd"]
        assert value(s, "hyperhive_messages_sent_total", agent="operator") == 1
        assert value(s, "hyperhive_messages_sent_total", agent="alice") == 1
        assert value(s, "hyperhive_messages_delivered_total", agent="alice") == 1
        assert value(s, "hyperhive_queue_depth", agent="alice") == 0  # acked by the clean turn
        assert value(s, "hyperhive_queue_depth", agent="operator") == 1  # "pong", unread
        assert value(s, "hyperhive_turns_total", agent="alice", outcome="ok") == 1
        assert value(s, "hyperhive_turns_total", agent="queen", outcome="ok") is None
        assert value(s, "hyperhive_spend_usd_total", agent="alice") == pytest.approx(cost)
        duration = value(s, "hyperhive_turn_duration_seconds_sum", agent="alice")
        assert duration is not None and duration > 0
        assert value(s, "hyperhive_turn_duration_seconds_bucket", agent="alice", le="+Inf") == 1
        assert value(s, "hyperhive_approvals_pending") == 0
        assert value(s, "hyperhive_questions_open") == 0
        assert value(s, "hyperhive_hosts_connected") == 1
        assert value(s, "hyperhive_host_connected", host="test-host") == 1
        assert value(s, "hyperhive_agents", state="idle") == 2
        assert value(s, "hyperhive_host_up") == 1
        assert value(s, "hyperhive_bash_tasks_running", agent="alice") == 0
        assert value(s, "hyperhive_subagents_running", agent="queen") == 0

        async with agent(c.paths, "alice") as alice:
            await agent_call(alice, "ask_operator", question="which branch?")
        async with agent(c.paths, "queen") as queen:
            await agent_call(queen, "request_init_config", name="scout", config="")
        async with surface_client(host, "alice", "bash") as bash:
            started = await bash.call_tool("run", {"cmd": "sleep 60", "wait_seconds": 0})
        assert "task started" in result_text(started)
        # Started, then running once its process is spawned.
        s = await scrape_until("hyperhive_bash_tasks_running", 1, agent="alice")
        assert value(s, "hyperhive_questions_open") == 1
        assert value(s, "hyperhive_approvals_pending") == 1
