"""The hive's home (``--home``, ``$HIVE_HOME``, or the default) and its layout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HOME_ENV", "SYSTEM_HOME", "HivePaths", "resolve_home"]

HOME_ENV = "HIVE_HOME"

SYSTEM_HOME = Path("/var/lib/hyperhive")


def resolve_home(
    explicit: str | os.PathLike[str] | None = None, *, euid: int | None = None
) -> Path:
    """``--home``, else ``$HIVE_HOME``, else ``~/.local/share/hyperhive``.

    As root the default is ``/var/lib/hyperhive``: root's home is mode 0700,
    so sandboxed agent users could never reach a hive kept under it.
    """
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if (os.geteuid() if euid is None else euid) == 0:
        return SYSTEM_HOME
    return (Path.home() / ".local" / "share" / "hyperhive").resolve()


@dataclass(frozen=True, slots=True)
class HivePaths:
    """Where everything of one hive lives under its home.

    ``run_dir`` moves the runtime dir (sockets, per-agent runtime files) off the
    home: a remote agent host serves its agents' sockets in a run dir of its
    own, never beside the coordinator's.
    """

    home: Path
    run_dir: Path | None = None

    @property
    def db(self) -> Path:
        return self.home / "hive.db"

    @property
    def meta(self) -> Path:
        return self.home / "meta"

    @property
    def topology(self) -> Path:
        return self.meta / "topology.json"

    @property
    def run(self) -> Path:
        return self.run_dir if self.run_dir is not None else self.home / "run"

    @property
    def host_sock(self) -> Path:
        return self.run / "host.sock"

    @property
    def hosts_sock(self) -> Path:
        return self.run / "hosts.sock"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    def agent_sock(self, name: str) -> Path:
        return self.run / "agents" / f"{name}.sock"

    def agent_dir(self, name: str) -> Path:
        return self.home / "agents" / name

    def agent_config_repo(self, name: str) -> Path:
        return self.agent_dir(name) / "config"

    def agent_state(self, name: str) -> Path:
        return self.agent_dir(name) / "state"

    def agent_home(self, name: str) -> Path:
        return self.agent_dir(name) / "home"

    def agent_work(self, name: str) -> Path:
        return self.agent_dir(name) / "work"

    def agent_runtime(self, name: str) -> Path:
        return self.run / "agent-runtime" / name

    def applied_config(self, name: str) -> Path:
        return self.meta / "agents" / f"{name}.toml"
