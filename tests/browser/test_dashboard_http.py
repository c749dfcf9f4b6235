"""The dashboard over plain HTTP: both security modes, error statuses, the event stream."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.core.api.dashboard.errors import status_for
from hyperhive.errors import (
    ConfigError,
    Conflict,
    CycleRefused,
    FrameTooLarge,
    HiveError,
    InvalidName,
    InvalidRequest,
    LimitExceeded,
    MalformedFrame,
    NotFound,
    PermissionDenied,
    RouteRefused,
    SelfParent,
    StorageError,
    ToolGroupDenied,
    TopologyError,
    Unavailable,
    UnknownChild,
)
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(60)

TREE = {"queen": None, "alice": "queen", "bob": None}


def test_the_default_needs_the_token_on_loopback_too(tmp_path: Path) -> None:
    """Every sandbox shares the host's network: loopback alone is no proof."""
    seed(tmp_path, "")
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        assert http.get("/api/agents").status_code == 401
        refused = http.post("/api/topology/set-parent", data={"child": "bob", "new_parent": ""})
        assert refused.status_code == 401
        token = (hive.paths.run / "dashboard-token").read_text().strip()
        ok = http.get("/api/agents", headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200


def seed(home: Path, extra: str = "") -> None:
    seed_home(
        home,
        {name: AgentConfig() for name in TREE},
        TREE,
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n' + extra,
    )


def local(url: str) -> str:
    """Reach a dashboard bound to all interfaces through loopback."""
    return url.replace("0.0.0.0", "127.0.0.1")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("x"), 404),
        (PermissionDenied("x"), 403),
        (RouteRefused("x"), 403),
        (ToolGroupDenied("x"), 403),
        (InvalidRequest("x"), 400),
        (MalformedFrame("x"), 400),
        (InvalidName("x"), 400),
        (LimitExceeded("x"), 413),
        (FrameTooLarge("x"), 413),
        (Conflict("x"), 409),
        (TopologyError("x"), 409),
        (CycleRefused("x"), 409),
        (SelfParent("x"), 409),
        (UnknownChild("x"), 409),
        (Unavailable("x"), 503),
        (ConfigError("x"), 400),
        (StorageError("x"), 507),
        (HiveError("x"), 500),
    ],
)
def test_hive_errors_map_to_http_statuses(error: HiveError, status: int) -> None:
    assert status_for(error) == status


def test_loopback_mode_needs_no_token_but_refuses_cross_site_posts(tmp_path: Path) -> None:
    seed(tmp_path, 'dashboard_auth = "loopback"\n')
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        page = http.get("/")
        assert page.status_code == 200 and "hive_csrf" in page.headers["set-cookie"]
        assert not (hive.paths.run / "dashboard-token").exists()
        assert http.get("/login").status_code == 303
        move = {"child": "bob", "new_parent": "queen"}
        foreign = http.post(
            "/api/topology/set-parent", data=move, headers={"origin": "http://evil.example"}
        )
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "csrf"
        cross = http.post(
            "/api/topology/set-parent", data=move, headers={"sec-fetch-site": "cross-site"}
        )
        assert cross.status_code == 403
        assert hive.op("topology")["bob"] is None
        same = http.post("/api/topology/set-parent", data=move, headers={"origin": hive.url})
        assert same.status_code == 200 and same.json()["changed"] is True
        plain = http.post("/api/topology/set-parent", data={"child": "bob"})
        assert plain.status_code == 200 and plain.json()["topology"]["bob"] is None
        rebound = http.get("/api/agents", headers={"host": "evil.example"})
        assert rebound.status_code == 421


def test_error_statuses_and_bodies(tmp_path: Path) -> None:
    seed(tmp_path, 'dashboard_auth = "loopback"\n')
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        cycle = http.post(
            "/api/topology/set-parent", data={"child": "queen", "new_parent": "alice"}
        )
        assert cycle.status_code == 409
        assert cycle.json()["error"]["code"] == "cycle_refused"
        assert "would make a cycle" in cycle.json()["error"]["message"]
        assert http.get("/api/agents/ghost").status_code == 404
        assert http.get("/api/approvals/7").status_code == 404
        compact = http.post("/api/agents/alice/compact")  # the operator's is ungated
        assert compact.status_code == 200 and compact.json()["queued"] is True
        assert compact.json()["context_usage"] is None  # no turn recorded, queued anyway
        assert http.post("/api/agents/ghost/compact").status_code == 404
        big = http.post("/api/messages", json={"to": "alice", "body": "x" * 70_000})
        assert big.status_code == 413
        bad_group = http.post("/api/agents/alice/perms", json={"tool_groups": ["nope"]})
        assert bad_group.status_code == 400 and "known groups" in bad_group.text
        destroy = http.post("/api/agents/bob/destroy", json={"confirm": "alice"})
        assert destroy.status_code == 400 and "bob" in hive.op("topology")
        spawn = http.post("/api/agents", json={"name": "w1", "config_toml": "tool_groups = ["})
        assert spawn.status_code == 400 and "not valid TOML" in spawn.text
        ok = http.post("/api/agents", json={"name": "w1", "parent": "queen"})
        assert ok.status_code == 200 and hive.op("topology")["w1"] == "queen"
        preview = http.get("/api/agents/alice/perms/preview", params={"groups": "meta"})
        assert preview.json()["tools_arg"] == "Edit,Glob,Grep,Read,Skill,Write"
        spec = http.get("/openapi.json").json()
        assert "/api/topology/set-parent" in spec["paths"]
        assert "/api/agents/{name}/perms" in spec["paths"]


