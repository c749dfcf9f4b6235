"""What the deploy/ tests share: where deploy/ is, and whether argv is a real hivectl call."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from hyperhive.cli import main

__all__ = ["DEPLOY", "REPO", "assert_hivectl_accepts", "expand"]

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"

_VAR = re.compile(r"\$\((\w+)\)|\$\{(\w+)\}")


def expand(arg: str, values: Mapping[str, str]) -> str:
    """``$(VAR)`` (Kubernetes) and ``${VAR}`` (systemd) replaced from ``values``.

    A variable missing from ``values`` fails the test: an unset one would reach hivectl
    as the literal text.
    """

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        assert name in values, f"{arg!r} uses ${name}, which nothing sets"
        return values[name]

    return _VAR.sub(one, arg)


def assert_hivectl_accepts(argv: Sequence[str]) -> None:
    """``hivectl ARGV`` names a real subcommand with real options, parsed and not run.

    ``make_context`` parses and converts every parameter as a run would (an unknown
    option, a missing value or a bad choice raises) without calling the command.
    """
    assert argv, "no hivectl subcommand given"
    with main.make_context("hivectl", [argv[0]]) as ctx:
        command = main.get_command(ctx, argv[0])
        assert command is not None, f"hivectl has no subcommand {argv[0]!r}"
        try:
            command.make_context(argv[0], list(argv[1:]), parent=ctx)
        except click.UsageError as exc:
            raise AssertionError(f"hivectl {' '.join(argv)}: {exc.format_message()}") from exc
