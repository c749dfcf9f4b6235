"""``hivectl``: the operator's command line (the group and shared helpers).

Every command prints one documented shape under ``--json`` (``cli/output.py``,
``docs/cli-json.md``); an error is one line on stderr (a JSON object under
``--json``) and the exit code of its class (``cli/exits.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import click
import click.shell_completion
import stamina
from pydantic import ValidationError

from hyperhive import __version__
from hyperhive.cli.exits import ExitCode, exit_code
from hyperhive.cli.output import error_json, json_mode
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
        result: R = anyio.run(self.acall, request, within)
        return result

    async def acall(self, request: Req[R], within: float = ANSWER_WITHIN_S) -> R:
        """:meth:`call` inside an event loop (a command doing two things at once)."""
        return await _call_riding_failover(self.paths, request, within)


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


def complete_agents(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Agent names for the shell's completion, asked of the running hive (none if it
    does not answer within a second or two: a completion must never hang the shell)."""
    from hyperhive.protocol import OpAgentsReq

    home = ctx.find_root().params.get("home")
    paths = HivePaths(resolve_home(home))
    try:
        rows = anyio.run(call_once, paths.host_sock, OpAgentsReq(cmd="agents"), 2.0)
    except (HiveError, OSError):
        return []
    return [
        click.shell_completion.CompletionItem(r.name) for r in rows if r.name.startswith(incomplete)
    ]


def agent_argument(name: str = "name") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An agent-name argument, completed from the running hive."""
    return click.argument(name, shell_complete=complete_agents)


class _Group(click.Group):
    """Turns any error into clear lines (what failed, why, where the log is) and the exit
    code of its class (``cli/exits.py``); under ``--json``, one JSON object on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, KeyboardInterrupt):
            raise
        except click.UsageError as exc:
            if not json_mode(ctx):
                raise  # click's own: the usage line, the error, exit 2
            _fail(ctx, "usage", exc.format_message(), exit_code(exc))
        except click.ClickException as exc:
            _fail(ctx, "error", exc.format_message(), exit_code(exc))
        except InternalError as exc:
            obj = ctx.find_object(_Ctx)
            log_file = obj.paths.logs / "coordinator.log" if obj is not None else None
            if log_file is not None and log_file.exists():
                where = f"the coordinator's log is {log_file}"
            else:
                where = "the coordinator's log is its stderr (`hivectl serve`)"
            _fail(ctx, exc.code, exc.message, exit_code(exc), where)
        except HiveError as exc:
            _fail(ctx, exc.code, exc.message, exit_code(exc))
        except Exception as exc:
            if isinstance(exc, ValidationError) and exc.title.endswith("Req"):
                # A request built from the command line that its model refuses (-n 99999).
                _fail(ctx, "invalid_request", _validation_text(exc), exit_code(exc))
            # Never a bare exception name: what failed, its text, and the traceback's file.
            command = ctx.invoked_subcommand or "hivectl"
            saved = _save_traceback(ctx.find_object(_Ctx))
            _fail(
                ctx,
                "internal_error",
                f"internal error in `{command}`: {type(exc).__name__}: {exc}",
                ExitCode.ERROR,
                f"the traceback is in {saved}",
            )


def _fail(
    ctx: click.Context, code: str, message: str, exit_with: ExitCode, where: str | None = None
) -> NoReturn:
    """Print an error (one line, plus where to look) and exit with its class's code."""
    if json_mode(ctx):
        extra = {"see": where} if where else {}
        click.echo(error_json(code, message, int(exit_with), **extra), err=True)
    else:
        click.echo(f"hivectl: {message}", err=True)
        if where:
            click.echo(f"hivectl: {where}", err=True)
    sys.exit(int(exit_with))


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


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
