"""Hypothesis against the attacker's socket: 100,000+ frames, deterministic for CI.

Each example draws request objects from the ``AgentRequest`` schema itself
(``st.from_type`` over every member's fields, salted with hostile names and
junk), raw ``st.binary()`` blobs and a mutation seed; the batch is expanded
to :data:`FRAMES_PER_EXAMPLE` frames by mutating the drawn ones (extra and
identity fields, swapped commands, wrong types, truncation, bit flips, stray
bytes, oversized frames) and written on a fresh connection. For every batch:
exactly one response per non-blank frame, never an internal ``hive_error``,
the attacker's other connection and a benign agent's still answer, and no row
that is not the attacker's changes.

The attacker here is a root with every group and capability and no
descendants: as much code as possible is reachable, and nothing it may
legitimately do can touch another agent's rows.
"""

from __future__ import annotations

import functools
import json
import random
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from hyperhive.client import RpcClient, connect
from hyperhive.config import AgentConfig
from hyperhive.core.coordinator import Coordinator
from hyperhive.framing import FrameDecoder
from hyperhive.permissions import Capability, ToolGroup
from hyperhive.protocol import AgentRequest
from hyperhive.protocol.budget import RunSpend
from hyperhive.unixsock import connect_unix
from tests.security.hostile import ATTACKER, assert_unchanged, db_rows, snapshot
from tests.support.hive import agent_call, coordinator, op_call, operator, seed_home

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 220
FRAMES_PER_EXAMPLE = 460  # 220 × ~460 ≈ 101k frames
MIN_FRAMES = 100_000

FUZZ_TOPOLOGY: dict[str, str | None] = {
    ATTACKER: None,
    "victim": None,
    "boss": None,
    "kid": "boss",
}
NAMES = [
    *FUZZ_TOPOLOGY,
    "operator",
    "system",
    "reminder",
    "graceful-stop",
    "<parent>",
    "*",
    "",
    "../victim",
    "matrix",
    "Victim",
    "x" * 70,
]
JUNK: list[Any] = [
    None,
    True,
    -1,
    0,
    2**63,
    2**70,
    -(2**63) - 1,
    1.5e308,
    float("inf"),
    float("nan"),
    "",
    "ünï\u0000code",
    [],
    {},
    [1, [2, [3]]],
    {"nested": {"deep": [None]}},
    "x" * 500,
]
IDENTITY_KEYS = ["from", "sender", "agent", "name", "to", "target", "id", "cmd", "extra"]


# Hypothesis cannot derive a string from a pydantic ``pattern``: say how to draw a run's spend.
st.register_type_strategy(
    RunSpend,
    st.builds(
        RunSpend,
        run_id=st.from_regex(r"\A[A-Za-z0-9_.:-]{8,80}\Z"),
    ),
)


def _members() -> list[Any]:
    union, _field = typing.get_args(AgentRequest)
    return list(typing.get_args(union))


def _plain(value: Any) -> Any:
    """A drawn model as the JSON object a client would send."""
    return value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else value


def _value(annotation: Any) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.from_type(annotation).map(_plain),
        st.sampled_from(NAMES),
        st.sampled_from(JUNK),
    )


def _request(model: Any) -> st.SearchStrategy[dict[str, Any]]:
    cmds = typing.get_args(model.model_fields["cmd"].annotation)
    fields = {n: f for n, f in model.model_fields.items() if n != "cmd"}
    required = {n: _value(f.annotation) for n, f in fields.items() if f.is_required()}
    optional = {n: _value(f.annotation) for n, f in fields.items() if not f.is_required()}
    return st.fixed_dictionaries({"cmd": st.sampled_from(cmds), **required}, optional=optional).map(
        lambda d: {("from" if k == "sender" else k): v for k, v in d.items()}
    )


REQUESTS = st.one_of([_request(m) for m in _members()])


@dataclass
class Batch:
    requests: list[dict[str, Any]]
    blobs: list[bytes]
    seed: int


BATCHES = st.builds(
    Batch,
    requests=st.lists(REQUESTS, min_size=4, max_size=12),
    blobs=st.lists(st.binary(max_size=160), max_size=6),
    seed=st.integers(0, 2**32 - 1),
)


