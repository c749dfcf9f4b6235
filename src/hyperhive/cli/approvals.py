"""hivectl: Approvals: list, show, approve, deny."""

from __future__ import annotations

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.protocol import (
    ApprovalDetail,
    ApprovalOutcome,
    ApprovalView,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpResolveReq,
)

# ---- approvals -------------------------------------------------------------------


@main.group()
def approvals() -> None:
    """Config changes waiting for the operator."""


@approvals.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include resolved ones.")
@json_output(list[ApprovalView])
@pass_ctx
def approvals_list(obj: _Ctx, show_all: bool, as_json: bool) -> None:
    """Pending approvals (id, kind, requester, subject, state)."""
    data = obj.call(OpApprovalsReq(cmd="approvals", pending_only=not show_all))

    def human(rows: list[ApprovalView]) -> None:
        if not rows:
            click.echo("(no pending approvals)")
        for a in rows:
            click.echo(f"#{a.id} [{a.state}] {a.kind} {a.subject} (by {a.requester})")

    emit(data, human)


@approvals.command("show")
@click.argument("approval_id", type=int)
@json_output(ApprovalDetail)
@pass_ctx
def approvals_show(obj: _Ctx, approval_id: int, as_json: bool) -> None:
    """One approval with the proposed config diff."""
    data = obj.call(OpApprovalShowReq(cmd="approval_show", approval_id=approval_id))

    def human(a: ApprovalDetail) -> None:
        click.echo(f"#{a.id} [{a.state}] {a.kind} {a.subject} (by {a.requester})")
        if a.diff:
            click.echo(a.diff)
        effective = a.effective
        if effective:
            click.echo(f"approving gives {effective.agent}:")
            click.echo(f"  parent          {effective.parent or '(none: a root agent)'}")
            click.echo(f"  tool groups     {', '.join(effective.tool_groups)}")
            click.echo(f"  capabilities    {', '.join(effective.capabilities) or '(none)'}")
            click.echo(f"  MCP servers     {', '.join(effective.mcp_servers)}")
            click.echo(f"  --tools         {effective.tools_arg}")
            click.echo(f"  --allowedTools  {effective.allowed_tools_arg}")
            click.echo("  agent.toml, defaults filled in:")
            for line in effective.toml.splitlines():
                click.echo(f"    {line}")

    emit(data, human)


@approvals.command("approve")
@click.argument("approval_id", type=int)
@click.option(
    "--host",
    metavar="HOST",
    help="A spawn's agent host: the new agent is pinned there (default: placed "
    "automatically). `hivectl hosts list` shows the hosts.",
)
@json_output(ApprovalOutcome)
@pass_ctx
def approvals_approve(obj: _Ctx, approval_id: int, host: str | None, as_json: bool) -> None:
    """Approve and carry out APPROVAL_ID (apply, spawn, rebuild)."""
    result = obj.call(OpResolveReq(cmd="approve", approval_id=approval_id, host=host))
    emit(result, _outcome)


@approvals.command("deny")
@click.argument("approval_id", type=int)
@click.option("--reason", required=True, help="Why (the asker reads it).")
@json_output(ApprovalOutcome)
@pass_ctx
def approvals_deny(obj: _Ctx, approval_id: int, reason: str, as_json: bool) -> None:
    """Deny APPROVAL_ID with a reason."""
    result = obj.call(OpResolveReq(cmd="deny", approval_id=approval_id, reason=reason))
    emit(result, _outcome)


def _outcome(o: ApprovalOutcome) -> None:
    commit = f" (meta commit {o.meta_commit[:12]})" if o.meta_commit else ""
    click.echo(f"approval #{o.approval_id} {o.state}{commit}")
    if o.note:
        click.echo(o.note)
