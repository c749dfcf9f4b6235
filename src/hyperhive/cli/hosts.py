"""hivectl: remote agent hosts: credentials (``hosts``) and running one (``host --coordinator``)."""

from __future__ import annotations

import time

import click

from hyperhive.cli.base import _Ctx, _emit, json_option, main, pass_ctx
from hyperhive.protocol import (
    HostCredential,
    HostView,
    OpHostsAddReq,
    OpHostsListReq,
    OpHostsRevokeReq,
    OpHostsRotateReq,
)


@main.group()
def hosts() -> None:
    """Agent hosts on other machines: their credentials and links."""


def _show_credential(cred: HostCredential, what: str) -> None:
    click.echo(f"{what} agent host {cred.name}. Its credential (shown once, only a hash is kept):")
    click.echo(cred.credential)
    click.echo(
        "Put it in a file only the host's user can read (chmod 600), then run on that "
        f"machine: hivectl host --coordinator wss://COORDINATOR:PORT --name {cred.name} "
        "--credential-file FILE [--ca-file CA.pem]",
        err=True,
    )


@hosts.command("add")
@click.argument("name")
@pass_ctx
def hosts_add(obj: _Ctx, name: str) -> None:
    """Register agent host NAME and print its credential once."""
    _show_credential(obj.call(OpHostsAddReq(cmd="hosts_add", name=name)), "Added")


@hosts.command("rotate")
@click.argument("name")
@pass_ctx
def hosts_rotate(obj: _Ctx, name: str) -> None:
    """Issue NAME a new credential; the old one is refused from now on (its link is cut)."""
    _show_credential(obj.call(OpHostsRotateReq(cmd="hosts_rotate", name=name)), "Rotated")


@hosts.command("revoke")
@click.argument("name")
@pass_ctx
def hosts_revoke(obj: _Ctx, name: str) -> None:
    """Refuse NAME's credential and cut its live link at once (`rotate` re-admits it)."""
    view = obj.call(OpHostsRevokeReq(cmd="hosts_revoke", name=name))
    click.echo(f"revoked agent host {view.name}; its link is cut")


def _ago(at: float | None, now: float) -> str:
    return "never" if at is None else f"{max(0.0, now - at):.0f}s ago"


@hosts.command("list")
@json_option
@pass_ctx
def hosts_list(obj: _Ctx, as_json: bool) -> None:
    """Every remote agent host: created, last seen, connected, its agents."""
    data = obj.call(OpHostsListReq(cmd="hosts_list"))

    def human(rows: list[HostView]) -> None:
        if not rows:
            click.echo("(no remote agent hosts; `hivectl hosts add NAME` registers one)")
        now = time.time()
        for h in rows:
            state = "revoked" if h.revoked else "connected" if h.connected else "not connected"
            created = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.created_at))
            click.echo(
                f"{h.name:20} {state:14} created {created}  last seen "
                f"{_ago(h.last_seen_at, now):10} agents: {', '.join(h.agents) or '-'}"
            )

    _emit(data, as_json, human)
