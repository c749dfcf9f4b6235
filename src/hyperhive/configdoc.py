"""Generate ``docs/configuration.md`` from the config models: ``python -m hyperhive.configdoc``.

Every key of ``hive.toml`` and ``agent.toml`` with its type, bounds, default and
description comes from the pydantic models (:class:`~hyperhive.config.HiveConfig`,
:class:`~hyperhive.config.AgentConfig` and the tables they hold), so the page
cannot drift from what the loader accepts. With ``--check`` it exits 1 (naming
the command to run) when the file on disk differs; the unit suite runs the same
comparison.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hyperhive.budgets import BudgetLimits, HiveBudget
from hyperhive.config import AgentConfig, HiveConfig, McpServer, ResourceLimits
from hyperhive.forge.config import ForgeConfig
from hyperhive.matrix.config import AgentMatrixConfig, MatrixConfig
from hyperhive.netlink.config import HostLinkConfig
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.telemetry.config import TelemetryConfig

__all__ = ["DOC_PATH", "REGENERATE", "SECTIONS", "main", "render", "undescribed"]

DOC_PATH = Path("docs/configuration.md")
REGENERATE = "python -m hyperhive.configdoc"


@dataclass(frozen=True)
class Section:
    """One table of keys: a file's top level, or a ``[table]`` inside it."""

    file: Literal["hive.toml", "agent.toml"]
    key: str | None  # None: the file's top level; "mcp_servers.<name>" for a map of tables
    model: type[BaseModel]
    about: str  # a sentence, with a link to the page that explains it

    @property
    def anchor(self) -> str:
        stem = self.file.removesuffix(".toml")
        if self.key is None:
            return stem
        return f"{stem}-{self.key.split('.')[0].replace('_', '-')}"

    @property
    def title(self) -> str:
        return self.file if self.key is None else f"`[{self.key}]` in {self.file}"


SECTIONS: tuple[Section, ...] = (
    Section(
        "hive.toml",
        None,
        HiveConfig,
        "The hive's configuration, `hive.toml` in its home (see "
        "[Running a hive](operating/hive.md#the-home)). Each coordinator and agent host reads "
        "its own; on several machines each has one.",
    ),
    Section(
        "hive.toml",
        "hostlink",
        HostLinkConfig,
        "Where agent hosts on other machines dial in "
        "([Across machines](across-machines.md#running-agent-hosts-on-other-machines)). Plain "
        "TCP is refused at start unless `listen` is a loopback address.",
    ),
    Section(
        "hive.toml",
        "budget",
        HiveBudget,
        "The whole hive's spend limits, over the sum of all agents, and the operator's time "
        "zone ([Budgets](operating/budgets.md)).",
    ),
    Section(
        "hive.toml",
        "telemetry",
        TelemetryConfig,
        "Traces of turns, tool calls and coordinator requests "
        "([Metrics and traces](operating/metrics.md#traces)).",
    ),
    Section(
        "hive.toml",
        "forge",
        ForgeConfig,
        "The Forgejo or Gitea agents with the `forge` group work on ([Forge](forge.md)). An "
        "agent host's hive.toml needs `url` only; `admin_token_file` is the coordinator's.",
    ),
    Section(
        "hive.toml",
        "matrix",
        MatrixConfig,
        "The homeserver agents get accounts on ([Matrix](matrix.md)). Exactly one of "
        "`registration_shared_secret_file` and `admin_token_file` on the coordinator; an agent "
        "host's hive.toml names neither.",
    ),
    Section(
        "agent.toml",
        None,
        AgentConfig,
        "An agent's configuration. The applied one is kept in the store (mirrored to "
        "`meta/agents/<name>.toml`); a change is a commit to its config repo "
        "`agents/<name>/config` and an approval ([Agents](operating/agents.md#configuration), "
        "[Approvals](operating/approvals.md)).",
    ),
    Section(
        "agent.toml",
        "limits",
        ResourceLimits,
        "Limits of the agent's processes, through cgroup v1 under the host's own cgroup. Where "
        "the machine does not allow one, the agent host's log says which and why.",
    ),
    Section(
        "agent.toml",
        "budget",
        BudgetLimits,
        "The agent's spend limits ([Budgets](operating/budgets.md)); `hivectl budget set` "
        "overrides them at run time.",
    ),
    Section(
        "agent.toml",
        "matrix",
        AgentMatrixConfig,
        "The agent's Matrix identity ([Matrix](matrix.md)); the hive's `[matrix]` names the "
        "homeserver.",
    ),
    Section(
        "agent.toml",
        "mcp_servers.<name>",
        McpServer,
        "An extra MCP server the agent's claude is given, by name (`[a-z0-9_-]`, at most 40; "
        "not `hyperhive`). `[mcp_servers.bash]` or `[mcp_servers.subagent]` override the "
        "built-in ones.",
    ),
)