# ---- expanding a batch into frames ---------------------------------------------------


def _mutate_object(rng: random.Random, obj: dict[str, Any]) -> Any:
    obj = dict(obj)
    for _ in range(rng.randint(0, 3)):
        roll = rng.random()
        keys = list(obj)
        if roll < 0.3:
            obj[rng.choice(IDENTITY_KEYS)] = rng.choice([*NAMES, *JUNK])
        elif roll < 0.45 and keys:
            del obj[rng.choice(keys)]
        elif roll < 0.6:
            obj["cmd"] = rng.choice(["set_parent", "spawn", "approve", "agent_kill", "CMD", 7])
        elif roll < 0.8 and keys:
            obj[rng.choice(keys)] = rng.choice(JUNK)
        elif roll < 0.9:
            return rng.choice([[obj], obj.get("cmd"), {"request": obj}])
    return obj


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.3 and buf:
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif roll < 0.5 and buf:
            del buf[rng.randrange(len(buf)) :]
        elif roll < 0.7:
            buf.insert(rng.randint(0, len(buf)), rng.choice(b'{}[]",:\\\r\x00\xff\xc3 '))
        elif roll < 0.85 and buf:
            i = rng.randrange(len(buf))
            buf[i:i] = buf[i : i + rng.randint(1, 40)]
        else:
            buf += b"\xed\xa0\x80" if rng.random() < 0.5 else b"\r"
    return bytes(buf)


def _defuse(frame: bytes) -> bytes:
    """Keep a frame from hanging the batch: a long-poll ``wait`` returns at once.

    Lone surrogates (a mutated ``\\uXXXX`` escape) are left in on purpose: they
    must come back as ``malformed_frame``, never crash or ``hive_error``.
    """
    if b"wait" not in frame:
        return frame  # the common case, without a parse
    try:
        obj = json.loads(frame)
    except (ValueError, RecursionError):
        return frame
    if isinstance(obj, dict) and obj.get("cmd") == "wait":
        obj["timeout"] = 0
        return json.dumps(obj).encode()
    return frame


def expand(batch: Batch, cap: int) -> list[bytes]:
    rng = random.Random(batch.seed)
    # The schema-shaped requests as drawn, the raw blobs, then mutants of both.
    frames = [json.dumps(req).encode() for req in batch.requests]
    frames.extend(batch.blobs)
    while len(frames) < FRAMES_PER_EXAMPLE:
        if batch.blobs and rng.random() < 0.1:
            base = rng.choice(batch.blobs)
        else:
            obj = _mutate_object(rng, rng.choice(batch.requests))
            base = json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode()
        frames.append(_mutate_bytes(rng, base) if rng.random() < 0.4 else base)
    if rng.random() < 0.05:
        frames.append(b'{"cmd": "send", "to": "victim", "body": "' + b"A" * cap + b'"}')
    if rng.random() < 0.2:
        depth = rng.randint(1, 400)  # deep, but within the parser's recursion budget
        frames.append(b'{"cmd": "recv", "max": ' + b"[" * depth + b"]" * depth + b"}")
    return [_defuse(f.replace(b"\n", b" ")) for f in frames]


def answered(frame: bytes) -> bool:
    """The framing layer answers every frame that is not blank (see FrameDecoder)."""
    return bool(frame.rstrip(b"\r").strip())


# ---- the hive under fuzz ---------------------------------------------------------------


@dataclass
class FuzzHive:
    portal: BlockingPortal
    coord: Coordinator
    bystander: RpcClient
    second: RpcClient
    frames: int = 0
    responses: int = 0
    codes: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def fuzz_hive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzHive]:
    home = tmp_path_factory.mktemp("fuzz")
    attacker = AgentConfig(tool_groups=list(ToolGroup.ALL), capabilities=list(Capability))
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    agents = {name: manager for name in FUZZ_TOPOLOGY}
    seed_home(home, {**agents, ATTACKER: attacker}, FUZZ_TOPOLOGY)
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(coordinator(home)) as coord:
            portal.call(_plant, coord)
            with (
                portal.wrap_async_context_manager(connect(coord.paths.agent_sock("victim"))) as b,
                portal.wrap_async_context_manager(connect(coord.paths.agent_sock(ATTACKER))) as s,
            ):
                yield FuzzHive(portal, coord, b, s)


