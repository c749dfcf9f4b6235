"""The shape of a tool declaration, and the gate every surface applies with it.

Pure module (pydantic models and data): the declarations import this, the
permissions table and the surfaces read what they declare.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from string import Template
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from hyperhive.tools.groups import Capability, ToolGroup
from hyperhive.wirebase import Req

__all__ = [
    "BASH_SERVER",
    "HYPERHIVE_SERVER",
    "MATRIX_SERVER",
    "SUBAGENT_CONTROL_SERVER",
    "SUBAGENT_SERVER",
    "McpTool",
    "NoArgs",
    "Tool",
    "ToolArgs",
    "as_json",
    "lean_schema",
]

HYPERHIVE_SERVER = "hyperhive"
BASH_SERVER = "bash"
SUBAGENT_SERVER = "subagent"
SUBAGENT_CONTROL_SERVER = "subagent_control"
# Served to agents whose agent.toml enables [matrix] (tools in tools/matrix.py).
MATRIX_SERVER = "matrix"

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R")


class ToolArgs(BaseModel):
    """A tool's arguments: each field's description is what the model reads.

    Every request of a turn carries every tool schema, so a description says
    what the model needs to call the tool right, briefly. Unknown arguments
    are refused (with a readable error, by the surface).
    """

    # Built on first use: the permissions table imports these declarations, and a process
    # that only resolves tool lists (hivectl, the dashboard) never validates most of them.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class NoArgs(ToolArgs):
    """A tool that takes no arguments (and refuses any)."""


def as_json(value: Any) -> str:
    """A result as the model reads it: JSON by wire alias (``from``, not ``sender``)."""
    return json.dumps(to_jsonable_python(value, by_alias=True), indent=1, ensure_ascii=False)


def lean_schema(node: Any) -> Any:
    """A pydantic JSON schema without what costs context and teaches the model nothing.

    Every request of a turn carries every tool schema, so: no ``title`` (the
    field name again, title-cased), an optional field as its plain type rather
    than ``anyOf`` with ``null`` (leaving it out already means "none"), no
    ``"default": null``, no ``additionalProperties`` (the surface refuses an
    unknown argument with a readable error either way), no ``"minimum": 0`` (the
    surface still refuses a negative number). Pure.
    """
    if isinstance(node, list):
        return [lean_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: lean_schema(v) for k, v in node.items() if k not in ("title", "additionalProperties")}
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        if len(rest) == 1 and isinstance(rest[0], dict):
            del out["anyOf"]
            out = {**rest[0], **out}
    if "default" in out and out["default"] is None:
        del out["default"]
    if out.get("minimum") == 0 and out.get("type") in ("integer", "number"):
        del out["minimum"]  # an id, a delay: nothing a model would make negative
    return out


@dataclass(frozen=True, slots=True)
class McpTool:
    """An MCP tool and the server that serves it."""

    server: str
    name: str

    @property
    def qualified(self) -> str:
        """The name claude sees: ``mcp__<server>__<name>``."""
        return f"mcp__{self.server}__{self.name}"


@dataclass(frozen=True, slots=True)
class Tool(Generic[A, R]):
    """One tool, declared once.

    ``A`` is its argument model, ``R`` what its handler gets back: for a
    ``hyperhive`` tool the coordinator's answer to ``wire`` (the request a
    call becomes; the coordinator gates it by this same declaration), which
    ``render`` turns into the text the model reads. A tool with no ``wire``
    runs on the agent host: its surface binds the handler by name.
    ``description`` may name ``$config_repo``, which the host fills in.
    """

    server: str
    name: str
    description: str
    args: type[A]
    result: str
    """What a call answers, in words (docs/tools.md)."""
    group: ToolGroup | None = None
    capability: Capability | None = None
    wire: type[Req[R]] | None = None
    to_wire: Callable[[A], Mapping[str, Any]] | None = None
    """The request's fields when they are not the arguments' own."""
    render: Callable[[A, R], str] | None = None

    @property
    def mcp(self) -> McpTool:
        return McpTool(self.server, self.name)

    def request(self, args: A) -> Req[R]:
        """The coordinator request a call with ``args`` becomes."""
        if self.wire is None:
            raise TypeError(f"{self.server}.{self.name} runs on the agent host, not forwarded")
        fields = self.to_wire(args) if self.to_wire is not None else args.model_dump()
        return self.wire.model_validate({**fields, "cmd": self.name})

    def text(self, args: A, result: R) -> str:
        if self.render is None:
            raise TypeError(f"{self.server}.{self.name} declares no render")
        return self.render(args, result)

    def schema(self) -> Any:
        """The arguments' JSON schema as the model reads it (:func:`lean_schema`), without
        the argument model's docstring: the tool's description says what it does."""
        schema = lean_schema(self.args.model_json_schema())
        schema.pop("description", None)
        return schema

    def described(self, values: Mapping[str, str] | None = None) -> str:
        """The description, with ``$config_repo`` and the like filled from ``values``."""
        return Template(self.description).safe_substitute(values or {})

    def refusal(
        self, agent: str, groups: Collection[ToolGroup], capabilities: Collection[Capability]
    ) -> str | None:
        """Why ``agent`` (with these grants) may not call this tool (None: it may)."""
        if self.group is not None and self.group not in groups:
            return (
                f"{self.name} needs the {self.group.value!r} tool group, which {agent} does not "
                "have; the operator can grant it in the permissions tab (hivectl perms set)"
            )
        if self.capability is not None and self.capability not in capabilities:
            return (
                f"{self.name} needs the {self.capability.value} capability, which {agent} does "
                "not have; the operator can grant it in the permissions tab (hivectl perms set)"
            )
        return None
