"""The claude version the package carries is the one the repository pins for npm."""

from __future__ import annotations

import json
from pathlib import Path

from hyperhive.claudebin import CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION

REPO = Path(__file__).resolve().parents[2]


def test_the_pinned_claude_is_package_json_s() -> None:
    package = json.loads((REPO / "package.json").read_text())
    assert package["dependencies"][CLAUDE_CODE_PACKAGE] == CLAUDE_CODE_VERSION


def test_the_pinned_claude_is_the_lock_s() -> None:
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert lock["packages"][f"node_modules/{CLAUDE_CODE_PACKAGE}"]["version"] == CLAUDE_CODE_VERSION
