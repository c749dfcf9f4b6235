"""The MCP fast path answers exactly as the SDK does, errors included.

Real coordinator and host (in process, real sockets, real HTTP). Every request
is sent twice as raw POSTs to the host's own server: once with the surface's
fast path on, once with it off (every request through the SDK). Status,
content type and body (as JSON) must be the same, and the fast path must have
answered exactly the ordinary calls itself; everything else it hands to the SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from hyperhive.agent.mcp_surface import MAX_MCP_BODY
from hyperhive.config import AgentConfig
from hyperhive.permissions import ToolGroup
from tests.support.hive import running_hive, seed_home
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(120)]

MODERN = LATEST_MODERN_VERSION
# bare lacks the meta group (get_agent_meta's).
AGENTS = {"alice": AgentConfig(), "bare": AgentConfig(tool_groups=[ToolGroup.MESSAGING])}
META = {
    PROTOCOL_VERSION_META_KEY: MODERN,
    CLIENT_CAPABILITIES_META_KEY: {},
    CLIENT_INFO_META_KEY: {"name": "test", "version": "0"},
}


def call(tool: str, arguments: Any = None, *, rid: Any = 7, meta: Any = META) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "_meta": meta}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def headers(tool: str = "get_agent_meta", **extra: str) -> dict[str, str]:
    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return {**base, **{k.replace("_", "-"): v for k, v in extra.items()}}


# (what, agent, body (bytes, chunks or JSON), headers, answered by the fast path)
CASES: list[tuple[str, str, Any, Any, bool]] = [
    ("own meta", "alice", call("get_agent_meta", {}), headers(), True),
    ("no arguments member", "alice", call("get_agent_meta"), headers(), True),
    ("string id", "alice", call("get_agent_meta", {}, rid="abc"), headers(), True),
    (
        "a tool with arguments",
        "alice",
        call("set_status", {"text": "testing"}),
        headers("set_status"),
        True,
    ),
    (
        "bad arguments (a result)",
        "alice",
        call("set_status", {"text": 5}),
        headers("set_status"),
        True,
    ),
    (
        "unknown argument (a result)",
        "alice",
        call("get_agent_meta", {"nme": "x"}),
        headers(),
        True,
    ),
    ("a group the agent lacks (a result)", "bare", call("get_agent_meta", {}), headers(), True),
    ("unknown tool", "alice", call("set_parent", {}), headers("set_parent"), False),
    (
        "unsupported protocol version",
        "alice",
        call("get_agent_meta", {}),
        headers(mcp_protocol_version="2099-01-01"),
        False,
    ),
    (
        "envelope and header disagree on the version",
        "alice",
        call("get_agent_meta", {}, meta={**META, PROTOCOL_VERSION_META_KEY: "2099-01-01"}),
        headers(),
        False,
    ),
    ("mcp-name mismatch", "alice", call("get_agent_meta", {}), headers("set_status"), False),
    (
        "no _meta envelope",
        "alice",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_agent_meta"}},
        headers(),
        False,
    ),
    (
        "missing client capabilities",
        "alice",
        call("get_agent_meta", {}, meta={PROTOCOL_VERSION_META_KEY: MODERN}),
        headers(),
        False,
    ),
    (
        "arguments not an object",
        "alice",
        call("get_agent_meta", [1, 2]),
        headers(),
        False,
    ),
    ("no name", "alice", {**call("x"), "params": {"_meta": META}}, headers(), False),
    (
        "accept without JSON",
        "alice",
        call("get_agent_meta", {}),
        headers(accept="text/event-stream"),
        False,
    ),
    (
        "wrong content type",
        "alice",
        call("get_agent_meta", {}),
        headers(content_type="text/plain"),
        False,
    ),
    (
        "a foreign Host (DNS rebinding)",
        "alice",
        call("get_agent_meta", {}),
        headers(host="evil.example:80"),
        False,
    ),
    (
        "a foreign Origin",
        "alice",
        call("get_agent_meta", {}),
        headers(origin="http://evil.example"),
        False,
    ),
    ("not JSON", "alice", b"{nope", headers(), False),
    ("a batch", "alice", [call("get_agent_meta", {})], headers(), False),
    (
        "a notification",
        "alice",
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers(mcp_method="notifications/initialized"),
        False,
    ),
    (
        "another method",
        "alice",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}},
        headers(mcp_method="tools/list"),
        False,
    ),
    (
        "body method disagrees with mcp-method",
        "alice",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}},
        headers(),
        False,
    ),
    (
        "a repeated routing header",
        "alice",
        call("get_agent_meta", {}),
        [*headers().items(), ("mcp-method", "tools/call")],
        False,
    ),
    (
        "a repeated header of another kind",
        "alice",
        call("get_agent_meta", {}),
        [*headers().items(), ("x-note", "a"), ("x-note", "b")],
        False,
    ),
    (
        "an Mcp-Param header",
        "alice",
        call("get_agent_meta", {}),
        headers(mcp_param_name="alice"),
        False,
    ),
    (
        "a bad session id (handshake era)",
        "alice",
        call("get_agent_meta", {}),
        headers(mcp_protocol_version=LATEST_HANDSHAKE_VERSION, mcp_session_id="f" * 32),
        False,
    ),
    (
        "too large, chunked (no content-length)",
        "alice",
        tuple(
            json.dumps(call("set_status", {"text": "x" * (MAX_MCP_BODY + 10)})).encode()[
                i : i + 65536
            ]
            for i in range(0, MAX_MCP_BODY + 200, 65536)
        ),
        headers("set_status"),
        False,
    ),
    (
        "too large",
        "alice",
        call("set_status", {"text": "x" * (MAX_MCP_BODY + 10)}),
        headers("set_status"),
        False,
    ),
]


async def _post(
    http: httpx.AsyncClient, url: str, token: str, body: Any, sent: Any
) -> tuple[int, str | None, Any]:
    content: Any
    if isinstance(body, tuple):  # sent chunked, so only counting finds its size

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in body:
                yield chunk

        content = chunks()
    else:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = list(sent.items()) if isinstance(sent, dict) else list(sent)
    response = await http.post(
        url, content=content, headers=[*lines, ("authorization", f"Bearer {token}")]
    )
    try:
        shown: Any = response.json() if response.content else None
    except ValueError:
        shown = response.text
    return response.status_code, response.headers.get("content-type"), shown


async def test_the_fast_path_answers_as_the_sdk_does(tmp_path: Path, claude_bin: Path) -> None:
    seed_home(tmp_path, AGENTS)
    async with running_hive(tmp_path, claude_bin) as (_, host):
        await until(lambda: {"alice", "bare"} <= set(host.agents))
        surface = host.surfaces["hyperhive"]
        fast = surface.fast
        assert fast is not None
        problems: list[str] = []
        async with httpx.AsyncClient(timeout=30) as http:
            for what, agent, body, sent, served_fast in CASES:
                url = f"{host.base_url}/agents/{agent}/mcp/hyperhive"
                token = host.agents[agent].token
                before = fast.answered
                got_fast = await _post(http, url, token, body, sent)
                answered = fast.answered - before
                surface.fast = None
                try:
                    got_sdk = await _post(http, url, token, body, sent)
                finally:
                    surface.fast = fast
                if answered != int(served_fast):
                    problems.append(f"{what}: fast path answered {answered}, want {served_fast}")
                if got_fast != got_sdk:
                    problems.append(f"{what}:\n  fast {got_fast}\n  sdk  {got_sdk}")
        assert not problems, "\n".join(problems)


async def test_the_ordinary_results_are_what_the_model_reads(
    tmp_path: Path, claude_bin: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fast path's own answers, read as a client would (not only equal to the SDK's);
    the host logs the refused and failed calls at INFO, not the ordinary ones."""
    seed_home(tmp_path, AGENTS)
    async with running_hive(tmp_path, claude_bin) as (_, host):
        await until(lambda: {"alice", "bare"} <= set(host.agents))
        caplog.set_level("INFO", logger="hyperhive.agent.mcp_surface")
        async with httpx.AsyncClient(timeout=30) as http:

            async def result(agent: str, body: Any, sent: dict[str, str]) -> dict[str, Any]:
                url = f"{host.base_url}/agents/{agent}/mcp/hyperhive"
                status, kind, shown = await _post(http, url, host.agents[agent].token, body, sent)
                assert (status, kind) == (200, "application/json"), shown
                assert shown["id"] == body["id"] and shown["jsonrpc"] == "2.0"
                got: dict[str, Any] = shown["result"]
                assert got["resultType"] == "complete"
                assert got["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hyperhive"
                return got

            own = await result("alice", call("get_agent_meta", {}), headers())
            assert own["isError"] is False
            assert json.loads(own["content"][0]["text"])["name"] == "alice"
            refused = await result("bare", call("get_agent_meta", {}), headers())
            assert refused["isError"] is True
            assert "'meta' tool group" in refused["content"][0]["text"]
            bad = await result("alice", call("set_status", {"text": 5}), headers("set_status"))
            assert bad["isError"] is True
            assert bad["content"][0]["text"].startswith("bad arguments for set_status")
        logged = [r.getMessage() for r in caplog.records if r.name.endswith("mcp_surface")]
        assert len(logged) == 2, logged
        assert logged[0].startswith("bare ← hyperhive.get_agent_meta {} error in ")
        assert logged[1].startswith("alice ← hyperhive.set_status {'text': 5} error in ")


async def test_a_refused_host_or_origin_is_warned_about_once(
    tmp_path: Path, claude_bin: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fast path answers a DNS-rebinding refusal itself, so the SDK's warning is
    logged once per request (not once by each path); and an accepted request first
    leaves no accepted verdict behind for a foreign Host or Origin."""
    seed_home(tmp_path, AGENTS)
    async with running_hive(tmp_path, claude_bin) as (_, host):
        await until(lambda: "alice" in host.agents)
        url = f"{host.base_url}/agents/alice/mcp/hyperhive"
        token = host.agents["alice"].token
        async with httpx.AsyncClient(timeout=30) as http:
            ok = await _post(http, url, token, call("get_agent_meta", {}), headers())
            assert ok[0] == 200
            caplog.set_level("WARNING", logger="mcp.server.transport_security")
            caplog.clear()
            host_refused = await _post(
                http, url, token, call("get_agent_meta", {}), headers(host="evil.example:80")
            )
            origin_refused = await _post(
                http, url, token, call("get_agent_meta", {}), headers(origin="http://evil.example")
            )
        assert host_refused[0] == 421 and origin_refused[0] == 403
        warned = [r.getMessage() for r in caplog.records if r.name.startswith("mcp.server")]
        assert warned == [
            "Invalid Host header: evil.example:80",
            "Invalid Origin header: http://evil.example",
        ]
