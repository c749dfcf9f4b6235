"""Steering a running turn, end to end: coordinator + host + the real claude + scripted model.

The scripted model holds an answer (:class:`Stall`) so the test acts while
the turn runs: an interrupt (with or without the operator's text), and mail
that arrives mid-turn, while a step runs or while the model writes its last
reply. Such mail counts as delivered only once a request carried it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.agent.active import ActiveAgent
from hyperhive.config import AgentConfig
from tests.chaos.soak_model import offered_midturn
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, RecordedRequest, Stall, text, tool_call
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]


def _seed(tmp_path: Path, model: ModelServer) -> None:
    # Mid-turn mail is on by default (hive.toml's midturn_mail).
    seed_home(tmp_path, {"alice": AgentConfig(env=agent_env(model.url))})


def _outcomes(rt: ActiveAgent) -> list[str]:
    return [str(e["outcome"]) for e in rt.bus.history if e["kind"] == "turn_end"]


def _said(req: RecordedRequest) -> str:
    return json.dumps(req.messages)


def _session(req: RecordedRequest) -> str | None:
    return req.headers.get("x-claude-code-session-id")


async def _main_requests(model: ModelServer, count: int) -> list[RecordedRequest]:
    await anyio.to_thread.run_sync(
        lambda: model.wait_for(lambda reqs: sum(r.main for r in reqs) >= count, 60)
    )
    return model.main_requests


async def _unread(op: Any) -> list[dict[str, Any]]:
    box = await op_call(op, "messages", agent="alice")
    assert isinstance(box, dict) and isinstance(box["inbox"], list)
    return [m for m in box["inbox"] if isinstance(m, dict) and not m["acked"]]


async def test_interrupt_ends_the_turn_keeps_the_session_and_redelivers_its_mail(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = threading.Event()
    model_server.set_script([Stall(release=gate, then=text("never seen")), text("done now")])
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        rt = await until(lambda: host.agents.get("alice"))
        await op_call(op, "send", to="alice", body="important work")
        first = (await _main_requests(model_server, 1))[0]

        got = await op_call(op, "interrupt", agent="alice")

        assert got == {"agent": "alice", "interrupted": True, "told": None, "message_id": None}
        await until(lambda: _outcomes(rt) == ["interrupted", "ok"], within=60)
        again = model_server.main_requests[1]
        # The same conversation, resumed: claude's own record of the interrupt is in it,
        # and the mail the interrupted turn never acked came back.
        assert _session(again) == _session(first)
        assert "[Request interrupted by user]" in _said(again)
        assert _said(again).count("important work") == 2
        assert await _unread(op) == []  # acked by the turn that finished
        gate.set()


async def test_tell_reaches_the_model_in_the_interrupted_turns_session(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [Stall(release=gate, then=text("never seen")), text("understood"), text("redone")]
    )
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        rt = await until(lambda: host.agents.get("alice"))
        await op_call(op, "send", to="alice", body="the wrong task")
        first = (await _main_requests(model_server, 1))[0]

        got = await op_call(op, "interrupt", agent="alice", tell="STOP: use the other branch")

        assert got == {"agent": "alice", "interrupted": True, "told": "turn", "message_id": None}
        told = (await _main_requests(model_server, 2))[1]
        assert "STOP: use the other branch" in _said(told)
        assert _session(told) == _session(first)
        await until(lambda: _outcomes(rt) == ["interrupted", "ok"], within=60)
        # Inside the same claude process: the interrupted turn took the text itself.
        user_lines = [e["text"] for e in rt.bus.history if e["kind"] == "user_message"]
        assert user_lines == ["STOP: use the other branch"]
        assert "the wrong task" in _said(model_server.main_requests[2])  # redelivered
        gate.set()


async def test_interrupt_of_an_idle_agent_is_refused_and_a_tell_becomes_a_message(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(
        [tool_call("mcp__hyperhive__send", {"to": "operator", "body": "ok"}), text("done")]
    )
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        rt = await until(lambda: host.agents.get("alice"))
        await until(lambda: rt.connection.up)
        with pytest.raises(Exception, match="not running a turn"):
            await op_call(op, "interrupt", agent="alice")

        got = await op_call(op, "interrupt", agent="alice", tell="when you can: ping me")

        assert isinstance(got, dict) and got["interrupted"] is False and got["told"] == "message"
        woke = (await _main_requests(model_server, 1))[0]
        assert "when you can: ping me" in _said(woke)
        await until(lambda: _outcomes(rt) == ["ok"], within=60)


async def test_mail_that_arrives_mid_turn_reaches_the_same_turn_and_is_acked_once(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [
            Stall(release=gate, then=tool_call("mcp__hyperhive__set_status", {"text": "busy"})),
            text("read both"),
            text("probe seen"),
        ]
    )
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        rt = await until(lambda: host.agents.get("alice"))
        await op_call(op, "send", to="alice", body="first task")
        await _main_requests(model_server, 1)
        sent = await op_call(op, "send", to="alice", body="a reply from a child")
        assert isinstance(sent, dict)
        # Offered to the running turn: claude holds it until the model call in flight ends.
        await until(lambda: [e for e in rt.bus.history if e["kind"] == "mail_offered"])
        gate.set()

        second = (await _main_requests(model_server, 2))[1]

        assert f"[msg #{sent['id']}] from operator: a reply from a child" in _said(second)
        assert _session(second) == _session(model_server.main_requests[0])
        # Taken in while the step ran, claude quotes it in a note beside the tool's result
        # (not as a user message): the chaos runs' ledger counts it as shown all the same.
        assert offered_midturn(second.messages) == ([], [sent["id"]])
        await until(lambda: _outcomes(rt) == ["ok"], within=60)
        assert await _unread(op) == []  # both acked, by the one turn
        # Nothing left to wake a turn for the mid-turn message: the next turn is the probe's.
        await op_call(op, "send", to="alice", body="probe")
        third = (await _main_requests(model_server, 3))[2]
        assert "probe" in json.dumps(third.messages[-1])
        assert "a reply from a child" not in json.dumps(third.messages[-1])
        await until(lambda: _outcomes(rt) == ["ok", "ok"], within=60)


async def test_mail_that_arrives_as_the_last_reply_is_written_gets_a_round_of_its_own(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [Stall(release=gate, then=text("all done")), text("read the late one"), text("probe")]
    )
    _seed(tmp_path, model_server)
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        rt = await until(lambda: host.agents.get("alice"))
        await op_call(op, "send", to="alice", body="first task")
        first = (await _main_requests(model_server, 1))[0]
        late = await op_call(op, "send", to="alice", body="a late reply")
        assert isinstance(late, dict)
        # Offered while the model's last answer (no tool call) is in flight.
        await until(lambda: [e for e in rt.bus.history if e["kind"] == "mail_offered"])
        gate.set()

        second = (await _main_requests(model_server, 2))[1]
        await until(lambda: _outcomes(rt) == ["ok"], within=60)

        # A second round of the same claude and session, the mail its own user message,
        # acked with the one turn once that round's answer came.
        assert "a late reply" not in json.dumps(first.messages)
        assert offered_midturn(second.messages) == ([late["id"]], [])
        assert _session(second) == _session(first)
        assert [e["kind"] for e in rt.bus.history if e["kind"] in ("result", "turn_end")] == [
            "result",
            "result",
            "turn_end",
        ]
        lines = [e["text"] for e in rt.bus.history if e["kind"] == "user_message"]
        assert len(lines) == 1 and f"[msg #{late['id']}] from operator: a late reply" in lines[0]
        assert await _unread(op) == []
        await op_call(op, "send", to="alice", body="probe")
        third = (await _main_requests(model_server, 3))[2]
        assert "a late reply" not in json.dumps(third.messages[-1])
        await until(lambda: _outcomes(rt) == ["ok", "ok"], within=60)
