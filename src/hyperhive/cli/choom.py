"""hivectl choom: an interactive claude inside an agent's sandbox, for the operator.

Spec 002's carve-out: the session passes neither ``--tools`` nor
``--allowedTools``, so claude's own synchronous ``Bash`` exists (inline and
human-approved) — an operator (root) action inside the existing trust
boundary. It goes through :class:`~hyperhive.agent.sandbox.AgentSandbox`,
so it lands wherever the agent's processes land (bubblewrap, its user, its
HOME and work dir).

``Task`` and ``TodoWrite`` are denied by claude's managed settings, bound
read-only over ``/etc/claude-code`` in the session's sandbox
(:mod:`hyperhive.agent.managed`): no setting of the session can allow them.
Unsandboxed (``runtime = "unsandboxed"``, or no mount point and not root),
there is no sandbox to bind into: the same denials go in ``--settings``, the
layer below managed, which a session's own settings still cannot loosen (a
deny wins over every allow), and choom says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.config import AgentConfig, load_hive_config
from hyperhive.errors import InvalidRequest, Unavailable
from hyperhive.protocol import OpAgentsReq, OpConfigReq, OpHostsListReq, OpTopologyReq

if TYPE_CHECKING:
    from hyperhive.agent.sandbox import AgentSandbox

__all__ = ["choom", "choom_argv"]

_FORBIDDEN = ("--tools", "--allowedTools", "--allowed-tools")


def choom_argv(claude_bin: str, extra: tuple[str, ...], settings: str | None = None) -> list[str]:
    """The claude argv for a choom session: never a tool restriction; ``settings``
    (the denials, when no managed settings can be bound) as ``--settings``."""
    for arg in extra:
        if arg.split("=", 1)[0] in _FORBIDDEN:
            raise InvalidRequest(
                f"choom never restricts tools ({arg.split('=', 1)[0]}); that is the harness's job"
            )
    flags = ["--settings", settings] if settings is not None else []
    return [claude_bin, *flags, *extra]


def _with_managed_settings(sandbox: AgentSandbox, target: Path) -> AgentSandbox | None:
    """``sandbox`` with the session's managed settings bound over /etc/claude-code, or
    None when it cannot be (no isolation, or no mount point and not root)."""
    from hyperhive.agent.managed import MANAGED_DIR, prepare_managed_dir

    iso = sandbox.isolation
    if iso is None or not prepare_managed_dir(target):
        return None
    # The agent's user reads it through run/choom/<agent> (traverse only).
    for parent in (target.parent.parent, target.parent):
        parent.chmod(0o711)
    return replace(sandbox, isolation=replace(iso, overlays=((target, MANAGED_DIR),)))


def _require_files_here(obj: _Ctx, name: str) -> None:
    """Refuse an agent whose HOME and work dir are on another machine's agent host:
    a session here would start in empty directories of this disk."""
    if obj.paths.agent_home(name).exists():
        # Here: a host on this machine, or one sharing the hive home's disk. (A mirror of
        # its config repo, kept for an ancestor here, is no home.)
        return
    row = next((a for a in obj.call(OpAgentsReq(cmd="agents")) if a.name == name), None)
    host = (row.assigned_host or row.host) if row is not None else None
    if host is None:
        return
    remote = {h.name: h.remote for h in obj.call(OpHostsListReq(cmd="hosts_list"))}
    if remote.get(host, False):
        raise Unavailable(
            f"{name}'s session and work dir are on agent host {host}'s disk, not this "
            f"machine's; choom opens claude where they are: move it to a host here first "
            f"(`hivectl agents move {name} --to HOST`)"
        )


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("claude_args", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def choom(obj: _Ctx, name: str, claude_args: tuple[str, ...]) -> None:
    """Open an interactive claude in agent NAME's sandbox (its HOME, work dir, user).

    No --tools and no --allowedTools: the session has claude's built-in Bash.
    Arguments after NAME go to claude (e.g. `hivectl choom alice -- --resume`).
    """
    from hyperhive.agent.enclosure import Enclosure
    from hyperhive.agent.host import resolve_claude_bin
    from hyperhive.agent.managed import CHOOM_DENY, choom_policy
    from hyperhive.agent.spec import AgentSpec

    data = obj.call(OpConfigReq(cmd="agent_config", agent=name))
    _require_files_here(obj, name)
    config = AgentConfig.model_validate(data.config)
    parent = obj.call(OpTopologyReq(cmd="topology")).get(name)
    hive = load_hive_config(obj.home)
    spec = AgentSpec(name=name, config=config, paths=obj.paths, hive=hive, parent=parent)
    sandbox = Enclosure.prepare(spec).sandbox(spec)
    managed = _with_managed_settings(sandbox, obj.paths.run / "choom" / name / "claude-code")
    settings = json.dumps(choom_policy(None)) if managed is None else None
    claude = resolve_claude_bin(hive.claude_bin)
    argv = (managed or sandbox).command(choom_argv(claude, claude_args, settings))
    if managed is None:
        click.echo(
            f"choom: no sandbox to bind managed settings into; denying {', '.join(CHOOM_DENY)} "
            "with --settings instead",
            err=True,
        )
    sandbox = managed or sandbox
    env = sandbox.environment()
    # Isolated, bubblewrap changes into the work dir itself; plain, we do.
    isolated = getattr(sandbox, "isolation", None) is not None
    where: Path = Path("/") if isolated else sandbox.work
    click.echo(
        f"choom: {name} in {sandbox.work} (HOME={sandbox.home}); exit claude to leave", err=True
    )
    os.chdir(where)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        raise Unavailable(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
