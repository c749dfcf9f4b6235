"""Podman as the tests and benchmarks drive it: the settings this machine needs, and
everything a test creates (containers, volumes, networks, tags) removed afterwards.

Podman runs here only with runc (crun refuses the hybrid cgroups), cgroupfs and
ulimits no higher than the caller's: ``scripts/image --print-conf`` writes those
settings, and every call here passes them through ``CONTAINERS_CONF``. Each
:class:`Podman` names its resources ``<prefix>-…`` and labels them with its owner
(``pid:starttime``), so a run killed before its teardown is swept by the next one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.deploy import REPO
from tests.support.strays import owner_alive, owner_tag

__all__ = [
    "COORDINATOR_IMAGE",
    "HOST_IMAGE",
    "OWNER_LABEL",
    "Podman",
    "build_images",
    "containers_conf",
    "podman_env",
    "podman_session",
    "sweep_strays",
]

COORDINATOR_IMAGE = "localhost/hyperhive-coordinator:latest"
HOST_IMAGE = "localhost/hyperhive-host:latest"
OWNER_LABEL = "org.hyperhive.test-owner"
# Building on a fresh machine downloads a Debian base (minutes on a slow mirror).
BUILD_WITHIN_S = 1500
CALL_WITHIN_S = 300


def containers_conf() -> Path:
    """The Podman settings file ``scripts/image`` writes for this machine."""
    out = subprocess.run(
        [str(REPO / "scripts" / "image"), "--print-conf"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(out.stdout.strip())


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf())}


def build_images() -> str:
    """``scripts/image`` (quick when nothing changed); what it printed (the sizes)."""
    out = subprocess.run(
        [str(REPO / "scripts" / "image")],
        capture_output=True,
        text=True,
        timeout=BUILD_WITHIN_S,
    )
    if out.returncode != 0:
        raise RuntimeError(f"scripts/image failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return out.stdout


def _run(
    env: dict[str, str], args: Sequence[str], *, check: bool = True, timeout: float = CALL_WITHIN_S
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out


def sweep_strays() -> None:
    """Remove containers, volumes and networks whose owning test process is gone."""
    env = podman_env()
    label = f"label={OWNER_LABEL}"
    for kind in ("container", "volume", "network"):
        every = ["-a"] if kind == "container" else []
        listed = _run(env, [kind, "ls", *every, "--format", "json", "--filter", label], check=False)
        if listed.returncode != 0 or not listed.stdout.strip():
            continue
        for item in json.loads(listed.stdout):
            labels = item.get("Labels") or item.get("labels") or {}
            owner = labels.get(OWNER_LABEL)
            name = (item.get("Names") or [None])[0] if kind == "container" else item.get("Name")
            name = name or item.get("name")
            if owner and name and not owner_alive(owner):
                _run(env, [kind, "rm", "-f", name], check=False)


@dataclass
class Podman:
    """One test's Podman resources; :meth:`close` removes every one it made."""

    prefix: str = field(default_factory=lambda: f"hh{secrets.token_hex(3)}")
    env: dict[str, str] = field(default_factory=podman_env)
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    _pinned: set[str] = field(default_factory=set)

    @property
    def owner_label(self) -> list[str]:
        return ["--label", f"{OWNER_LABEL}={owner_tag()}"]

    def __call__(
        self, *args: str, check: bool = True, timeout: float = CALL_WITHIN_S
    ) -> subprocess.CompletedProcess[str]:
        return _run(self.env, args, check=check, timeout=timeout)

    def name(self, what: str) -> str:
        return f"{self.prefix}-{what}"

    def network(self, what: str = "net") -> tuple[str, str, str]:
        """A new bridge network with DNS by container name: (name, subnet, gateway)."""
        name = self.name(what)
        self("network", "create", *self.owner_label, name)
        self.networks.append(name)
        [subnet] = json.loads(self("network", "inspect", name).stdout)[0]["subnets"]
        return name, subnet["subnet"], subnet["gateway"]

    def volume(self, what: str) -> str:
        name = self.name(what)
        if name not in self.volumes:
            self("volume", "create", *self.owner_label, name)
            self.volumes.append(name)
        return name

    def tag(self, image: str, as_name: str) -> None:
        self("tag", image, as_name)
        self.tags.append(as_name)

    def run(self, name: str, argv: Sequence[str], *, detach: bool = True) -> str:
        """``podman run`` with ``argv`` (options, image, command); its output."""
        if name not in self.containers:
            self.containers.append(name)
        mode = ["-d"] if detach else ["--rm"]
        out = self("run", *mode, "--name", name, *self.owner_label, *argv).stdout
        for i, arg in enumerate(argv[:-1]):
            if arg == "--network" and argv[i + 1] in self.networks:
                self._pin_bridge_mac(argv[i + 1])
        return out

    def _pin_bridge_mac(self, network: str) -> None:
        """Give the network's bridge a MAC address of its own, once it exists.

        A Linux bridge without one takes the lowest MAC of its ports (netavark 1.4 sets
        none), so removing a container can change the gateway's MAC under the others:
        their ARP entries then point nowhere, and their connections to the gateway's
        address (PostgreSQL, the model here) time out until the entries expire.
        """
        if network in self._pinned:
            return
        [info] = json.loads(self("network", "inspect", network).stdout)
        bridge = Path("/sys/class/net") / info["network_interface"]
        mac = (bridge / "address").read_text().strip()
        subprocess.run(
            ["ip", "link", "set", "dev", bridge.name, "address", mac], check=True, timeout=30
        )
        self._pinned.add(network)

    def remove(self, name: str) -> None:
        self("rm", "-f", "-t", "0", name, check=False)

    def exec(self, name: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self("exec", name, *argv, check=check)

    def put(
        self, name: str, path: str, content: str | bytes, *, mode: int = 0o600, owner: str = "root"
    ) -> None:
        """Write ``content`` to ``path`` in container ``name``, with that mode and owner."""
        with tempfile.NamedTemporaryFile() as f:
            f.write(content.encode() if isinstance(content, str) else content)
            f.flush()
            self("cp", f.name, f"{name}:{path}")
        self.exec(name, "chown", f"{owner}:{owner}", path)
        self.exec(name, "chmod", f"{mode:o}", path)

    def logs(self, name: str) -> str:
        out = self("logs", name, check=False)
        return out.stdout + out.stderr

    def inspect(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(self("inspect", name).stdout)[0]
        return got

    def running(self, name: str) -> bool:
        out = self("inspect", "--format", "{{.State.Running}}", name, check=False)
        return out.stdout.strip() == "true"

    def address(self, name: str, network: str) -> str:
        nets = self.inspect(name)["NetworkSettings"]["Networks"]
        address: str = nets[network]["IPAddress"]
        return address

    def all_logs(self) -> str:
        return "\n".join(f"--- {c}\n{self.logs(c)[-3000:]}" for c in self.containers)

    def close(self) -> None:
        for name in reversed(self.containers):
            self.remove(name)
        for volume in self.volumes:
            self("volume", "rm", "-f", volume, check=False)
        for network in self.networks:
            self("network", "rm", "-f", network, check=False)
        for tag in self.tags:
            self("untag", tag, tag, check=False)


@contextlib.contextmanager
def podman_session() -> Iterator[Podman]:
    """A :class:`Podman` whose resources are removed when the block ends."""
    made = Podman()
    try:
        yield made
    finally:
        made.close()
