"""Config-repo ACLs: the pure diff, and real ``setfacl``/``getfacl`` on a temp tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.repoacl import acl_changes, grant_repo, named_uids, sync_repo

UIDS = st.frozensets(st.integers(1000, 1010))


@given(UIDS, UIDS, UIDS)
def test_after_the_changes_exactly_the_wanted_hive_users_remain(
    current: frozenset[int], wanted: frozenset[int], hive: frozenset[int]
) -> None:
    grant, revoke = acl_changes(current, wanted, hive)
    result = (current - revoke) | grant
    assert result & (hive | wanted) == wanted  # every wanted uid, no unwanted hive uid
    assert result - hive - wanted == current - hive - wanted  # foreign entries untouched
    assert not grant & current and revoke <= current  # no redundant setfacl call


@pytest.mark.skipif(shutil.which("setfacl") is None, reason="needs Debian's acl package")
def test_sync_moves_the_entries_on_every_file_and_keeps_foreign_ones(tmp_path: Path) -> None:
    repo = tmp_path / "config"
    (repo / ".git").mkdir(parents=True)
    (repo / "agent.toml").write_text("")
    old, stays, new, foreign = 54301, 54302, 54303, 54399
    for uid in (old, stays, foreign):
        grant_repo(repo, uid)
    assert named_uids(repo) == {old, stays, foreign}

    sync_repo(repo, {stays, new}, hive_uids={old, stays, new})

    assert named_uids(repo) == {stays, new, foreign}
    assert named_uids(repo / ".git") == {stays, new, foreign}  # recursive, default entries too
    text = subprocess.run(
        ["getfacl", "--numeric", "--omit-header", "--absolute-names", str(repo / "agent.toml")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"user:{new}:rw-" in text and f"user:{old}:" not in text
