"""Per-hive system users, with real ``useradd``/``usermod``/``userdel`` (root only).

Every agent name here starts with ``hhtu-`` so nothing collides with another
suite's users, and every user a test makes is removed after it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import STORE_URL_ENV, AgentConfig, HivePaths
from hyperhive.errors import StorageError
from hyperhive.names import legacy_system_user
from hyperhive.sysusers import agent_user, ensure_user, hive_id, owner_comment, remove_user
from tests.support.hive import SERVE_START_WITHIN_S, seed_home
from tests.support.postgres import PgCluster
from tests.support.procs import wait_until

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creating system users needs root"),
    # One xdist worker for all tests that make system users (/etc/passwd's lock).
    pytest.mark.xdist_group("sysusers"),
]

TAG = f"hhtu-{os.getpid() % 100000}"


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture
def made() -> Iterator[list[str]]:
    """User names a test creates or may create; each removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if _exists(name):
            subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def two_homes() -> Iterator[tuple[HivePaths, HivePaths]]:
    dirs = [Path(tempfile.mkdtemp(prefix="hhtu-", dir="/tmp")) for _ in range(2)]
    for d in dirs:
        d.chmod(0o755)
    yield HivePaths(dirs[0]), HivePaths(dirs[1])
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def test_two_hives_queens_are_two_users_and_destroy_removes_only_its_own(
    two_homes: tuple[HivePaths, HivePaths], made: list[str]
) -> None:
    a, b = two_homes
    agent = f"{TAG}-queen"
    made.extend([agent_user(a, agent), agent_user(b, agent)])
    assert hive_id(a) != hive_id(b) and hive_id(a) == hive_id(a)  # stable once made
    ids_a, ids_b = ensure_user(a, agent), ensure_user(b, agent)
    assert ids_a is not None and ids_b is not None and ids_a[0] != ids_b[0]
    assert pwd.getpwuid(ids_a[0]).pw_gecos == owner_comment(a, agent)
    assert ensure_user(a, agent) == ids_a  # found again, not made again
    remove_user(a, agent)
    assert not _exists(agent_user(a, agent))
    assert pwd.getpwnam(agent_user(b, agent)).pw_uid == ids_b[0]


def test_a_user_not_marked_as_this_hives_is_neither_used_nor_deleted(
    two_homes: tuple[HivePaths, HivePaths], made: list[str]
) -> None:
    a, _ = two_homes
    agent = f"{TAG}-squat"
    name = agent_user(a, agent)
    made.append(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--comment", "someone else", name], check=True
    )
    with pytest.raises(StorageError, match="is not agent .* of this hive"):
        ensure_user(a, agent)
    remove_user(a, agent)
    assert _exists(name)


def test_an_old_hh_user_of_this_hive_is_renamed_keeping_its_uid(
    two_homes: tuple[HivePaths, HivePaths], made: list[str]
) -> None:
    mine, other = two_homes
    agent = f"{TAG}-old"
    legacy = legacy_system_user(agent)
    made.extend([legacy, agent_user(mine, agent), agent_user(other, agent)])
    subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--comment",
            f"hyperhive agent {agent}",  # what earlier releases wrote
            legacy,
        ],
        check=True,
    )
    old = pwd.getpwnam(legacy)
    for paths in (mine, other):
        paths.agent_state(agent).mkdir(parents=True)
    os.chown(mine.agent_state(agent), old.pw_uid, old.pw_gid)  # this hive's agent's files
    # Another hive that shared the old user by accident does not get to claim it.
    theirs = ensure_user(other, agent)
    assert theirs is not None and theirs[0] != old.pw_uid and _exists(legacy)
    ids = ensure_user(mine, agent)
    assert ids is not None and ids[0] == old.pw_uid
    assert not _exists(legacy)
    renamed = pwd.getpwuid(old.pw_uid)
    assert renamed.pw_name == agent_user(mine, agent)
    assert renamed.pw_gecos == owner_comment(mine, agent)


@pytest.fixture
def operator_user(made: list[str]) -> pwd.struct_passwd:
    name = f"{TAG}-op"
    made.append(name)
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", name], check=True)
    return pwd.getpwnam(name)


def test_a_non_root_operator_runs_agents_as_itself_whatever_users_exist(
    two_homes: tuple[HivePaths, HivePaths],
    made: list[str],
    operator_user: pwd.struct_passwd,
    hive_store: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A root hive once made ``hh-<agent>`` (and this hive's name too): not ours to use."""
    if hive_store == "postgresql":
        # serve runs as the operator, who cannot reach the cluster's root-only socket:
        # the same database over TCP, with the password (as a remote database would be).
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        monkeypatch.setenv(STORE_URL_ENV, cluster.over_tcp(os.environ[STORE_URL_ENV]))
    paths, _ = two_homes
    agent = f"{TAG}-nr"
    seed_home(paths.home, {agent: AgentConfig()}, {agent: None}, 'runtime = "bwrap"\n')
    for name in (legacy_system_user(agent), agent_user(paths, agent)):
        made.append(name)
        subprocess.run(["useradd", "--system", "--no-create-home", name], check=True)
    subprocess.run(
        ["chown", "-R", f"{operator_user.pw_uid}:{operator_user.pw_gid}", str(paths.home)],
        check=True,
    )
    log = paths.home / "serve.log"
    with log.open("wb") as err:
        serve = subprocess.Popen(
            [
                "setpriv",
                f"--reuid={operator_user.pw_uid}",
                f"--regid={operator_user.pw_gid}",
                "--clear-groups",
                sys.executable,
                "-m",
                "hyperhive",
                "--home",
                str(paths.home),
                "serve",
                "--no-dashboard",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        sock = paths.agent_sock(agent)

        def up() -> bool:
            if serve.poll() is not None:
                raise AssertionError(f"serve exited {serve.returncode}: {log.read_text()}")
            return paths.host_sock.exists() and sock.exists()

        wait_until(up, SERVE_START_WITHIN_S, "the coordinator serving as the operator")
        assert sock.stat().st_uid == operator_user.pw_uid
        assert paths.db.exists() == (hive_store == "sqlite")  # the store the switch chose
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def test_an_old_user_still_in_use_is_kept_until_a_later_start(
    two_homes: tuple[HivePaths, HivePaths], made: list[str]
) -> None:
    paths, _ = two_homes
    agent = f"{TAG}-busy"
    legacy = legacy_system_user(agent)
    made.extend([legacy, agent_user(paths, agent)])
    subprocess.run(
        [
            "useradd",
            "--system",
            "--no-create-home",
            "--comment",
            f"hyperhive agent {agent}",
            legacy,
        ],
        check=True,
    )
    old = pwd.getpwnam(legacy)
    paths.agent_state(agent).mkdir(parents=True)
    os.chown(paths.agent_state(agent), old.pw_uid, old.pw_gid)
    busy = subprocess.Popen(
        ["setpriv", f"--reuid={old.pw_uid}", f"--regid={old.pw_gid}", "--clear-groups"]
        + ["sleep", "300"]
    )
    try:
        wait_until(lambda: os.stat(f"/proc/{busy.pid}").st_uid == old.pw_uid, 10, "sleep runs")
        assert ensure_user(paths, agent) == (old.pw_uid, old.pw_gid)  # usermod refuses: kept
        assert _exists(legacy)
    finally:
        busy.kill()
        busy.wait()
    assert ensure_user(paths, agent) == (old.pw_uid, old.pw_gid)
    assert pwd.getpwuid(old.pw_uid).pw_name == agent_user(paths, agent)
