"""hivectl: Running the hive: serve, up, down, host, status, tools."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import anyio
import click

from hyperhive.agentreach import refuse_unrunnable
from hyperhive.cli.base import (
    _Ctx,
    _setup_logging,
    _until_signalled,
    main,
    pass_ctx,
)
from hyperhive.cli.output import StatusLine, emit, json_output, no_json
from hyperhive.cli.shapes import ToolArgs
from hyperhive.config import AgentConfig, HivePaths, load_hive_config
from hyperhive.effective import turn_tool_args
from hyperhive.errors import ConfigError
from hyperhive.eventloop import UVLOOP
from hyperhive.lifeline import die_with_supervisor
from hyperhive.permissions import Capability, ToolGroup, builtin_tools_arg
from hyperhive.protocol import (
    HiveStatus,
    OpStatusReq,
    WaitingSlot,
)
from hyperhive.telemetry import configure as configure_tracing


@main.command()
@click.option("--no-dashboard", is_flag=True, help="Do not serve the web dashboard.")
@no_json("the coordinator in the foreground until stopped; it logs, it does not answer")
@pass_ctx
def serve(obj: _Ctx, no_dashboard: bool) -> None:
    """Run the coordinator in the foreground (logs to stderr)."""
    from functools import partial

    die_with_supervisor()
    hive = load_hive_config(obj.home)
    refuse_unreachable_home(obj.home, hive.runtime)
    if hive.store:
        # On PostgreSQL a second serve is a standby: it waits for the home and the
        # database's lease instead of being refused (core/standby.py).
        from hyperhive.core.standby import serve_with_lease
        from hyperhive.store.postgres import open_postgres

        _setup_logging()

        async def serve_standby() -> None:
            store = await open_postgres(hive.store or "")  # refused here if unreachable
            await _until_signalled(
                partial(serve_with_lease, obj.paths, hive, store, dashboard=not no_dashboard)
            )

        anyio.run(serve_standby, backend_options=UVLOOP)
        return
    # Imported here, not above: on PostgreSQL they load after the lease (standby.py).
    from hyperhive.core.coordinator import Coordinator
    from hyperhive.homelock import HomeLock

    with HomeLock(obj.paths, "coordinator"):
        _setup_logging()
        stop_tracing = configure_tracing(hive.telemetry, "coordinator")

        async def serve_hive() -> None:
            # Opened in the loop that serves (a PostgreSQL pool belongs to it), and
            # before the task group, so a refused store is one clear error.
            coordinator = await Coordinator.open(obj.paths, hive)
            await _until_signalled(partial(coordinator.run, dashboard=not no_dashboard))

        try:
            anyio.run(serve_hive, backend_options=UVLOOP)
        finally:
            stop_tracing()


@main.command()
@no_json("the hive in the foreground until Ctrl-C or `hivectl down`; its console is for a person")
@pass_ctx
def up(obj: _Ctx) -> None:
    """Start the whole hive: coordinator, agent host, dashboard; supervise until Ctrl-C.

    Ensures the root manager agent exists, prints the dashboard's URL and
    where the logs are, reports each agent as it comes up, and restarts the
    agent host if it dies. On a terminal a progress line says what it waits
    for. Ctrl-C (or `hivectl down` from another terminal) stops agents
    gracefully.
    """
    from hyperhive.supervisor import Supervisor

    hive = load_hive_config(obj.home)
    console = _Console()
    anyio.run(Supervisor(obj.home, hive, console.say, console.status).run)


class _Console:
    """``up``'s lines and progress line; a closed terminal (SIGHUP) must not stop the
    shutdown, so a write that fails is dropped."""

    def __init__(self) -> None:
        self.line = StatusLine()

    def say(self, text: str) -> None:
        try:
            self.line.say(text)
        except OSError:
            pass

    def status(self, text: str) -> None:
        try:
            if text:
                self.line.show(text)
            else:
                self.line.clear()
        except OSError:
            pass


@main.command()
@click.option(
    "--coordinator",
    metavar="URL",
    help="Dial a coordinator over the network (wss://HOST:PORT) instead of run/hosts.sock.",
)
@click.option("--name", help="This host's name, as `hivectl hosts add NAME` registered it.")
@click.option(
    "--credential-file",
    type=click.Path(path_type=Path),
    help="The file (mode 0600, this user's) holding the credential `hosts add` printed.",
)
@click.option(
    "--ca-file",
    type=click.Path(path_type=Path),
    help="PEM CA bundle to verify the coordinator's certificate (default: the system's).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    help="This host's own runtime dir for its agents' sockets (default: run/hosts/NAME "
    "under the home).",
)
@no_json("the agent host in the foreground until stopped; it logs, it does not answer")
@pass_ctx
def host(
    obj: _Ctx,
    coordinator: str | None,
    name: str | None,
    credential_file: Path | None,
    ca_file: Path | None,
    run_dir: Path | None,
) -> None:
    """Run the agent host in the foreground: every active agent of this machine.

    With --coordinator it dials that coordinator over the network (it opens no
    port) and serves its agents' sockets itself. SIGTERM/SIGINT stops agents
    gracefully (their current turn finishes); a second signal kills their
    claude processes at once.
    """
    from hyperhive.agent.host import AgentHost
    from hyperhive.homelock import HomeLock

    die_with_supervisor()
    hive = load_hive_config(obj.home)
    refuse_unreachable_home(obj.home, hive.runtime)
    refuse_unrunnable(hive.claude_bin, obj.home, hive.runtime)
    paths, remote = obj.paths, None
    if coordinator is not None:
        from hyperhive.netlink.credentials import validate_host_name
        from hyperhive.netlink.dialer import LinkTarget, read_credential

        if name is None or credential_file is None:
            raise click.UsageError("--coordinator needs --name and --credential-file")
        remote = LinkTarget(coordinator, validate_host_name(name), credential_file, ca_file)
        remote.link_url  # noqa: B018  (refuse a bad URL now, with the reason)
        read_credential(credential_file)  # refuse a readable-by-others file before starting
        paths = HivePaths(obj.home, run_dir or obj.home / "run" / "hosts" / name)
        # A remote host holds no database credentials: it never opens the store.
        hive = hive.model_copy(update={"store": None, "store_url_file": None})
    lock = HomeLock(paths, "host").acquire()
    _setup_logging()
    stop_tracing = configure_tracing(hive.telemetry, "agent-host")
    agent_host = AgentHost(paths, hive, remote=remote)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(agent_host.run)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break

                async def second_signal_kills() -> None:
                    async for _ in signals:
                        await agent_host.stop_all(graceful=False)
                        return

                async with anyio.create_task_group() as stopping:
                    stopping.start_soon(second_signal_kills)
                    await agent_host.stop_all()
                    stopping.cancel_scope.cancel()
            tg.cancel_scope.cancel()

    try:
        anyio.run(run, backend_options=UVLOOP)
    finally:
        stop_tracing()
        lock.release()


def refuse_unreachable_home(home: Path, runtime: str) -> None:
    from hyperhive.sysusers import home_problem

    problem = home_problem(home, runtime)
    if problem is not None:
        raise ConfigError(problem)


@main.command()
@json_output(HiveStatus)
@pass_ctx
def status(obj: _Ctx, as_json: bool) -> None:
    """Show the coordinator's view of the hive."""
    data = obj.call(OpStatusReq(cmd="status"))

    def human(d: HiveStatus) -> None:
        for key, value in d.model_dump().items():
            if key == "waiting_slot":
                value = waiting_line(d.waiting_slot, time.time())
            if key == "lost":
                value = ", ".join(f"{a} (host {h})" for a, h in d.lost.items()) or "-"
            click.echo(f"{key:15} {value}")

    emit(data, human)


