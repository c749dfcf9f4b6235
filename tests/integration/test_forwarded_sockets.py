"""An agent's socket on its host, closed and at once opened again (a fenced incarnation
and the next one): the new socket file survives the old server's cleanup.

Real unix sockets on this machine's disk (ext4 hands a new file the inode number
of one just removed, so "is it still the file I made" must not be the inode alone).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from hyperhive.netlink.forward import ForwardedSockets
from hyperhive.unixsock import is_listening, listening_socket, unlink_if
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


async def test_a_reopened_agent_socket_is_still_served_after_the_old_one_ends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents" / "alice.sock"
    sockets = ForwardedSockets(lambda: None, 1 << 20)
    async with anyio.create_task_group() as tg:
        for incarnation in range(1, 21):  # many rounds: each a chance for an inode reuse
            await sockets.open(tg, "alice", path, incarnation, None)
            assert is_listening(path)
            sockets.close("alice")
        await sockets.open(tg, "alice", path, 21, None)
        await anyio.wait_all_tasks_blocked()  # every old server has run its cleanup
        assert path.exists() and is_listening(path)
        assert sockets.incarnations["alice"] == 21
        sockets.close("alice")
        await until(lambda: not path.exists(), 5)  # and the last one's file goes with it


def test_unlink_if_keeps_a_later_socket_file_on_the_same_path(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    sock, made = listening_socket(path, 0o600, None)
    try:
        time.sleep(0.05)  # past the file system's coarse clock tick
        os.chmod(path, 0o600)  # a changed file: same inode, later change time
        assert os.stat(path).st_ctime_ns != made[1]
        unlink_if(path, made)
        assert path.exists()
    finally:
        sock.close()
    sock, made = listening_socket(path, 0o600, None)
    sock.close()
    unlink_if(path, made)  # its own file: removed
    assert not path.exists()
