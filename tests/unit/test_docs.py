"""What users read stays true: the newcomer's guide names real files and symbols, and no
text a user reads carries an internal tracker number ("issue 11", "#11")."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from hyperhive.cli import main as hivectl
from hyperhive.configdoc import render as render_config
from hyperhive.tools.doc import render as render_tools

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "hyperhive"
GUIDE = ROOT / "docs" / "contributing.md"

# `path` or `path::symbol` in a code span; a path starts at a top-level folder of the repo.
_NAMED = re.compile(r"`((?:src|tests|docs|scripts|bench|deploy)/[^`\s:]+)(?:::([A-Za-z_]\w*))?`")


def named_in_guide() -> list[tuple[str, str | None]]:
    return [(m[1], m[2] or None) for m in _NAMED.finditer(GUIDE.read_text(encoding="utf-8"))]


def _defines(path: Path, symbol: str) -> bool:
    text = path.read_text(encoding="utf-8")
    pattern = rf"^\s*(?:async\s+def|def|class)\s+{symbol}\b|^{symbol}\s*(?::[^=\n]+)?="
    return re.search(pattern, text, re.M) is not None


def test_the_guide_names_enough_to_be_checked() -> None:
    named = named_in_guide()
    assert len({p for p, _ in named}) >= 30, named
    assert sum(s is not None for _, s in named) >= 15, named


@pytest.mark.parametrize(("path", "symbol"), named_in_guide(), ids=str)
def test_every_file_and_symbol_the_guide_names_exists(path: str, symbol: str | None) -> None:
    if "<" in path:  # a pattern such as src/hyperhive/tools/<group>.py: its folder exists
        target = ROOT / path[: path.index("<")].rsplit("/", 1)[0]
        assert target.is_dir(), f"docs/contributing.md names {path}, but {target} is gone"
        return
    target = ROOT / path
    assert target.exists(), f"docs/contributing.md names {path}, which does not exist"
    if symbol is not None:
        assert _defines(target, symbol), (
            f"docs/contributing.md names {path}::{symbol}, but {path} defines no {symbol}"
        )


def test_the_check_catches_a_moved_symbol(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("class Kept:\n    pass\n\nasync def also():\n    pass\n\nTABLE: int = 1\n")
    assert _defines(module, "Kept") and _defines(module, "also") and _defines(module, "TABLE")
    assert not _defines(module, "Gone") and not _defines(module, "Kep")


# ---- no tracker numbers where users read ----------------------------------------------

# A number after '#' is fine when it is a hive object the user sees (an approval, a message,
# a reminder…); anything else like "#11", "issue 11" or "turn 2 issues" is a tracker's.
_HASH_OK = re.compile(
    r"(approval|msg|message|reminder|question|schedule|task|todo|loose end)s? #\d+$", re.I
)
_TRACKER = re.compile(r"\bissues?\s*#?\d+\b|\bturn \d+ issues?\b|\b(?:PR|pull request) #?\d+\b")


def tracker_numbers(text: str) -> list[str]:
    found = [m.group(0) for m in _TRACKER.finditer(text)]
    for m in re.finditer(r"(?<![\w&/])#(\d+)\b", text):
        before = text[max(0, m.start() - 30) : m.end()]
        if not _HASH_OK.search(before):
            found.append(text[max(0, m.start() - 20) : m.end()].strip())
    return found


def _read_files() -> Iterator[tuple[str, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((SRC / "core" / "dashboard" / "templates").rglob("*.html"))
    files += sorted((SRC / "core" / "dashboard" / "static").rglob("*.js"))
    files += sorted((SRC / "agent" / "prompts").rglob("*.md"))
    files += sorted((SRC / "agent" / "skills").rglob("*.md"))
    for f in files:
        yield str(f.relative_to(ROOT)), f.read_text(encoding="utf-8")


def _help(command: click.Command, prog: str) -> Iterator[tuple[str, str]]:
    with click.Context(command, info_name=prog) as ctx:
        yield f"`{prog} --help`", command.get_help(ctx)
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _help(sub, f"{prog} {name}")


@functools.cache
def _strings_in_code() -> tuple[tuple[str, str], ...]:
    """Every string literal of the package that is not a docstring: messages, help, prompts."""
    return tuple(_walk_strings())


def _walk_strings() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


def user_texts() -> Iterator[tuple[str, str]]:
    yield from _read_files()
    yield from _help(hivectl, "hivectl")
    yield "the tools reference", render_tools()
    yield "the configuration reference", render_config()
    yield from _strings_in_code()


def test_the_tracker_check_tells_them_apart() -> None:
    assert tracker_numbers("see issue 14, first slice") == ["issue 14"]
    assert tracker_numbers("(#11)") and tracker_numbers("since issue #13's economy")
    assert tracker_numbers("Where the core is going (turn 2 issues)")
    assert tracker_numbers("Your approval #3 for w was approved; [msg #12]; reminder #4") == []
    assert tracker_numbers("agents/<name>/config, color #fff, `a#1`") == []


def test_no_tracker_numbers_where_users_read() -> None:
    found = [f"{where}: {hit!r}" for where, text in user_texts() for hit in tracker_numbers(text)]
    assert not found, "internal tracker numbers in user-facing text:\n" + "\n".join(found)


# ---- pointers into the docs stay good ---------------------------------------------------


def test_the_readme_links_to_pages_that_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?!https?://|#)[^)\s#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 10, links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_messages_that_point_into_the_docs_point_at_pages_that_exist() -> None:
    pointers = {
        (where, page)
        for where, text in _strings_in_code()
        for page in re.findall(r"\bdocs/[\w/.-]+\.md\b", text)
    }
    assert pointers, "expected the package's messages to point into docs/"
    missing = [f"{where}: {page}" for where, page in sorted(pointers) if not (ROOT / page).exists()]
    assert not missing, "messages point at docs pages that do not exist:\n" + "\n".join(missing)
