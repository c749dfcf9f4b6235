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
from typing import Any, TypeVar

import anyio
from tests.support.hostlink import link_tls
from tests.support.netns import Lan, lan, netns_available

from bench._procs import seed_home
from bench.registry import Context, Latency, Row, Sizes, benchmark
from hyperhive.client import call_once, connect
from hyperhive.config import HivePaths, load_hive_config
from hyperhive.core.coordinator import Coordinator
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import (
    HostCapacity,
    LinkHeartbeatReq,
    LinkRegisterReq,
    OpHostsAddReq,
    OpSpawnReq,
    Req,
)

__all__ = ["cross_host_wake", "heartbeat_bytes"]

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


def _wake_samples(waiter: _Proc, sender: _Proc, samples: int, sender_agent: str) -> Latency:
    out: list[int] = []
    for i in range(samples + WARMUP):
        waiter.tell("wait a")
        time.sleep(IDLE_S)  # the long-poll parks, as in coordinator.wake
        sender.tell(f"send {sender_agent} a")
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
        link_tls(home, net.addresses["coord"])
        paths = seed_home(home, ["a", "c"])
        with (home / "hive.toml").open("a") as toml:
            # The bare hosts send no heartbeat: a lease longer than the run stands in.
            toml.write(
                f'dashboard_port = 0\n[hostlink]\nlisten = "{net.addresses["coord"]}:0"\n'
                'tls_cert = "link.pem"\ntls_key = "link.pem"\nlease_seconds = 900\n'
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
                h1.expect("activate")  # the first host took a and c
                # A new agent goes to the least loaded host: b to h2.
                _op(paths, OpSpawnReq(cmd="spawn", name="b"))
                h2.expect("activate")
                h1.tell("attach a")
                h1.expect("attached")
                cross = _wake_samples(h1, h2, samples, "b")
                same = _wake_samples(h1, h1, samples, "c")
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
    rows.append(Row("same-host send → wake (a and c on host 1, TLS)", same, floor_name, floor))
    return rows


# ---- the lease's cost on the wire ---------------------------------------------------

HEARTBEATS = 20
# One TLS 1.3 record around each WebSocket message (AES-GCM): 5 header + 1 type + 16 tag.
TLS_RECORD_BYTES = 22


class _Counter:
    """A loopback TCP relay in front of the coordinator's link, counting bytes each way."""

    def __init__(self) -> None:
        self.up = 0  # host -> coordinator
        self.down = 0

    async def relay(self, target: tuple[str, int], *, task_status: Any) -> None:
        async def pipe(src: Any, dst: Any, up: bool) -> None:
            try:
                async for chunk in src:
                    if up:
                        self.up += len(chunk)
                    else:
                        self.down += len(chunk)
                    await dst.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass
            finally:
                await dst.aclose()

        async def one(client: Any) -> None:
            async with client, await anyio.connect_tcp(*target) as upstream:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(pipe, client, upstream, True)
                    tg.start_soon(pipe, upstream, client, False)

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        task_status.started(listener.extra(anyio.abc.SocketAttribute.local_port))
        await listener.serve(one)


async def _heartbeat_bytes(home: Path, agents: int) -> tuple[int, int]:
    """Bytes per heartbeat (up, down) of a host holding ``agents`` agents, measured on
    the wire (plain WebSocket on loopback) over ``HEARTBEATS`` heartbeats."""
    names = [f"a{i}" for i in range(agents)]
    paths = seed_home(home, names)
    with (home / "hive.toml").open("a") as toml:
        toml.write('[hostlink]\nlisten = "127.0.0.1:0"\n')
    coord = await Coordinator.open(paths, load_hive_config(home, {}))
    counter = _Counter()
    async with anyio.create_task_group() as tg:
        await tg.start(coord.run)
        url = json.loads((paths.run / "hostlink.json").read_text())["url"]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        relay_port = await tg.start(counter.relay, ("127.0.0.1", port))
        async with connect(paths.host_sock) as op:
            made = await op.call(OpHostsAddReq(cmd="hosts_add", name="h1"))
        cred = home / "h1.cred"
        cred.touch(mode=0o600)
        cred.write_text(made.credential)
        target = LinkTarget(f"ws://127.0.0.1:{relay_port}", "h1", cred)
        activated = anyio.Event()
        seen: list[str] = []

        def on_push(frame: dict[str, Any]) -> None:
            seen.append(str(frame.get("agent")))
            if len(seen) >= agents:
                activated.set()

        async with dial(target, on_push=on_push) as link:
            await link.call(LinkRegisterReq(cmd="register", host_id="h1"))
            with anyio.fail_after(START_S):
                await activated.wait()
            beat = LinkHeartbeatReq(
                cmd="heartbeat",
                capacity=HostCapacity(
                    claude_slots=8, slots_in_use=3, mem_total=64 << 30, mem_available=41 << 30
                ),
            )
            up0, down0 = counter.up, counter.down
            for _ in range(HEARTBEATS):
                await link.call(beat)
            up, down = counter.up - up0, counter.down - down0
        tg.cancel_scope.cancel()
    return up // HEARTBEATS, down // HEARTBEATS


@benchmark("netlink.heartbeat")
def heartbeat_bytes(ctx: Context) -> list[Sizes]:
    """What the lease costs on the wire: one heartbeat and its answer, per host and per
    agent, for a host holding one agent and one holding many (it does not grow)."""
    rows: list[Sizes] = []
    for agents in (1, 100 if ctx.quick else 1000):
        up, down = anyio.run(_heartbeat_bytes, ctx.scratch("hb"), agents)
        tls = 2 * TLS_RECORD_BYTES
        rows.append(
            Sizes(
                f"netlink.heartbeat: host with {agents} agent(s)",
                (
                    ("host→coordinator", up),
                    ("coordinator→host", down),
                    ("+TLS records", tls),
                    ("per agent", (up + down + tls) // agents),
                ),
            )
        )
    rows[-1] = Sizes(
        rows[-1].benchmark,
        rows[-1].parts,
        rows[-1].target,
        "netlink: heartbeat = one WebSocket message each way, measured through a counting "
        "TCP relay on loopback (plain ws); TLS adds one record (22 B) per message. Every "
        "third of lease_seconds (default 15 s: every 5 s) per host, whatever it holds",
    )
    return rows
