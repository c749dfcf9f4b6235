"""Approving a spawn chooses its agent host: ``hivectl approvals approve ID --host H`` and
the dashboard's approval view (a host select, "automatic" by default); an unknown or
revoked host is refused before anything is created.

A real coordinator with its dashboard (HTTP on loopback), two hosts dialled over the
real network link, the requests from an agent's own socket, the CLI as a process.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from hyperhive.client import RpcClient
from hyperhive.config import AgentConfig
from hyperhive.core.api.dashboard.server import serve_dashboard
from hyperhive.errors import InvalidRequest
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import AgentView, OpAgentsReq, OpApprovalsReq, OpHostsRevokeReq
from tests.support.hive import agent, agent_call, coordinator, op_call, operator, seed_home
from tests.support.hostlink import Pushes, add_host, link_url, registered
from tests.support.procs import hivectl

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

HIVE_TOML = (
    'dashboard_port = 0\ndashboard_auth = "loopback"\n'
    'hostlink = { listen = "127.0.0.1:0", lease_seconds = 30 }\n'
)


async def _ask(home_paths: object, child: str) -> int:
    async with agent(home_paths, "queen") as queen:  # type: ignore[arg-type]
        asked = await agent_call(queen, "request_init_config", name=child, config="")
    assert isinstance(asked, dict)
    return int(asked["approval_id"])


async def _views(op: RpcClient) -> dict[str, AgentView]:
    return {a.name: a for a in await op.call(OpAgentsReq(cmd="agents"))}


async def _pending(op: RpcClient) -> set[int]:
    return {a.id for a in await op.call(OpApprovalsReq(cmd="approvals"))}


async def test_an_approved_spawn_goes_to_the_chosen_host_from_the_cli_and_the_dashboard(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(
        tmp_path,
        {"queen": AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))},
        hive_toml=HIVE_TOML,
        store_url=hive_store_url,
    )
    run = anyio.to_thread.run_sync
    async with (
        coordinator(tmp_path) as c,
        operator(c.paths) as op,
        anyio.create_task_group() as tg,
    ):
        url = await tg.start(serve_dashboard, c.dashboard_parts())
        link = link_url(c.paths)
        creds = {n: await add_host(op, n, tmp_path / "creds") for n in ("h1", "h2", "h3")}
        await op.call(OpHostsRevokeReq(cmd="hosts_revoke", name="h3"))
        first, second = Pushes(), Pushes()
        async with (
            registered(LinkTarget(link, "h1", creds["h1"]), first, claude_slots=4),
            registered(LinkTarget(link, "h2", creds["h2"]), second, claude_slots=4),
            httpx.AsyncClient(base_url=url) as http,
        ):
            await first.activation("queen")  # h1 (by name): an automatic spawn joins it
            gina = await _ask(c.paths, "gina")

            # The CLI: an unknown host and a revoked one are refused, nothing is made.
            ghost = await run(
                lambda: hivectl(
                    tmp_path, "approvals", "approve", str(gina), "--host", "ghost", check=False
                )
            )
            assert ghost.returncode != 0 and "no agent host named 'ghost'" in ghost.stderr
            revoked = await run(
                lambda: hivectl(
                    tmp_path, "approvals", "approve", str(gina), "--host", "h3", check=False
                )
            )
            assert revoked.returncode != 0 and "agent host 'h3' is revoked" in revoked.stderr
            assert not c.registry.exists("gina") and gina in await _pending(op)
            assert "gina" not in c.topology_store.read_cached()
            # Chosen: h2, though automatic placement would put her beside her parent.
            await run(lambda: hivectl(tmp_path, "approvals", "approve", str(gina), "--host", "h2"))
            await second.activation("gina")
            view = (await _views(op))["gina"]
            assert view.host == "h2" and view.assigned_host == "h2" and view.pinned

            # The dashboard: the approval view offers the hosts, "automatic" first.
            hal = await _ask(c.paths, "hal")
            page = (await http.get("/approvals")).text
            card = page[page.index(f'data-approval="{hal}"') :]
            select = card[: card.index("</select>")]
            assert re.findall(r'<option value="([^"]*)"', select) == ["", "h1", "h2"]
            assert '<option value="" selected>automatic</option>' in select
            refused = await http.post(f"/api/approvals/{hal}/approve", json={"host": "ghost"})
            assert refused.status_code == 404 and "ghost" in refused.json()["error"]["message"]
            revoked_api = await http.post(f"/api/approvals/{hal}/approve", json={"host": "h3"})
            assert revoked_api.status_code == 409
            assert not c.registry.exists("hal") and hal in await _pending(op)
            ok = await http.post(f"/api/approvals/{hal}/approve", json={"host": "h2"})
            assert ok.status_code == 200 and ok.json()["state"] == "approved"
            await second.activation("hal")
            assert (await _views(op))["hal"].pinned

            # "automatic" (the select's default): placed by the rules, not pinned.
            ivy = await _ask(c.paths, "ivy")
            auto = await http.post(f"/api/approvals/{ivy}/approve", json={"host": ""})
            assert auto.status_code == 200
            await first.activation("ivy")  # beside its parent
            assert not (await _views(op))["ivy"].pinned

            # A host is for approving a spawn only.
            jay = await _ask(c.paths, "jay")
            with pytest.raises(InvalidRequest, match="when approving, not denying"):
                await op_call(op, "deny", approval_id=jay, reason="no", host="h1")
        tg.cancel_scope.cancel()
