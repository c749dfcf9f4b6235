"""docs/configuration.md is generated from the config models and must be current and true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HiveConfig, load_hive_config, parse_agent_config
from hyperhive.configdoc import REGENERATE, SECTIONS, Section, main, render, undescribed

ROOT = Path(__file__).resolve().parents[2]
# A row with a default: | `key` | type (may hold an escaped \|) | `default` | …
ROW = re.compile(r"^\| `([a-z_]+)` \| (?:[^|\\]|\\\|)+ \| `(.+?)` \|", re.M)


def _table(text: str, anchor: str) -> str:
    start = text.index(f"{{#{anchor}}}")
    end = text.find("\n#", start)
    return text[start : end if end != -1 else None]


def test_docs_configuration_md_is_current() -> None:
    current = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert current == render(), f"docs/configuration.md is not current; regenerate it: {REGENERATE}"


def test_every_key_says_what_it_does() -> None:
    assert undescribed() == [], "config keys without Field(description=...): " + ", ".join(
        undescribed()
    )


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.anchor)
def test_every_key_of_every_table_is_documented(section: Section) -> None:
    table = _table(render(), section.anchor)
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    assert documented == set(section.model.model_fields)


def test_hive_toml_defaults_as_documented_load_as_the_defaults(tmp_path: Path) -> None:
    """Each documented default, written into hive.toml, loads as the key's real default."""
    rows = ROW.findall(_table(render(), "hive"))
    assert len(rows) >= 12, rows
    baseline = HiveConfig()
    for key, default in rows:
        (tmp_path / "hive.toml").write_text(f"{key} = {default}\n")
        loaded = load_hive_config(tmp_path, env={})
        assert getattr(loaded, key) == getattr(baseline, key), (key, default)


def test_agent_toml_defaults_as_documented_load_as_the_defaults() -> None:
    rows = ROW.findall(_table(render(), "agent"))
    assert len(rows) >= 9, rows
    baseline = AgentConfig()
    for key, default in rows:
        loaded = parse_agent_config(f"{key} = {default}\n")
        assert getattr(loaded, key) == getattr(baseline, key), (key, default)


def test_check_fails_on_a_stale_file_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "configuration.md"
    out.write_text("# stale\n")
    assert main(["--check", "--out", str(out)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--out", str(out)]) == 0
    assert main(["--check", "--out", str(out)]) == 0
