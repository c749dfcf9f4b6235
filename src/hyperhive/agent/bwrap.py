"""The bubblewrap command line for an agent's processes.

Pure module: no I/O. :func:`isolated_argv` is the one function that decides
what an agent's process can see and touch; it is unit-tested exhaustively.
Paths keep the same names inside and outside the sandbox, so nothing that
crosses the boundary (a ``Read(<path>)`` pointer, a config file) needs
translating.

Inside: read-only system dirs, the Python environment and the claude
install; read-write only the agent's own ``state/``, ``home/``, ``work/`` and
its descendants' proposed config repos; the agent's coordinator socket;
private ``/tmp``, ``/proc`` and ``/dev``; every namespace unshared except the
network (loopback reaches the MCP surfaces and the model API).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SYSTEM_RO", "Isolation", "isolated_argv"]

# Read-only from the host. /etc holds passwd, resolv.conf and CA certificates;
# secrets there (shadow) stay unreadable to a non-root agent user anyway.
SYSTEM_RO: tuple[str, ...] = ("/usr", "/etc", "/opt")
# Merged-/usr layouts keep these as symlinks; others have real dirs.
SYSTEM_LINKS: tuple[tuple[str, str], ...] = (
    ("/bin", "usr/bin"),
    ("/sbin", "usr/sbin"),
    ("/lib", "usr/lib"),
    ("/lib64", "usr/lib64"),
)
BWRAP = "bwrap"
SETPRIV = "setpriv"


@dataclass(frozen=True)
class Isolation:
    """Everything the sandbox of one agent is built from (resolved by the host)."""

    agent: str
    uid: int | None
    gid: int | None
    rw: tuple[Path, ...]
    ro: tuple[Path, ...] = ()
    sockets: tuple[Path, ...] = ()
    cgroups: tuple[Path, ...] = ()
    system_links: tuple[tuple[str, str], ...] = SYSTEM_LINKS
    system_ro: tuple[str, ...] = SYSTEM_RO
    existing: frozenset[str] = field(default_factory=frozenset)
    # (host path, path inside): read-only, over what the system dirs show there (a
    # choom session's /etc/claude-code). The inside path must exist on the host.
    overlays: tuple[tuple[Path, Path], ...] = ()

    def present(self, path: str) -> bool:
        """Whether a system path exists on this host (``existing`` is filled by the host)."""
        return not self.existing or path in self.existing


def _bwrap(iso: Isolation, argv: Sequence[str], cwd: Path) -> list[str]:
    out = [BWRAP, "--unshare-all", "--share-net", "--die-with-parent", "--new-session"]
    for path in iso.system_ro:
        if iso.present(path):
            out += ["--ro-bind", path, path]
    for link, target in iso.system_links:
        if iso.present(link):
            out += ["--symlink", target, link]
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for ro in sorted(set(iso.ro)):
        out += ["--ro-bind", str(ro), str(ro)]
    for source, inside in iso.overlays:
        out += ["--ro-bind", str(source), str(inside)]
    for rw in sorted(set(iso.rw)):
        out += ["--bind", str(rw), str(rw)]
    for sock in iso.sockets:
        out += ["--bind", str(sock), str(sock)]
    out += ["--chdir", str(cwd), "--", *argv]
    return out


def isolated_argv(iso: Isolation, argv: Sequence[str], cwd: Path) -> list[str]:
    """The full argv: join the agent's cgroups, drop to its user, then bubblewrap.

    The cgroup join and the privilege drop happen in the process itself before
    ``exec``, so not even the first instruction of the agent's command runs
    outside its limits or as root.
    """
    if not argv:
        raise ValueError("cannot isolate an empty argv")
    if cwd not in iso.rw and not any(cwd.is_relative_to(p) for p in iso.rw):
        raise ValueError(f"working dir {cwd} is not one of {iso.agent}'s writable dirs")
    inner = _bwrap(iso, argv, cwd)
    if iso.uid is not None and iso.gid is not None:
        inner = [
            SETPRIV,
            f"--reuid={iso.uid}",
            f"--regid={iso.gid}",
            "--clear-groups",
            "--",
            *inner,
        ]
    if not iso.cgroups:
        return inner
    joins = " && ".join(f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))}" for cg in iso.cgroups)
    return ["/bin/sh", "-c", f'{joins} || exit 97; exec "$@"', "hyperhive-cgroup", *inner]
