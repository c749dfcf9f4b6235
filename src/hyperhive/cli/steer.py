"""hivectl: steer a running turn (``agents interrupt``)."""

from __future__ import annotations

import sys

import click

from hyperhive.cli.agents import agents
from hyperhive.cli.base import _Ctx, _emit, json_option, pass_ctx
from hyperhive.errors import Conflict, HiveError, NotFound, Unavailable
from hyperhive.protocol import Interrupted, OpInterruptReq

# The classes a script branches on (docs/operating/agents.md): 3 the hive is not
# reachable, 4 no such agent, 5 refused (no turn to interrupt).
_EXITS: tuple[tuple[type[HiveError], int], ...] = ((Unavailable, 3), (NotFound, 4), (Conflict, 5))


@agents.command("interrupt")
@click.argument("name")
@click.option(
    "--tell",
    "tell",
    default=None,
    help="Text for the model: it reaches the interrupted turn's session (or, with no turn "
    "running, is sent as a message for the next).",
)
@json_option
@pass_ctx
def interrupt(obj: _Ctx, name: str, tell: str | None, as_json: bool) -> None:
    """End NAME's running turn now: outcome interrupted, its session kept, its mail redelivered.

    Exits 4 if there is no agent NAME, 5 if it is not running a turn (without --tell).
    """
    try:
        got = obj.call(OpInterruptReq(cmd="interrupt", agent=name, tell=tell or None))
    except HiveError as exc:
        code = next((c for kind, c in _EXITS if isinstance(exc, kind)), None)
        if code is None:
            raise
        click.echo(f"hivectl: {exc.message}", err=True)
        sys.exit(code)

    def human(d: Interrupted) -> None:
        if d.interrupted:
            told = "; the model has your text in the same session" if d.told == "turn" else ""
            click.echo(f"{d.agent}: turn interrupted{told}")
        else:
            click.echo(f"{d.agent}: no turn running; your text was sent as message #{d.message_id}")

    _emit(got, as_json, human)
