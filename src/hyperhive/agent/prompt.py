"""The system prompt and the wake prompt.

Pure module (the template is package data, read once). The template keeps
``role:agent`` or ``role:manager`` blocks by the agent's role, ``cap:<group>``
blocks only for groups the agent holds, ``server:<name>`` blocks only for MCP
servers its turn gets (``without:<name>`` only when it lacks one), so it never
names a tool the agent lacks.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from functools import cache
from importlib.resources import files

from hyperhive.permissions import ToolGroup
from hyperhive.protocol import WaitResult

__all__ = ["keep_blocks", "render_system_prompt", "wake_prompt"]

_BLOCK = re.compile(
    r"<!-- (role|cap|server|without):([a-z_]+) -->\n(.*?)<!-- /\1:\2 -->\n?", re.DOTALL
)
_HH = "mcp__hyperhive__"


def keep_blocks(text: str, groups: Iterable[ToolGroup], servers: Collection[str]) -> str:
    """``text`` with only the blocks that apply to an agent holding ``groups`` and MCP
    ``servers``: ``role:manager``/``role:agent`` (a manager holds ``lifecycle``),
    ``cap:<group>``, ``server:<name>`` and ``without:<name>``. Blocks nest. Pure."""
    held = {g.value for g in groups}
    role = "manager" if ToolGroup.LIFECYCLE.value in held else "agent"

    def keep(match: re.Match[str]) -> str:
        kind, value, body = match.group(1), match.group(2), match.group(3)
        if kind == "role":
            wanted = value == role
        elif kind == "cap":
            wanted = value in held
        elif kind == "server":
            wanted = value in servers
        else:
            wanted = value not in servers
        return body if wanted else ""

    while True:  # blocks nest (a server block inside the manager's): peel until none left
        kept = _BLOCK.sub(keep, text)
        if kept == text:
            return text
        text = kept


@cache
def _template() -> str:
    return (files("hyperhive.agent") / "prompts" / "system.md").read_text(encoding="utf-8")


def render_system_prompt(
    name: str,
    parent: str | None,
    groups: Iterable[ToolGroup],
    state_dir: str,
    work_dir: str,
    additions: str = "",
    *,
    servers: Collection[str] = ("bash", "subagent"),
    hive_home: str = "<hive home>",
) -> str:
    text = keep_blocks(_template(), groups, servers).format(
        name=name,
        parent=parent or "the operator (you are a root agent)",
        state_dir=state_dir,
        work_dir=work_dir,
        hive_home=hive_home,
        config_repo=f"{hive_home}/agents/{name}/config",
    )
    if additions.strip():
        text += "\n" + additions.strip() + "\n"
    return text


def wake_prompt(
    woke: WaitResult,
    groups: Collection[ToolGroup] = ToolGroup.AGENT_DEFAULT,
    servers: Collection[str] = ("bash", "subagent"),
) -> str:
    """What the turn is told about why it woke; it names only tools the agent has."""
    inbox = ToolGroup.INBOX in groups
    parts: list[str] = []
    if woke.messages:
        parts.append("You were woken by these messages:")
        parts.extend(m.render() for m in woke.messages)
        if ToolGroup.MESSAGING in groups:
            parts.append(
                f'(Acked when this turn ends cleanly. Reply: {_HH}send(to="<name>", '
                "body=..., in_reply_to=N).)"
            )
    if woke.todos_changed:
        if inbox:
            parts.append(
                f"Your todos changed (a result arrived): call {_HH}get_loose_ends(), handle "
                f'each, then clear it with {_HH}cancel_loose_end(kind="todo", id=<row id>).'
            )
        elif ToolGroup.EXECUTION in groups and "bash" in servers:
            parts.append(
                'A background result arrived: check your tasks with mcp__bash__status(id="<task '
                'id>").'
            )
        else:
            parts.append("A background result arrived for you.")
    if not parts:
        check = f" Check {_HH}get_loose_ends(), then end the turn." if inbox else ""
        parts.append("You were woken with nothing new." + (check or " End the turn."))
    return "\n".join(parts) + "\n"
