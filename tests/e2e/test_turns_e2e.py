"""Turn records end to end: the real claude CLI runs a tool-using turn against the scripted
model, and ``hivectl turns`` reads back exactly what it did, across a restart of the
whole hive, with a secret the hive injected redacted before it was stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.matrix.identity import Account, write_account
from tests.support.clidoc import read_doc
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, Stall, Usage, text, tool_call
from tests.support.procs import hivectl, hivectl_json
from tests.support.surfaces import until, until_async

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(300)]

SONNET = "claude-sonnet-4-5-20250929"
CALL = Usage(input_tokens=50_800, output_tokens=5)
CALL_USD = (CALL.input_tokens * 3 + CALL.output_tokens * 15) / 1e6
SECRET = "planted-secret-0123456789abcdef"
API_KEY = "sk-ant-planted-api-key-0123456789"
FORGE = "planted-forge-token-0123456789"
MATRIX = "planted-matrix-token-0123456789"
# Every secret the hive injects, as a tool prints it: the agent.toml env, the model
# credential, its forge and Matrix tokens, and its hive token (in its MCP config).
CMD = (
    f"echo token={SECRET} key={API_KEY} forge={FORGE} matrix={MATRIX}; "
    "cat {runtime}/mcp-config.json; echo hello-marmalade"
)
NAMED = {
    SECRET: "PLANTED_TOKEN",
    API_KEY: "ANTHROPIC_API_KEY",
    FORGE: "forge token",
    MATRIX: "matrix token",
}


def _redacted(text: str, hive_token: str) -> str:
    for value, what in {**NAMED, hive_token: "hive token"}.items():
        text = text.replace(value, f"[redacted:{what}]")
    return text


def _tool_results(model_server: ModelServer) -> list[str]:
    """The tool results claude sent back to the model: what the agent really saw."""
    out = []
    for request in model_server.main_requests:
        for message in request.messages:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        inner = "".join(str(b.get("text", "")) for b in inner)
                    out.append(str(inner))
    return out


async def _counted(c: Any, n: int) -> list[Any]:
    async def rows() -> list[Any]:
        found = await c.store.spend.entries("alice", limit=100)
        return found if len(found) >= n else []

    result: list[Any] = await until_async(rows, within=120)
    return result


async def test_a_tool_using_turn_is_read_back_exactly_after_a_restart(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    cmd = CMD.replace("{runtime}", str(HivePaths(tmp_path).agent_runtime("alice")))
    model_server.set_script(
        [
            tool_call("mcp__bash__run", {"cmd": cmd, "wait_seconds": 30}, CALL),
            text("all done, the jam is marmalade", CALL),
        ]
    )
    env = {**agent_env(model_server.url), "PLANTED_TOKEN": SECRET, "ANTHROPIC_API_KEY": API_KEY}
    config = AgentConfig.model_validate({"env": env, "model": SONNET})
    paths = seed_home(tmp_path, {"alice": config}, hive_toml="dashboard_port = 0\n")
    state = paths.agent_state("alice")
    state.mkdir(parents=True)
    (state / "forge-token").write_text(FORGE)
    write_account(state, Account("@alice:hive", "DEV", MATRIX, "http://matrix.invalid"), None)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        hive_token = host.agents["alice"].token
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="look it up\nplease")
        [spent] = await _counted(c, 1)
        listed = await anyio.to_thread.run_sync(
            lambda: hivectl_json(tmp_path, "turns", "list", "alice")
        )
    seen = _tool_results(model_server)
    # The whole hive restarts between the turn and reading it back.
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        shown = await anyio.to_thread.run_sync(
            lambda: hivectl_json(tmp_path, "turns", "show", listed[0]["id"])
        )
        found = await anyio.to_thread.run_sync(
            lambda: hivectl_json(tmp_path, "turns", "search", "hello-marmalade")
        )
        missing = await anyio.to_thread.run_sync(
            lambda: hivectl(
                tmp_path, "turns", "show", "alice.20200101T000000Z-00000000", check=False
            )
        )

    [turn] = listed
    # What --json prints is what docs/cli-json.md documents.
    doc = read_doc()
    assert doc.shapes["hivectl turns list"] == "list[TurnSummary]"
    assert set(turn) == doc.tables["TurnSummary"]
    assert set(shown) == doc.tables["TurnRecord"]
    assert all(set(s) == doc.tables["TurnStep"] for s in shown["steps"])
    assert all(set(h) == doc.tables["TurnHit"] for h in found)
    assert turn["agent"] == "alice" and turn["id"].startswith("alice.")
    assert turn["outcome"] == "ok"
    # The figure spend holds: two model calls at the scripted price.
    assert turn["cost_usd"] == pytest.approx(2 * CALL_USD, rel=1e-9)
    assert turn["cost_usd"] == pytest.approx(spent.cost_usd, rel=1e-12)
    assert turn["tools"] == ["mcp__bash__run"]
    assert turn["wake_reason"] == "mail from operator"

    assert shown["turn"]["id"] == turn["id"]
    assert shown["wake"]["messages"][0]["subject"] == "look it up"
    steps = shown["steps"]
    uses = [s for s in steps if s["kind"] == "tool_use"]
    results = [s for s in steps if s["kind"] == "tool_result"]
    texts = [s["text"] for s in steps if s["kind"] == "text"]
    assert [s["kind"] for s in steps][0] == "prompt" and "look it up" in steps[0]["text"]
    [use] = uses
    assert use["name"] == "mcp__bash__run"
    assert json.loads(use["text"]) == {"cmd": _redacted(cmd, hive_token), "wait_seconds": 30}
    [result] = results
    assert result["call_id"] == use["call_id"]
    # Exactly the result the model was sent, but for the secret (claude appends its own
    # system reminder to what it sends the API; the record is what the tool returned).
    [sent_back] = seen
    assert SECRET in sent_back and hive_token in sent_back and "hello-marmalade" in result["text"]
    assert "[redacted:hive token]" in result["text"]
    kept = _redacted(sent_back, hive_token)
    assert kept.startswith(result["text"]) and len(result["text"]) > len(CMD)
    rest = kept[len(result["text"]) :].strip()
    assert rest == "" or rest.startswith("<system-reminder>"), rest
    assert texts == ["all done, the jam is marmalade"]
    assert [h["turn"]["id"] for h in found] == [turn["id"]]
    # No secret reached a file of the records.
    records = tmp_path / "agents" / "alice" / "turns"
    assert (records / "turns.db").is_file()
    for path in records.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for value in (*NAMED, hive_token):
                assert value.encode() not in data, path
    # An unknown turn: said, and exit 4 (not found).
    assert missing.returncode == 4
    assert "no turn alice.20200101T000000Z-00000000" in missing.stderr


async def test_a_turn_killed_mid_way_keeps_the_steps_before_it(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path
) -> None:
    held = Stall()
    model_server.set_script(
        [tool_call("mcp__bash__run", {"cmd": "echo step-one-done", "wait_seconds": 30}), held]
    )
    config = AgentConfig.model_validate({"env": agent_env(model_server.url)})
    seed_home(tmp_path, {"alice": config}, hive_toml="dashboard_port = 0\n")
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            await op_call(op, "send", to="alice", body="start something long")
        # The second model call hangs: the tool call and its result are in; the host stops.
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda rs: sum(r.main for r in rs) >= 2, 120)
        )
    held.release.set()
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        # Oldest last: the mail came back after the restart, and woke a turn of its own.
        turn = (
            await anyio.to_thread.run_sync(lambda: hivectl_json(tmp_path, "turns", "list", "alice"))
        )[-1]
        shown = await anyio.to_thread.run_sync(
            lambda: hivectl_json(tmp_path, "turns", "show", turn["id"])
        )
    assert turn["outcome"] == "interrupted" and turn["ended"] is not None
    kinds = [(s["kind"], s.get("name")) for s in shown["steps"]]
    assert kinds == [("prompt", None), ("tool_use", "mcp__bash__run"), ("tool_result", None)]
    assert "step-one-done" in shown["steps"][2]["text"]
