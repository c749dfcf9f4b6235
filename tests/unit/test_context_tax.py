"""The context-tax bench's pure parts: splitting a request, printing the table."""

from __future__ import annotations

import json
from pathlib import Path

from bench.context_tax import BUDGET_TOKENS, request_parts
from bench.registry import Sizes
from bench.report import BYTES_PER_TOKEN, Machine, render_markdown, render_text

from hyperhive.agent.host import AgentHost
from hyperhive.agent.skills import skill_text
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths

APPENDED = "# You are alice, an agent of a hyperhive\n"
BODY = {
    "system": [{"type": "text", "text": "claude's own prompt. " + APPENDED}],
    "tools": [
        {"name": "Read", "description": "r", "input_schema": {}},
        {"name": "mcp__hyperhive__send", "description": "s", "input_schema": {}},
        {"name": "mcp__bash__run", "description": "b", "input_schema": {}},
        {
            "name": "mcp__echo__echo",
            "description": "an operator's extra server",
            "input_schema": {},
        },
    ],
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The following skills are available for use with the Skill tool:"
                    "\n\n- hive-basics: how\n- plugin-authoring: mods\n\nToday's date is x.",
                }
            ],
        },
    ],
}


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def test_a_request_splits_into_the_hives_additions_and_claudes_parts() -> None:
    parts = request_parts(BODY, APPENDED)
    tools = BODY["tools"]
    assert isinstance(tools, list)
    assert parts["appended system prompt"] == len(APPENDED)
    assert parts["claude system prompt"] == len("claude's own prompt. ")
    assert parts["hive MCP schemas"] == _size(tools[1:3])
    # An operator's extra server is not the hive's tax: it is counted with claude's own.
    assert parts["claude built-in schemas"] == _size([tools[0], tools[3]])
    assert parts["hive skills lines"] == len("- hive-basics: how\n")
    assert parts["skills listing (all)"] == len(
        "The following skills are available for use with the Skill tool:"
        "\n\n- hive-basics: how\n- plugin-authoring: mods"
    )
    assert parts["hive total"] == (
        parts["appended system prompt"] + parts["hive MCP schemas"] + parts["hive skills lines"]
    )
    assert parts["whole request"] == _size(BODY)


def test_sizes_print_as_their_own_table() -> None:
    machine = Machine(2, "cpu", "3.11", "6", "3.40", "ext4")
    rows = [Sizes("context_tax: default agent", (("a", 8000), ("b", 40)), "≤ 2,200 tok", "why")]
    text = render_text(machine, rows, 1.0)
    assert "8,000 B (~2,000 tok)" in text and "40 B (~10 tok)" in text
    assert "benchmark  figure" not in text  # no empty timed table
    md = render_markdown(machine, rows, 1.0)
    assert "| sizes per request | a | b | target |" in md
    assert (
        "| context_tax: default agent | 8,000 B (~2,000 tok) | 40 B (~10 tok) | ≤ 2,200 tok |" in md
    )
    assert "- context_tax: default agent: why" in md


def test_a_default_agents_additions_stay_within_the_budget() -> None:
    """The bench measures the real request; this keeps a change from blowing the budget
    unnoticed: the prompt, the schemas claude is offered and the skills lines, offline."""
    host = AgentHost(HivePaths(Path("/var/lib/hyperhive")), HiveConfig(runtime="unsandboxed"))
    rt = AgentSpec(
        name="alice", config=AgentConfig(), paths=host.paths, hive=host.hive, parent="queen"
    )
    tools = []
    for server in ("hyperhive", *rt.config.servers_for(rt.groups)):
        surface = host.surfaces[server]
        for name in surface.listed_for(rt):
            described = surface.describe(name)
            tools.append(
                {
                    "name": f"mcp__{server}__{name}",
                    "description": described.description,
                    "input_schema": described.input_schema,
                }
            )
    lines = 0
    for skill in rt.skills():
        head = skill_text(skill, "alice", "/h", rt.groups).split("---\n")[1]
        meta = dict(line.split(": ", 1) for line in head.strip().splitlines())
        lines += len(f"- {skill}: {meta['description'].strip(chr(34))}\n".encode())
    total = len(rt.system_prompt().encode()) + _size(tools) + lines
    # The lower bound catches a measure that lost a part (no schemas, no prompt).
    assert 5000 < total <= BUDGET_TOKENS * BYTES_PER_TOKEN, total
