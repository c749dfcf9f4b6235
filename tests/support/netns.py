"""Separate network stacks for multi-host tests: ``ip netns`` + veth on one private LAN.

Each role gets a network namespace with one address on a random 10.x.y.0/24
(loopback up inside); a switch namespace bridges them, and the test process
itself joins the LAN at ``.1`` so a server it runs (the scripted model
server) is reachable from every namespace. Everything is made with unique
names and removed on exit; every command is bounded in time.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["Lan", "lan", "netns_available"]


def netns_available() -> str | None:
    """Why network namespaces cannot be made here (``None``: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")


def _routed_prefixes() -> set[str]:
    out = subprocess.run(
        ["ip", "-4", "route", "show"], capture_output=True, text=True, timeout=20, check=True
    ).stdout
    nets = set()
    for line in out.splitlines():
        first = line.split(" ", 1)[0]
        with contextlib.suppress(ValueError):
            nets.add(str(ipaddress.ip_network(first, strict=False)))
    return nets


@dataclass
class Lan:
    tag: str
    prefix: str  # "10.x.y"
    roles: dict[str, str] = field(default_factory=dict)  # role → netns name
    addresses: dict[str, str] = field(default_factory=dict)  # role → address
    legs: dict[str, str] = field(default_factory=dict)  # role → its veth leg (in its netns)

    @property
    def own_address(self) -> str:
        """The test process's address on the LAN."""
        return f"{self.prefix}.1"

    def exec_prefix(self, role: str) -> list[str]:
        """argv prefix that runs a command in ``role``'s namespace (it execs: same pid)."""
        return ["ip", "netns", "exec", self.roles[role]]

    def partition(self, role: str) -> None:
        """Cut ``role`` off the LAN (its leg down): its packets go nowhere, no RST, no FIN."""
        _ip("-n", self.roles[role], "link", "set", self.legs[role], "down")

    def heal(self, role: str) -> None:
        _ip("-n", self.roles[role], "link", "set", self.legs[role], "up")


@contextlib.contextmanager
def lan(roles: Sequence[str]) -> Iterator[Lan]:
    tag = secrets.token_hex(3)
    taken = _routed_prefixes()
    for _ in range(20):  # a free /24, bounded
        prefix = f"10.{secrets.randbelow(200) + 50}.{secrets.randbelow(250) + 1}"
        if f"{prefix}.0/24" not in taken:
            break
    else:
        raise RuntimeError("no free 10.x.y.0/24 for the test LAN")
    net = Lan(tag, prefix)
    switch = f"hhsw-{tag}"
    made: list[str] = []
    own = f"hv{tag}0"
    try:
        _ip("netns", "add", switch)
        made.append(switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        # The test process's own leg.
        _ip("link", "add", own, "type", "veth", "peer", "name", f"{own}p")
        _ip("link", "set", f"{own}p", "netns", switch)
        _ip("-n", switch, "link", "set", f"{own}p", "master", "br0", "up")
        _ip("addr", "add", f"{net.own_address}/24", "dev", own)
        _ip("link", "set", own, "up")
        for i, role in enumerate(roles, start=2):
            ns, leg = f"hh{role}-{tag}", f"hv{tag}{i}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", leg, "type", "veth", "peer", "name", f"{leg}p")
            _ip("link", "set", leg, "netns", ns)
            _ip("link", "set", f"{leg}p", "netns", switch)
            _ip("-n", switch, "link", "set", f"{leg}p", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{prefix}.{i}/24", "dev", leg)
            _ip("-n", ns, "link", "set", leg, "up")
            net.roles[role] = ns
            net.addresses[role] = f"{prefix}.{i}"
            net.legs[role] = leg
        yield net
    finally:
        # Deleting a namespace deletes the veth legs in it, and with them their peers.
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", own], capture_output=True, timeout=20)
