"""Tests that run processes as real per-agent users under bubblewrap.

A home such users can traverse (pytest's tmp dirs are 0700), an agent's runtime
prepared as its host prepares it, and a command run in its sandbox. Every such
test needs root and shares one xdist worker (:data:`SYSUSER_MARKS`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from hyperhive.agent.runtime import AgentRuntime
from hyperhive.config import HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.sysusers import remove_user

__all__ = ["SYSUSER_MARKS", "agent_runtime", "run_sandboxed", "traversable_home"]

SYSUSER_MARKS = [
    # Concurrent useradd/userdel contend for /etc/passwd's lock: one xdist worker for all.
    pytest.mark.xdist_group("sysusers"),
    pytest.mark.skipif(os.geteuid() != 0, reason="per-agent users need root (CI runs as root)"),
]


@contextmanager
def traversable_home(prefix: str, agents: Iterable[str]) -> Iterator[Path]:
    """A fresh home under /tmp, mode 0755; at the end the ``agents``' system users go,
    before the home (and the hive id their names carry) does."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for agent in agents:
            remove_user(HivePaths(path), agent)
        subprocess.run(["rm", "-rf", str(path)], check=False)


def agent_runtime(coord: Coordinator, name: str, parent: str | None = None) -> AgentRuntime:
    """``name``'s runtime with its applied config, its dirs and user made."""
    rt = AgentRuntime(
        name=name,
        config=coord.registry.config(name),
        parent=parent,
        paths=coord.paths,
        hive=coord.config,
    )
    rt.prepare_dirs()
    return rt


async def run_sandboxed(
    rt: AgentRuntime, argv: Sequence[str], *, agent_socket: bool = True
) -> tuple[int, str]:
    """Run ``argv`` in the agent's sandbox (``agent_socket=False``: as a subagent's,
    without the coordinator socket): its exit code and its stdout and stderr."""
    proc = await rt.sandbox(agent_socket=agent_socket).open_process(
        list(argv), stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    out = b""
    async for chunk in proc.stdout:
        out += chunk
    return await proc.wait(), out.decode(errors="replace")
