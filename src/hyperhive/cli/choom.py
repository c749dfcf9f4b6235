"""hivectl choom: an interactive claude inside an agent's sandbox, for the operator.

Spec 002's carve-out: the session passes neither ``--tools`` nor
``--allowedTools``, so claude's own synchronous ``Bash`` exists (inline and
human-approved) — an operator (root) action inside the existing trust
boundary. It goes through :class:`~hyperhive.agent.sandbox.AgentSandbox`,
so it lands wherever the agent's processes land (bubblewrap, its user, its
HOME and work dir).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.config import AgentConfig, load_hive_config
from hyperhive.errors import InvalidRequest, Unavailable
from hyperhive.protocol import OpConfigReq, OpTopologyReq

__all__ = ["choom", "choom_argv"]

_FORBIDDEN = ("--tools", "--allowedTools", "--allowed-tools")


def choom_argv(claude_bin: str, extra: tuple[str, ...]) -> list[str]:
    """The claude argv for a choom session: never a tool restriction."""
    for arg in extra:
        if arg.split("=", 1)[0] in _FORBIDDEN:
            raise InvalidRequest(
                f"choom never restricts tools ({arg.split('=', 1)[0]}); that is the harness's job"
            )
    return [claude_bin, *extra]


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("claude_args", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def choom(obj: _Ctx, name: str, claude_args: tuple[str, ...]) -> None:
    """Open an interactive claude in agent NAME's sandbox (its HOME, work dir, user).

    No --tools and no --allowedTools: the session has claude's built-in Bash.
    Arguments after NAME go to claude (e.g. `hivectl choom alice -- --resume`).
    """
    from hyperhive.agent.host import resolve_claude_bin
    from hyperhive.agent.runtime import AgentRuntime

    data = obj.call(OpConfigReq(cmd="agent_config", agent=name))
    config = AgentConfig.model_validate(data.config)
    parent = obj.call(OpTopologyReq(cmd="topology")).get(name)
    hive = load_hive_config(obj.home)
    runtime = AgentRuntime(
        name=name,
        config=config,
        parent=parent,
        paths=obj.paths,
        hive=hive,
    )
    runtime.prepare_dirs()
    sandbox = runtime.sandbox()
    argv = sandbox.command(choom_argv(resolve_claude_bin(hive.claude_bin), claude_args))
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
