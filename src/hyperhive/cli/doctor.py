"""hivectl: ``doctor`` checks the machine and the hive, and says what to do about each failure."""

from __future__ import annotations

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.doctor import DoctorReport, run_checks
from hyperhive.errors import HiveError

__all__ = ["doctor"]

_MARK = {"ok": "ok  ", "fail": "FAIL", "skip": "skip"}


@main.command()
@json_output(DoctorReport)
@pass_ctx
def doctor(obj: _Ctx, as_json: bool) -> None:
    """Check that this machine can run the hive, and that the hive is well.

    Bubblewrap as an agent's user, claude (found, runnable by agents, the pinned
    version), credentials, the dashboard's port, disk space, the open-files limit,
    the store, each agent host's link and lease, and the forge and Matrix
    homeserver if configured. Exits non-zero when any check fails.
    """
    report = run_checks(obj.home)

    def human(r: DoctorReport) -> None:
        click.echo(f"hive home: {r.home}")
        for c in r.checks:
            click.echo(f"{_MARK[c.status]}  {c.name}: {c.detail}")
            if c.remedy:
                click.echo(f"      → {c.remedy}")

    emit(report, human)
    failed = [c.name for c in report.checks if c.status == "fail"]
    if failed:
        raise HiveError(f"doctor: {len(failed)} check(s) failed: {', '.join(failed)}")
