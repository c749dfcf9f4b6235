"""The README documents every ``hive.toml`` key (and nothing that is not one)."""

from __future__ import annotations

import re
from pathlib import Path

from hyperhive.config import HiveConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def hive_toml_section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## hive\.toml\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "README.md has no '## hive.toml' section"
    return match.group(1)


def test_every_hive_toml_key_is_documented_in_the_readme() -> None:
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", hive_toml_section(), re.M))
    keys = set(HiveConfig.model_fields)
    missing, stale = sorted(keys - documented), sorted(documented - keys)
    assert not missing, (
        f"hive.toml keys missing from README.md's '## hive.toml' table: {', '.join(missing)}; "
        "add a row for each: | `key` | default | what it does |"
    )
    assert not stale, f"README.md documents keys hive.toml does not have: {', '.join(stale)}"
