"""docs/cli-json.md against the code: every command's ``--json`` shape is documented,
each documented shape's keys are exactly what the command prints, and the exit codes
listed are the CLI's."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from hyperhive.cli import main
from hyperhive.cli.exits import ExitCode
from hyperhive.cli.output import json_exemption, json_shape

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


def sections(text: str, level: str) -> dict[str, str]:
    """``{title: body}`` of the headings at ``level`` (``"## "``, ``"### "``)."""
    parts = re.split(rf"^{re.escape(level)}(.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def doc_parts() -> tuple[dict[str, str], dict[str, set[str]], dict[str, str], str]:
    text = DOC.read_text()
    top = sections(text, "## ")
    documented = {}
    for title, body in sections(top["Commands"], "### ").items():
        command = re.fullmatch(r"`(hivectl [^`]+)`", title)
        assert command, f"a command heading is `hivectl …` in backticks: {title!r}"
        shape = re.search(r"^Shape: `([^`]+)`", body, flags=re.MULTILINE)
        assert shape, f"{title}: no 'Shape: `…`' line"
        documented[command.group(1)] = shape.group(1)
    tables: dict[str, set[str]] = {}
    inherits: dict[str, str] = {}
    for title, body in sections(top["Shapes"], "### ").items():
        name = re.fullmatch(r"`(\w+)`", title)
        assert name, f"a shape heading is the model's name in backticks: {title!r}"
        rows = set(re.findall(r"^\| `([^`]+)` \|", body, flags=re.MULTILINE))
        tables[name.group(1)] = rows
        parent = re.search(r"^Every key of `(\w+)`", body, flags=re.MULTILINE)
        if parent:
            inherits[name.group(1)] = parent.group(1)
    for child, parent in inherits.items():
        tables[child] |= tables[parent]
    return documented, tables, top["Exit codes"], top["Commands without `--json`"]


def test_every_command_declares_a_json_shape_or_why_it_has_none() -> None:
    for path, cmd in commands():
        shape, why = json_shape(cmd), json_exemption(cmd)
        assert (shape is None) != (why is None), f"{path}: a shape or an exemption, exactly one"
        if shape is not None:
            assert any(p.name == "as_json" for p in cmd.params), f"{path} lacks --json"


def test_every_shape_is_documented_as_the_command_prints_it() -> None:
    documented, _, _, exempt_text = doc_parts()
    declared = {p: render(json_shape(c)) for p, c in commands() if json_shape(c) is not None}
    assert documented == declared
    exempt = {p for p, c in commands() if json_exemption(c) is not None}
    assert set(re.findall(r"^- `(hivectl [^`]+)`", exempt_text, flags=re.MULTILINE)) == exempt


def test_each_documented_shape_has_exactly_the_keys_printed() -> None:
    _, tables, _, _ = doc_parts()
    models: dict[str, type[BaseModel]] = {}
    for _, cmd in commands():
        models_in(json_shape(cmd), models)
    assert set(tables) == set(models), "shapes documented vs printed"
    for name, model in models.items():
        assert tables[name] == keys(model), f"{name}: documented keys vs printed keys"


def test_the_exit_codes_documented_are_the_clis() -> None:
    _, _, exit_text, _ = doc_parts()
    rows = dict(re.findall(r"^\| `(\d)` \| ([a-z ]+) \|", exit_text, flags=re.MULTILINE))
    assert {int(code): name.replace(" ", "_").upper() for code, name in rows.items()} == {
        c.value: c.name for c in ExitCode
    }
