"""All of ``hivectl doctor``'s checks, in the order an operator fixes things."""

from __future__ import annotations

from pathlib import Path

import anyio

from hyperhive.client import call_once
from hyperhive.config import HiveConfig, HivePaths, load_hive_config
from hyperhive.doctor.machine import (
    check_bubblewrap,
    check_claude,
    check_credentials,
    check_dashboard_port,
    check_disk,
    check_home,
    check_install,
    check_open_files,
)
from hyperhive.doctor.model import Check, DoctorReport, fail
from hyperhive.doctor.services import check_forge, check_hosts, check_matrix, check_store
from hyperhive.errors import ConfigError, HiveError
from hyperhive.protocol import HostView, OpAgentsReq, OpHostsListReq
from hyperhive.unixsock import is_listening

__all__ = ["run_checks"]


def _ask_hive(paths: HivePaths) -> tuple[int, list[HostView]] | None:
    """(agents, hosts) from the running hive's coordinator; None when it is not running."""
    if not is_listening(paths.host_sock):
        return None

    async def ask() -> tuple[int, list[HostView]]:
        agents = await call_once(paths.host_sock, OpAgentsReq(cmd="agents"), 30.0)
        hosts = await call_once(paths.host_sock, OpHostsListReq(cmd="hosts_list"), 30.0)
        return len(agents), list(hosts)

    try:
        return anyio.run(ask)
    except HiveError:
        return None


def _agents_on_disk(paths: HivePaths) -> int:
    try:
        return sum(1 for d in (paths.home / "agents").iterdir() if d.is_dir())
    except OSError:
        return 0


def run_checks(home: Path) -> DoctorReport:
    paths = HivePaths(home)
    checks: list[Check] = []
    try:
        hive = load_hive_config(home)
    except ConfigError as exc:
        checks.append(fail("config", exc.message, "fix hive.toml; the checks below use defaults"))
        hive = HiveConfig()
    live = _ask_hive(paths)
    agents = live[0] if live is not None else max(1, _agents_on_disk(paths))
    checks += [
        check_install(hive),
        check_home(hive, paths),
        check_bubblewrap(hive),
        check_claude(hive, home),
        check_credentials(hive, paths),
        check_dashboard_port(hive, paths, running=live is not None),
        check_disk(paths),
        check_open_files(agents),
        check_store(hive, paths),
        *check_hosts(live[1] if live is not None else None),
        check_matrix(hive),
        check_forge(hive),
    ]
    return DoctorReport(ok=all(c.status != "fail" for c in checks), home=str(home), checks=checks)
