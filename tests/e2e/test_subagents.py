"""Subagents end to end: the real claude CLI, spawned by the host, against the scripted model.

The model server answers both the parent agent's turns and its subagents'
runs; it tells them apart by the tools offered (only a subagent is offered
``mcp__subagent_control__*``, only the parent ``mcp__hyperhive__*``). Each
subagent request's ``tools`` array is exactly what its ``--tools``,
``--strict-mcp-config`` and MCP config produced, so it is the ground truth
for what a subagent can do.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup, builtin_tools_for
from tests.support.hive import agent_env, running_hive, seed_home
from tests.support.model_server import (
    Answer,
    ModelServer,
    RecordedRequest,
    Stall,
    text,
    tool_call,
)
from tests.support.surfaces import (
    eventually,
    loose_todos,
    mcp_client,
    result_text,
    surface_client,
    until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(150)]

ECHO_SERVER = Path(__file__).resolve().parents[1] / "support" / "echo_mcp.py"
GOAL = "mcp__subagent_control__goal_reached"
HELP = "mcp__subagent_control__need_help"
ESCAPING = (
    "SendMessage",
    "ListAgents",
    "Task",
    "TaskStop",
    "TaskOutput",
    "CronCreate",
    "CronDelete",
    "RemoteTrigger",
    "EnterWorktree",
    "ExitWorktree",
)


def _echo(shared: bool) -> dict[str, Any]:
    return {
        "type": "stdio",
        "command": sys.executable,
        "args": [str(ECHO_SERVER)],
        "available_to_subagents": shared,
    }


def _tools(body: dict[str, Any]) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


def is_subagent(request: RecordedRequest) -> bool:
    return GOAL in request.tool_names


def _said(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


def _answered_a_tool(body: dict[str, Any]) -> bool:
    # The last *user* message: with some models claude appends a role "system" one.
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return bool(users) and '"tool_result"' in json.dumps(users[-1])


def script(stall: threading.Event | None = None) -> Callable[[dict[str, Any]], Answer]:
    """Subagents do what their prompt's keyword says; the parent's turns just end."""

    def answer(body: dict[str, Any]) -> Answer:
        if GOAL not in _tools(body):
            return text("parent noted it")
        said = _said(body)
        if _answered_a_tool(body):
            return text("SUBAGENT DONE: reported")
        if "KEYWORD-STALL" in said and stall is not None:
            return Stall(release=stall, then=text("too late"))
        if "KEYWORD-SIGNAL" in said:
            return tool_call(GOAL, {"summary": "found the answer: 42"})
        if "KEYWORD-SECOND" in said:
            return text("second answer")
        return text("first answer")

    return answer


def _seed(home: Path, model: ModelServer, **agents: AgentConfig) -> None:
    configs = {n: c.model_copy(update={"env": agent_env(model.url)}) for n, c in agents.items()}
    seed_home(home, configs)


def _subagent_requests(model: ModelServer) -> list[RecordedRequest]:
    return [r for r in model.main_requests if is_subagent(r)]


async def _wait_requests(
    model: ModelServer, check: Callable[[list[RecordedRequest]], bool], within: float = 60
) -> list[RecordedRequest]:
    return await anyio.to_thread.run_sync(lambda: model.wait_for(check, within))


GROUPS = {
    "agent_default": ToolGroup.AGENT_DEFAULT,
    "manager_default": ToolGroup.MANAGER_DEFAULT,
    "agent_default+web_tools": (*ToolGroup.AGENT_DEFAULT, ToolGroup.WEB_TOOLS),
    "manager_default+web_tools": (*ToolGroup.MANAGER_DEFAULT, ToolGroup.WEB_TOOLS),
}


@pytest.mark.parametrize("groups", list(GROUPS.values()), ids=list(GROUPS))
async def test_a_subagent_is_offered_its_parents_builtins_and_only_its_own_surfaces(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, groups: tuple[ToolGroup, ...]
) -> None:
    model_server.set_script(script())
    config = AgentConfig.model_validate(
        {
            "tool_groups": [g.value for g in groups],
            "mcp_servers": {"shared": _echo(True), "private": _echo(False)},
        }
    )
    _seed(tmp_path, model_server, alice=config)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with surface_client(host, "alice", "subagent") as sub:
            listed = {t.name for t in (await sub.list_tools()).tools}
            assert listed == {"start", "continue", "interrupt", "status"}
            started = await sub.call_tool("start", {"prompt": "KEYWORD-SIGNAL go", "name": "scout"})
            assert result_text(started).startswith("subagent started: id=scout"), started

            # goal_reached, then the run's end, reach alice as todos at the coordinator.
            todos = await eventually(
                c.paths,
                "alice",
                "subagent",
                lambda t: "scout:goal_reached" in t and "scout" in t,
                within=60,
            )
            assert "found the answer: 42" in todos["scout:goal_reached"]
            assert "finished" in todos["scout"] and "SUBAGENT DONE" in todos["scout"]

            seen = result_text(await sub.call_tool("status", {"id": "scout"}))
            assert "subagent scout: finished" in seen and "SUBAGENT DONE" in seen
            assert "scout" not in await loose_todos(c.paths, "alice", "subagent")

        # The parent's own turn (woken by those todos) shows what the parent has.
        requests = await _wait_requests(
            model_server, lambda rs: any(r.main and not is_subagent(r) for r in rs)
        )
        parent = next(r for r in requests if r.main and not is_subagent(r))
        child = _subagent_requests(model_server)[0]

    offered = set(child.tool_names)
    builtins = {t for t in offered if not t.startswith("mcp__")}
    parent_builtins = {t for t in parent.tool_names if not t.startswith("mcp__")}
    assert builtins and builtins <= parent_builtins
    # All the parent's built-ins but Skill: a subagent gets no skills (--disable-slash-commands).
    assert builtins == set(builtin_tools_for(groups)) - {"Skill"}
    assert "Skill" in parent_builtins
    assert ({"WebFetch", "WebSearch"} <= builtins) == (ToolGroup.WEB_TOOLS in groups)
    assert not {"WebFetch", "WebSearch"} & builtins or ToolGroup.WEB_TOOLS in groups
    assert not builtins & set(ESCAPING)
    for surface in ("hyperhive", "bash", "subagent"):
        assert not [t for t in offered if t.startswith(f"mcp__{surface}__")], surface
    assert {GOAL, HELP} <= offered
    assert "mcp__shared__echo" in offered
    assert not [t for t in offered if t.startswith("mcp__private__")]
    # The parent did get its private server: the absence above is the subagent rule.
    assert "mcp__private__echo" in parent.tool_names


async def test_continue_resumes_the_session_and_interrupt_stops_the_run(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    stall = threading.Event()
    model_server.set_script(script(stall))
    _seed(tmp_path, model_server, alice=AgentConfig())
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(lambda: "alice" in host.agents)
            async with surface_client(host, "alice", "subagent") as sub:
                await sub.call_tool("start", {"prompt": "KEYWORD-FIRST task", "name": "worker"})
                await eventually(
                    c.paths, "alice", "subagent", lambda t: "first answer" in t.get("worker", "")
                )
                early = await sub.call_tool("continue", {"id": "nobody", "prompt": "x"})
                assert early.is_error and "no subagent 'nobody'" in result_text(early)

                resumed = await sub.call_tool(
                    "continue", {"id": "worker", "prompt": "KEYWORD-SECOND task"}
                )
                assert "continues in its session (run 2)" in result_text(resumed), resumed
                await eventually(
                    c.paths, "alice", "subagent", lambda t: "second answer" in t.get("worker", "")
                )
                first, second = _subagent_requests(model_server)[:2]
                # Same claude session: the second run's model call carries the first run.
                assert "KEYWORD-FIRST" in _said(second.body)
                assert "first answer" in _said(second.body)
                assert "KEYWORD-SECOND" not in _said(first.body)
                session = "x-claude-code-session-id"
                assert first.headers[session] == second.headers[session]

                await sub.call_tool("start", {"prompt": "KEYWORD-STALL now", "name": "sleepy"})
                await _wait_requests(
                    model_server, lambda rs: "KEYWORD-STALL" in json.dumps([r.body for r in rs])
                )
                busy = await sub.call_tool("continue", {"id": "sleepy", "prompt": "more"})
                assert busy.is_error and "still running" in result_text(busy)
                stopped = await sub.call_tool("interrupt", {"id": "sleepy"})
                assert "interrupted" in result_text(stopped)
                with anyio.fail_after(20):
                    while True:
                        seen = result_text(await sub.call_tool("status", {"id": "sleepy"}))
                        if "subagent sleepy: interrupted" in seen:
                            break
                        await anyio.sleep(0.1)
                again = await sub.call_tool("interrupt", {"id": "sleepy"})
                assert "was not running" in result_text(again)
                # An interrupt the parent asked for files no todo.
                assert "sleepy" not in await loose_todos(c.paths, "alice", "subagent")
    finally:
        stall.set()


async def test_the_control_surface_knows_its_caller_by_a_per_run_token(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    stall = threading.Event()
    model_server.set_script(script(stall))
    no_subagents = AgentConfig.model_validate({"mcp_servers": {"subagent": {"enabled": False}}})
    _seed(tmp_path, model_server, alice=AgentConfig(), bob=no_subagents)
    try:
        async with running_hive(tmp_path, claude_bin) as (c, host):
            await until(lambda: {"alice", "bob"} <= set(host.agents))
            alice = host.agents["alice"]
            async with surface_client(host, "alice", "subagent") as sub:
                await sub.call_tool("start", {"prompt": "KEYWORD-STALL hold", "name": "held"})
            await _wait_requests(model_server, lambda rs: any(is_subagent(r) for r in rs))
            config = json.loads((alice.spec.runtime_dir / "subagent-held.json").read_text())
            control = config["mcpServers"]["subagent_control"]
            assert control["url"] == f"{host.base_url}/agents/alice/mcp/subagent_control"
            run_token = control["headers"]["Authorization"].removeprefix("Bearer ")
            assert run_token != alice.token
            assert set(config["mcpServers"]) == {"subagent_control"}

            async with mcp_client(control["url"], run_token) as signals:
                listed = {t.name for t in (await signals.list_tools()).tools}
                assert listed == {"goal_reached", "need_help"}
                asked = await signals.call_tool("need_help", {"question": "which branch?"})
                assert not asked.is_error and "end your turn" in result_text(asked)
            todos = await loose_todos(c.paths, "alice", "subagent")
            assert "which branch?" in todos["held:need_help"]
            assert "continue('held'" in todos["held:need_help"]
            calls = [e for e in alice.bus.history if e["kind"] == "tool_call"]
            assert any(
                e["server"] == "subagent_control" and e["tool"] == "need_help" for e in calls
            )

            async def status(url: str, token: str) -> int:
                init = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                }
                headers = {
                    "accept": "application/json, text/event-stream",
                    "authorization": f"Bearer {token}",
                }
                async with httpx.AsyncClient() as http:
                    return (await http.post(url, json=init, headers=headers)).status_code

            base = f"{host.base_url}/agents"
            # The agent's own token does not open its subagents' surface …
            assert await status(f"{base}/alice/mcp/subagent_control", alice.token) == 401
            # … and a subagent's token opens nothing else, nor another agent's path.
            for surface in ("hyperhive", "bash", "subagent"):
                assert await status(f"{base}/alice/mcp/{surface}", run_token) == 401
            assert await status(f"{base}/bob/mcp/subagent_control", run_token) == 401

            async with surface_client(host, "alice", "subagent") as sub:
                await sub.call_tool("interrupt", {"id": "held"})
            await until(lambda: alice.subagents is not None and not alice.subagents.running("held"))
            # The run is over: its token is revoked.
            assert await status(f"{base}/alice/mcp/subagent_control", run_token) == 401

            async with surface_client(host, "bob", "subagent") as sub:
                assert (await sub.list_tools()).tools == []
                refused = await sub.call_tool("start", {"prompt": "hi"})
                assert refused.is_error and "disabled" in result_text(refused)
    finally:
        stall.set()
