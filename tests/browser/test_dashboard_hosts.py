"""The Hosts page: every agent host — the local one and remote ones — with its link,
heartbeat, agents, running turns and capacity, from the coordinator's own view."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hyperhive.config import AgentConfig
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.protocol import HostCapacity, LinkHeartbeatReq
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home
from tests.support.hostlink import link_url, registered, write_credential
from tests.support.surfaces import until

pytestmark = pytest.mark.timeout(90)


def test_the_hosts_page_shows_local_and_remote_hosts(tmp_path: Path, claude_bin: Path) -> None:
    seed_home(
        tmp_path,
        {"alice": AgentConfig()},
        hive_toml=(
            'runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n'
            'hostlink = { listen = "127.0.0.1:0" }\n'
        ),
    )
    with live_hive(tmp_path, claude_bin) as hive, httpx.Client(base_url=hive.url) as http:
        # Placed on the local host before rack2 exists (placement could pick either).
        hive.call(until, lambda: hive.coord.hostlink.running("alice"))
        made = hive.op("hosts_add", name="rack2")
        cred = write_credential(tmp_path / "creds" / "rack2", made["credential"])
        target = LinkTarget(link_url(hive.paths), "rack2", cred)
        capacity = HostCapacity(
            claude_slots=6, slots_in_use=2, mem_total=16 << 30, mem_available=5 << 30
        )
        with hive.portal.wrap_async_context_manager(registered(target)) as link:
            hive.call(link.call, LinkHeartbeatReq(cmd="heartbeat", capacity=capacity))
            rows = {h["name"]: h for h in http.get("/api/hosts").json()}
            [local] = [h for h in rows.values() if not h["remote"]]
            assert local["link"] == "connected" and local["agents"] == ["alice"]
            assert rows["rack2"]["link"] == "connected" and rows["rack2"]["remote"]
            assert rows["rack2"]["capacity"]["claude_slots"] == 6
            page = http.get("/hosts")
            assert page.status_code == 200
            assert '<a href="/hosts" aria-current="page">Hosts</a>' in page.text
            assert 'data-host="rack2" data-link="connected"' in page.text
            assert "2 / 6" in page.text and "5.0 of 16.0 GiB" in page.text
            assert f'data-host="{local["name"]}"' in page.text and "local</span>" in page.text
        # Its link dropped: still holding its lease (no agents of its own here).
        rows = {h["name"]: h for h in http.get("/api/hosts").json()}
        assert rows["rack2"]["link"] == "disconnected"
        assert 'data-host="rack2" data-link="disconnected"' in http.get("/fragments/hosts").text