def test_event_stream_pushes_a_reparent(tmp_path: Path) -> None:
    seed(tmp_path, 'dashboard_auth = "loopback"\n')
    with (
        live_hive(tmp_path) as hive,
        httpx.Client(base_url=hive.url, timeout=10) as http,
        http.stream("GET", "/api/events") as events,
    ):
        assert events.headers["content-type"].startswith("text/event-stream")
        lines = events.iter_lines()
        seen: list[str] = []
        for line in lines:
            seen.append(line)
            if line == "event: hello":
                break
        hive.op("set_parent", child="bob", new_parent="alice")
        for line in lines:
            if line.startswith("data: ") and '"topology"' in line:
                data = json.loads(line[6:])
                assert data["child"] == "bob" and data["parent"] == "alice"
                break


def test_token_mode_login_cookie_and_csrf(tmp_path: Path) -> None:
    seed(tmp_path, 'bind = "0.0.0.0"\nagent_host_port = 0\n')
    with live_hive(tmp_path) as hive:
        url = local(hive.url)
        token_file = hive.paths.run / "dashboard-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        with httpx.Client(base_url=url) as anon:
            assert anon.get("/api/agents").status_code == 401
            html = anon.get("/", headers={"accept": "text/html"})
            assert html.status_code == 303 and html.headers["location"] == "/login?next=/"
            assert anon.get("/healthz").status_code == 200
            assert anon.get("/static/dashboard.js").status_code == 200
            assert anon.get("/login").status_code == 200
            wrong = anon.get("/api/agents", headers={"authorization": "Bearer nope"})
            assert wrong.status_code == 401
            bearer = {"authorization": f"Bearer {token}"}
            assert anon.get("/api/agents", headers=bearer).status_code == 200
            moved = anon.post(
                "/api/topology/set-parent",
                data={"child": "bob", "new_parent": "queen"},
                headers=bearer,
            )
            assert moved.status_code == 200
            refused = anon.post("/login", data={"token": "guess"})
            assert refused.status_code == 401 and "not the operator token" in refused.text

        with httpx.Client(base_url=url) as browser_like:
            login = browser_like.post("/login", data={"token": token, "next": "/approvals"})
            assert login.status_code == 303 and login.headers["location"] == "/approvals"
            cookie = next(
                c for c in login.headers.get_list("set-cookie") if c.startswith("hive_token=")
            )
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie
            assert browser_like.get("/api/agents").status_code == 200
            csrf = browser_like.cookies.get("hive_csrf")
            assert csrf
            move = {"child": "bob", "new_parent": "alice"}
            no_csrf = browser_like.post("/api/topology/set-parent", data=move)
            assert no_csrf.status_code == 403 and "x-csrf-token" in no_csrf.text
            bad_csrf = browser_like.post(
                "/api/topology/set-parent", data=move, headers={"x-csrf-token": "forged"}
            )
            assert bad_csrf.status_code == 403
            foreign = browser_like.post(
                "/api/topology/set-parent",
                data=move,
                headers={"x-csrf-token": csrf, "origin": "http://evil.example"},
            )
            assert foreign.status_code == 403
            assert hive.op("topology")["bob"] == "queen"
            good = browser_like.post(
                "/api/topology/set-parent", data=move, headers={"x-csrf-token": csrf}
            )
            assert good.status_code == 200 and hive.op("topology")["bob"] == "alice"
            assert browser_like.post("/logout", headers={"x-csrf-token": csrf}).status_code == 303


def test_token_mode_in_the_browser(tmp_path: Path, page: Page) -> None:
    seed(tmp_path, 'bind = "0.0.0.0"\n')
    with live_hive(tmp_path) as hive:
        url = local(hive.url)
        token = (hive.paths.run / "dashboard-token").read_text().strip()
        page.goto(url)
        expect(page).to_have_url(f"{url}/login?next=/")
        page.fill("input[name=token]", "wrong")
        page.click("button[type=submit]")
        expect(page.locator("[role=alert]")).to_contain_text("not the operator token")
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        expect(page.locator("#glance")).to_be_visible()  # the front page
        page.goto(f"{url}/tree")
        expect(page.locator("#tree li.node")).to_have_count(3)
        assert "hive_token" not in page.evaluate("document.cookie")  # HttpOnly
        # The page's own POSTs carry the double-submit header.
        page.fill("#set-parent input[name=child]", "bob")
        page.fill("#set-parent input[name=new_parent]", "alice")
        page.click("#set-parent button[type=submit]")
        expect(page.locator("#set-parent-result")).to_have_text("moved")
        assert hive.op("topology")["bob"] == "alice"


def test_the_agent_page_shows_a_skipped_tool_group(tmp_path: Path) -> None:
    seed_home(
        tmp_path,
        {"queen": AgentConfig(), "alice": 'tool_groups = ["meta", "telepathy"]\n'},
        {"queen": None, "alice": "queen"},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n',
    )
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        page = http.get("/agents/alice")
        assert page.status_code == 200
        assert "config warning: tool_groups: unknown group(s) &#39;telepathy&#39; skipped" in (
            page.text
        )
        assert "config warning" not in http.get("/agents/queen").text
        row = next(a for a in http.get("/api/agents").json() if a["name"] == "alice")
        assert row["broken"] is None and "'telepathy'" in row["config_warnings"][0]
