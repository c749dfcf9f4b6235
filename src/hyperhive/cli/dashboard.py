"""hivectl: the dashboard's URL and a fresh one-click log-in link."""

from __future__ import annotations

import os
import time

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.cli.shapes import DashboardLink
from hyperhive.config import load_hive_config
from hyperhive.core.dashboard.frontdoor import (
    announce_lines,
    login_url,
    read_record,
    read_token,
    token_required,
)
from hyperhive.errors import Unavailable

__all__ = ["dashboard"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


@main.command("dashboard")
@click.option("--next", "next_path", default="/", help="The page to land on after logging in.")
@json_output(DashboardLink)
@pass_ctx
def dashboard(obj: _Ctx, next_path: str, as_json: bool) -> None:
    """The dashboard's URL and a fresh one-click log-in link (it works once, for 15 minutes)."""
    run = obj.paths.run
    record = read_record(run)
    if record is None or not _alive(record.pid):
        raise Unavailable(
            "the dashboard is not serving (no live run/dashboard.json); start the hive with "
            "`hivectl up`"
        )
    hive = load_hive_config(obj.home)
    token = read_token(run) if token_required(hive.dashboard_auth, hive.bind) else None
    now = time.time()

    def human(_: DashboardLink) -> None:
        for line in announce_lines(record, token, run, now, next_path):
            click.echo(line)

    link = DashboardLink(
        url=record.url,
        login_url=None if token is None else login_url(record.url, token, now, next_path),
        requested_port=record.requested_port,
        busy=record.busy,
    )
    emit(link, human)
