"""Turn economy on the real claude CLI: an agent is woken only for a net change.

A bash task that ends inside ``run``'s wait window is answered inline and
files no todo (spec 001), so the agent is not woken a turn later with "Your
todos changed" and nothing to find. A task that outlives its turn is listed
but wakes nothing until it ends; its completion then wakes exactly one turn
(the control showing such a wake would be seen).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import Answer, ModelServer, RecordedRequest, text, tool_call
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

TODO_WAKE = "Your todos changed"


def _said(request: RecordedRequest) -> str:
    """The conversation a request carries (wake prompts, tool calls and results)."""
    return json.dumps(request.messages)


def _todo_wakes(reqs: list[RecordedRequest]) -> list[RecordedRequest]:
    return [r for r in reqs if TODO_WAKE in _said(r)]


async def _main_requests(
    model: ModelServer, done: Callable[[list[RecordedRequest]], bool]
) -> list[RecordedRequest]:
    await anyio.to_thread.run_sync(
        lambda: model.wait_for(lambda reqs: done([r for r in reqs if r.main]), 60)
    )
    return model.main_requests


@asynccontextmanager
async def _first_then_second(
    tmp_path: Path, model: ModelServer, claude_bin: Path, script: list[Answer]
) -> AsyncIterator[list[RecordedRequest]]:
    """alice runs ``script`` from a message; then "message-two" wakes her once more.

    Yields the main requests up to the one carrying "message-two". A wake for what
    the first turn left behind lands no later than that: the harness waits
    again only after a turn ends, so a stale wake either takes a turn of its
    own before "message-two" or shares its prompt.
    """
    model.set_script([*script, text("second handled"), text("handled")])
    seed_home(tmp_path, {"alice": AgentConfig(env=agent_env(model.url))})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.runtimes)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="message-one")
            await _main_requests(model, lambda reqs: len(reqs) >= len(script))
            await op_call(op, "send", to="alice", body="message-two")
        yield await _main_requests(model, lambda reqs: any("message-two" in _said(r) for r in reqs))


async def test_a_task_that_ends_inline_wakes_no_further_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    run = tool_call("mcp__bash__run", {"cmd": "echo inline-result", "wait_seconds": 20})
    async with _first_then_second(tmp_path, model_server, claude_bin, [run, text("ok")]) as reqs:
        assert "inline-result" in _said(reqs[1])  # the result came back inside the call
        assert "message-two" not in _said(reqs[1]) and "message-two" in _said(reqs[2])
        assert len(reqs) == 3  # the first turn's two requests, then straight to message-two
        assert _todo_wakes(reqs) == []


async def test_a_task_that_outlives_its_turn_wakes_once_when_it_ends(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = tmp_path / "gate"
    cmd = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo finished-late"
    run = tool_call("mcp__bash__run", {"cmd": cmd, "wait_seconds": 0})
    async with _first_then_second(
        tmp_path, model_server, claude_bin, [run, text("started")]
    ) as reqs:
        assert "task started" in _said(reqs[1])
        # Its "running" todo is listed, but this turn started it: no wake for that.
        assert len(reqs) == 3 and _todo_wakes(reqs) == []
        gate.touch()
        reqs = await _main_requests(model_server, lambda rs: bool(_todo_wakes(rs)))
        assert _todo_wakes(reqs) == [reqs[3]]  # one turn, for the completion
