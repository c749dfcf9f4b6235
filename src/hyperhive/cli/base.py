"""``hivectl``: the operator's command line (the group and shared helpers).

Every read command takes ``--json`` (stable shapes, documented in
``docs/cli-json.md``); errors are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
import stamina
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from hyperhive import __version__
from hyperhive.client import call_once
from hyperhive.config import (
    HivePaths,
    resolve_home,
)
from hyperhive.errors import HiveError, InternalError, NotListening
from hyperhive.homelock import holder
from hyperhive.protocol import Req

__all__ = ["main"]

R = TypeVar("R")
_T = TypeVar("_T")


ANSWER_WITHIN_S = 30.0
"""How long hivectl waits for an answer: a request that takes longer on purpose (a move
waits for a turn to finish, then copies) says so."""


class _Ctx:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.paths = HivePaths(home)

    def call(self, request: Req[R], within: float = ANSWER_WITHIN_S) -> R:
        """One operator request, answered with the request's response model (waiting
        ``within`` seconds for the answer)."""
        result: R = anyio.run(_call_riding_failover, self.paths, request, within)
        return result


RECONNECT_WITHIN_S = 15.0
"""How long hivectl keeps knocking on a socket nobody answers: a coordinator restart or a
standby's takeover (within 10 s of the active one's death) fits; a stopped hive does not."""


def _coordinator_coming(paths: HivePaths) -> bool:
    """Whether a coordinator may answer soon: one holds the home (starting, or standing
    by), or its socket file outlived it (killed; a supervisor restarts it)."""
    return holder(paths, "coordinator") is not None or paths.host_sock.exists()


async def _call_riding_failover(paths: HivePaths, request: Req[R], within: float) -> R:
    # Only a connect that found nobody listening is retried: the request was never
    # sent, so it cannot be applied twice. A connection lost mid-request answers at once.
    def retry(exc: Exception) -> bool:
        return isinstance(exc, NotListening) and _coordinator_coming(paths)

    async for attempt in stamina.retry_context(
        on=retry,
        attempts=None,
        timeout=RECONNECT_WITHIN_S,
        wait_initial=0.2,
        wait_max=2.0,
    ):
        with attempt:
            return await call_once(paths.host_sock, request, within)
    raise AssertionError("unreachable: stamina re-raises the last error")


pass_ctx = click.make_pass_decorator(_Ctx)


class _Group(click.Group):
    """Turns any error into clear lines (what failed, why, where the log is) and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InternalError as exc:
            click.echo(f"hivectl: {exc.message}", err=True)
            obj = ctx.find_object(_Ctx)
            log_file = obj.paths.logs / "coordinator.log" if obj is not None else None
            if log_file is not None and log_file.exists():
                click.echo(f"hivectl: the coordinator's log is {log_file}", err=True)
            else:
                click.echo(
                    "hivectl: the coordinator's log is its stderr (`hivectl serve`)", err=True
                )
            sys.exit(1)
        except HiveError as exc:
            click.echo(f"hivectl: {exc.message}", err=True)
            sys.exit(1)
        except (click.exceptions.Exit, click.ClickException, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            # Never a bare exception name: what failed, its text, and the traceback's file.
            command = ctx.invoked_subcommand or "hivectl"
            where = _save_traceback(ctx.find_object(_Ctx))
            click.echo(
                f"hivectl: internal error in `{command}`: {type(exc).__name__}: {exc}", err=True
            )
            click.echo(f"hivectl: the traceback is in {where}", err=True)
            sys.exit(1)


def _save_traceback(obj: _Ctx | None) -> Path:
    """Append the current exception's traceback to ``logs/hivectl.log`` (else a temp file)."""
    import tempfile
    import time
    import traceback

    text = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {sys.argv}\n{traceback.format_exc()}"
    if obj is not None:
        path = obj.paths.logs / "hivectl.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(text)
            return path
        except OSError:
            pass
    fd, name = tempfile.mkstemp(prefix="hivectl-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(name)


def _jsonable(value: Any) -> JsonValue:
    """A result as ``--json`` prints it: models by wire alias (docs/cli-json.md)."""
    out: JsonValue = to_jsonable_python(value, by_alias=True)
    return out


def _emit(data: _T, as_json: bool, human: Callable[[_T], None]) -> None:
    if as_json:
        click.echo(json.dumps(_jsonable(data), indent=2))
    else:
        human(data)


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: this package's, and the claude this hive would run (and its pin)."""
    if not value or ctx.resilient_parsing:
        return
    from hyperhive.claudebin import CLAUDE_CODE_VERSION, claude_version, find_claude
    from hyperhive.config import load_hive_config

    click.echo(f"hivectl {__version__}")
    home = resolve_home(ctx.params.get("home"))
    try:
        configured = load_hive_config(home).claude_bin
    except HiveError:
        configured = None
    found, looked = find_claude(configured, home)
    if found is None:
        click.echo(
            f"claude: not found (looked at {', '.join(looked)}); `hivectl install-claude` "
            f"installs {CLAUDE_CODE_VERSION}, the version hyperhive is tested with"
        )
    else:
        version = claude_version(found) or "(did not say its version)"
        pinned = "" if version == CLAUDE_CODE_VERSION else f"; tested with {CLAUDE_CODE_VERSION}"
        click.echo(f"claude {version} at {found}{pinned}")
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    is_eager=True,  # before --version, which reads this hive's claude_bin
    help="The hive's home (default: $HIVE_HOME, else /var/lib/hyperhive as root and "
    "~/.local/share/hyperhive otherwise).",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show hivectl's version and the claude it runs, and exit.",
)
@click.pass_context
def main(ctx: click.Context, home: Path | None) -> None:
    """Run and steer a hive of sandboxed Claude Code agents."""
    ctx.obj = _Ctx(resolve_home(home))


def _raise_fd_limit() -> None:
    """Lift the soft open-files limit to the hard one: two fds per agent add up."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _setup_logging() -> None:
    _raise_fd_limit()
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def _until_signalled(run: Callable[..., Any]) -> None:
    """Run ``run`` until SIGTERM/SIGINT, which cancel it, also while it is still starting.

    The handlers are installed before ``run`` starts: a signal that came while it
    started (`hivectl up` stopping a coordinator whose dashboard was still loading)
    used to kill the process outright, leaving its sockets behind.
    """
    try:
        async with anyio.create_task_group() as tg:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                tg.start_soon(run)
                async for signum in signals:
                    name = signal.Signals(signum).name
                    logging.getLogger("hyperhive").info("%s: stopping", name)
                    break
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # ``run``'s own error as itself: a HiveError (a lost lease) exits with its message.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
