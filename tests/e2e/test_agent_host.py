"""The agent host end to end: coordinator + host + the real claude CLI + scripted model."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from hyperhive.config import AgentConfig
from hyperhive.core.coordinator import Coordinator
from hyperhive.names import OPERATOR
from hyperhive.permissions import ToolGroup, builtin_tools_for, group_tools
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import (
    ApiError,
    ModelServer,
    Reply,
    Stall,
    ToolUse,
    Usage,
    always,
    text,
    tool_call,
)
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(90)]


async def operator_inbox(c: Coordinator) -> list[dict[str, Any]]:
    async with operator(c.paths) as op:
        rows = await op_call(op, "inbox")
    assert isinstance(rows, list)
    return [r for r in rows if isinstance(r, dict)]


async def wait_operator_message(c: Coordinator, within: float = 30.0) -> dict[str, Any]:
    with anyio.fail_after(within):
        while True:
            event = c.notifier.event(OPERATOR)
            rows = await operator_inbox(c)
            if rows:
                return rows[-1]
            await event.wait()


def _seed(
    tmp_path: Path, model: ModelServer, store_url: str | None = None, **agents: AgentConfig
) -> None:
    configs = {
        name: cfg.model_copy(update={"env": agent_env(model.url)}) for name, cfg in agents.items()
    }
    seed_home(tmp_path, configs, store_url=store_url)


async def test_operator_message_wakes_the_agent_which_replies(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, hive_store_url: str | None
) -> None:
    model_server.set_script(
        [
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "pong"}),
            text("done"),
        ]
    )
    _seed(tmp_path, model_server, hive_store_url, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            sent = await op_call(op, "send", to="alice", body="ping")
        assert isinstance(sent, dict)
        reply = await wait_operator_message(c)
        assert reply["from"] == "alice" and reply["body"] == "pong"
        first = model_server.main_requests[0]
        assert "[msg #" in str(first.messages) and "from operator: ping" in str(first.messages)

        async def acked() -> bool:
            async with operator(c.paths) as op:
                views = await op_call(op, "messages", agent="alice")
            assert isinstance(views, dict)
            return bool(views["inbox"][0]["acked"])

        await until_async(acked)
        # The ack is stored before the coordinator answers turn_end; the harness tells
        # its bus the turn's end once that answer is back, a moment later.
        state = await until(lambda: (s := host.agents["alice"].bus.snapshot())["last_turn"] and s)
        assert state["last_turn"]["outcome"] == "ok" and state["session_id"]


@pytest.mark.parametrize(
    "groups",
    [
        ToolGroup.AGENT_DEFAULT,
        ToolGroup.MANAGER_DEFAULT,
        (*ToolGroup.AGENT_DEFAULT, ToolGroup.WEB_TOOLS),
        (*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE),
    ],
    ids=["agent_default", "manager_default", "agent_default+web_tools", "agent_default+forge"],
)
async def test_the_model_is_offered_exactly_the_granted_tools(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, groups: tuple[ToolGroup, ...]
) -> None:
    model_server.set_script([text("ok")])
    _seed(tmp_path, model_server, alice=AgentConfig(tool_groups=list(groups)))
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="hello")
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda reqs: any(r.main for r in reqs), 30)
        )
        offered = set(model_server.main_requests[0].tool_names)
        surface = host.surfaces["hyperhive"]
        expected_mcp = {f"mcp__hyperhive__{t}" for t in surface.listed_for(host.agents["alice"])}
        builtins = {t for t in offered if not t.startswith("mcp__")}
        assert builtins == set(builtin_tools_for(groups))
        hyperhive = {t for t in offered if t.startswith("mcp__hyperhive__")}
        assert hyperhive == expected_mcp
        granted = {t.name for g in groups for t in group_tools(g) if t.server == "hyperhive"}
        assert {"send", "recv", "compact"} <= {
            t.removeprefix("mcp__hyperhive__") for t in hyperhive
        }
        # Every hyperhive tool offered belongs to a granted group (or is always on), and
        # every tool a granted group names is offered: served, not a name without a tool.
        assert {t.removeprefix("mcp__hyperhive__") for t in hyperhive} == granted | {"compact"}


@asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def test_direct_mcp_calls_are_gated_and_authenticated(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    _seed(
        tmp_path, model_server, alice=AgentConfig(tool_groups=[ToolGroup.META]), bob=AgentConfig()
    )
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: {"alice", "bob"} <= set(host.agents))
        alice, bob = host.agents["alice"], host.agents["bob"]
        url = f"{host.base_url}/agents/alice/mcp/hyperhive"
        async with mcp_client(url, alice.token) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert listed == {"set_status", "get_agent_meta", "compact"}
            refused = await client.call_tool("send", {"to": "operator", "body": "x"})
            assert refused.is_error
            assert "'messaging' tool group" in refused.content[0].text  # type: ignore[union-attr]
            ok = await client.call_tool("set_status", {"text": "testing"})
            assert not ok.is_error and "testing" in ok.content[0].text  # type: ignore[union-attr]
            bad = await client.call_tool("set_status", {"txt": "typo"})
            assert bad.is_error and "bad arguments" in bad.content[0].text  # type: ignore[union-attr]
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
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as http:
            none = await http.post(url, json=init, headers=headers)
            stolen = await http.post(
                url, json=init, headers={**headers, "authorization": f"Bearer {bob.token}"}
            )
            state = await http.get(
                f"{host.base_url}/api/agents/alice/state",
                headers={"authorization": f"Bearer {bob.token}"},
            )
            mine = await http.get(
                f"{host.base_url}/api/agents/alice/state",
                headers={"authorization": f"Bearer {alice.token}"},
            )
        assert none.status_code == 401 and stolen.status_code == 401
        assert state.status_code == 401
        assert mine.status_code == 200 and mine.json()["turn_state"] == "idle"
        # The envelope put the calls on alice's bus.
        calls = [e for e in alice.bus.history if e["kind"] == "tool_call"]
        assert [(e["tool"], e["ok"]) for e in calls] == [
            ("send", False),
            ("set_status", True),
            ("set_status", False),
        ]


async def test_claude_killed_mid_turn_gets_the_message_again(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, hive_store_url: str | None
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [
            Stall(release=gate, then=text("never seen")),
            tool_call("mcp__hyperhive__send", {"to": "operator", "body": "second try"}),
            text("done"),
        ]
    )
    _seed(tmp_path, model_server, hive_store_url, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="important")
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda reqs: any(r.main for r in reqs), 30)
        )
        pid = await until(lambda: host.agents["alice"].turns.claude_pid)
        os.killpg(pid, signal.SIGKILL)
        gate.set()
        reply = await wait_operator_message(c, within=45)
        assert reply["body"] == "second try"
        retried = model_server.main_requests[1]
        assert "important" in str(retried.messages)
        bus = host.agents["alice"].bus

        def outcomes() -> list[str]:
            return [e["outcome"] for e in bus.history if e["kind"] == "turn_end"]

        await until(lambda: outcomes() and outcomes()[-1] == "ok")
        # The killed turn's session was never written, so one turn finds it gone.
        assert outcomes()[0] == "interrupted"


async def test_usage_above_the_watermark_checkpoints_then_compacts(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    full = Usage(input_tokens=170_000, output_tokens=10)
    model_server.set_script(
        [
            Reply([ToolUse("mcp__hyperhive__set_status", {"text": "busy"})], full),
            text("done", full),
            text("noted"),  # the notes-checkpoint turn
            text("SUMMARY OF THE CONVERSATION"),  # /compact
        ]
    )
    _seed(tmp_path, model_server, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="work")
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda reqs: sum(r.main for r in reqs) >= 4, 45)
        )
        bus = host.agents["alice"].bus
        await until(
            lambda: (
                bus.turn_state == "idle"
                and any(
                    e["kind"] == "state" and e["turn_state"] == "compacting" for e in bus.history
                )
            )
        )
        mains = model_server.main_requests
        checkpoint, compact = str(mains[2].messages[-1]), str(mains[3].messages[-1])
        assert "durable notes" in checkpoint
        assert "summary" in compact.lower()
        states = [e["turn_state"] for e in bus.history if e["kind"] == "state"]
        assert states[-3:] == ["thinking", "compacting", "idle"]

        # Both count to the budget: the turn, and the checkpoint + /compact as one run.
        async def compaction_counted() -> list[Any]:
            rows = await c.store.spend.entries("alice")
            return rows if any(e.kind == "compaction" for e in rows) else []

        spent = {e.kind: e for e in await until_async(compaction_counted)}
        assert spent["turn"].input_tokens == 2 * full.input_tokens
        assert spent["compaction"].input_tokens >= 10  # at least the checkpoint's call


async def test_auth_failure_puts_the_agent_in_needs_login(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    model_server.set_script(always(ApiError(401, "authentication_error", "invalid x-api-key")))
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    _seed(tmp_path, model_server, queen=manager, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="hello")

            async def flagged() -> bool:
                ends = await op_call(op, "get_loose_ends", agent="queen")
                assert isinstance(ends, list)
                return "needs_login:alice" in [e["key"] for e in ends]

            await until_async(flagged)
            agents = await op_call(op, "agents")
        assert isinstance(agents, list)
        assert next(a for a in agents if a["name"] == "alice")["needs_login"] is True


async def test_graceful_stop_fences_the_inbox_and_finishes_the_turn(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    gate = threading.Event()
    model_server.set_script(
        [
            Stall(release=gate, then=tool_call("mcp__hyperhive__recv", {"max": 5})),
            text("flushed my notes"),
        ]
    )
    _seed(tmp_path, model_server, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        rt = host.agents["alice"]
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="start")
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda reqs: any(r.main for r in reqs), 30)
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.deactivate, "alice")
            await until(lambda: rt.lifetime.stopping.is_set())
            async with operator(c.paths) as op:
                await op_call(op, "send", to="alice", body="after the fence")
            gate.set()
        assert rt.lifetime.done.is_set() and "alice" not in host.agents
        tool_result = str(model_server.main_requests[1].messages[-1])
        assert "graceful-stop" in tool_result and "after the fence" not in tool_result
        outcomes = [e["outcome"] for e in rt.bus.history if e["kind"] == "turn_end"]
        assert outcomes == ["ok"]
        assert rt.bus.turn_state == "stopped"


async def test_a_restarted_agent_shows_its_new_incarnations_turn_state(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The old runtime's last report ("stopped", once its graceful stop ended) reached the
    # coordinator after the restart had activated the new one, which reports nothing
    # until its state changes: an idle agent showed "stopped" until its next turn.
    caplog.set_level(logging.DEBUG, logger="hyperhive.core.infra.link_table")
    _seed(tmp_path, model_server, alice=AgentConfig())
    async with running_hive(tmp_path, claude_bin) as (c, host), operator(c.paths) as op:
        old = await until(lambda: host.agents.get("alice"))
        await until(lambda: old.connection.up)
        await op_call(op, "agent_restart", agent="alice")
        new = await until(lambda: (rt := host.agents.get("alice")) is not old and rt)
        await until(lambda: new.connection.up and old.lifetime.done.is_set())

        def stale_report_seen() -> bool:
            return any("not its current one" in r.getMessage() for r in caplog.records)

        await until(stale_report_seen)
        assert old.bus.turn_state == "stopped" and new.bus.turn_state == "idle"
        assert c.hostlink.turns["alice"].state == "idle"
        agents = await op_call(op, "agents")
        assert isinstance(agents, list)
        assert next(a for a in agents if a["name"] == "alice")["turn_state"] == "idle"


async def test_one_broken_agent_does_not_stop_another(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    def script(body: dict[str, Any]) -> Reply:
        # Only alice answers the operator; queen (woken by the crash notice) just ends.
        mine = "You are alice" in json.dumps(body.get("system"))
        if mine and "tool_result" not in json.dumps(body["messages"][-1]):
            return tool_call("mcp__hyperhive__send", {"to": "operator", "body": "alive"})
        return text("done")

    model_server.set_script(script)
    broken = AgentConfig.model_validate({"mcp_servers": {"x": {"type": "stdio"}}})
    manager = AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))
    _seed(tmp_path, model_server, queen=manager, alice=AgentConfig(), broken=broken)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="broken", body="crash please")
            await op_call(op, "send", to="alice", body="are you there")
        reply = await wait_operator_message(c)
        assert (reply["from"], reply["body"]) == ("alice", "alive"), reply
        # The host drops the runtime, then reports the crash over its link: the coordinator
        # learns a moment later (and restarts it after a back-off, so poll for the window).
        await until(lambda: "broken" not in host.agents and not c.hostlink.running("broken"))

        # The queen's notice is stored after the coordinator books the crash: poll for it.
        async def crash_mail() -> list[dict[str, str]]:
            async with operator(c.paths) as op:
                queen_mail = await op_call(op, "messages", agent="queen")
            assert isinstance(queen_mail, dict)
            return [m for m in queen_mail["inbox"] if "container_crash" in m["body"]]

        crash = await until_async(crash_mail)
        assert "broken" in crash[0]["body"]
