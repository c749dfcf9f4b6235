"""hivectl: Agents: list, tree, show, spawn, set-parent, lifecycle, logs, compact."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from hyperhive.cli.base import _Ctx, agent_argument, complete_agents, main, pass_ctx
from hyperhive.cli.follow import follow
from hyperhive.cli.output import StatusLine, emit, emit_line, json_mode, json_output
from hyperhive.cli.shapes import AgentDetail, SpawnOutcome
from hyperhive.config import AgentConfig, load_agent_config
from hyperhive.credentials import LOGIN_REMEDY
from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.view import AgentForgeView
from hyperhive.protocol import (
    AgentDestroyed,
    AgentRunning,
    AgentStopped,
    AgentView,
    CompactQueued,
    LifecycleResult,
    LogTail,
    MatrixAccountView,
    OpAgentForgeReq,
    OpAgentSnapshotReq,
    OpAgentsReq,
    OpCompactReq,
    OpConfigReq,
    OpLifecycleReq,
    OpLogsReq,
    OpSetParentReq,
    OpSpawnReq,
    ParentSet,
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
@json_output(list[AgentView])
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

    emit(data, human)


@agents.command("show")
@agent_argument()
@json_output(AgentDetail)
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
    data = AgentDetail.model_validate(
        {**row.model_dump(), "config": config, "forge": forge, "matrix": matrix}
    )

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
        view: MatrixAccountView | None = data.matrix
        if view is not None:
            click.echo(f"matrix: {view.user_id} on {view.homeserver}")
            for invite in view.pending_invites:
                click.echo(f"  pending invitation: {invite}")
            if view.problem:
                click.echo(f"  problem: {view.problem}")

    emit(data, human)


def _host_state(obj: _Ctx, name: str) -> dict[str, Any]:
    """The agent host's view of ``name``, through the coordinator (empty if its host does
    not answer: the rest still shows)."""
    try:
        return obj.call(OpAgentSnapshotReq(cmd="agent_snapshot", agent=name)).model_dump()
    except HiveError:
        return {}


@agents.command("tree")
@json_output(list[AgentView])
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

    emit(data, human)


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
@json_output(SpawnOutcome)
@pass_ctx
def agents_spawn(
    obj: _Ctx,
    name: str,
    config_file: Path | None,
    parent: str | None,
    host: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Create agent NAME (the operator's own spawn: no approval needed)."""
    config = load_agent_config(config_file) if config_file else AgentConfig()
    result = obj.call(OpSpawnReq(cmd="spawn", name=name, config=config, parent=parent, host=host))
    running = result.running and wait_until_active(obj, name, timeout)
    outcome = SpawnOutcome(
        name=name, parent=result.parent, host=host, placed=result.running, running=running
    )

    def human(o: SpawnOutcome) -> None:
        if not o.placed:
            where = f"agent host {host}" if host else "an agent host"
            click.echo(f"spawned {name} (starts when {where} connects)")
        elif o.running:
            click.echo(f"spawned {name} (running)")
        else:
            click.echo(f"spawned {name} (running; not confirmed by its host within {timeout:.0f}s)")

    emit(outcome, human)


def wait_until_active(obj: _Ctx, name: str, timeout: float) -> bool:
    """Until the agent's host answers for it (its harness is up), or ``timeout``.

    Asked of the coordinator, which asks the host over its link: the host may be
    another machine.
    """
    status = StatusLine()
    began = time.monotonic()
    try:
        while (waited := time.monotonic() - began) < timeout:
            status.show(
                f"{name} placed on an agent host; waiting for it to come up ({waited:.0f}s)"
            )
            if _host_state(obj, name):
                return True
            time.sleep(0.2)
        return False
    finally:
        status.clear()


@agents.command("set-parent")
@agent_argument("child")
@click.option("--parent", default=None, help="The new parent.", shell_complete=complete_agents)
@click.option("--root", is_flag=True, help="Promote CHILD to a root agent.")
@json_output(ParentSet)
@pass_ctx
def agents_set_parent(obj: _Ctx, child: str, parent: str | None, root: bool, as_json: bool) -> None:
    """Move CHILD under --parent P, or to the top with --root (exactly one)."""
    if (parent is None) == (not root):
        raise click.UsageError("give exactly one of --parent P or --root")
    result = obj.call(OpSetParentReq(cmd="set_parent", child=child, new_parent=parent))
    where = f"under {parent}" if parent else "at the root"
    emit(
        result,
        lambda r: click.echo(
            f"{child} is now {where}" if r.changed else f"{child} was already {where}"
        ),
    )


