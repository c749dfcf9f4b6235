"""Agent snapshots: what one costs after a typical turn, beside the turn itself.

One agent on an in-process hive (coordinator and agent host, SQLite store) takes
turns on the real claude CLI against the scripted model server; after each, its
host sends the snapshot of its ``state/`` and claude session to the store
(``hyperhive.agent.snapshots``). The snapshot's time (collect, gzip, upload over
the host link, commit) is beside the turn's (message sent → turn ended), and its
bytes (sent, and uncompressed) are counted at the first and the last turn: the
session file grows with the conversation, so the last is the larger. The
snapshot runs after the turn's mail is acked, off the turn's path: the ratio
says what it costs the host, not what it adds to the turn.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import anyio
from tests.support.hive import op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import until

from bench.registry import Context, Latency, Row, Sizes, benchmark
from hyperhive.agent.host import AgentHost, resolve_claude_bin
from hyperhive.config import AgentConfig

__all__ = ["snapshot_per_turn"]

# A typical answer: a few hundred characters, like a short reply to a message.
ANSWER = "Noted. " + "I will follow up on the open items tomorrow and report back. " * 6


def _events(host: AgentHost, kind: str, after: int) -> list[dict[str, Any]]:
    agent = host.agents.get("alice")
    if agent is None:
        return []
    return [e for e in agent.bus.history if e["kind"] == kind and e["seq"] > after]


async def _measure(
    home: Path, model: ModelServer, turns: int
) -> tuple[list[int], list[dict[str, Any]]]:
    env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "bench"}
    seed_home(home, {"alice": AgentConfig(env=env)})
    claude = Path(resolve_claude_bin(None))
    turn_ns: list[int] = []
    snaps: list[dict[str, Any]] = []
    async with running_hive(home, claude) as (c, host), operator(c.paths) as op:
        await until(lambda: "alice" in host.agents and c.hostlink.placement.get("alice"), 60)
        agent = host.agents["alice"]
        # Notes an agent keeps: a page of them, as a working agent has.
        (agent.spec.state_dir / "notes.md").write_text("- an open item to follow up\n" * 100)
        for i in range(turns):
            seq = agent.bus.history[-1]["seq"] if agent.bus.history else 0
            started = time.perf_counter_ns()
            await op_call(op, "send", to="alice", body=f"message {i}: how is it going?")
            await until(functools.partial(_events, host, "turn_end", seq), 120)
            turn_ns.append(time.perf_counter_ns() - started)
            [snap] = await until(functools.partial(_events, host, "snapshot", seq), 120)
            snaps.append(snap)
    return turn_ns, snaps


@benchmark("snapshots.per_turn")
def snapshot_per_turn(ctx: Context) -> list[Row | Sizes]:
    turns = 3 if ctx.quick else 10
    with ModelServer() as model:
        model.set_script(always(text(ANSWER)))
        turn_ns, snaps = anyio.run(_measure, ctx.scratch("s"), model, turns)
    snap_ns = [int(s["seconds"] * 1e9) for s in snaps]
    rows: list[Row | Sizes] = [
        Row(
            "snapshots.per_turn: time per snapshot",
            Latency.of(snap_ns),
            "its turn (scripted model)",
            Latency.of(turn_ns),
            target="off the turn's path",
            note=(
                f"{turns} turns of one agent on the real claude CLI against the scripted "
                "model; a snapshot is collect + gzip + upload + commit, after the turn's "
                "mail is acked (the ratio is its cost to the host, not added to the turn). "
                "A real model's turn lasts seconds to minutes, so the ratio there is smaller."
            ),
        )
    ]
    for label, snap in (("the first turn", snaps[0]), (f"turn {turns}", snaps[-1])):
        rows.append(
            Sizes(
                f"snapshots.per_turn: bytes after {label}",
                (("sent (gzip)", int(snap["size"])), ("uncompressed", int(snap["raw_bytes"]))),
                note=f"{snap['files']} files: state/ and the claude session",
            )
        )
    return rows
