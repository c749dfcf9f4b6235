"""A host's credential file: only the host's user reads it; the host refuses a looser one.

The agent's own system user (a real one, made as the host makes it) runs a real
process that tries to read the file and is refused by the kernel; the host
refuses to start on a file another user could read, or one it does not own,
and says how to fix it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.errors import ConfigError
from hyperhive.netlink.dialer import read_credential
from hyperhive.sysusers import can_manage_users, ensure_user, remove_user
from tests.support.hostlink import write_credential


@pytest.fixture
def hive_paths() -> Iterator[HivePaths]:
    # Under /tmp, not pytest's tmp_path: a system user must be able to traverse to it.
    with tempfile.TemporaryDirectory(prefix="hh-cred-") as home:
        os.chmod(home, 0o755)
        yield HivePaths(Path(home))


def test_an_agents_user_cannot_read_its_hosts_credential(hive_paths: HivePaths) -> None:
    if not can_manage_users():
        pytest.skip("needs root to make the agent's system user")
    cred = write_credential(hive_paths.home / "host" / "h1.credential", "hhc1_secret")
    cred.parent.chmod(0o755)  # even with the directory open, the file is the host's alone
    ids = ensure_user(hive_paths, "alice")
    assert ids is not None
    try:
        attempt = subprocess.run(
            ["cat", str(cred)],
            user=ids[0],
            group=ids[1],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert attempt.returncode != 0 and "Permission denied" in attempt.stderr
        assert "hhc1_secret" not in attempt.stdout
        assert read_credential(cred) == "hhc1_secret"  # the host's own user reads it
    finally:
        remove_user(hive_paths, "alice")


def test_the_host_refuses_a_credential_file_others_can_read(tmp_path: Path) -> None:
    cred = write_credential(tmp_path / "h1.credential", "hhc1_secret")
    cred.chmod(0o644)
    with pytest.raises(ConfigError, match=r"mode 644.*chmod 600"):
        read_credential(cred)
    cred.chmod(0o600)
    with pytest.raises(ConfigError, match=rf"owned by uid {os.geteuid()}.*chown 4242"):
        read_credential(cred, euid=4242)
    empty = write_credential(tmp_path / "empty", "")
    with pytest.raises(ConfigError, match="empty"):
        read_credential(empty)
    with pytest.raises(ConfigError, match="cannot read"):
        read_credential(tmp_path / "missing")
