"""One-click log-in links: a code in the URL exchanged for the HttpOnly cookie, once."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Page, expect

from hyperhive.config import AgentConfig
from hyperhive.core.api.dashboard.frontdoor import login_url
from hyperhive.core.api.dashboard.logincode import LOGIN_CODE_TTL
from tests.browser.conftest import live_hive
from tests.support.hive import seed_home

pytestmark = pytest.mark.timeout(60)

TREE = {"queen": None, "alice": "queen"}


def seed(home: Path) -> None:
    seed_home(
        home,
        {name: AgentConfig() for name in TREE},
        TREE,
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\n',
    )


def token_of(home: Path) -> str:
    return (home / "run" / "dashboard-token").read_text().strip()


def code_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["code"][0]


class _Records(logging.Handler):
    """The server's records; the test's own HTTP client (httpx, in this process) logs URLs."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("httpx", "httpcore")):
            self.lines.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def every_log_line() -> Iterator[list[str]]:
    """Every record any logger emits, uvicorn's access log forced on at INFO."""
    handler = _Records()
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.access", "uvicorn.error")]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield handler.lines
    finally:
        for lg, level in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)


def test_a_login_link_sets_the_cookie_once_and_leaves_no_trace_in_logs(tmp_path: Path) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive, every_log_line() as logged:
        token = token_of(tmp_path)
        link = login_url(hive.url, token, time.time(), "/approvals")
        path = link.removeprefix(hive.url)
        with httpx.Client(base_url=hive.url) as browser_like:
            entered = browser_like.get(path)
            assert entered.status_code == 303
            assert entered.headers["location"] == "/approvals"  # the code is gone
            cookie = next(
                c for c in entered.headers.get_list("set-cookie") if c.startswith("hive_token=")
            )
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie
            assert browser_like.get("/api/agents").status_code == 200
            # The usual rules still hold for a cookie from a link: POSTs need the CSRF echo.
            move = {"child": "alice", "new_parent": ""}
            assert browser_like.post("/api/topology/set-parent", data=move).status_code == 403

        with httpx.Client(base_url=hive.url) as second:
            again = second.get(path, headers={"accept": "text/html"})
            assert again.status_code == 401
            assert "already been used" in again.text and "hivectl dashboard" in again.text
            assert again.headers["referrer-policy"] == "same-origin"
            assert "hive_token" not in second.cookies
            assert second.get("/api/agents").status_code == 401

        assert logged, "the capture saw nothing: it would prove nothing"
        code = code_of(link)
        assert not [line for line in logged if code in line or token in line]


@pytest.mark.parametrize(
    ("minted", "token", "says"),
    [
        (-LOGIN_CODE_TTL - 5, None, "has expired"),
        (0.0, "someone-elses-token-" + "x" * 30, "not valid for this hive"),
        (-60.0, None, "before the dashboard last restarted"),
    ],
)
def test_expired_foreign_and_stale_links_are_refused_in_words(
    tmp_path: Path, minted: float, token: str | None, says: str
) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive, httpx.Client(base_url=hive.url) as http:
        link = login_url(hive.url, token or token_of(tmp_path), time.time() + minted)
        refused = http.get(link.removeprefix(hive.url))
        assert refused.status_code == 401 and says in refused.text
        assert "hive_token" not in http.cookies
        damaged = http.get(f"/login?code={code_of(link)[:-3]}")
        assert damaged.status_code == 401 and "not valid for this hive" in damaged.text


def test_the_login_link_in_a_browser_lands_on_a_clean_url(tmp_path: Path, page: Page) -> None:
    seed(tmp_path)
    with live_hive(tmp_path) as hive:
        link = login_url(hive.url, token_of(tmp_path), time.time())
        page.goto(link)
        expect(page).to_have_url(f"{hive.url}/")
        expect(page.locator("#glance")).to_be_visible()  # the front page
        page.goto(f"{hive.url}/tree")
        expect(page.locator("#tree li.node")).to_have_count(2)
        assert "hive_token" not in page.evaluate("document.cookie")  # HttpOnly
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["hive_token"]["httpOnly"]
        # The same link a second time (another browser, say) is refused with a clear page.
        page.context.clear_cookies()
        page.goto(link)
        expect(page.locator("#login-error")).to_contain_text("already been used")
        # ... and the token form on that page still works.
        page.fill("input[name=token]", token_of(tmp_path))
        page.click("button[type=submit]")
        expect(page).to_have_url(f"{hive.url}/")
        expect(page.locator("#glance")).to_be_visible()
