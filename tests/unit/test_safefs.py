"""safefs.write_if_changed_beneath: rewrites only what differs, never through a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyperhive.safefs import write_if_changed_beneath


def _ident(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_ino, st.st_mtime_ns


def test_the_same_bytes_are_not_written_again(tmp_path: Path) -> None:
    path = tmp_path / "a" / "f.md"
    assert write_if_changed_beneath(tmp_path, path, b"one") is True
    before = _ident(path)
    assert write_if_changed_beneath(tmp_path, path, b"one") is False
    assert _ident(path) == before  # same inode: no temp file renamed over it


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.write_bytes(b"onf"), id="same size, other bytes"),
        pytest.param(lambda p: p.write_bytes(b"one\n"), id="a byte appended"),
        pytest.param(lambda p: p.write_bytes(b""), id="emptied"),
        pytest.param(lambda p: p.chmod(0o600), id="other mode"),
        pytest.param(lambda p: p.unlink(), id="removed"),
    ],
)
def test_anything_else_is_rewritten(tmp_path: Path, spoil: object) -> None:
    path = tmp_path / "f.md"
    write_if_changed_beneath(tmp_path, path, b"one")
    spoil(path)  # type: ignore[operator]
    assert write_if_changed_beneath(tmp_path, path, b"one") is True
    assert path.read_bytes() == b"one"
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_link_with_the_same_content_is_replaced_not_kept(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"one")
    home = tmp_path / "home"
    home.mkdir()
    os.symlink(outside, home / "f.md")
    assert write_if_changed_beneath(home, home / "f.md", b"one") is True
    assert not (home / "f.md").is_symlink()
    assert outside.read_bytes() == b"one"


def test_a_planted_fifo_neither_hangs_nor_survives(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.md")
    assert write_if_changed_beneath(tmp_path, tmp_path / "f.md", b"one") is True
    assert (tmp_path / "f.md").read_bytes() == b"one"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_another_owner_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "f.md"
    write_if_changed_beneath(tmp_path, path, b"one", owner=(4242, 4343))
    assert write_if_changed_beneath(tmp_path, path, b"one", owner=(4242, 4343)) is False
    os.chown(path, 0, 0)
    assert write_if_changed_beneath(tmp_path, path, b"one", owner=(4242, 4343)) is True
    assert (path.stat().st_uid, path.stat().st_gid) == (4242, 4343)
