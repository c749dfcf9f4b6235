"""The hive's skills: which agent gets which, installing them, and planted links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyperhive.agent.skills import SKILLS, install_skills, skill_text, skills_for
from hyperhive.errors import StorageError
from hyperhive.permissions import ToolGroup


def _frontmatter(text: str) -> dict[str, str]:
    assert text.startswith("---\n")
    head = text.split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in head.strip().splitlines())


@pytest.mark.parametrize("name", SKILLS)
def test_every_skill_has_its_name_and_a_short_description(name: str) -> None:
    meta = _frontmatter(skill_text(name, "alice", "/hive"))
    assert meta["name"] == name
    # The description is listed in every request: keep it one short line.
    description = meta["description"]
    # Quoted (a plain YAML scalar cannot hold ": "), one short line.
    assert description.startswith('"') and description.endswith('"')
    assert 40 <= len(description) <= 120


def test_placeholders_are_filled_in() -> None:
    text = skill_text("hive-children", "queen", "/var/lib/hyperhive")
    assert "/var/lib/hyperhive/agents/<name>/config" in text and "{hive_home}" not in text
    assert "You are alice" in skill_text("hive-basics", "alice", "/h")


def test_which_agent_gets_which_skill() -> None:
    default = skills_for(ToolGroup.AGENT_DEFAULT, {"bash", "subagent"})
    assert default == ["hive-basics", "hive-loose-ends", "hive-subagents"]
    manager = skills_for(ToolGroup.MANAGER_DEFAULT, {"bash", "subagent"})
    assert manager == ["hive-basics", "hive-loose-ends", "hive-children", "hive-subagents"]
    assert skills_for([ToolGroup.MESSAGING], set()) == ["hive-basics"]


def test_install_writes_replaces_and_drops_what_no_longer_applies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude" / "skills" / "mine").mkdir(parents=True)
    (home / ".claude" / "skills" / "mine" / "SKILL.md").write_text("the agent's own")
    written = install_skills(home, SKILLS, "queen", "/h")
    assert [p.parent.name for p in written] == list(SKILLS)
    assert all(p.read_text().startswith("---\nname: ") for p in written)

    install_skills(home, ["hive-basics"], "queen", "/h")
    skills = home / ".claude" / "skills"
    assert sorted(p.name for p in skills.iterdir()) == ["hive-basics", "mine"]
    assert (skills / "mine" / "SKILL.md").read_text() == "the agent's own"

    # A hive skill directory the agent put files in is kept, minus our SKILL.md.
    (skills / "hive-basics" / "notes.md").write_text("x")
    install_skills(home, [], "queen", "/h")
    assert sorted(p.name for p in (skills / "hive-basics").iterdir()) == ["notes.md"]


def test_an_unchanged_install_writes_nothing(tmp_path: Path) -> None:
    # A host restoring its agents installs every agent's skills again: unchanged
    # files stay as they are (each rewrite costs two fsyncs), a changed one is redone.
    written = install_skills(tmp_path, SKILLS, "queen", "/h")
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in written}
    install_skills(tmp_path, SKILLS, "queen", "/h")
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in written} == before
    install_skills(tmp_path, SKILLS, "queen", "/elsewhere")
    changed = {
        p
        for p in written
        if skill_text(p.parent.name, "queen", "/h") != skill_text(p.parent.name, "queen", "/x")
    }
    assert changed  # the hive's home is named in some skills, so those are redone
    assert {p for p in written if p.stat().st_ino != before[p][0]} == changed
    assert all("/elsewhere" in p.read_text() for p in changed)


def test_unknown_skill_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a hive skill: telepathy"):
        install_skills(tmp_path, ["telepathy"], "a", "/h")


def test_a_planted_link_is_never_followed(tmp_path: Path) -> None:
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (outside / "SKILL.md").write_text("precious")
    (home / ".claude").mkdir()
    os.symlink(outside, home / ".claude" / "skills")
    with pytest.raises(StorageError, match="symlink"):
        install_skills(home, ["hive-basics"], "a", "/h")
    with pytest.raises(StorageError, match="symlink"):
        install_skills(home, [], "a", "/h")  # removal walks the same way
    assert (outside / "SKILL.md").read_text() == "precious"
    assert sorted(p.name for p in outside.iterdir()) == ["SKILL.md"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_what_is_created_belongs_to_the_agent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (path,) = install_skills(home, ["hive-basics"], "a", "/h", owner=(4242, 4343))
    for p in (home / ".claude", home / ".claude" / "skills", path.parent, path):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (4242, 4343), p
