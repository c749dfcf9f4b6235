"""The system prompt and the wake prompt name only tools the agent really has."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperhive.agent.host import AgentHost
from hyperhive.agent.prompt import render_system_prompt, wake_prompt
from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, McpServer
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import Message, WaitResult

HOST = AgentHost(HivePaths(Path("/srv/hive")), HiveConfig(runtime="unsandboxed"))
# Every tool any surface serves, by bare name (what a prompt may write in backticks).
ALL_TOOLS = {t for name, s in HOST.surfaces.items() if name != "subagent_control" for t in s.tools}
BUILTINS = {"Read", "Edit", "Write", "Glob", "Grep", "Skill", "WebFetch", "WebSearch", "Bash"}


def _runtime(groups: list[ToolGroup], bash: bool = True, subagent: bool = True) -> AgentSpec:
    off = {
        n: McpServer(enabled=False) for n, on in (("bash", bash), ("subagent", subagent)) if not on
    }
    config = AgentConfig(tool_groups=groups, mcp_servers=off)
    return AgentSpec(name="alice", config=config, paths=HOST.paths, hive=HOST.hive, parent="queen")


def _offered(rt: AgentSpec) -> set[str]:
    out = set()
    servers = {"hyperhive", *rt.config.servers_for(rt.groups)}
    for server in servers:
        out |= {f"mcp__{server}__{t}" for t in HOST.surfaces[server].listed_for(rt)}
    return out


def _named_tools(text: str) -> tuple[set[str], set[str]]:
    """(qualified mcp__ names, bare tool names called as `name(` or `name`) in ``text``."""
    qualified = set(re.findall(r"mcp__[a-z_]+__[a-z_]+", text))
    bare = {m for m in re.findall(r"`([a-z_]+)(?:\(|`)", text) if m in ALL_TOOLS}
    return qualified, bare


groups_st = st.lists(st.sampled_from(ToolGroup.ALL), min_size=1, unique=True)


@settings(max_examples=200, deadline=None)
@given(groups=groups_st, bash=st.booleans(), subagent=st.booleans())
def test_the_system_prompt_names_only_tools_the_agent_has(
    groups: list[ToolGroup], bash: bool, subagent: bool
) -> None:
    rt = _runtime(groups, bash, subagent)
    text = rt.system_prompt()
    offered = _offered(rt)
    qualified, bare = _named_tools(text)
    assert qualified <= offered, qualified - offered
    names = {q.rsplit("__", 1)[1] for q in offered}
    # "Bash" only ever appears as "no Bash tool".
    assert bare <= names, bare - names
    assert "{" not in text.replace("{}", "")  # every placeholder was filled in


@settings(max_examples=200, deadline=None)
@given(groups=groups_st, messages=st.booleans(), todos=st.booleans())
def test_the_wake_prompt_names_only_tools_the_agent_has(
    groups: list[ToolGroup], messages: bool, todos: bool
) -> None:
    rt = _runtime(groups)
    rows = (
        [
            Message.model_validate(
                {"id": 7, "from": "bob", "to": "alice", "body": "hi", "created_at": 0.0}
            )
        ]
        if messages
        else []
    )
    text = wake_prompt(WaitResult(messages=rows, todos_changed=todos), rt.groups)
    qualified, _ = _named_tools(text)
    assert qualified <= _offered(rt), qualified - _offered(rt)
    if messages:
        assert "[msg #7] from bob: hi" in text


def test_the_wake_prompt_gives_the_exact_calls() -> None:
    woke = WaitResult(todos_changed=True)
    text = wake_prompt(woke, ToolGroup.AGENT_DEFAULT)
    assert "mcp__hyperhive__get_loose_ends()" in text
    assert 'mcp__hyperhive__cancel_loose_end(kind="todo", id=<row id>)' in text
    bare = wake_prompt(woke, [ToolGroup.MESSAGING, ToolGroup.EXECUTION])
    assert "get_loose_ends()" not in bare and "mcp__bash__status(" in bare
    assert "get_loose_ends" not in wake_prompt(WaitResult(), [ToolGroup.MESSAGING])


def _always_sent(rt: AgentSpec) -> str:
    """What every request of the agent's turns carries: its system prompt and the names
    and descriptions of the tools it is offered (argument descriptions included)."""
    parts = [rt.system_prompt()]
    for server in ("hyperhive", *rt.config.servers_for(rt.groups)):
        for name in HOST.surfaces[server].listed_for(rt):
            tool = HOST.surfaces[server].describe(name)
            fields = tool.input_schema.get("properties", {}).values()
            parts += [tool.name, tool.description or ""]
            parts += [f.get("description", "") for f in fields]
    return "\n".join(parts)


# Guidance the model needs on every turn, each said once across the prompt and the
# tool descriptions (the wake prompt adds what applies to one wake, the skills the rest).
DEFAULT_GUIDANCE = (
    "/srv/hive/agents/alice/state",  # where notes survive compaction
    "Never wait inside a turn",
    "Report results to your parent",
    "[msg #N]",
    "ack_until",
    "mail that woke you is acked with the turn",
    "ask_operator",
    "when you start or finish work",
    "above 66%",
    "a whole session",
    "cheaper than a new start",
    "its end wakes you as a todo",
    "end the turn meanwhile",
)


def test_the_default_agents_guidance_is_said_once() -> None:
    rt = _runtime(list(ToolGroup.AGENT_DEFAULT))
    sent = _always_sent(rt)
    for needle in DEFAULT_GUIDANCE:
        assert needle in sent, needle
    for once in ("Never wait inside a turn", "above 66%", "a whole session", "Report results"):
        assert sent.count(once) == 1, once
    assert "request_init_config" not in rt.system_prompt()  # managers only
    todos = wake_prompt(WaitResult(todos_changed=True), rt.groups)
    assert 'cancel_loose_end(kind="todo", id=<row id>)' in todos  # said when it applies


def test_the_managers_guidance_is_said_once() -> None:
    rt = _runtime(list(ToolGroup.MANAGER_DEFAULT))
    sent = _always_sent(rt)
    assert "hive-children skill" in rt.system_prompt()
    assert sent.count("starts idle") == 1 and "request_init_config" in sent
    assert "/srv/hive/agents/<agent>/config" in sent  # request_apply_commit's repo
    assert "git -C <repo> commit" in sent and "request_apply_commit" in sent


def test_operator_additions_are_appended() -> None:
    text = render_system_prompt("a", None, [ToolGroup.MESSAGING], "/s", "/w", "Be terse.")
    assert text.rstrip().endswith("Be terse.")
    assert "you are a root agent" in text
