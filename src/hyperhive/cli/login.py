"""hivectl: Credentials: ``login`` gives a running hive an API key or subscription token."""

from __future__ import annotations

import sys

import click

from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_output
from hyperhive.cli.shapes import LoggedInTo
from hyperhive.credentials import CREDENTIAL_KEYS, write_credentials

__all__ = ["login"]


@main.command()
@click.option(
    "--oauth-token",
    "kind",
    flag_value="CLAUDE_CODE_OAUTH_TOKEN",
    help="A Claude subscription token (from `claude setup-token`).",
)
@click.option(
    "--api-key",
    "kind",
    flag_value="ANTHROPIC_API_KEY",
    default=True,
    help="An Anthropic API key (the default).",
)
@json_output(LoggedInTo)
@pass_ctx
def login(obj: _Ctx, kind: str, as_json: bool) -> None:
    """Give the hive credentials, without a restart.

    Reads the key or token from stdin (typed, hidden, or piped) and writes it
    to <home>/credentials (mode 0600). The agent host reads that file before
    every claude it starts, and agents waiting in `needs login` resume.
    """
    assert kind in CREDENTIAL_KEYS
    if sys.stdin.isatty():
        value = click.prompt(kind, hide_input=True)
    else:
        value = sys.stdin.readline()
    path = write_credentials(obj.paths, kind, value)
    emit(
        LoggedInTo(kind=kind, path=str(path)),
        lambda r: click.echo(
            f"wrote {r.kind} to {r.path} (mode 0600); agents that need login resume now"
        ),
    )