def waiting_line(waiting: list[WaitingSlot], now: float) -> str:
    """``alice 12s, bob 3s``: who waits for a claude slot, longest first, and how long."""
    if not waiting:
        return "(no agent waits for a claude slot)"
    return ", ".join(f"{w.agent} {max(0.0, now - w.since):.0f}s" for w in waiting)


@main.command("tools")
@click.option("--groups", default="", help="Comma-separated tool groups (blank: the default).")
@click.option("--caps", default="", help="Comma-separated capabilities.")
@json_output(ToolArgs)
def tools_cmd(groups: str, caps: str, as_json: bool) -> None:
    """Show the exact --tools and --allowedTools a set of groups resolves to.

    For an agent.toml that sets nothing else: the default servers included.
    """
    resolved = ToolGroup.parse_list(groups)
    capabilities = Capability.parse_list(caps)
    data = ToolArgs(
        tool_groups=[g.value for g in resolved],
        capabilities=[c.value for c in capabilities],
        tools_arg=builtin_tools_arg(resolved),
        allowed_tools_arg=turn_tool_args(
            AgentConfig(tool_groups=resolved), resolved, capabilities
        ).allowed_tools,
    )

    def human(d: ToolArgs) -> None:
        click.echo(f"groups:         {','.join(d.tool_groups)}")
        click.echo(f"--tools         {d.tools_arg}")
        click.echo(f"--allowedTools  {d.allowed_tools_arg}")

    emit(data, human)
