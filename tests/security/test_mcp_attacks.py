"""The attacker's MCP endpoints on the agent host: every escalation is an error it can read.

A real coordinator and agent host (unsandboxed here, so this runs without
root; the sandbox suite repeats the network probes from inside bubblewrap).
Tool refusals are MCP error *results* naming the reason; an unknown tool is a
protocol error; another agent's endpoint answers 401 whatever token is shown.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from hyperhive.agent.host import AgentHost
from tests.security.hostile import (
    ACTIVE,
    ATTACKER,
    TOPOLOGY,
    assert_unchanged,
    live_hive,
    snapshot,
)
from tests.support.model_server import ModelServer, always, text
from tests.support.surfaces import mcp_client, result_text

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "mallory", "version": "0"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def _still(home: Path) -> list[str]:
    """The agents whose files must not move (the active ones write their own as they run)."""
    return [a for a in TOPOLOGY if a not in ACTIVE]


HYPERHIVE_REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("send", {"to": "stranger", "body": "x"}, "may not message 'stranger'"),
    ("send", {"to": "victim", "body": "x", "from": "boss"}, "bad arguments"),
    ("send", {"to": "system", "body": "x"}, "unknown recipient 'system'"),
    ("send", {"to": "victim", "body": "x" * (64 * 1024 + 1)}, "the limit is 65536 bytes"),
    ("recv", {"max": 5, "agent": "victim"}, "bad arguments"),
    ("ack_until", {"up_to": 10**9, "agent": "victim"}, "bad arguments"),
    ("cancel_loose_end", {"kind": "reminder", "id": 1}, "belongs to victim"),
    ("cancel_loose_end", {"kind": "approval", "id": 1}, "only a root agent"),
    ("get_loose_ends", {"agent": "victim"}, "query_agent_state"),
    ("get_loose_ends", {"agent": "*"}, "only for the operator"),
    (
        "schedule_prompt",
        {"target": "victim", "prompt": "p", "every_seconds": 60},
        "not a descendant",
    ),
    ("kill", {"agent": "boss"}, "not a descendant"),
    ("restart", {"agent": "victim"}, "not a descendant"),
    ("update", {"agent": "stranger"}, "not a descendant"),
    ("start", {"agent": "outsider"}, "not a descendant"),
    ("destroy", {"agent": "boss"}, "(an ancestor)"),
    ("destroy", {"agent": ATTACKER}, "cannot destroy itself"),
    ("destroy", {"agent": "benign"}, "not a descendant"),
    ("request_init_config", {"name": "victim"}, "already exists under boss"),
    ("request_apply_commit", {"agent": "boss"}, "not a descendant"),
    ("get_logs", {"agent": "minion"}, "'diagnostics' tool group"),
    ("get_host_journal", {}, "read_host_journal"),
    ("set_status", {"text": "s" * 201}, "the limit is 200"),
]


async def test_the_mcp_surfaces_refuse_every_escalation(
    tmp_path: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(always(text("ok")))
    async with live_hive(tmp_path, claude_bin, model_server) as (c, host):
        before = snapshot(c.paths, files_of=_still(tmp_path))
        base = host.base_url
        mallory = host.agents[ATTACKER]
        problems: list[str] = []

        async with mcp_client(f"{base}/agents/{ATTACKER}/mcp/hyperhive", mallory.token) as hh:
            listed = {t.name for t in (await hh.list_tools()).tools}
            assert not {"get_logs", "get_host_journal", "set_parent"} & listed, listed
            for tool, args, fragment in HYPERHIVE_REFUSALS:
                got = await hh.call_tool(tool, args)
                if not got.is_error or fragment not in result_text(got):
                    problems.append(f"hyperhive.{tool} {list(args)}: {result_text(got)[:200]}")
            for tool in ("set_parent", "spawn", "approve", "perms_set", "agent_kill"):
                with pytest.raises(MCPError, match="unknown tool"):
                    await hh.call_tool(tool, {"child": ATTACKER})

        async with mcp_client(f"{base}/agents/{ATTACKER}/mcp/bash", mallory.token) as bash:
            assert (await bash.list_tools()).tools == []
            got = await bash.call_tool("run", {"cmd": "id"})
            if not got.is_error or "'execution' tool group" not in result_text(got):
                problems.append(f"bash.run: {result_text(got)[:200]}")

        victim_notes = c.paths.agent_state("victim") / "notes.md"
        subagent_refusals: list[tuple[dict[str, Any], str]] = [
            ({"prompt": "x", "tools": ["WebFetch", "Bash"]}, "bad arguments"),
            ({"prompt": "x", "allowed_tools": ["WebFetch"]}, "bad arguments"),
            ({"prompt": "x", "groups": ["web_tools"]}, "bad arguments"),
            ({"prompt": "x", "model": "--dangerously-skip-permissions"}, "not a model name"),
            ({"prompt": "x", "prompt_file": str(victim_notes)}, "outside your own directories"),
            ({"prompt": "x", "dir": "../../victim/state"}, "outside your own directories"),
            ({"prompt": "x", "name": "../victim"}, "[a-z0-9-]"),
        ]
        async with mcp_client(f"{base}/agents/{ATTACKER}/mcp/subagent", mallory.token) as sub:
            for args, fragment in subagent_refusals:
                got = await sub.call_tool("start", args)
                if not got.is_error or fragment not in result_text(got):
                    problems.append(f"subagent.start {args}: {result_text(got)[:200]}")
        assert not problems, "\n".join(problems)

        await _other_endpoints_refuse(host)
        assert_unchanged(before, snapshot(c.paths, files_of=_still(tmp_path)))
        assert victim_notes.read_text() == "victim's private notes\n"


async def _other_endpoints_refuse(host: AgentHost) -> None:
    base = host.base_url
    mallory, benign = host.agents[ATTACKER], host.agents["benign"]
    tokens = {
        "none": None,
        "own": mallory.token,
        "stolen-looking": secrets.token_urlsafe(32),
        "one char off": ("A" if benign.token[0] != "A" else "B") + benign.token[1:],
        "scheme only": "",
    }
    huge = {**INIT, "padding": "x" * (2 << 20)}  # a 2 MiB body, refused before it is read
    async with httpx.AsyncClient(timeout=30) as http:
        for label, token in tokens.items():
            auth = {"authorization": f"Bearer {token}".strip()} if token is not None else {}
            for surface in ("hyperhive", "bash", "subagent", "subagent_control"):
                r = await http.post(
                    f"{base}/agents/benign/mcp/{surface}",
                    json=INIT,
                    headers={**MCP_HEADERS, **auth},
                )
                assert r.status_code == 401, (label, surface, r.text)
                assert "valid bearer token for agent 'benign'" in r.json()["error"]["message"]
            for path in ("state", "events"):
                r = await http.get(f"{base}/api/agents/benign/{path}", headers=auth)
                assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
            r = await http.post(
                f"{base}/agents/benign/mcp/hyperhive", json=huge, headers={**MCP_HEADERS, **auth}
            )
            assert r.status_code == 401, (label, "2 MiB body")
        own = {"authorization": f"Bearer {mallory.token}"}
        r = await http.post(
            f"{base}/agents/{ATTACKER}/mcp/subagent_control",
            json=INIT,
            headers={**MCP_HEADERS, **own},
        )
        assert r.status_code == 401, "the agent's own token opened its subagents' surface"
        r = await http.post(
            f"{base}/agents/{ATTACKER}/mcp/hyperhive",
            json=INIT,
            headers={**MCP_HEADERS, **own, "host": "evil.example:80"},
        )
        assert r.status_code in (400, 403, 421), ("DNS-rebinding Host accepted", r.status_code)


async def test_a_megabyte_mcp_request_is_refused_with_a_reason(
    tmp_path: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(always(text("ok")))
    async with live_hive(tmp_path, claude_bin, model_server) as (c, host):
        url = f"{host.base_url}/agents/{ATTACKER}/mcp/hyperhive"
        async with mcp_client(url, host.agents[ATTACKER].token) as hh:
            with anyio.fail_after(10):
                # Over the surface's body cap: refused at the HTTP layer (413), not hung.
                with pytest.raises(MCPError):
                    await hh.call_tool("send", {"to": "victim", "body": "A" * (3 << 19)})
                # Under it but over the message limit: an error result naming the limit.
                got = await hh.call_tool("send", {"to": "victim", "body": "A" * (100 << 10)})
    assert got.is_error and "65536 bytes" in result_text(got)
