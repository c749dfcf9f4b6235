"""Resource limits through cgroup v1 under the agent host's own cgroup.

Measured on the project's machines: v1 ``memory``, ``pids`` and ``cpu`` work
under the process's own cgroup; v2 has no controllers. Where a limit cannot
be set the reason is returned (and shown in logs and the dashboard), never
silently dropped.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hyperhive.config import ResourceLimits

__all__ = ["CGROUP_ROOT", "prepare_cgroups"]

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


def _own(controller: str, proc_cgroup: str) -> str | None:
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def prepare_cgroups(
    agent: str,
    limits: ResourceLimits,
    root: Path = CGROUP_ROOT,
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    *,
    unit: str,
) -> tuple[tuple[Path, ...], list[str]]:
    """Create the agent's cgroups (named ``unit``, its system user) and write its limits.

    Returns (dirs to join, problems).
    """
    wanted: list[tuple[str, str, str]] = []
    if limits.memory_mb is not None:
        wanted.append(("memory", "memory.limit_in_bytes", str(limits.memory_mb << 20)))
    if limits.pids is not None:
        wanted.append(("pids", "pids.max", str(limits.pids)))
    if limits.cpu_percent is not None:
        wanted.append(("cpu", "cpu.cfs_quota_us", str(CPU_PERIOD_US * limits.cpu_percent // 100)))
    dirs: list[Path] = []
    problems: list[str] = []
    try:
        table = proc_cgroup.read_text()
    except OSError as exc:
        return (), [f"cannot read {proc_cgroup}: {exc}"] if wanted else []
    for controller, knob, value in wanted:
        own = _own(controller, table)
        if own is None:
            problems.append(f"{controller}: no cgroup v1 {controller} controller here")
            continue
        path = root / controller / own.lstrip("/") / unit
        try:
            path.mkdir(exist_ok=True)
            if controller == "cpu":
                (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (path / knob).write_text(value)
        except OSError as exc:
            problems.append(f"{controller}: cannot set {knob} in {path} ({exc.strerror})")
            continue
        dirs.append(path)
    for problem in problems:
        log.warning("%s: resource limit not applied: %s", agent, problem)
    return tuple(dirs), problems
