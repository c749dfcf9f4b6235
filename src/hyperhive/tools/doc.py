"""Generate ``docs/tools.md`` from the declarations: ``python -m hyperhive.tools.doc``.

With ``--check`` it exits 1 (naming the command to run) when the file on
disk differs from what the declarations say; the unit suite runs the same
comparison, so the reference cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from hyperhive.tools.catalog import CATALOG
from hyperhive.tools.decl import (
    BASH_SERVER,
    HYPERHIVE_SERVER,
    MATRIX_SERVER,
    SUBAGENT_CONTROL_SERVER,
    SUBAGENT_SERVER,
    Tool,
)
from hyperhive.tools.groups import Capability, ToolGroup
from hyperhive.wirebase import result_type

__all__ = ["DOC_PATH", "REGENERATE", "main", "render"]

DOC_PATH = Path("docs/tools.md")
REGENERATE = "python -m hyperhive.tools.doc"
_VARS = {"config_repo": "<hive home>/agents/<agent>/config"}
_GATED = (HYPERHIVE_SERVER, BASH_SERVER)


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = str(prop.get("type", "any"))
    bounds = [
        f"{op} {prop[key]}"
        for key, op in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"))
        if key in prop
    ]
    if "maxLength" in prop:
        bounds.append(f"length ≤ {prop['maxLength']}")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _md(text: str) -> str:
    """Plain text as markdown: ``<agent>`` stays visible (not an HTML tag), code spans kept."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: str) -> str:
    return _md(text).replace("|", "\\|").replace("\n", " ")


def _arguments(tool: Tool[Any, Any]) -> list[str]:
    props: dict[str, dict[str, Any]] = tool.schema().get("properties", {})
    if not props:
        return ["No arguments."]
    required = set(tool.schema().get("required", []))
    lines = ["| argument | type | default | description |", "|---|---|---|---|"]
    for name, prop in props.items():
        field = tool.args.model_fields[name]
        if name in required:
            default = "required"
        elif field.default is None or field.default is PydanticUndefined:
            default = "omit"
        else:
            default = f"`{field.default!r}`"
        lines.append(
            f"| `{name}` | {_type(prop)} | {default} | {_cell(prop.get('description', ''))} |"
        )
    return lines


def _fields(annotation: Any) -> str:
    """`` (a, b, c)`` for a result model (or a list of one), so JSON results are documented."""
    args = typing.get_args(annotation)
    inner = args[0] if typing.get_origin(annotation) is list and args else annotation
    members = typing.get_args(inner) or (inner,)
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    if len(models) != 1:
        return ""
    return " (" + ", ".join(f.alias or n for n, f in models[0].model_fields.items()) + ")"


def _type_name(annotation: Any) -> str:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args:
        return f"list[{_type_name(args[0])}]"
    if args:
        return " | ".join(_type_name(a) for a in args)
    return getattr(annotation, "__name__", str(annotation))


def _tool(tool: Tool[Any, Any]) -> list[str]:
    out = [f"### `{tool.name}`", "", _md(tool.described(_VARS)), "", *_arguments(tool), ""]
    out.append(f"**Result:** {_md(tool.result)}.")
    if tool.wire is not None:
        answer = result_type(tool.wire)
        out.append(
            f"Forwarded to the coordinator as `{tool.wire.__name__}`, which answers "
            f"`{_type_name(answer)}`{_fields(answer)}; gated there by the same declaration."
        )
    else:
        out.append("Runs on the agent host.")
    return [*out, ""]


def _section(title: str, intro: str, tools: Iterable[Tool[Any, Any]]) -> list[str]:
    body = [line for t in tools for line in _tool(t)]
    return [f"## {title}", "", intro, "", *body]


def render() -> str:
    """The whole reference, from the catalog."""
    gated = [t for t in CATALOG if t.server in _GATED]
    out = [
        "# Tool reference",
        "",
        "<!-- Generated from src/hyperhive/tools/ by `" + REGENERATE + "`; do not edit. -->",
        "",
        "Every MCP tool the hive serves, per tool group, as the model sees it: a tool reaches "
        "claude as `mcp__<server>__<tool>`, offered and allowed only when the agent has its "
        "group (or capability), and refused server-side otherwise — by the MCP surface and, "
        "for `hyperhive` tools, again by the coordinator. Argument descriptions are what the "
        "model reads. An agent's groups are `tool_groups` in its `agent.toml` (default: "
        + ", ".join(f"`{g.value}`" for g in ToolGroup.AGENT_DEFAULT)
        + "; a manager also gets "
        + ", ".join(
            f"`{g.value}`" for g in ToolGroup.MANAGER_DEFAULT if g not in ToolGroup.AGENT_DEFAULT
        )
        + ").",
        "",
    ]
    for group in ToolGroup.ALL:
        tools = [t for t in gated if t.group is group]
        builtins = group.builtin_tools()
        intro = f"Server `{tools[0].server}`." if tools else ""
        if builtins:
            intro = (intro + " " if intro else "") + (
                "Adds claude's built-ins " + ", ".join(f"`{b}`" for b in builtins) + "."
            )
        out += _section(f"Group `{group.value}`", intro.strip(), tools)
    out += _section(
        "Always on",
        "In no group: every agent has these.",
        [t for t in gated if t.group is None and t.capability is None],
    )
    for cap in Capability:
        tools = [t for t in gated if t.capability is cap]
        intro = cap_intro(cap)
        out += _section(f"Capability `{cap.value}`", intro, tools)
    out += _section(
        "Server `subagent`",
        "In no group: on unless the agent's `[mcp_servers.subagent]` entry disables or "
        "replaces it.",
        [t for t in CATALOG if t.server == SUBAGENT_SERVER],
    )
    out += _section(
        "Server `subagent_control`",
        "What a subagent's own claude gets (under its run token), never an agent.",
        [t for t in CATALOG if t.server == SUBAGENT_CONTROL_SERVER],
    )
    out += _section(
        "Server `matrix`",
        "In no group: offered to an agent whose `agent.toml` enables `[matrix]`; it acts "
        "as the agent's own Matrix account (docs/matrix.md).",
        [t for t in CATALOG if t.server == MATRIX_SERVER],
    )
    return "\n".join(out).rstrip("\n") + "\n"


def cap_intro(cap: Capability) -> str:
    if cap is Capability.QUERY_AGENT_STATE:
        return "Grants no tool of its own: `get_loose_ends(agent=…)` may read any agent."
    return "Unlocks the tools below, whatever the groups."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--out", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.out} is not current; regenerate it: {REGENERATE}\n")
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
