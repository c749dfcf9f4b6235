"""The moved archive: a round trip keeps the agent's files, unpacking refuses anything
that would land outside the agent's directory or is not a plain file, dir or link."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from hyperhive.agent.moving import pack, unpack


def test_a_round_trip_keeps_the_parts_and_leaves_markers_behind(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "state").mkdir(parents=True)
    (src / "state" / "notes.md").write_text("remember 42\n")
    (src / "home" / ".claude" / "projects").mkdir(parents=True)
    (src / "home" / ".claude" / "projects" / "s.jsonl").write_text('{"x":1}\n')
    (src / "work").mkdir()
    (src / "work" / "latest").symlink_to("../state/notes.md")
    (src / "config").mkdir()
    (src / "config" / "agent.toml").write_text("model = 'x'\n")
    (src / ".move-abc").touch()
    (src / "stray").write_text("not an agent part\n")
    archive = tmp_path / "a.tar"
    size, sha = pack(src, archive)
    assert size == archive.stat().st_size
    assert sha == hashlib.sha256(archive.read_bytes()).hexdigest()

    dest = tmp_path / "dest"
    unpack(archive, dest)
    assert (dest / "state" / "notes.md").read_text() == "remember 42\n"
    assert (dest / "home" / ".claude" / "projects" / "s.jsonl").read_text() == '{"x":1}\n'
    assert (dest / "work" / "latest").read_text() == "remember 42\n"
    assert (dest / "config" / "agent.toml").exists()
    assert not (dest / ".move-abc").exists() and not (dest / "stray").exists()


def _tar_with(tmp_path: Path, member: tarfile.TarInfo, data: bytes = b"x") -> Path:
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as tar:
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


def _sym(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def _dev(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    return info


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (tarfile.TarInfo("../escape"), "outside"),
        (tarfile.TarInfo("/etc/passwd"), "outside"),
        (tarfile.TarInfo("state/../../escape"), "outside"),
        (tarfile.TarInfo("elsewhere/file"), "unexpected top-level"),
        (_sym("state/link", "/etc/shadow"), "symlink leaving"),
        (_sym("state/link", "../../outside"), "symlink leaving"),
        (_dev("state/tty"), "device"),
    ],
)
def test_unpacking_refuses_what_could_leave_the_agent_dir(
    tmp_path: Path, member: tarfile.TarInfo, why: str
) -> None:
    archive = _tar_with(tmp_path, member)
    with pytest.raises(ValueError, match=why):
        unpack(archive, tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []  # checked before anything is written
