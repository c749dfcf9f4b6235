"""What a command prints: one ``--json`` shape per command, its human lines, and a
progress line only a terminal sees.

Every command declares its shape with :func:`json_output` (or why it has none,
with :func:`no_json`); ``docs/cli-json.md`` documents each shape and
``tests/unit/test_cli_json_doc.py`` checks the two against each other. Under
``--json`` the result is validated against the shape and dumped from it, so
the keys printed are exactly the shape's. A following command (``-f``) prints
one document per line (JSON Lines) as new items come.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import IO, Any, TypeVar

import click
from pydantic import TypeAdapter

__all__ = [
    "JSON_META",
    "StatusLine",
    "emit",
    "emit_line",
    "error_json",
    "json_exemption",
    "json_mode",
    "json_output",
    "json_shape",
    "no_json",
]

F = TypeVar("F", bound=Callable[..., Any])
_T = TypeVar("_T")

JSON_META = "hivectl.json"
_SHAPE = "__hivectl_json_shape__"
_EXEMPT = "__hivectl_no_json__"


def _remember(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    # Eager, so a usage error later in the same command line is reported as JSON too.
    if value:
        ctx.meta[JSON_META] = True
    return value


def json_output(shape: Any) -> Callable[[F], F]:
    """Give the command ``--json`` and declare what it prints with it: ``shape``, a model,
    a ``list[Model]`` or a union of models (docs/cli-json.md documents each)."""

    def declare(f: F) -> F:
        setattr(f, _SHAPE, shape)
        option = click.option(
            "--json",
            "as_json",
            is_flag=True,
            is_eager=True,
            expose_value=True,
            callback=_remember,
            help="Print the result as JSON (docs/cli-json.md); errors too, on stderr.",
        )
        return option(f)

    return declare


def no_json(why: str) -> Callable[[F], F]:
    """Declare a command that has no ``--json``, and why (docs/cli-json.md lists them)."""

    def declare(f: F) -> F:
        setattr(f, _EXEMPT, why)
        return f

    return declare


def json_shape(command: click.Command) -> Any:
    """The shape ``command`` prints under ``--json`` (``None``: it has none)."""
    return getattr(command.callback, _SHAPE, None)


def json_exemption(command: click.Command) -> str | None:
    """Why ``command`` has no ``--json`` (``None``: it has one, or is a bare group)."""
    return getattr(command.callback, _EXEMPT, None)


def json_mode(ctx: click.Context | None = None) -> bool:
    """Whether this command line asked for ``--json``."""
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(JSON_META))


@functools.cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def _dumped(data: Any, indent: int | None) -> str:
    ctx = click.get_current_context()
    shape = json_shape(ctx.command)
    if shape is None:
        raise AssertionError(f"`{ctx.command_path}` prints JSON but declares no shape")
    adapter = _adapter(shape)
    return adapter.dump_json(adapter.validate_python(data), by_alias=True, indent=indent).decode()


def emit(data: _T, human: Callable[[_T], None]) -> None:
    """Print a command's result: its JSON shape under ``--json``, else ``human(data)``."""
    if json_mode():
        click.echo(_dumped(data, indent=2))
    else:
        human(data)


def emit_line(data: Any) -> None:
    """One JSON document on one line (a following command's next batch), flushed."""
    click.echo(_dumped(data, indent=None))
    sys.stdout.flush()


def error_json(code: str, message: str, exit_code: int, **extra: Any) -> str:
    """The one line an error prints under ``--json`` (on stderr)."""
    return json.dumps({"error": {"code": code, "message": message, "exit": exit_code, **extra}})


class StatusLine:
    """A line of progress redrawn in place on a terminal; nothing at all on a pipe or file,
    or under ``--json``: what a script reads stays the result alone."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() and not json_mode()
        self.text = ""

    def show(self, text: str) -> None:
        if not self.live or text == self.text:
            return
        self._write("\r\x1b[K" + text)
        self.text = text

    def clear(self) -> None:
        if self.live and self.text:
            self._write("\r\x1b[K")
        self.text = ""

    def say(self, line: str) -> None:
        """A line that stays (on any output), with the progress line redrawn under it."""
        shown = self.text
        self.clear()
        click.echo(line, file=self.stream)
        if shown:
            self.show(shown)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
