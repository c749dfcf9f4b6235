"""The activity log end to end: a real hive (coordinator, agent host, the real claude
CLI against the scripted model) produces every kind the front page shows, and
each lands once with the fields the feed needs.

Turns with their cost and tokens, a budget warning then an over-budget hold,
a bash task that ended inside its wait (one event), another and a subagent
started and finished (reported by the host),
a spawn, a reparent and a destroy, an approval asked and resolved, a question
to the operator and its answer, a crash and a lost login.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperhive.config import AgentConfig
from hyperhive.core.activity import KINDS
from hyperhive.permissions import ToolGroup
from hyperhive.store.rows import ActivityRow
from tests.support.hive import (
    agent,
    agent_call,
    agent_env,
    op_call,
    operator,
    running_hive,
    seed_home,
)
from tests.support.model_server import ModelServer
from tests.support.spend_script import BIG, spending, start_scout
from tests.support.surfaces import result_text, surface_client, until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

LIMIT = 5000  # the subagent and one big turn pass 80%; a second big turn passes 100%


async def _events(c: Any) -> list[ActivityRow]:
    return list(reversed(await c.store.activity.page(limit=500)))


async def _seen(c: Any, kind: str, count: int = 1, **detail: Any) -> list[ActivityRow]:
    async def found() -> list[ActivityRow]:
        rows = [
            r
            for r in await _events(c)
            if r.kind == kind and all(r.detail.get(k) == v for k, v in detail.items())
        ]
        return rows if len(rows) >= count else []

    rows: list[ActivityRow] = await until_async(found, within=90)
    return rows


async def test_a_live_hive_logs_every_kind_once_with_its_fields(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)  # only nologin goes without one
    model_server.set_script(spending)
    env = agent_env(model_server.url)
    seed_home(
        tmp_path,
        {
            "queen": AgentConfig(env=env, tool_groups=list(ToolGroup.MANAGER_DEFAULT)),
            "alice": AgentConfig.model_validate({"env": env, "budget": {"tokens_per_day": LIMIT}}),
            "broken": AgentConfig.model_validate({"mcp_servers": {"x": {"type": "stdio"}}}),
            "nologin": AgentConfig(env={k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}),
        },
        {"queen": None, "alice": "queen", "broken": "queen", "nologin": "queen"},
    )
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)

        # Bash tasks and a subagent, reported by the host: a task that ends inside its
        # wait is one "ran" event; one that outlives it is started, then finished.
        async with surface_client(host, "alice", "bash") as bash:
            ran = await bash.call_tool("run", {"cmd": "exit 3", "wait_seconds": 10})
            assert "3" in result_text(ran)
            later = await bash.call_tool("run", {"cmd": "sleep 1; exit 5", "wait_seconds": 0})
            assert "started" in result_text(later), later
        [inline] = await _seen(c, "bash", phase="ran")
        assert inline.agent == "alice" and inline.detail["exit_code"] == 3
        assert "ran (done, exit 3): exit 3" in inline.title
        [bash_start] = await _seen(c, "bash", phase="started")
        [bash_end] = await _seen(c, "bash", phase="finished")
        assert bash_start.agent == bash_end.agent == "alice"
        assert bash_start.detail["ref"] == bash_end.detail["ref"] != inline.detail["ref"]
        assert bash_end.detail["exit_code"] == 5 and "exit 5" in bash_end.title
        await start_scout(host, "alice")
        [sub_start] = await _seen(c, "subagent", phase="started")
        [sub_end] = await _seen(c, "subagent", phase="finished")
        assert sub_start.detail["ref"] == sub_end.detail["ref"] == "scout"
        assert sub_end.agent == "alice" and sub_end.detail["status"] == "finished"

        # Turns with their cost: the feed's figure is the spend the budgets counted.
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="ping-1")
        [warning] = await _seen(c, "budget", state="warning")
        assert warning.agent == "alice" and warning.detail["limit"] == "tokens_per_day"
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="ping-2")
        [over] = await _seen(c, "budget", state="over")
        assert over.agent == "alice" and "Budget reached" in over.title

        # A turn's event is recorded at its turn_end, after the spend that tripped the
        # budget: wait for alice's two big turns, not for any two turns of the hive.
        async def alices_turns() -> list[ActivityRow]:
            rows = [r for r in await _events(c) if r.kind == "turn" and r.agent == "alice"]
            big = [r for r in rows if r.detail.get("input_tokens", 0) >= BIG.input_tokens]
            return rows if len(big) >= 2 else []

        turns: list[ActivityRow] = await until_async(alices_turns, within=90)
        spent = {
            e.key.split(":", 1)[1]: e
            for e in await c.store.spend.entries("alice")
            if e.kind == "turn"
        }
        big = [t for t in turns if t.detail.get("input_tokens", 0) >= BIG.input_tokens]
        assert len(big) == 2
        for t in turns:
            assert t.detail["outcome"] == "ok" and t.detail["run"] == "turn"
            run = next(e for e in spent.values() if e.cost_usd == t.detail["cost_usd"])
            assert t.detail["input_tokens"] == run.input_tokens
            assert f"${run.cost_usd:.4f}" in t.title
        assert len(turns) == len(spent)  # one event per run, no more

        # Spawn, reparent, destroy (the operator's), with the agents they concern.
        async with operator(c.paths) as op:
            await op_call(op, "spawn", name="kid", parent="queen", config={"env": env})
            await op_call(op, "set_parent", child="kid", new_parent=None)
            await op_call(op, "agent_destroy", agent="kid")
        [spawn] = await _seen(c, "spawn", agent="kid")
        assert spawn.agent == "queen" and spawn.others == ("kid",)
        [moved] = await _seen(c, "reparent", to=None)
        assert moved.agent == "kid" and moved.detail["from"] == "queen"
        [gone] = await _seen(c, "destroy")
        assert gone.agent == "kid"

        # An approval asked by an agent and resolved by the operator.
        async with agent(c.paths, "queen") as q:
            asked = await agent_call(q, "request_init_config", name="scout2", config="")
        assert isinstance(asked, dict)
        async with operator(c.paths) as op:
            await op_call(op, "deny", approval_id=asked["approval_id"], reason="not now")
        [ask] = await _seen(c, "approval", state="asked")
        [denied] = await _seen(c, "approval", state="denied")
        assert ask.agent == "queen" and ask.others == ("scout2",)
        assert denied.detail["resolution"] == "not now" and "queen" in denied.others
        async with agent(c.paths, "queen") as q:
            again = await agent_call(q, "request_init_config", name="scout3", config="")
        assert isinstance(again, dict)
        async with operator(c.paths) as op:
            await op_call(op, "cancel_loose_end", kind="approval", row_id=again["approval_id"])
        [cancelled] = await _seen(c, "approval", state="cancelled")
        assert cancelled.detail["approval_id"] == again["approval_id"]
        assert "(by the operator)" in cancelled.title

        # A question to the operator, and the operator's answer.
        async with agent(c.paths, "queen") as q:
            question_asked = await agent_call(q, "ask_operator", question="Deploy now?")
        assert isinstance(question_asked, dict)
        qid = question_asked["question_id"]
        async with operator(c.paths) as op:
            await op_call(op, "answer_question", question_id=qid, answer="Yes, go.")
        [question] = await _seen(c, "question")
        [answer] = await _seen(c, "answer")
        assert question.agent == answer.agent == "queen"
        assert question.detail["question_id"] == answer.detail["question_id"] == qid
        assert question.title.endswith("Deploy now?") and answer.title.endswith("Yes, go.")

        # A crash and a lost login, from turns that really ran.
        async with operator(c.paths) as op:
            await op_call(op, "send", to="broken", body="wake up")
            await op_call(op, "send", to="nologin", body="wake up")
        crash = (await _seen(c, "crash"))[0]
        assert crash.agent == "broken" and crash.detail["reason"]
        [login] = await _seen(c, "needs_login")
        assert login.agent == "nologin" and "hivectl login nologin" in login.title

        # Every id is unique and the log is in time order, as the feed pages it.
        rows = await _events(c)
        assert {r.kind for r in rows} == set(KINDS)  # a new kind gets its place here
        assert len({r.id for r in rows}) == len(rows)
        assert [r.at for r in rows] == sorted(r.at for r in rows)
