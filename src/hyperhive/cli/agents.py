"""hivectl: Agents: list, tree, show, spawn, set-parent, lifecycle, logs, compact, permissions."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from hyperhive.cli.base import _Ctx, _emit, _jsonable, json_option, main, pass_ctx
from hyperhive.config import AgentConfig, load_agent_config
from hyperhive.credentials import LOGIN_REMEDY
from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.view import AgentForgeView
from hyperhive.protocol import (
    MOVE_TIMEOUT,
    AgentConfigView,
    AgentView,
    MatrixAccountView,
    OpAgentForgeReq,
    OpAgentMoveReq,
    OpAgentSnapshotReq,
    OpAgentsReq,
    OpCompactReq,
    OpConfigReq,
    OpLastSnapshotReq,
    OpLifecycleReq,
    OpLogsReq,
    OpPermsSetReq,
    OpResolveReq,
    OpSetParentReq,
    OpSpawnReq,
)

# ---- agents -------------------------------------------------------------------


def _turn_shown(a: AgentView) -> str:
    """The turn column: a held agent says why before what its harness is doing."""
    if a.lost_on and not a.running:
        return f"lost ({a.lost_on})"
    if a.launch_problem:
        return "cannot run claude"
    if a.needs_login:
        return "needs login"
    if a.over_budget:
        return "over budget"
    return a.turn_state


@main.group()
def agents() -> None:
    """List, spawn and arrange agents."""


@agents.command("list")
@json_option
@pass_ctx
def agents_list(obj: _Ctx, as_json: bool) -> None:
    """Every agent with parent, running state and status."""
    data = obj.call(OpAgentsReq(cmd="agents"))

    def human(rows: list[AgentView]) -> None:
        for a in rows:
            state = "running" if a.running else "lost" if a.lost_on else "stopped"
            turn = _turn_shown(a)
            click.echo(
                f"{a.name:20} parent={a.parent or '-':12} {state:8} {turn:11} {a.status_text}"
            )
        if any(a.needs_login for a in rows):
            click.echo(f"needs login: {LOGIN_REMEDY}")
        for a in rows:
            if a.launch_problem:
                click.echo(f"{a.name} cannot run claude: {a.launch_problem}")
        for a in rows:
            if a.over_budget:
                click.echo(
                    f"{a.name} is over budget ({a.over_budget}): its mail waits; "
                    "raise the limit with `hivectl budget set`"
                )

    _emit(data, as_json, human)


@agents.command("show")
@click.argument("name")
@json_option
@pass_ctx
def agents_show(obj: _Ctx, name: str, as_json: bool) -> None:
    """One agent: parent, state, status, tool groups, what is wrong with its config, and its
    forge user and repositories."""
    rows = obj.call(OpAgentsReq(cmd="agents"))
    row = next((r for r in rows if r.name == name), None)
    if row is None:
        raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")
    config = None if row.broken else obj.call(OpConfigReq(cmd="agent_config", agent=name))
    forge = obj.call(OpAgentForgeReq(cmd="agent_forge", agent=name))
    matrix = _host_state(obj, name).get("matrix") if row.running else None
    snapshot = obj.call(OpLastSnapshotReq(cmd="agent_last_snapshot", agent=name))
    # The agents-list row plus its config, forge and Matrix: one JSON object for --json.
    data = {
        **row.model_dump(mode="json"),
        "config": _jsonable(config),
        "forge": _jsonable(forge),
        "matrix": matrix,
        "snapshot": snapshot.model_dump(mode="json"),
    }

    def human(_: object) -> None:
        state = "running" if row.running else "stopped"
        click.echo(f"{row.name}  parent={row.parent or '-'}  {state}  {row.turn_state}")
        if row.status_text:
            click.echo(f"status: {row.status_text}")
        if row.broken:
            click.echo(f"broken config: {row.broken}")
        if row.crashed:
            click.echo(f"crashed: {row.crashed}")
        if row.over_budget:
            click.echo(f"over budget: {row.over_budget} (hivectl budget set {row.name} …)")
        for warning in row.config_warnings:
            click.echo(f"config warning: {warning}")
        if config is not None:
            click.echo("tool groups: " + ", ".join(config.tool_groups))
        for line in AgentForgeView.model_validate(forge.model_dump()).lines():
            click.echo(line)
        if snapshot.taken_at is None:
            click.echo("snapshot: none kept")
        else:
            age = max(0.0, time.time() - snapshot.taken_at)
            click.echo(
                f"snapshot: {snapshot.size:,} bytes ({snapshot.raw_bytes:,} uncompressed, "
                f"{snapshot.files} files) from {snapshot.host}, {age:.0f}s ago"
            )
        if isinstance(matrix, dict):
            view = MatrixAccountView.model_validate(matrix)
            click.echo(f"matrix: {view.user_id} on {view.homeserver}")
            for invite in view.pending_invites:
                click.echo(f"  pending invitation: {invite}")
            if view.problem:
                click.echo(f"  problem: {view.problem}")

    _emit(data, as_json, human)


def _host_state(obj: _Ctx, name: str) -> dict[str, Any]:
    """The agent host's view of ``name``, through the coordinator (empty if its host does
    not answer: the rest still shows)."""
    try:
        return obj.call(OpAgentSnapshotReq(cmd="agent_snapshot", agent=name)).model_dump()
    except HiveError:
        return {}


@agents.command("tree")
@json_option
@pass_ctx
def agents_tree(obj: _Ctx, as_json: bool) -> None:
    """The agent tree, roots first."""
    data = obj.call(OpAgentsReq(cmd="agents"))
    rows = {a.name: a for a in data}

    def human(_: object) -> None:
        def walk(name: str, depth: int) -> None:
            a = rows[name]
            mark = "●" if a.running else "✕" if a.lost_on else "○"
            turn = _turn_shown(a)
            click.echo(f"{'  ' * depth}{mark} {name}  {turn}  {a.status_text}")
            for child in sorted(n for n, r in rows.items() if r.parent == name):
                walk(child, depth + 1)

        for root in sorted(n for n, r in rows.items() if r.parent not in rows):
            walk(root, 0)

    _emit(data, as_json, human)


@agents.command("spawn")
@click.argument("name")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, exists=True),
    help="An agent.toml to apply (default: the default agent config).",
)
@click.option("--parent", default=None, help="Place the new agent under this agent.")
@click.option(
    "--host",
    default=None,
    help="Pin it to this agent host (it waits for that host rather than go elsewhere).",
)
@click.option(
    "--timeout", default=30.0, show_default=True, help="Seconds to wait for the agent to come up."
)
@pass_ctx
def agents_spawn(
    obj: _Ctx,
    name: str,
    config_file: Path | None,
    parent: str | None,
    host: str | None,
    timeout: float,
) -> None:
    """Create agent NAME (the operator's own spawn: no approval needed)."""
    config = load_agent_config(config_file) if config_file else AgentConfig()
    result = obj.call(OpSpawnReq(cmd="spawn", name=name, config=config, parent=parent, host=host))
    if not result.running:
        where = f"agent host {host}" if host else "an agent host"
        click.echo(f"spawned {name} (starts when {where} connects)")
        return
    click.echo(f"{name} placed on an agent host; waiting for it to come up…", err=True)
    if wait_until_active(obj, name, timeout):
        click.echo(f"spawned {name} (running)")
    else:
        click.echo(f"spawned {name} (running; not confirmed by its host within {timeout:.0f}s)")


@agents.command("move")
@click.argument("name")
@click.option("--to", "to", required=True, help="The agent host to move it to.")
@pass_ctx
def agents_move(obj: _Ctx, name: str, to: str) -> None:
    """Move agent NAME to agent host TO: its turn finishes, its inbox waits, its state/,
    home/ (claude's session), work/ and config go over the link, and it runs on TO."""
    click.echo(f"moving {name} to {to} (its current turn finishes first)…", err=True)
    # As long as the coordinator gives the move (a turn to finish, then the copy), not
    # the usual 30 s: hanging up would undo a move that is only slow.
    moved = obj.call(OpAgentMoveReq(cmd="agent_move", agent=name, to=to), MOVE_TIMEOUT + 30)
    if moved.source is None:
        how = "it had never run, nothing to copy"
    elif moved.shared_disk:
        how = f"from {moved.source}; one disk for both, nothing copied"
    else:
        how = f"from {moved.source}, {moved.copied_bytes} bytes copied"
    state = "running" if moved.running else "not running"
    click.echo(f"moved {name} to {moved.target} ({how}); {state}")


def wait_until_active(obj: _Ctx, name: str, timeout: float) -> bool:
    """Until the agent's host answers for it (its harness is up), or ``timeout``.

    Asked of the coordinator, which asks the host over its link: the host may be
    another machine.
    """
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _host_state(obj, name):
            return True
        time.sleep(0.2)
    return False


@agents.command("set-parent")
@click.argument("child")
@click.option("--parent", default=None, help="The new parent.")
@click.option("--root", is_flag=True, help="Promote CHILD to a root agent.")
@pass_ctx
def agents_set_parent(obj: _Ctx, child: str, parent: str | None, root: bool) -> None:
    """Move CHILD under --parent P, or to the top with --root (exactly one)."""
    if (parent is None) == (not root):
        raise click.UsageError("give exactly one of --parent P or --root")
    result = obj.call(OpSetParentReq(cmd="set_parent", child=child, new_parent=parent))
    where = f"under {parent}" if parent else "at the root"
    click.echo(f"{child} is now {where}" if result.changed else f"{child} was already {where}")


def _lifecycle_command(verb: str, summary: str) -> None:
    @agents.command(verb, help=summary)
    @click.argument("name")
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation (destroy).")
    @pass_ctx
    def command(obj: _Ctx, name: str, yes: bool) -> None:
        if verb == "destroy" and not yes:
            click.confirm(f"destroy {name}? Its data moves to agents/.trash", abort=True)
        request = OpLifecycleReq.model_validate({"cmd": f"agent_{verb}", "agent": name})
        click.echo(json.dumps(_jsonable(obj.call(request))))


for _verb, _summary in (
    ("kill", "Stop agent NAME; it stays stopped until started."),
    ("start", "Start agent NAME."),
    ("restart", "Restart agent NAME (unacked mail is redelivered)."),
    ("update", "Rebuild agent NAME from its applied config."),
    ("destroy", "Remove agent NAME for good (data moves to agents/.trash)."),
):
    _lifecycle_command(_verb, _summary)


@main.command()
@click.argument("name")
@click.option("-n", "--lines", default=100, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
@json_option
@pass_ctx
def logs(obj: _Ctx, name: str, lines: int, follow: bool, as_json: bool) -> None:
    """Tail agent NAME's log (its claude turns, bash tasks, subagents), read from the
    agent host that runs it; -f keeps following it there."""
    result = obj.call(OpLogsReq(cmd="logs", agent=name, lines=lines))
    if as_json:
        click.echo(json.dumps(_jsonable(result), indent=2))
        return
    for line in result.lines:
        click.echo(line)
    if follow:
        _follow(obj, name, result.cursor)


# A follow step waits this long on the host for a new line before asking again.
FOLLOW_WAIT_S = 10.0


def _follow(obj: _Ctx, name: str, cursor: str | None) -> None:
    """Long-poll the agent's host through the coordinator: each answer carries the cursor
    for the next, so nothing is buffered for a slow reader and a rotation loses no line."""
    while True:
        try:
            got = obj.call(
                OpLogsReq(cmd="logs", agent=name, lines=1, after=cursor or "", wait=FOLLOW_WAIT_S)
            )
        except HiveError as exc:
            raise click.ClickException(f"stopped following {name}'s log: {exc.message}") from exc
        for line in got.lines:
            click.echo(line)
        cursor = got.cursor


@main.command()
@click.argument("name")
@pass_ctx
def compact(obj: _Ctx, name: str) -> None:
    """Queue a compaction of NAME's context (at any usage; runs after its turn)."""
    click.echo(json.dumps(_jsonable(obj.call(OpCompactReq(cmd="compact", agent=name)))))


# ---- permissions -----------------------------------------------------------------


@main.group()
def perms() -> None:
    """Tool groups and capabilities of an agent."""


@perms.command("show")
@click.argument("name")
@json_option
@pass_ctx
def perms_show(obj: _Ctx, name: str, as_json: bool) -> None:
    """NAME's groups, capabilities and the exact --tools / --allowedTools it gets."""
    data = obj.call(OpConfigReq(cmd="agent_config", agent=name))

    def human(d: AgentConfigView) -> None:
        click.echo(f"groups:         {','.join(d.tool_groups)}")
        click.echo(f"capabilities:   {','.join(d.capabilities) or '-'}")
        click.echo(f"--tools         {d.tools_arg}")
        click.echo(f"--allowedTools  {d.allowed_tools_arg}")

    _emit(data, as_json, human)


@perms.command("set")
@click.argument("name")
@click.option("--groups", required=True, help="Comma-separated tool groups.")
@click.option("--caps", default="", help="Comma-separated capabilities.")
@click.option("--apply", "apply_now", is_flag=True, help="Approve the change at once.")
@pass_ctx
def perms_set(obj: _Ctx, name: str, groups: str, caps: str, apply_now: bool) -> None:
    """Propose new groups/capabilities for NAME (an approval; --apply approves it)."""
    result = obj.call(
        OpPermsSetReq(
            cmd="perms_set",
            agent=name,
            tool_groups=groups.split(","),
            capabilities=[c for c in caps.split(",") if c],
        )
    )
    click.echo(
        f"approval #{result.approval_id} created (proposed commit {(result.commit or '')[:12]})"
    )
    if apply_now:
        outcome = obj.call(OpResolveReq(cmd="approve", approval_id=result.approval_id))
        click.echo(json.dumps(_jsonable(outcome)))
