"""Tests that run processes as real per-agent users under bubblewrap.

A home such users can traverse (pytest's tmp dirs are 0700), an agent's
enclosure prepared as its host prepares it, and a command run in its sandbox.
Every such test needs root and shares one xdist worker (:data:`SYSUSER_MARKS`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.sysusers import remove_user

__all__ = [
    "SYSUSER_MARKS",
    "Enclosed",
    "agent_enclosed",
    "enclosed",
    "run_sandboxed",
    "traversable_home",
]

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


@dataclass(frozen=True)
class Enclosed:
    """An agent's spec and its enclosure, prepared as its host prepares them (no host)."""

    spec: AgentSpec
    enclosure: Enclosure

    @property
    def state_dir(self) -> Path:
        return self.spec.state_dir

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox:
        return self.enclosure.sandbox(self.spec, agent_socket=agent_socket)


def enclosed(spec: AgentSpec) -> Enclosed:
    """``spec``'s dirs (and, under bubblewrap, its user) made; blocking."""
    return Enclosed(spec, Enclosure.prepare(spec))


def agent_enclosed(
    coord: Coordinator, name: str, parent: str | None = None, descendants: tuple[str, ...] = ()
) -> Enclosed:
    """``name`` with its applied config, its dirs and user made."""
    spec = AgentSpec(
        name=name,
        config=coord.registry.config(name),
        paths=coord.paths,
        hive=coord.config,
        parent=parent,
        descendants=descendants,
    )
    return enclosed(spec)


class Sandboxed(Protocol):
    """An active agent, or an :class:`Enclosed` one."""

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox: ...


async def run_sandboxed(
    rt: Sandboxed, argv: Sequence[str], *, agent_socket: bool = True
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
