"""The session-start reaper: a killed run's PostgreSQL cluster and servers are stopped,
a live run's are left alone (tests/support/strays.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PgCluster
from tests.support.strays import OWNER_ENV, OWNER_FILE, owner_alive, owner_tag, reap_strays
from tests.support.waits import wait_until

REPO = Path(__file__).resolve().parents[2]

_MAKE_CLUSTER = """
import sys, time
from tests.support.postgres import start_cluster
cluster = start_cluster()
print(cluster.root, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def dead_owner() -> str:
    """The owner tag of a process that has exited."""
    proc = subprocess.Popen(["sleep", "600"])
    tag = owner_tag(proc.pid)
    proc.kill()
    proc.wait()
    return tag


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_owner_tags_tell_a_live_process_from_a_dead_or_reused_pid(dead_owner: str) -> None:
    assert owner_alive(owner_tag())
    assert not owner_alive(dead_owner)
    # The same pid with another start time is another process (the pid was reused).
    pid, _, start = owner_tag().partition(":")
    assert not owner_alive(f"{pid}:{int(start) + 1}")


def test_a_killed_runs_cluster_is_stopped_and_removed_and_a_live_ones_kept(
    pg_cluster: PgCluster,
) -> None:
    maker = subprocess.Popen(
        [sys.executable, "-c", _MAKE_CLUSTER], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert maker.stdout is not None
        root = Path(maker.stdout.readline().strip())
        assert (root / OWNER_FILE).read_text().strip() == owner_tag(maker.pid)
        postmaster = int((root / "data" / "postmaster.pid").read_text().split()[0])
        assert _alive(postmaster)
    finally:
        # What a `timeout` or a kill -9 of pytest leaves: the cluster, without its owner.
        maker.send_signal(signal.SIGKILL)
        maker.wait()
        if maker.stdout is not None:
            maker.stdout.close()

    done = reap_strays(root.parent)

    assert f"removed {root}" in done
    assert not root.exists()
    wait_until(lambda: not _alive(postmaster), 10, "the stray cluster's postmaster to stop")
    # This session's own cluster (a live owner) is untouched and still serves.
    assert pg_cluster.root.is_dir()
    assert pg_cluster.running()
    name = pg_cluster.create_database()
    pg_cluster.drop_database(name)


def test_a_server_of_a_dead_owner_is_stopped_and_one_of_a_live_owner_kept(
    dead_owner: str, sleepers: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    stray = subprocess.Popen(["sleep", "600"], env={**os.environ, OWNER_ENV: dead_owner})
    mine = subprocess.Popen(["sleep", "600"], env={**os.environ, OWNER_ENV: owner_tag()})
    unowned = subprocess.Popen(["sleep", "600"])
    sleepers += [stray, mine, unowned]
    time.sleep(0.2)  # the exec done, so /proc/PID/environ is the sleep's own

    done = reap_strays(tmp_path)

    assert f"stopped pid {stray.pid} (owner {dead_owner} is gone)" in done
    assert stray.wait(timeout=10) == -signal.SIGTERM
    assert mine.poll() is None
    assert unowned.poll() is None
    assert not any(str(mine.pid) in line or str(unowned.pid) in line for line in done)
