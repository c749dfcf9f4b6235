"""hivectl: remote agent hosts: credentials (``hosts``) and running one (``host --coordinator``)."""

from __future__ import annotations

import time

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.errors import InvalidRequest
from hyperhive.netlink.expiry import parse_expires, when
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
    if cred.expires_at is not None:
        click.echo(
            f"It expires at {when(cred.expires_at)} (`hivectl hosts rotate {cred.name} "
            "--expires ...` issues the next one).",
            err=True,
        )
    click.echo(
        "Put it in a file only the host's user can read (chmod 600), then run on that "
        f"machine: hivectl host --coordinator wss://COORDINATOR:PORT --name {cred.name} "
        "--credential-file FILE [--ca-file CA.pem]",
        err=True,
    )


_EXPIRES = click.option(
    "--expires",
    metavar="SPAN|DATE",
    help="The credential stops being accepted after this: a span (30d, 12h, 2w) or a UTC "
    "date or time (2027-01-31, 2027-01-31T12:00). Default: never.",
)


def _expires_at(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_expires(text, time.time())
    except InvalidRequest as exc:
        raise click.BadParameter(exc.message, param_hint="--expires") from None


@hosts.command("add")
@click.argument("name")
@_EXPIRES
@json_output(HostCredential)
@pass_ctx
def hosts_add(obj: _Ctx, name: str, expires: str | None, as_json: bool) -> None:
    """Register agent host NAME and print its credential once."""
    req = OpHostsAddReq(cmd="hosts_add", name=name, expires_at=_expires_at(expires))
    emit(obj.call(req), lambda cred: _show_credential(cred, "Added"))


@hosts.command("rotate")
@click.argument("name")
@_EXPIRES
@json_output(HostCredential)
@pass_ctx
def hosts_rotate(obj: _Ctx, name: str, expires: str | None, as_json: bool) -> None:
    """Issue NAME a new credential; the old one is refused from now on (its link is cut).
    Without --expires the new one never expires."""
    req = OpHostsRotateReq(cmd="hosts_rotate", name=name, expires_at=_expires_at(expires))
    emit(obj.call(req), lambda cred: _show_credential(cred, "Rotated"))


@hosts.command("revoke")
@click.argument("name")
@json_output(HostView)
@pass_ctx
def hosts_revoke(obj: _Ctx, name: str, as_json: bool) -> None:
    """Refuse NAME's credential and cut its live link at once (`rotate` re-admits it)."""
    view = obj.call(OpHostsRevokeReq(cmd="hosts_revoke", name=name))
    emit(view, lambda v: click.echo(f"revoked agent host {v.name}; its link is cut"))


def _ago(at: float | None, now: float) -> str:
    return "never" if at is None else f"{max(0.0, now - at):.0f}s ago"


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 30):.1f}G"


def host_line(h: HostView, now: float) -> str:
    """One host as ``hosts list`` prints it (the Hosts page shows the same fields)."""
    state = h.link if h.remote else f"{h.link} (local)"
    if h.link == "disconnected" and h.lease_expires_at is not None:
        state += f", lease {max(0.0, h.lease_expires_at - now):.0f}s left"
    cap = h.capacity
    if cap is None:
        capacity = "capacity: not reported"
    else:
        slots = (
            "unlimited"
            if cap.claude_slots is None or cap.claude_slots > 1 << 20
            else str(cap.claude_slots)
        )
        capacity = (
            f"slots {cap.slots_in_use}/{slots}, memory {_size(cap.mem_available)} free of "
            f"{_size(cap.mem_total)}"
        )
    lost = f"  lost: {', '.join(h.lost_agents)}" if h.lost_agents else ""
    return (
        f"{h.name:20} {state:28} heartbeat {_ago(h.last_heartbeat_at, now):10} epoch "
        f"{h.epoch:<4} turns {h.running_turns:<3} {capacity}  agents: "
        f"{', '.join(h.agents) or '-'}{lost}{_credential(h, now)}"
    )


def _credential(h: HostView, now: float) -> str:
    at = h.credential_expires_at
    if at is None:
        return ""
    return f"  credential {'expired' if at <= now else 'expires'} {when(at)}"


@hosts.command("list")
@json_output(list[HostView])
@pass_ctx
def hosts_list(obj: _Ctx, as_json: bool) -> None:
    """Every agent host: link and lease, last heartbeat, agents, running turns, capacity."""
    data = obj.call(OpHostsListReq(cmd="hosts_list"))

    def human(rows: list[HostView]) -> None:
        if not rows:
            click.echo(
                "(no agent hosts; `hivectl up` runs one, `hivectl hosts add NAME` "
                "registers a remote one)"
            )
        now = time.time()
        for h in rows:
            click.echo(host_line(h, now))

    emit(data, human)
