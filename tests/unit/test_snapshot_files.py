"""A snapshot's files: what is collected (state/ and the resumed claude session, no link
followed), the size bound, what says "changed", and an unpack that trusts nothing."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from hyperhive.agent.snapshotfiles import (
    SnapshotTooBig,
    claude_slug,
    collect,
    pack,
    unpack,
)
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.errors import StorageError

SID = "0b7c2a4e-1111-4222-8333-444455556666"
LIMIT = 1 << 20


def spec_in(home: Path) -> AgentSpec:
    spec = AgentSpec("bob", AgentConfig(), HivePaths(home), HiveConfig())
    for d in (spec.state_dir, spec.home_dir, spec.work_dir):
        d.mkdir(parents=True, exist_ok=True)
    return spec


def session_dir(spec: AgentSpec) -> Path:
    return spec.home_dir / ".claude" / "projects" / claude_slug(spec.work_dir)


def seed(spec: AgentSpec) -> None:
    (spec.state_dir / "notes.md").write_text("the answer is 42\n")
    (spec.state_dir / "harness").mkdir()
    (spec.state_dir / "harness" / "session.json").write_text(json.dumps({"session_id": SID}))
    sessions = session_dir(spec)
    sessions.mkdir(parents=True)
    (sessions / f"{SID}.jsonl").write_text('{"type":"user","text":"first prompt"}\n')
    (sessions / SID / "subagents").mkdir(parents=True)
    (sessions / SID / "subagents" / "a.jsonl").write_text("{}\n")
    # Another session of claude's: not the one resumed, so not the agent's memory.
    (sessions / "other-session.jsonl").write_text("{}\n")


def test_the_state_and_the_resumed_session_are_collected_and_nothing_else(
    tmp_path: Path,
) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    (spec.work_dir / "scratch.txt").write_text("work is not durable state\n")
    got = collect(spec, LIMIT)
    slug = claude_slug(spec.work_dir)
    assert sorted(got.files) == [
        f"session/{slug}/{SID}.jsonl",
        f"session/{slug}/{SID}/subagents/a.jsonl",
        "state/harness/session.json",
        "state/notes.md",
    ]
    assert got.files["state/notes.md"][0] == b"the answer is 42\n"
    expected = sum(
        p.stat().st_size
        for p in [
            spec.state_dir / "notes.md",
            spec.state_dir / "harness" / "session.json",
            session_dir(spec) / f"{SID}.jsonl",
            session_dir(spec) / SID / "subagents" / "a.jsonl",
        ]
    )
    assert got.raw_bytes == expected


def test_links_and_special_files_the_agent_planted_are_not_followed(tmp_path: Path) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key").write_text("root's secret\n")
    (spec.state_dir / "to-file").symlink_to(outside / "key")
    (spec.state_dir / "to-dir").symlink_to(outside)
    os.mkfifo(spec.state_dir / "pipe")  # opening it blocking would hang the host
    got = collect(spec, LIMIT)
    assert sorted(got.skipped) == ["state/pipe", "state/to-dir", "state/to-file"]
    assert not any(b"secret" in data for data, _, _ in got.files.values())
    assert not any(name.startswith(("state/to-", "state/pipe")) for name in got.files)


def test_a_session_json_link_does_not_lead_the_collector_out(tmp_path: Path) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"session_id": "other-session"}))
    (spec.state_dir / "harness" / "session.json").unlink()
    (spec.state_dir / "harness" / "session.json").symlink_to(elsewhere)
    got = collect(spec, LIMIT)
    # No session id read through the link: no session collected at all.
    assert not any(name.startswith("session/") for name in got.files)


def test_a_state_over_the_bound_is_refused_with_its_size(tmp_path: Path) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    under = collect(spec, LIMIT).raw_bytes
    (spec.state_dir / "big.bin").write_bytes(b"x" * 5000)
    with pytest.raises(SnapshotTooBig) as refused:
        collect(spec, under + 4999)
    assert (refused.value.size, refused.value.limit) == (under + 5000, under + 4999)
    assert "snapshot_max_bytes" in refused.value.message
    assert "previous snapshot is kept" in refused.value.message
    assert collect(spec, under + 5000).raw_bytes == under + 5000  # at the bound: taken


def test_a_change_of_content_or_mode_changes_the_hashes_and_a_touch_does_not(
    tmp_path: Path,
) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    first = collect(spec, LIMIT).hashes()
    notes = spec.state_dir / "notes.md"
    os.utime(notes, (1, 1))
    assert collect(spec, LIMIT).hashes() == first
    notes.write_text("the answer is 43\n")
    second = collect(spec, LIMIT).hashes()
    assert second != first and second["state/notes.md"] != first["state/notes.md"]
    notes.chmod(0o600)
    assert collect(spec, LIMIT).hashes() != second
    (spec.state_dir / "new.md").write_text("")
    assert "state/new.md" in collect(spec, LIMIT).hashes()


def test_unpacked_on_another_host_the_files_are_back_and_the_session_under_its_slug(
    tmp_path: Path,
) -> None:
    source = spec_in(tmp_path / "h1")
    seed(source)
    blob = pack(collect(source, LIMIT))
    target = spec_in(tmp_path / "elsewhere" / "h2")  # another working dir: another slug
    assert claude_slug(target.work_dir) != claude_slug(source.work_dir)
    files, size = unpack(blob, target, None, LIMIT)
    assert (files, size) == (4, collect(source, LIMIT).raw_bytes)
    assert (target.state_dir / "notes.md").read_text() == "the answer is 42\n"
    assert json.loads((target.state_dir / "harness" / "session.json").read_text()) == {
        "session_id": SID
    }
    here = session_dir(target)
    assert (here / f"{SID}.jsonl").read_text() == '{"type":"user","text":"first prompt"}\n'
    assert (here / SID / "subagents" / "a.jsonl").exists()

    # What the target collects again is what the source sent (the slug aside).
    def kept(spec: AgentSpec) -> list[tuple[bytes, int]]:
        return sorted((data, mode) for data, mode, _ in collect(spec, LIMIT).files.values())

    assert kept(target) == kept(source)


def _archive(*members: tarfile.TarInfo, data: bytes = b"x") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for m in members:
            if m.isfile():
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))
            else:
                tar.addfile(m)
    return buf.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_member("state/../../escape"), "outside"),
        (_member("/etc/cron.d/x"), "outside"),
        (_member("work/notes.md"), "unexpected"),
        (_member("session/x.jsonl"), "unexpected"),
        (_member("state/link", tarfile.SYMTYPE, "/etc/passwd"), "link or device"),
        (_member("state/hard", tarfile.LNKTYPE, "state/notes.md"), "link or device"),
        (_member("state/dev", tarfile.CHRTYPE), "link or device"),
    ],
)
def test_an_unsafe_member_refuses_the_whole_snapshot(
    tmp_path: Path, member: tarfile.TarInfo, why: str
) -> None:
    spec = spec_in(tmp_path / "h2")
    blob = _archive(_member("state/ok.md"), member)
    with pytest.raises(StorageError, match=why):
        unpack(blob, spec, None, LIMIT)
    assert not (spec.state_dir / "ok.md").exists()  # nothing written before the refusal


def test_a_snapshot_unpacking_past_the_bound_writes_nothing(tmp_path: Path) -> None:
    spec = spec_in(tmp_path / "h2")
    blob = _archive(_member("state/a"), _member("state/b"), data=b"y" * 600)
    with pytest.raises(StorageError, match="over snapshot_max_bytes"):
        unpack(blob, spec, None, 1000)
    assert list(spec.state_dir.iterdir()) == []


def test_a_link_planted_where_a_restored_file_goes_is_not_written_through(
    tmp_path: Path,
) -> None:
    spec = spec_in(tmp_path / "h2")
    victim = tmp_path / "victim"
    victim.mkdir()
    (spec.state_dir / "harness").symlink_to(victim)
    blob = _archive(_member("state/harness/session.json"), data=b'{"session_id":"x"}')
    with pytest.raises(StorageError, match="symlink"):
        unpack(blob, spec, None, LIMIT)
    assert list(victim.iterdir()) == []


def test_a_session_line_being_written_is_left_for_the_next_snapshot(tmp_path: Path) -> None:
    spec = spec_in(tmp_path / "h1")
    seed(spec)
    session = session_dir(spec) / f"{SID}.jsonl"
    whole = session.read_bytes()
    session.write_bytes(whole + b'{"type":"assist')  # the next turn's claude, mid-write
    [(data, _, _)] = [
        v for k, v in collect(spec, LIMIT).files.items() if k.endswith(f"{SID}.jsonl")
    ]
    assert data == whole


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_restored_files_and_the_directories_made_for_them_are_the_agents_users(
    tmp_path: Path,
) -> None:
    source = spec_in(tmp_path / "h1")
    seed(source)
    target = spec_in(tmp_path / "h2")
    owner = (54321, 54322)  # the agent's user and group on the new host
    unpack(pack(collect(source, LIMIT)), target, owner, LIMIT)
    made = [
        target.state_dir / "notes.md",
        target.state_dir / "harness",
        target.state_dir / "harness" / "session.json",
        target.home_dir / ".claude",
        session_dir(target),
        session_dir(target) / f"{SID}.jsonl",
        session_dir(target) / SID / "subagents" / "a.jsonl",
    ]
    assert {p: (p.stat().st_uid, p.stat().st_gid) for p in made} == dict.fromkeys(made, owner)
