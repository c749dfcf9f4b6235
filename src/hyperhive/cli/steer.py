"""hivectl: steer a running turn (``agents interrupt``)."""

from __future__ import annotations

import click

from hyperhive.cli.agents import agents
from hyperhive.cli.base import _Ctx, agent_argument, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.protocol import Interrupted, OpInterruptReq


@agents.command("interrupt")
@agent_argument()
@click.option(
    "--tell",
    "tell",
    default=None,
    help="Text for the model: it reaches the interrupted turn's session (or, with no turn "
    "running, is sent as a message for the next).",
)
@json_output(Interrupted)
@pass_ctx
def interrupt(obj: _Ctx, name: str, tell: str | None, as_json: bool) -> None:
    """End NAME's running turn now: outcome interrupted, its session kept, its mail redelivered.

    Exits 5 (refused) if NAME is not running a turn and there is no --tell.
    """

    def human(d: Interrupted) -> None:
        if d.interrupted:
            told = "; the model has your text in the same session" if d.told == "turn" else ""
            click.echo(f"{d.agent}: turn interrupted{told}")
        else:
            click.echo(f"{d.agent}: no turn running; your text was sent as message #{d.message_id}")

    emit(obj.call(OpInterruptReq(cmd="interrupt", agent=name, tell=tell or None)), human)
