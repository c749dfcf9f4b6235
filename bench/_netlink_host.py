"""A bare remote host for ``bench.netlink``, run inside a network namespace.

``python -m bench._netlink_host host URL NAME CREDENTIAL CA``: dials the
coordinator with the real link code (``hyperhive.netlink.dialer``), registers,
and then takes commands on stdin, one per line, each run concurrently:
``wait AGENT`` forwards a long-poll for AGENT and prints ``woke T``;
``send AGENT TO`` prints ``sent T`` and forwards a send from AGENT to TO
(``T``: ``perf_counter_ns`` — CLOCK_MONOTONIC, one clock for every process
of the machine, whatever their network namespace). Activations are printed
as ``activate AGENT``. It runs no harness and no claude: the figure is the
link and the coordinator, nothing else.

``echo ADDRESS`` serves a bare TCP echo (printing ``port P``); ``ping ADDRESS
PORT N IDLE`` prints ``rtt NS`` for N frames of a send request's size.
"""

from __future__ import annotations

import sys
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
from anyio.abc import SocketStream

from bench.coordinator import _pingpong_once
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import LinkForwardReq, LinkRegisterReq, SendReq

BODY = "x" * 200


def _say(line: str) -> None:
    print(line, flush=True)


async def _host(url: str, name: str, credential: str, ca: str) -> None:
    incarnations: dict[str, int] = {}

    def pushed(frame: dict[str, Any]) -> None:
        if frame.get("cmd") == "activate":
            incarnations[frame["agent"]] = frame["incarnation"]
            _say(f"activate {frame['agent']}")

    target = LinkTarget(url, name, Path(credential), Path(ca))
    async with dial(target, on_push=pushed) as link:
        await link.call(LinkRegisterReq(cmd="register", host_id=name))
        _say("registered")

        async def forward(agent: str, frame: dict[str, Any]) -> None:
            got = await link.call(
                LinkForwardReq(
                    cmd="forward", agent=agent, incarnation=incarnations[agent], frame=frame
                )
            )
            if not got.ok:
                raise RuntimeError(f"{agent}: {got.error}")

        async def run(words: list[str]) -> None:
            if words[0] == "wait":
                await forward(words[1], {"cmd": "wait", "timeout": 30, "id": 1})
                _say(f"woke {perf_counter_ns()}")
            elif words[0] == "send":
                t0 = perf_counter_ns()
                _say(f"sent {t0}")
                frame = SendReq(cmd="send", to=words[2], body=BODY, id=1)
                await forward(words[1], frame.model_dump(by_alias=True, exclude_none=True))
            elif words[0] == "attach":
                await forward(words[1], {"cmd": "attach", "id": 1})
                _say("attached")

        async with anyio.create_task_group() as tg:
            while line := await anyio.to_thread.run_sync(sys.stdin.readline):
                tg.start_soon(run, line.split())
            tg.cancel_scope.cancel()


async def _echo(address: str) -> None:
    async def serve(stream: SocketStream) -> None:
        async with stream:
            try:
                while True:
                    await stream.send(await stream.receive(65536))
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return

    listener = await anyio.create_tcp_listener(local_host=address, local_port=0)
    _say(f"port {listener.extra(anyio.abc.SocketAttribute.local_port)}")
    async with listener:
        await listener.serve(serve)


async def _ping(address: str, port: int, count: int, idle_s: float) -> None:
    frame = SendReq(cmd="send", to="a", body=BODY, id=1).model_dump_json().encode() + b"\n"
    async with await anyio.connect_tcp(address, port) as stream:
        for _ in range(count):
            _say(f"rtt {await _pingpong_once(stream, frame, idle_s)}")


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "host":
        anyio.run(_host, args[0], args[1], args[2], args[3])
    elif mode == "echo":
        anyio.run(_echo, args[0])
    else:
        anyio.run(_ping, args[0], int(args[1]), int(args[2]), float(args[3]))