_ENVIRONMENT = (
    ("HIVE_HOME", "The hive's home, when `--home` is not given."),
    ("HIVE_STORE_URL", "The store's `postgresql://` URL; wins over `store` and `store_url_file`."),
    ("HIVE_REMIND_MAX_PENDING_PER_AGENT", "Overrides `remind_max_pending`."),
)


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The annotation without ``| None``, and whether None was allowed."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if (origin is typing.Union or origin is types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else annotation), True
    return annotation, False


def _type(annotation: Any) -> str:
    annotation, _ = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' for a in args)
    if origin is list:
        return f"list of {_type(args[0])}s"
    if origin is dict:
        return f"table of {_type(args[1])}s"
    if annotation is ToolGroup:
        return "[tool group](tools.md) name"
    if annotation is Capability:
        return "[capability](tools.md) name"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if annotation is Path:
        return "path"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def _bounds(field: FieldInfo) -> str:
    marks = {
        annotated_types.Ge: ("≥", "ge"),
        annotated_types.Gt: (">", "gt"),
        annotated_types.Le: ("≤", "le"),
        annotated_types.Lt: ("<", "lt"),
        annotated_types.MinLen: ("length ≥", "min_length"),
        annotated_types.MaxLen: ("length ≤", "max_length"),
    }
    out = []
    for meta in field.metadata:
        for kind, (sign, attr) in marks.items():
            if isinstance(meta, kind):
                out.append(f"{sign} {_number(getattr(meta, attr))}")
    return f" ({', '.join(out)})" if out else ""


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ToolGroup | Capability):
        return _toml(value.value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "—"
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    return f"`{_toml(value)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def _cell_code(text: str) -> str:
    """A description cell: ``<name>`` stays visible outside code spans, as in tools.md."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = _cell(parts[i])
    return "`".join(parts)


def _subsection(section: Section, key: str) -> Section | None:
    for other in SECTIONS:
        if other.file == section.file and other.key and other.key.split(".")[0] == key:
            return other
    return None


def _rows(section: Section) -> Iterator[str]:
    yield "| key | type | default | description |"
    yield "|---|---|---|---|"
    for name, field in section.model.model_fields.items():
        kind = _type(field.annotation) + _bounds(field)
        sub = _subsection(section, name) if section.key is None else None
        if sub is not None:
            kind = f"[table](#{sub.anchor})"
        description = _cell_code(field.description or "")
        yield f"| `{name}` | {kind} | {_default(field)} | {description} |"


def undescribed() -> list[str]:
    """Keys with no description: each must say what it does."""
    return [
        f"{s.title}: {name}"
        for s in SECTIONS
        for name, field in s.model.model_fields.items()
        if not (field.description or "").strip()
    ]


def render() -> str:
    """The whole page, from the models."""
    out = [
        "# Configuration",
        "",
        "<!-- Generated from the config models by `" + REGENERATE + "`; do not edit. -->",
        "",
        "Two TOML files configure a hive: `hive.toml` for the hive (each coordinator and "
        "agent host reads the one in its home) and `agent.toml` for each agent. Every key is "
        "optional. A misspelt key or a value out of bounds is refused at start, naming the "
        "file, the line and what is wrong.",
        "",
    ]
    for file in ("hive.toml", "agent.toml"):
        for section in (s for s in SECTIONS if s.file == file):
            level = "##" if section.key is None else "###"
            out += [f"{level} {section.title} {{#{section.anchor}}}", "", section.about, ""]
            out += [*_rows(section), ""]
    out += [
        "## Environment",
        "",
        "| variable | what it does |",
        "|---|---|",
        *(f"| `{name}` | {_cell_code(what)} |" for name, what in _ENVIRONMENT),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperhive.configdoc", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--out", type=Path, default=DOC_PATH, help=f"default: {DOC_PATH}")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not args.out.exists() or args.out.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{args.out} is not current; regenerate it: {REGENERATE}\n")
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
