"""The context tax: what the hive adds to every request a turn makes (issue 13).

Every model request of a turn carries the appended system prompt, the MCP
tool schemas and claude's skills listing, so a byte there is paid on every
call. Read from the first request of a session as the scripted model server
receives it from the real claude CLI, run by a real ``hivectl serve`` and
``hivectl host``, for each preset: a default agent and the root manager.
Counted, not timed: the table is in bytes with ~tokens at 4 bytes a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from tests.support.model_server import ModelServer, RecordedRequest, always, text

from bench._hostprocs import host
from bench._procs import serve
from bench.registry import Context, Sizes, benchmark
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.agent.skills import SKILLS
from hyperhive.client import call_once
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import OpSendReq

__all__ = ["context_tax", "request_parts"]

PRESETS: Mapping[str, tuple[str, AgentConfig]] = {
    "default agent": ("alice", AgentConfig()),
    "root manager": ("queen", AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))),
}
TOPOLOGY = {"queen": None, "alice": "queen"}
HIVE_SERVERS = ("mcp__hyperhive__", "mcp__bash__", "mcp__subagent__")
SKILLS_HEAD = "The following skills are available for use with the Skill tool:"
BUDGET_TOKENS = 1600


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _texts(value: Any) -> list[str]:
    """Every text of a request's system blocks or messages, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return [value["text"]]
        return _texts(value.get("content"))
    return []


def _skills_listing(body: Mapping[str, Any]) -> tuple[int, int]:
    """(bytes of claude's whole skills listing, bytes of the hive's own lines in it)."""
    for chunk in _texts(body.get("messages")):
        start = chunk.find(SKILLS_HEAD)
        if start < 0:
            continue
        listing = chunk[start:].split("\n\n", 2)
        block = "\n\n".join(listing[:2])
        ours = [
            line
            for line in block.splitlines()
            if re.match(r"- ([a-z0-9-]+):", line) and line[2:].split(":", 1)[0] in SKILLS
        ]
        return len(block.encode()), sum(len(line.encode()) + 1 for line in ours)
    return 0, 0


def request_parts(body: Mapping[str, Any], appended: str) -> dict[str, int]:
    """A first request split into the hive's additions and claude's own parts."""
    tools = body.get("tools") or []
    hive_tools = [t for t in tools if str(t.get("name", "")).startswith(HIVE_SERVERS)]
    builtin_tools = [t for t in tools if t not in hive_tools]
    system = sum(len(t.encode()) for t in _texts(body.get("system")))
    appended_bytes = len(appended.encode())
    listing, ours = _skills_listing(body)
    return {
        "appended system prompt": appended_bytes,
        "hive MCP schemas": _size(hive_tools),
        "hive skills lines": ours,
        "hive total": appended_bytes + _size(hive_tools) + ours,
        "claude system prompt": system - appended_bytes,
        "claude built-in schemas": _size(builtin_tools),
        "skills listing (all)": listing,
        "whole request": _size(body),
    }


def _seed(home: Path, model_url: str) -> HivePaths:
    paths = HivePaths(home)
    (paths.meta / "agents").mkdir(parents=True, exist_ok=True)
    env = {"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "bench-key"}
    for name, config in PRESETS.values():
        paths.applied_config(name).write_text(
            dump_agent_config(config.model_copy(update={"env": env}))
        )
    paths.topology.write_text(json.dumps(TOPOLOGY))
    claude = json.dumps(resolve_claude_bin(None))
    (home / "hive.toml").write_text(f'claude_bin = {claude}\nruntime = "unsandboxed"\n')
    return paths


async def _wake(paths: HivePaths, agents: Sequence[str]) -> None:
    for agent in agents:
        await call_once(
            paths.host_sock, OpSendReq(cmd="send", to=agent, body="hello; nothing to do")
        )


@benchmark("context_tax.presets")
def context_tax(ctx: Context) -> list[Sizes]:
    home = ctx.scratch("c")
    names = [name for name, _ in PRESETS.values()]
    rows: list[Sizes] = []
    with ModelServer(always(text("done"))) as model:
        paths = _seed(home, model.url)
        with serve(paths, names), host(paths):
            anyio.run(_wake, paths, names)
            model.wait_for(
                lambda reqs: {a for a in names if any(_is_for(r, a) for r in reqs)} == set(names),
                120,
            )
            for preset, (agent, _) in PRESETS.items():
                request = next(r for r in model.main_requests if _is_for(r, agent))
                appended = (paths.agent_runtime(agent) / "system-prompt.md").read_text()
                parts = request_parts(request.body, appended)
                rows.append(
                    Sizes(
                        f"context_tax: {preset}",
                        tuple(parts.items()),
                        f"hive total ≤ {BUDGET_TOKENS:,} tok" if preset == "default agent" else "",
                    )
                )
    rows[-1] = Sizes(
        rows[-1].benchmark,
        rows[-1].parts,
        rows[-1].target,
        "hive total = appended system prompt + hive MCP schemas (hyperhive, bash, subagent) "
        "+ the hive's skills lines; claude's parts for comparison (first request of a "
        "session, claude with bundled skills off)",
    )
    return rows


def _is_for(request: RecordedRequest, agent: str) -> bool:
    return request.main and any(
        f"You are {agent}," in t for t in _texts(request.body.get("system"))
    )
