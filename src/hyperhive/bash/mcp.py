"""The ``bash`` MCP surface: ``run``, ``status``, ``kill`` (spec 001).

Declared in :mod:`hyperhive.tools.bash`; the handlers here are bound by
name. Each tool sits behind the ``execution`` tool group — a real, server-side
gate — and the whole surface behind the agent's ``[mcp_servers.bash]``
entry (disabled or replaced there = refused here too). The tools call the
agent's own :class:`~hyperhive.bash.tasks.TaskManager`, which the host runs
while the agent is active, and answer with short text the model reads.
"""

from __future__ import annotations

from collections.abc import Callable

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.mcp_surface import Handler, Surface, SurfaceAgent, builtin_gate
from hyperhive.bash.records import TaskReport, TaskStarted
from hyperhive.permissions import BASH_SERVER
from hyperhive.tools.bash import TOOLS, KillArgs, RunArgs, StatusArgs

__all__ = ["HANDLERS", "bash_surface", "render_report", "render_started"]


def _section(label: str, text: str, path: object) -> str:
    body = text.rstrip("\n") if text else "(empty)"
    return f"--- {label} (last 4 KiB; all of it: Read({path})) ---\n{body}"


def render_report(report: TaskReport) -> str:
    """A task's status as the model reads it: one head line, then both output tails."""
    head = f"task {report.id}: {report.status}"
    if report.exit_code is not None:
        head += f", exit_code {report.exit_code}"
    if report.duration_secs is not None:
        head += f", ran {report.duration_secs:.1f}s"
    lines = [head, f"cmd: {report.cmd}"]
    if report.error:
        lines.append(report.error)
    if not report.terminal:
        lines.append("still going: its end arrives as a todo, or poll status(id)")
    lines += [
        _section("stdout", report.stdout_tail, report.stdout_path),
        _section("stderr", report.stderr_tail, report.stderr_path),
    ]
    return "\n".join(lines)


def render_started(started: TaskStarted) -> str:
    return (
        f"task started: id={started.id}\n"
        "It runs in the background; its end arrives as a todo (get_loose_ends), "
        f"or poll status({started.id!r}). Output: Read({started.stdout_path}), "
        f"Read({started.stderr_path})"
    )


async def _run(agent: ActiveAgent, a: RunArgs) -> str:
    got = await agent.bash_tasks.run(a.cmd, a.timeout_secs, a.wait_seconds, a.name)
    return render_started(got) if isinstance(got, TaskStarted) else render_report(got)


async def _status(agent: ActiveAgent, a: StatusArgs) -> str:
    return render_report(await agent.bash_tasks.status(a.id, a.wait_seconds))


async def _kill(agent: ActiveAgent, a: KillArgs) -> str:
    outcome = await agent.bash_tasks.kill(a.id, a.force)
    if outcome == "already_finished":
        return f"task {a.id} had already finished; status({a.id!r}) has its result"
    if outcome == "cancelled":
        return f"task {a.id} was still pending: cancelled before it started (killed)"
    signal = "SIGKILL" if a.force else "SIGINT"
    return f"sent {signal} to task {a.id}'s process group; its end arrives as a todo" + (
        "" if a.force else " (if it does not stop, kill again with force=true)"
    )


HANDLERS: dict[str, Handler] = {"run": _run, "status": _status, "kill": _kill}


def bash_surface(lookup: Callable[[str], SurfaceAgent | None]) -> Surface:
    """The host's ``bash`` surface (``/agents/<X>/mcp/bash``)."""
    return Surface(BASH_SERVER, TOOLS, HANDLERS, lookup, gate=builtin_gate(BASH_SERVER))
