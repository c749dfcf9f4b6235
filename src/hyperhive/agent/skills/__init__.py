"""The hive's own claude skills, installed into each agent's ``~/.claude/skills``.

claude lists every installed skill (name and description) in each request
and reads a skill's body only when the model invokes it through the
``Skill`` built-in. So the long how-tos (triage, the ``agent.toml`` schema,
subagent economics) live here, loaded on demand, rather than in the system
prompt every request pays for. claude's own bundled skills are switched off
(``CLAUDE_CODE_DISABLE_BUNDLED_SKILLS`` in :data:`~hyperhive.agent.launch.QUIET_ENV`),
which more than pays for these four lines.

A skill is offered only to an agent that can use it: ``hive-children`` with
``lifecycle``, ``hive-subagents`` with the ``subagent`` surface. Installing
also removes a hive skill the agent no longer qualifies for; directories
that are not the hive's are never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import cache
from importlib.resources import files
from pathlib import Path

from hyperhive.agent.prompt import keep_blocks
from hyperhive.permissions import ToolGroup
from hyperhive.safefs import remove_beneath, write_if_changed_beneath

__all__ = ["SKILLS", "install_skills", "skill_text", "skills_for"]

SKILLS: tuple[str, ...] = ("hive-basics", "hive-loose-ends", "hive-children", "hive-subagents")


def skills_for(groups: Iterable[ToolGroup], servers: Collection[str]) -> list[str]:
    """The hive skills an agent with ``groups`` and MCP ``servers`` is given."""
    held = set(groups)
    out = ["hive-basics"]
    if ToolGroup.INBOX in held:
        out.append("hive-loose-ends")
    if ToolGroup.LIFECYCLE in held:
        out.append("hive-children")
    if "subagent" in servers:
        out.append("hive-subagents")
    return out


@cache
def _template(name: str) -> str:
    return (files("hyperhive.agent.skills") / name / "SKILL.md").read_text(encoding="utf-8")


def skill_text(
    name: str,
    agent: str,
    hive_home: Path | str,
    groups: Iterable[ToolGroup] = ToolGroup.ALL,
    servers: Collection[str] = ("bash", "subagent"),
) -> str:
    """A skill's ``SKILL.md`` for ``agent`` holding ``groups`` and MCP ``servers``: its
    ``{name}``/``{hive_home}`` filled in, and only the blocks that apply to it (as in the
    system prompt: a skill names no tool the agent lacks)."""
    text = keep_blocks(_template(name), groups, servers)
    return text.replace("{name}", agent).replace("{hive_home}", str(hive_home))


def install_skills(
    home: Path,
    names: Iterable[str],
    agent: str,
    hive_home: Path | str,
    owner: tuple[int, int] | None = None,
    *,
    groups: Iterable[ToolGroup] = ToolGroup.ALL,
    servers: Collection[str] = ("bash", "subagent"),
) -> list[Path]:
    """Write ``names`` under ``home/.claude/skills``; drop hive skills not in ``names``.

    The host runs as root and ``home`` belongs to the agent, which may have
    planted links there: every write and removal goes through
    :mod:`hyperhive.safefs` (no link followed). ``owner`` is the agent's
    (uid, gid), given to what is created, since claude, running as the agent,
    keeps its own state under ``~/.claude`` too.
    """
    wanted = list(names)
    unknown = [n for n in wanted if n not in SKILLS]
    if unknown:
        raise ValueError(f"not a hive skill: {', '.join(unknown)}")
    root = home / ".claude" / "skills"
    written = []
    for name in wanted:
        path = root / name / "SKILL.md"
        text = skill_text(name, agent, hive_home, groups, servers).encode()
        # Derived, not state: rewritten (if it differs) at every activation, so
        # no fsync. Two per file made a 1,000-agent host start mostly fsyncs.
        write_if_changed_beneath(home, path, text, 0o644, owner=owner, durable=False)
        written.append(path)
    for name in SKILLS:
        if name not in wanted:
            remove_beneath(home, root / name / "SKILL.md")
    return written
