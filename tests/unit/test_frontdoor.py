"""One-click log-in codes (single use, short-lived, minted from the token) and what the
console says about the dashboard."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from hyperhive.core.api.dashboard.frontdoor import (
    DashboardRecord,
    announce_lines,
    login_url,
    read_record,
    token_required,
    write_record,
)
from hyperhive.core.api.dashboard.logincode import (
    LOGIN_CODE_TTL,
    CodeRefusal,
    LoginCodes,
    check_code,
    mint_code,
)

TOKEN = "t" * 43
NONCE = "n0nce-n0nce-n0nce-n0"
START = 1_800_000_000.0


def test_a_code_logs_in_once() -> None:
    codes = LoginCodes(TOKEN, not_before=START)
    code = mint_code(TOKEN, now=START + 5, nonce=NONCE)
    assert codes.redeem(code, START + 6) is None
    assert codes.redeem(code, START + 7) is CodeRefusal.USED
    # Another code from the same token is its own single use.
    other = mint_code(TOKEN, now=START + 5, nonce="another-nonce-0123")
    assert codes.redeem(other, START + 8) is None


def test_a_code_expires() -> None:
    codes = LoginCodes(TOKEN, not_before=START)
    code = mint_code(TOKEN, now=START + 10, nonce=NONCE)
    assert codes.redeem(code, START + 10 + LOGIN_CODE_TTL + 1) is CodeRefusal.EXPIRED
    assert codes.redeem(code, START + 10 + LOGIN_CODE_TTL - 1) is None


def test_a_code_from_another_token_or_damaged_is_invalid() -> None:
    codes = LoginCodes(TOKEN, not_before=START)
    foreign = mint_code("x" * 43, now=START + 1, nonce=NONCE)
    assert codes.redeem(foreign, START + 2) is CodeRefusal.INVALID
    for junk in ("", "abc", "1.2.3", TOKEN, mint_code(TOKEN, now=START, nonce="short")):
        assert codes.redeem(junk, START + 2) is CodeRefusal.INVALID


def test_a_code_minted_before_the_server_started_is_stale() -> None:
    """A restart forgets which codes were used; a code older than the server is refused."""
    code = mint_code(TOKEN, now=START - 60, nonce=NONCE)
    assert LoginCodes(TOKEN, not_before=START).redeem(code, START + 1) is CodeRefusal.STALE
    assert LoginCodes(TOKEN, not_before=START - 61).redeem(code, START + 1) is None


def test_a_code_from_the_future_is_invalid() -> None:
    code = mint_code(TOKEN, now=START + 3600, nonce=NONCE)
    assert check_code(TOKEN, code, now=START, not_before=START) is CodeRefusal.INVALID


@given(st.integers(min_value=0), st.characters(codec="ascii", categories=["L", "N"]))
def test_changing_any_character_invalidates_a_code(position: int, replacement: str) -> None:
    code = mint_code(TOKEN, now=START, nonce=NONCE)
    i = position % len(code)
    tampered = code[:i] + replacement + code[i + 1 :]
    verdict = check_code(TOKEN, tampered, now=START + 1, not_before=START)
    if tampered == code:
        assert verdict == (NONCE, int(START) + LOGIN_CODE_TTL)
    else:
        assert isinstance(verdict, CodeRefusal)


def test_the_login_url_carries_a_fresh_code_and_never_the_token() -> None:
    a = login_url("http://127.0.0.1:7878", TOKEN, START)
    b = login_url("http://127.0.0.1:7878", TOKEN, START, "/approvals")
    assert TOKEN not in a and TOKEN not in b
    assert a.startswith("http://127.0.0.1:7878/login?code=")
    qa, qb = parse_qs(urlsplit(a).query), parse_qs(urlsplit(b).query)
    assert qa["code"] != qb["code"] and qb["next"] == ["/approvals"]
    assert LoginCodes(TOKEN, START).redeem(qa["code"][0], START + 1) is None


def test_token_required_unless_loopback_mode_on_a_loopback_bind() -> None:
    assert token_required("token", "127.0.0.1")
    assert token_required("loopback", "0.0.0.0")
    assert not token_required("loopback", "127.0.0.1")
    assert not token_required("loopback", "::1")


def test_announcement_says_a_busy_port_beside_the_url_and_gives_a_link(tmp_path: Path) -> None:
    record = DashboardRecord("http://127.0.0.1:41234", 99, 7878, "Address already in use")
    write_record(tmp_path, record)
    assert read_record(tmp_path) == record
    lines = announce_lines(read_record(tmp_path), TOKEN, tmp_path, START)
    assert lines[0] == "dashboard: http://127.0.0.1:41234"
    assert "port 7878 was busy (Address already in use)" in lines[1]
    assert "dashboard_port" in lines[1]
    assert lines[2].startswith("log in:    http://127.0.0.1:41234/login?code=")
    assert "hivectl dashboard" in lines[3] and TOKEN not in "\n".join(lines)


def test_announcement_without_token_or_record(tmp_path: Path) -> None:
    fine = DashboardRecord("http://127.0.0.1:7878", 99, 7878)
    assert announce_lines(fine, None, tmp_path, START) == ["dashboard: http://127.0.0.1:7878"]
    assert announce_lines(None, TOKEN, tmp_path, START)[0].startswith("dashboard: not serving")
    (tmp_path / "dashboard.json").write_text("{not json")
    assert read_record(tmp_path) is None
