"""Agent hosts on other machines (issue 14, "Speed"): send → wake across the network link.

Three network namespaces on one LAN (``tests/support/netns``): ``hivectl serve``
with ``[hostlink]`` over TLS in one, a bare remote host (``bench._netlink_host``:
the real dialer and forward frames, no harness) in each of two others. Agent a
long-polls through host 1; agent b sends to it through host 2 (cross-host),
then through the same host as a (same-host); the floor is a bare TCP
ping-pong of a send-sized frame between host 1's and the coordinator's
namespaces, in the same run. Needs root (``ip netns``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import trustme
from tests.support.netns import Lan, lan, netns_available

from bench._procs import seed_home
from bench.registry import Context, Latency, Row, benchmark
from hyperhive.client import call_once
from hyperhive.config import HivePaths
from hyperhive.protocol import OpHostsAddReq, OpLifecycleReq, Req

__all__ = ["cross_host_wake"]

IDLE_S = 0.003
WARMUP = 20
START_S = 60.0
R = TypeVar("R")


class _Proc:
    """A child speaking lines: commands in on stdin, ``word value`` lines out."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
            )

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word: str) -> str:
        """The value of the next ``word`` line (other lines are skipped)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.proc.args!r} ended before {word!r}:\n{tail}")
            head, _, value = line.strip().partition(" ")
            if head == word:
                return value
        raise RuntimeError(f"no {word!r} from {self.proc.args!r} in {START_S:.0f}s")

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _helper(net: Lan, role: str, *args: str) -> list[str]:
    return [*net.exec_prefix(role), sys.executable, "-m", "bench._netlink_host", *args]


@contextmanager
def _coordinator(net: Lan, home: Path, within: float = START_S) -> Iterator[str]:
    """``hivectl serve`` in the coordinator's namespace; yields the host link's URL."""
    paths = HivePaths(home)
    with (home / "serve.log").open("ab") as log:
        proc = subprocess.Popen(
            [*net.exec_prefix("coord"), sys.executable, "-m", "hyperhive", "serve"],
            env={**os.environ, "HIVE_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        info = paths.run / "hostlink.json"
        deadline = time.monotonic() + within
        while not (info.exists() and paths.host_sock.exists()):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (home / "serve.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"hivectl serve did not come up:\n{tail}")
            time.sleep(0.05)
        yield str(json.loads(info.read_text())["url"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _op(paths: HivePaths, request: Req[R]) -> R:
    result: R = anyio.run(call_once, paths.host_sock, request)
    return result


def _credential(paths: HivePaths, name: str) -> Path:
    made = _op(paths, OpHostsAddReq(cmd="hosts_add", name=name))
    path = paths.home / f"{name}.credential"
    path.touch(mode=0o600)
    path.write_text(made.credential)
    return path


def _wake_samples(waiter: _Proc, sender: _Proc, samples: int) -> Latency:
    out: list[int] = []
    for i in range(samples + WARMUP):
        waiter.tell("wait a")
        time.sleep(IDLE_S)  # the long-poll parks, as in coordinator.wake
        sender.tell("send b a")
        t0 = int(sender.expect("sent"))
        woke = int(waiter.expect("woke"))
        if i >= WARMUP:
            out.append(woke - t0)
    return Latency.of(out)


@benchmark("netlink.wake")
def cross_host_wake(ctx: Context) -> list[Row]:
    problem = netns_available()
    if problem is not None:
        raise RuntimeError(f"cannot run: {problem}")
    samples = 100 if ctx.quick else 1000
    home = ctx.scratch("nl")
    with lan(["coord", "h1", "h2"]) as net:
        ca = trustme.CA()
        ca.issue_cert(net.addresses["coord"]).private_key_and_cert_chain_pem.write_to_path(
            str(home / "link.pem")
        )
        ca.cert_pem.write_to_path(str(home / "ca.pem"))
        paths = seed_home(home, ["a", "b"])
        with (home / "hive.toml").open("a") as toml:
            toml.write(
                f'dashboard_port = 0\n[hostlink]\nlisten = "{net.addresses["coord"]}:0"\n'
                'tls_cert = "link.pem"\ntls_key = "link.pem"\n'
            )
        with _coordinator(net, home) as url:
            procs: list[_Proc] = []
            try:
                hosts = {}
                for name in ("h1", "h2"):
                    cred = _credential(paths, name)
                    argv = _helper(net, name, "host", url, name, str(cred), str(home / "ca.pem"))
                    hosts[name] = host = _Proc(argv, home / f"{name}.log")
                    procs.append(host)
                    host.expect("registered")
                h1, h2 = hosts["h1"], hosts["h2"]
                h1.expect("activate")
                h1.expect("activate")  # the first host took a and b
                # Placement spreads by load: b, started again, goes to h2.
                _op(paths, OpLifecycleReq(cmd="agent_kill", agent="b"))
                _op(paths, OpLifecycleReq(cmd="agent_start", agent="b"))
                h2.expect("activate")
                h1.tell("attach a")
                h1.expect("attached")
                cross = _wake_samples(h1, h2, samples)
                _move_b_beside_a(paths, h1, h2)
                same = _wake_samples(h1, h1, samples)
                echo = _Proc(_helper(net, "coord", "echo", net.addresses["coord"]), home / "e.log")
                procs.append(echo)
                port = echo.expect("port")
                ping = _Proc(
                    _helper(
                        net,
                        "h1",
                        "ping",
                        net.addresses["coord"],
                        port,
                        str(samples + WARMUP),
                        str(IDLE_S),
                    ),
                    home / "p.log",
                )
                procs.append(ping)
                rtts = [int(ping.expect("rtt")) for _ in range(samples + WARMUP)][WARMUP:]
            finally:
                for proc in procs:
                    proc.stop()
    floor = Latency.of(rtts)
    floor_name = "bare TCP ping-pong, host 1 ↔ coordinator namespace"
    rows = [
        Row(
            "cross-host send → wake (a waits via host 1, b sends via host 2, TLS)",
            cross,
            floor_name,
            floor,
            note="netlink: remote hosts are bare link clients (no harness); each frame "
            "crosses a veth bridge twice plus TLS WebSocket framing",
        )
    ]
    rows.append(Row("same-host send → wake (a and b on host 1, TLS)", same, floor_name, floor))
    return rows


def _move_b_beside_a(paths: HivePaths, h1: _Proc, h2: _Proc) -> None:
    """Load-based placement (there is no pin yet) would put b back on the empty h2:
    end h2's link instead, and start b on the one host left."""
    h2.stop()
    _op(paths, OpLifecycleReq(cmd="agent_start", agent="b"))
    h1.expect("activate")