async def _plant(c: Coordinator) -> None:
    async with operator(c.paths) as op, connect(c.paths.agent_sock("boss")) as boss:
        await op_call(op, "send", to="victim", body="for victim")
        await agent_call(boss, "send", to="kid", body="for kid")
        await agent_call(boss, "remind", message="boss's", delay_seconds=3600)
        await agent_call(boss, "request_init_config", name="newkid")
        await agent_call(boss, "schedule_prompt", target="kid", prompt="p", cron="0 0 1 1 *")
        await op_call(op, "send", to=ATTACKER, body="for the attacker")


async def _exchange(hive: FuzzHive, frames: list[bytes]) -> list[dict[str, Any]]:
    """Write the batch on a fresh connection; return its responses (in arrival order).

    Responses come back as their requests finish, not in order, so a sentinel
    sent once every expected answer is in shows whether any extra one followed.
    """
    expected = sum(1 for f in frames if answered(f))
    stream = await connect_unix(hive.coord.paths.agent_sock(ATTACKER))
    out: list[dict[str, Any]] = []
    decoder = FrameDecoder(1 << 22)
    all_in = anyio.Event()

    async def reader() -> None:
        while True:
            for line in decoder.feed(await stream.receive(1 << 16)):
                assert isinstance(line, bytes)
                out.append(json.loads(line))
                if out[-1].get("id") == "sentinel":
                    return
                if len(out) >= expected:
                    all_in.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await stream.send(b"".join(f + b"\n" for f in frames))
            if expected:
                await all_in.wait()
            await stream.send(b'{"id": "sentinel", "cmd": "get_agent_meta"}\n')
    await stream.aclose()
    assert out[-1]["id"] == "sentinel" and out[-1]["ok"], out[-1]
    return out[:-1]


def test_hypothesis_frames_at_the_agent_socket(fuzz_hive: FuzzHive) -> None:
    hive = fuzz_hive
    paths = hive.coord.paths
    cap = hive.coord.config.max_frame_bytes
    before = snapshot(paths, files_of=[a for a in FUZZ_TOPOLOGY if a != ATTACKER])
    rows_before = db_rows(paths)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=BATCHES)
    def fuzz(batch: Batch) -> None:
        frames = expand(batch, cap)
        responses = hive.portal.call(_exchange, hive, frames)
        assert len(responses) == sum(1 for f in frames if answered(f))
        for r in responses:
            assert isinstance(r.get("ok"), bool), r
            code = None if r["ok"] else r["error"]["code"]
            assert code not in ("hive_error", "internal_error"), r
            hive.codes[code or "ok"] = hive.codes.get(code or "ok", 0) + 1
        hive.frames += len(frames)
        hive.responses += len(responses)
        # The attacker's other connection and a bystander still answer; nobody else moved.
        meta = hive.portal.call(agent_call, hive.second, "get_agent_meta")
        assert isinstance(meta, dict) and meta["name"] == ATTACKER
        seen = hive.portal.call(agent_call, hive.bystander, "get_agent_meta")
        assert isinstance(seen, dict) and seen["name"] == "victim"
        assert db_rows(paths) == rows_before

    fuzz()
    assert hive.frames >= MIN_FRAMES, hive.frames
    assert {"ok", "malformed_frame", "unknown_command", "permission_denied"} <= set(hive.codes)
    assert_unchanged(before, snapshot(paths, files_of=[a for a in FUZZ_TOPOLOGY if a != ATTACKER]))
    victim_mail = hive.portal.call(functools.partial(agent_call, hive.bystander, "recv", max=5))
    # The operator's mail is still there, unread; anything else is the attacker's own sending.
    assert isinstance(victim_mail, list) and victim_mail, victim_mail
    assert victim_mail[0]["from"] == "operator" and victim_mail[0]["body"] == "for victim"
    assert all(m["from"] == ATTACKER for m in victim_mail[1:]), victim_mail
