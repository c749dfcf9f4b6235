"""One hive per home: the lock refuses a second holder by name and frees on release."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.errors import Conflict
from hyperhive.homelock import HomeLock, holder, refuse_if_held


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "hive")
    assert holder(paths, "coordinator") is None
    refuse_if_held(paths)  # nothing runs: no refusal, and nothing created
    assert not paths.home.exists()
    with HomeLock(paths, "coordinator"):
        assert holder(paths, "coordinator") == os.getpid()
        with pytest.raises(Conflict, match=f"coordinator runs as pid {os.getpid()}"):
            HomeLock(paths, "coordinator").acquire()
        with pytest.raises(Conflict, match="already in use"):
            refuse_if_held(paths)
        with HomeLock(paths, "host"):  # one of each role per home
            assert holder(paths, "host") == os.getpid()
    assert holder(paths, "coordinator") is None and holder(paths, "host") is None
    with HomeLock(paths, "coordinator"):  # a stale file never blocks a restart
        pass


def test_the_lock_file_is_private(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    with HomeLock(paths, "host") as lock:
        assert lock.path.stat().st_mode & 0o077 == 0
        assert lock.path.read_text().strip() == str(os.getpid())
