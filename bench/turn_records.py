"""What keeping turn records costs a turn ("≤ 1% of a turn"), and what a turn stores.

One hive in-process, the real claude against the scripted model; each turn makes
one MCP tool call (a ``send``) and answers. Turns alternate between recorded and
not (the agent's recorder closed: every write a no-op), interleaved so drift in
the machine hits both alike. A turn is timed from the operator's send being
accepted to the coordinator recording its end. The turn-to-turn difference is
mostly claude's own variance, so the recording work alone is measured too: a
typical tool-using turn's events (three tool calls with 2 KiB results) replayed
through a recorder into a real store on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
from tests.support.model_server import ModelServer, text, tool_call

from bench.agent_host import _nodelay, _seed
from bench.registry import Context, Latency, Row, Sizes, benchmark
from hyperhive.agent.host import AgentHost, resolve_claude_bin
from hyperhive.agent.stream import StreamEvent, parse_line
from hyperhive.agent.turnrecorder import TurnRecorder
from hyperhive.agent.turnreport import summarize_turn
from hyperhive.agent.turnstore import list_turns
from hyperhive.client import connect
from hyperhive.config import HivePaths, load_hive_config
from hyperhive.core.coordinator import Coordinator
from hyperhive.protocol import OpSendReq, WaitResult

__all__ = ["turn_records"]

WARMUP = 2


def _script() -> Any:
    calls = [0]

    def answer(body: dict[str, Any]) -> Any:
        calls[0] += 1
        if calls[0] % 2:
            return tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"})
        return text("done")

    return answer


async def _turns(paths: HivePaths, rounds: int) -> dict[bool, list[int]]:
    hive = load_hive_config(paths.home, {})
    coord = await Coordinator.open(paths, hive)
    host = AgentHost(paths, hive, host_id="bench")
    times: dict[bool, list[int]] = {False: [], True: []}
    async with anyio.create_task_group() as tg, coord.bus.subscribe(replay=False) as events:
        await tg.start(coord.run)
        await tg.start(host.run)

        async def until(kind: str, **fields: Any) -> None:
            with anyio.fail_after(60):
                async for event in events:
                    if event["kind"] == kind and all(event.get(k) == v for k, v in fields.items()):
                        return

        # Idle is reported by its harness: the agent is whole (running is said before).
        await until("turn", agent="alice", turn_state="idle")
        records = host.agents["alice"].records
        async with connect(paths.host_sock) as op:
            for i in range(WARMUP + 2 * rounds):
                recorded = i % 2 == 1
                # Between turns (idle): a closed recorder writes nothing, reopened it goes on.
                if recorded:
                    records.open()
                else:
                    records.close()
                t0 = perf_counter_ns()
                await op.call(OpSendReq(cmd="send", to="alice", body=f"ping {i}"))
                await until("turn_end", agent="alice")
                elapsed = perf_counter_ns() - t0
                if i >= WARMUP:
                    times[recorded].append(elapsed)
                await until("turn", agent="alice", turn_state="idle")
        records.open()
        await host.stop_all(graceful=False)
        tg.cancel_scope.cancel()
    return times


def _typical_turn() -> list[StreamEvent]:
    """A turn of three tool calls with 2 KiB results, and texts between them."""
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m"}
    ]
    for i in range(3):
        lines.append(
            {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": f"Now step {i}: reading."}]},
            }
        )
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "tool_use", "id": f"t{i}", "name": "mcp__bash__run",
                         "input": {"cmd": f"cat notes-{i}.md", "wait_seconds": 30}}
                    ]
                },
            }
        )  # fmt: skip
        lines.append(
            {
                "type": "user",
                "message": {
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{i}",
                         "content": ("a line of notes, as a file would hold it\n" * 50)}
                    ]
                },
            }
        )  # fmt: skip
    lines.append({"type": "assistant", "message": {"content": [{"type": "text", "text": "Done."}]}})
    lines.append({"type": "result", "subtype": "success", "session_id": "s", "num_turns": 4})
    out = [parse_line(json.dumps(x)) for x in lines]
    return [e for e in out if e is not None]


def _disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _record_work(root: Path, rounds: int) -> tuple[int, int, int]:
    """Median ns to record the typical turn; its stored text bytes and disk bytes per turn."""
    events = _typical_turn()
    report = summarize_turn(events, 0, 200_000)
    rec = TurnRecorder(root, "bench", lambda: [("K", "a-secret-value")], 30.0, 1024.0)
    rec.open()
    samples = []
    before = _disk(root)
    for _ in range(rounds):
        t0 = perf_counter_ns()
        with rec.turn(WaitResult()):
            rec.prompt("You were woken by these messages: …")
            for event in events:
                rec.event(event)
            rec.finish([report])
        samples.append(perf_counter_ns() - t0)
    rec.close()
    text_bytes = sum(t.bytes for t in list_turns(root, None, rounds)) // rounds
    samples.sort()
    return samples[len(samples) // 2], text_bytes, (_disk(root) - before) // rounds


@benchmark("turns.recording")
def turn_records(ctx: Context) -> list[Row | Sizes]:
    rounds = 3 if ctx.quick else 10
    home = ctx.scratch("r")
    with ModelServer(_script()) as model:
        _nodelay(model)
        paths = _seed(home, ["alice"], model.url, resolve_claude_bin(None))
        times = anyio.run(_turns, paths, rounds)
    recorded, unrecorded = Latency.of(times[True]), Latency.of(times[False])
    work_ns, text_bytes, disk_bytes = _record_work(ctx.scratch("w"), 50 if ctx.quick else 400)
    share = work_ns / (unrecorded.p50 * 1e6)
    return [
        Row(
            "turn with 1 tool call, recorded (SQLite WAL + FTS5 on the host)",
            recorded,
            "the same turns, not recorded (recorder closed), interleaved",
            unrecorded,
            "≤ 1% of a turn",
            f"recording alone, a typical tool-using turn (3 calls, 2 KiB results): "
            f"{work_ns / 1e3:.0f} µs = {share:.3%} of the unrecorded turn's p50; the "
            f"turn-to-turn difference (p50 {recorded.p50 - unrecorded.p50:+.1f} ms over "
            f"{rounds} turns each) is mostly claude's own variance",
        ),
        Sizes(
            "turns.recording: a typical tool-using turn (3 calls, 2 KiB results)",
            (("texts kept", text_bytes), ("on disk", disk_bytes)),
            "",
            "on disk: the database, its WAL and FTS5 index, and long texts' files, per turn",
        ),
    ]
