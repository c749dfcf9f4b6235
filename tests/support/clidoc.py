"""docs/cli-json.md read as the tests check it: each command's shape, each shape's keys.

The page's form is fixed: ``## Commands`` holds one ``### `hivectl …``` section per
command with a ``Shape: `…``` line; ``## Shapes`` one ``### `Model``` section per
model with a table whose first column is the keys (``Every key of `Other`, and:``
takes another model's keys in too); ``## Commands without `--json``` lists the rest.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from hyperhive.cli import main

__all__ = ["DOC", "CliDoc", "commands", "keys", "models_in", "read_doc", "render"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli-json.md"


def commands(
    group: click.Group = main, prefix: str = "hivectl"
) -> Iterator[tuple[str, click.Command]]:
    """Every command a user can run (a group that only holds subcommands is none)."""
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if not isinstance(cmd, click.Group) or cmd.invoke_without_command:
            yield path, cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)


def render(shape: Any) -> str:
    """A shape as the doc writes it: ``AgentView``, ``list[AgentView]``."""
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return shape.__name__
    origin, args = typing.get_origin(shape), typing.get_args(shape)
    if origin is list:
        return f"list[{render(args[0])}]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(render(a) for a in args)
    raise AssertionError(f"no doc form for shape {shape!r}")


def models_in(shape: Any, found: dict[str, type[BaseModel]]) -> None:
    """Every model a shape holds, nested ones too."""
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        known = found.setdefault(shape.__name__, shape)
        assert known is shape, f"two shapes named {shape.__name__}: {known} and {shape}"
        for field in shape.model_fields.values():
            models_in(field.annotation, found)
        return
    for arg in typing.get_args(shape):
        models_in(arg, found)


def keys(model: type[BaseModel]) -> set[str]:
    """The keys ``--json`` prints for a model (by wire alias)."""
    return {f.alias or name for name, f in model.model_fields.items()}


def _sections(text: str, level: str) -> dict[str, str]:
    """``{title: body}`` of the headings at ``level`` (``"## "``, ``"### "``)."""
    parts = re.split(rf"^{re.escape(level)}(.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


@dataclass(frozen=True)
class CliDoc:
    shapes: dict[str, str]  # command -> its shape as written ("list[AgentView]")
    tables: dict[str, set[str]]  # model -> the keys its table lists
    exit_codes: str  # the "Exit codes" section
    exempt: set[str]  # commands listed as having no --json


def read_doc(path: Path = DOC) -> CliDoc:
    top = _sections(path.read_text(), "## ")
    shapes = {}
    for title, body in _sections(top["Commands"], "### ").items():
        command = re.fullmatch(r"`(hivectl [^`]+)`", title)
        assert command, f"a command heading is `hivectl …` in backticks: {title!r}"
        shape = re.search(r"^Shape: `([^`]+)`", body, flags=re.MULTILINE)
        assert shape, f"{title}: no 'Shape: `…`' line"
        shapes[command.group(1)] = shape.group(1)
    tables: dict[str, set[str]] = {}
    inherits: dict[str, str] = {}
    for title, body in _sections(top["Shapes"], "### ").items():
        name = re.fullmatch(r"`(\w+)`", title)
        assert name, f"a shape heading is the model's name in backticks: {title!r}"
        tables[name.group(1)] = set(re.findall(r"^\| `([^`]+)` \|", body, flags=re.MULTILINE))
        parent = re.search(r"^Every key of `(\w+)`", body, flags=re.MULTILINE)
        if parent:
            inherits[name.group(1)] = parent.group(1)
    for child, parent in inherits.items():
        tables[child] |= tables[parent]
    exempt_text = top["Commands without `--json`"]
    exempt = set(re.findall(r"^- `(hivectl [^`]+)`", exempt_text, flags=re.MULTILINE))
    return CliDoc(shapes, tables, top["Exit codes"], exempt)
