"""The system prompt and the wake prompt.

Pure module (the template is package data, read once). The template keeps
``role:agent`` or ``role:manager`` blocks by the agent's role and
``cap:<group>`` blocks only for groups the agent holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files

from hyperhive.permissions import ToolGroup
from hyperhive.protocol import WaitResult

__all__ = ["render_system_prompt", "wake_prompt"]

_BLOCK = re.compile(r"<!-- (role|cap):([a-z_]+) -->\n(.*?)<!-- /\1:\2 -->\n?", re.DOTALL)


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
) -> str:
    held = {g.value for g in groups}
    role = "manager" if ToolGroup.LIFECYCLE.value in held else "agent"

    def keep(match: re.Match[str]) -> str:
        kind, value, body = match.group(1), match.group(2), match.group(3)
        wanted = value == role if kind == "role" else value in held
        return body if wanted else ""

    text = _BLOCK.sub(keep, _template()).format(
        name=name,
        parent=parent or "the operator (you are a root agent)",
        state_dir=state_dir,
        work_dir=work_dir,
    )
    if additions.strip():
        text += "\n" + additions.strip() + "\n"
    return text


def wake_prompt(woke: WaitResult) -> str:
    """What the turn is told about why it woke."""
    parts: list[str] = []
    if woke.messages:
        parts.append("You were woken by these messages:")
        parts.extend(m.render() for m in woke.messages)
    if woke.todos_changed:
        parts.append(
            "Your todos changed (e.g. a background task finished): call "
            "mcp__hyperhive__get_loose_ends to see them, then clear the ones you handled."
        )
    if not parts:
        parts.append("You were woken with nothing new; check get_loose_ends, then end the turn.")
    return "\n".join(parts) + "\n"
