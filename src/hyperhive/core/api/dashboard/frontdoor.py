"""The dashboard's front door as the operator meets it: where it serves, how to get in.

The server records itself in ``run/dashboard.json`` (URL, the port it was
asked for, why it could not have it, its pid); ``hivectl up`` and
``hivectl dashboard`` read that record and print the URL with a one-click
log-in link minted from the operator token (:mod:`.logincode`). Nothing here
imports the web stack: the supervisor stays light.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlencode

import anyio

from hyperhive.atomic import atomic_write_text
from hyperhive.core.api.dashboard.logincode import LOGIN_CODE_TTL, mint_code

__all__ = [
    "RECORD_FILE",
    "TOKEN_FILE",
    "DashboardRecord",
    "announce_lines",
    "await_record",
    "is_loopback",
    "login_url",
    "read_record",
    "read_token",
    "token_required",
    "write_record",
]

RECORD_FILE = "dashboard.json"
TOKEN_FILE = "dashboard-token"


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False


def token_required(dashboard_auth: str, bind: str) -> bool:
    """The token is required unless ``dashboard_auth = "loopback"`` on a loopback bind.

    Loopback alone proves nothing by default: agents' sandboxes share the
    host's network, so any agent process can reach a loopback port.
    """
    return dashboard_auth == "token" or not is_loopback(bind)


@dataclass(frozen=True)
class DashboardRecord:
    """``busy`` is why ``requested_port`` could not be had (None: it was)."""

    url: str
    pid: int
    requested_port: int
    busy: str | None = None


def write_record(run_dir: Path, record: DashboardRecord) -> None:
    atomic_write_text(run_dir / RECORD_FILE, json.dumps(asdict(record)), 0o600)


def read_record(run_dir: Path) -> DashboardRecord | None:
    """The last record written, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((run_dir / RECORD_FILE).read_text())
        return DashboardRecord(
            url=str(data["url"]),
            pid=int(data.get("pid", 0)),
            requested_port=int(data.get("requested_port", 0)),
            busy=None if data.get("busy") is None else str(data["busy"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def await_record(run_dir: Path, pid: int, within: float = 15.0) -> DashboardRecord | None:
    """The record written by process ``pid`` (not a stale one from an earlier run)."""
    with anyio.move_on_after(within):
        while True:
            record = read_record(run_dir)
            if record is not None and record.pid == pid:
                return record
            await anyio.sleep(0.05)
    return None


def read_token(run_dir: Path) -> str | None:
    try:
        token = (run_dir / TOKEN_FILE).read_text().strip()
    except OSError:
        return None
    return token or None


def login_url(base_url: str, token: str, now: float, next_path: str = "/") -> str:
    """A one-click log-in link: single-use, valid for :data:`LOGIN_CODE_TTL` seconds."""
    code = mint_code(token, now=now, nonce=secrets.token_urlsafe(16))
    query = {"code": code} if next_path == "/" else {"code": code, "next": next_path}
    return f"{base_url}/login?{urlencode(query)}"


def announce_lines(
    record: DashboardRecord | None,
    token: str | None,
    run_dir: Path,
    now: float,
    next_path: str = "/",
) -> list[str]:
    """What the console says about the dashboard. ``token`` None: no token is required."""
    if record is None:
        return [f"dashboard: not serving (see {run_dir.parent / 'logs' / 'coordinator.log'})"]
    lines = [f"dashboard: {record.url}"]
    if record.busy is not None:
        lines.append(
            f"           port {record.requested_port} was busy ({record.busy}), so the "
            "dashboard took a free one; set dashboard_port in hive.toml to choose"
        )
    if token is not None:
        minutes = f"{LOGIN_CODE_TTL / 60:.0f} minutes"
        lines.append(f"log in:    {login_url(record.url, token, now, next_path)}")
        lines.append(
            f"           (one click, once, within {minutes}; `hivectl dashboard` prints a "
            f"fresh link; the token itself is in {run_dir / TOKEN_FILE})"
        )
    return lines
