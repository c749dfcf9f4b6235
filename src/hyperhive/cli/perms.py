"""hivectl perms: an agent's tool groups and capabilities, and changing them."""

from __future__ import annotations

import click

from hyperhive.cli.base import _Ctx, agent_argument, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.cli.shapes import PermsProposed
from hyperhive.protocol import AgentConfigView, OpConfigReq, OpPermsSetReq, OpResolveReq

__all__ = ["perms"]


@main.group()
def perms() -> None:
    """Tool groups and capabilities of an agent."""


@perms.command("show")
@agent_argument()
@json_output(AgentConfigView)
@pass_ctx
def perms_show(obj: _Ctx, name: str, as_json: bool) -> None:
    """NAME's groups, capabilities and the exact --tools / --allowedTools it gets."""
    data = obj.call(OpConfigReq(cmd="agent_config", agent=name))

    def human(d: AgentConfigView) -> None:
        click.echo(f"groups:         {','.join(d.tool_groups)}")
        click.echo(f"capabilities:   {','.join(d.capabilities) or '-'}")
        click.echo(f"--tools         {d.tools_arg}")
        click.echo(f"--allowedTools  {d.allowed_tools_arg}")

    emit(data, human)


@perms.command("set")
@agent_argument()
@click.option("--groups", required=True, help="Comma-separated tool groups.")
@click.option("--caps", default="", help="Comma-separated capabilities.")
@click.option("--apply", "apply_now", is_flag=True, help="Approve the change at once.")
@json_output(PermsProposed)
@pass_ctx
def perms_set(obj: _Ctx, name: str, groups: str, caps: str, apply_now: bool, as_json: bool) -> None:
    """Propose new groups/capabilities for NAME (an approval; --apply approves it)."""
    result = obj.call(
        OpPermsSetReq(
            cmd="perms_set",
            agent=name,
            tool_groups=groups.split(","),
            capabilities=[c for c in caps.split(",") if c],
        )
    )
    approved = None
    if apply_now:
        approved = obj.call(OpResolveReq(cmd="approve", approval_id=result.approval_id))
    proposed = PermsProposed(
        approval_id=result.approval_id, commit=result.commit, approved=approved
    )

    def human(p: PermsProposed) -> None:
        click.echo(f"approval #{p.approval_id} created (proposed commit {(p.commit or '')[:12]})")
        if p.approved is not None:
            click.echo(f"approval #{p.approval_id} {p.approved.state}")

    emit(proposed, human)
