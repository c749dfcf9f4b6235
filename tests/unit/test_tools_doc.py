"""docs/tools.md is generated from the declarations and must be current."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.tools.catalog import CATALOG
from hyperhive.tools.doc import REGENERATE, main, render

ROOT = Path(__file__).resolve().parents[2]


def test_docs_tools_md_is_current() -> None:
    current = (ROOT / "docs" / "tools.md").read_text()
    assert current == render(), f"docs/tools.md is not current; regenerate it: {REGENERATE}"


def test_the_reference_documents_every_tool_and_argument() -> None:
    text = render()
    for tool in CATALOG:
        assert f"### `{tool.name}`" in text
        for name in tool.args.model_fields:
            assert f"| `{name}` |" in text, f"{tool.name}.{name}"
    assert "&lt;parent&gt;" in text  # a placeholder stays readable, not an HTML tag


def test_check_fails_on_a_stale_file_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tools.md"
    out.write_text("# stale\n")
    assert main(["--check", "--out", str(out)]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--out", str(out)]) == 0
    assert main(["--check", "--out", str(out)]) == 0
    assert out.read_text() == render()