def _lifecycle_line(r: LifecycleResult) -> str:
    if isinstance(r, AgentStopped):
        return f"stopped {r.agent}" if r.stopped else f"{r.agent} was not running; it stays down"
    if isinstance(r, AgentRunning):
        if r.running:
            return f"{r.agent} is running"
        return f"{r.agent} starts when an agent host has room for it (not running yet)"
    where = f"; its data is in {r.data_moved_to}" if r.data_moved_to else ""
    later = f" (its files go when {r.trash_waits_for} is back)" if r.trash_waits_for else ""
    return f"destroyed {r.agent}{where}{later}"


def _lifecycle_command(verb: str, summary: str, shape: type[LifecycleResult]) -> None:
    @agents.command(verb, help=summary)
    @agent_argument()
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation (destroy).")
    @json_output(shape)
    @pass_ctx
    def command(obj: _Ctx, name: str, yes: bool, as_json: bool) -> None:
        if verb == "destroy" and not yes:
            click.confirm(f"destroy {name}? Its data moves to agents/.trash", abort=True)
        request = OpLifecycleReq.model_validate({"cmd": f"agent_{verb}", "agent": name})
        emit(obj.call(request), lambda r: click.echo(_lifecycle_line(r)))


for _verb, _summary, _shape in (
    ("kill", "Stop agent NAME; it stays stopped until started.", AgentStopped),
    ("start", "Start agent NAME.", AgentRunning),
    ("restart", "Restart agent NAME (unacked mail is redelivered).", AgentRunning),
    ("update", "Rebuild agent NAME from its applied config.", AgentRunning),
    ("destroy", "Remove agent NAME for good (data moves to agents/.trash).", AgentDestroyed),
):
    _lifecycle_command(_verb, _summary, _shape)


@main.command()
@agent_argument()
@click.option("-n", "--lines", default=100, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C ends).")
@json_output(LogTail)
@pass_ctx
def logs(obj: _Ctx, name: str, lines: int, follow: bool, as_json: bool) -> None:
    """Tail agent NAME's log (its claude turns, bash tasks, subagents), read from the
    agent host that runs it; -f keeps following it there."""
    result = obj.call(OpLogsReq(cmd="logs", agent=name, lines=lines))
    if follow and json_mode():
        emit_line(result)
    else:
        emit(result, _print_lines)
    if follow:
        _follow(obj, name, result.cursor)


def _print_lines(tail: LogTail) -> None:
    for line in tail.lines:
        click.echo(line)


# A follow step waits this long on the host for a new line before asking again.
FOLLOW_WAIT_S = 10.0


def _follow(obj: _Ctx, name: str, cursor: str | None) -> None:
    """Long-poll the agent's host through the coordinator: each answer carries the cursor
    for the next, so nothing is buffered for a slow reader and a rotation loses no line."""

    async def step(cursor: str | None) -> str | None:
        req = OpLogsReq(cmd="logs", agent=name, lines=1, after=cursor or "", wait=FOLLOW_WAIT_S)
        got = await obj.acall(req)
        if got.lines and json_mode():
            emit_line(got)
        else:
            for line in got.lines:
                click.echo(line)
        return got.cursor

    follow(f"{name}'s log", cursor, step)


@main.command()
@agent_argument()
@json_output(CompactQueued)
@pass_ctx
def compact(obj: _Ctx, name: str, as_json: bool) -> None:
    """Queue a compaction of NAME's context (at any usage; runs after its turn)."""

    def human(r: CompactQueued) -> None:
        usage = "" if r.context_usage is None else f" (last turn used {r.context_usage:.0%})"
        click.echo(f"{'queued' if r.queued else 'not queued'}: {r.note}{usage}")

    emit(obj.call(OpCompactReq(cmd="compact", agent=name)), human)
