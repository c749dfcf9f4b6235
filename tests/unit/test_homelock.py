"""One hive per home: the lock refuses a second holder by name and frees on release."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from hyperhive.config import HivePaths
from hyperhive.errors import Conflict
from hyperhive.homelock import HomeLock, holder, refuse_if_held
from tests.support.surfaces import until


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


@pytest.mark.anyio
async def test_a_standby_waits_for_the_lock_and_takes_it_once_released(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    first = HomeLock(paths, "coordinator").acquire()
    told: list[int | None] = []
    standby = HomeLock(paths, "coordinator")
    async with anyio.create_task_group() as tg:
        got = anyio.Event()

        async def wait_for_it() -> None:
            await standby.wait_acquire(told.append)
            got.set()

        tg.start_soon(wait_for_it)
        # The lock is polled: there is no event to wait on.
        await until(lambda: told, 10)
        assert told == [os.getpid()] and not got.is_set()
        first.release()
        with anyio.fail_after(10):
            await got.wait()
    assert holder(paths, "coordinator") == os.getpid()
    with pytest.raises(Conflict):  # the standby now holds it: a third one is refused
        HomeLock(paths, "coordinator").acquire()
    standby.release()


@pytest.mark.anyio
async def test_a_standby_stopped_while_waiting_leaves_the_lock_alone(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    with HomeLock(paths, "coordinator"):
        with anyio.move_on_after(0.5):
            await HomeLock(paths, "coordinator").wait_acquire(lambda pid: None)
        assert holder(paths, "coordinator") == os.getpid()
    assert holder(paths, "coordinator") is None
