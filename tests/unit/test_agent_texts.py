"""Every text an agent reads names only what exists for that agent.

The texts: its system prompt, its wake prompts, the descriptions (and argument
descriptions) of the tools it is offered, the skills it is given, and the
lifecycle events as it would read them. Each is parsed, not matched against a
hand list, for the names it uses:

- a tool (``mcp__<server>__<tool>``, ``tool(...)``, a backticked name or a
  snake_case word that is a tool's name): offered to this agent (a
  subagent's own ``goal_reached``/``need_help`` count when it has subagents;
  a claude built-in written as `` `Read` `` or ``Read(`` must be in its
  ``--tools``);
- any other backticked or snake_case name: something the hive has (an
  ``agent.toml`` key or one of its values, a tool argument, a tool group, a
  capability, an event, a loose end's field or kind, a task state, a
  reserved sender);
- an ``agent.toml`` key in a TOML example or a ``[table]`` name: a real key;
- an absolute path: inside the agent's sandbox (its own dirs, its config
  repo, its descendants' config repos when it can have descendants).

Hypothesis walks the agent's tool groups and which MCP servers it has, so a
text that names a tool some agents lack fails here, not in an agent's turn.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from hyperhive.agent.compaction import CHECKPOINT_PROMPT
from hyperhive.agent.flush import FLUSH_PROMPT
from hyperhive.agent.host import AgentHost
from hyperhive.agent.prompt import wake_prompt
from hyperhive.agent.skills import SKILLS, skill_text
from hyperhive.agent.spec import AgentSpec
from hyperhive.bash.records import TaskStatus
from hyperhive.config import AgentConfig, HiveConfig, HivePaths, McpServer
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.names import RESERVED_NAMES
from hyperhive.permissions import Capability, ToolGroup, builtin_tools_for
from hyperhive.protocol import HelperEvent, LostAgent, Message, WaitResult, describe
from hyperhive.protocol.events import HostLost
from hyperhive.wirebase import AgentMeta, LooseEnd

HOME = Path("/srv/hive")
HOST = AgentHost(HivePaths(HOME), HiveConfig(runtime="unsandboxed"))
CONTROL = set(HOST.surfaces["subagent_control"].tools)
TOOLS = {name for surface in HOST.surfaces.values() for name in surface.tools}
ARGS = {
    field
    for surface in HOST.surfaces.values()
    for tool in surface.tools.values()
    for field in tool.args.model_fields
}
# claude's built-ins by the names a text would use (those no agent gets included).
BUILTINS = {*builtin_tools_for(ToolGroup.ALL), "Bash", "Task", "TodoWrite", "Agent"}


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in get_args(annotation):
        yield from _models(arg)


def _literals(annotation: Any) -> Iterator[str]:
    if get_origin(annotation) is typing.Literal:
        yield from (str(v) for v in get_args(annotation))
    elif isinstance(annotation, types.UnionType) or get_origin(annotation) is not None:
        for arg in get_args(annotation):
            yield from _literals(arg)


def _config_vocabulary(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    """(every agent.toml key, nested tables too; the values its literals and defaults take)."""
    keys: set[str] = set()
    values: set[str] = set()
    for name, field in model.model_fields.items():
        keys.add(name)
        values.update(_literals(field.annotation))
        if isinstance(field.default, str):
            values.add(field.default)
        for nested in _models(field.annotation):
            more_keys, more_values = _config_vocabulary(nested)
            keys |= more_keys
            values |= more_values
    return keys, values


CONFIG_KEYS, CONFIG_VALUES = _config_vocabulary(AgentConfig)
VOCABULARY = {
    *ARGS,
    *CONFIG_KEYS,
    *CONFIG_VALUES,
    *(g.value for g in ToolGroup),
    *(c.value for c in Capability),
    *(
        get_args(m)[0]
        for m in (t.model_fields["event"].annotation for t in get_args(get_args(HelperEvent)[0]))
    ),
    *LooseEnd.model_fields,
    *AgentMeta.model_fields,  # get_agent_meta's answer (its applied_config)
    *get_args(LooseEnd.model_fields["kind"].annotation),
    *get_args(TaskStatus),
    *RESERVED_NAMES,
    *HOST.surfaces,  # a server is a todo's subsystem too (bash, subagent)
    *SKILLS,
    "core",  # the coordinator's todos' subsystem
    "HEAD",  # a commit
}

QUALIFIED = re.compile(r"mcp__([a-z_]+)__([a-z_]+)")
CALL = re.compile(r"(?<![\w.-])([A-Za-z][A-Za-z_]*)\(")
TICKED = re.compile(r"(?<!`)`([A-Za-z_][\w-]*)(?:\(|`)")
SNAKE = re.compile(r"(?<![\w\\-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w-])")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)
TOML_KEY = re.compile(r"^\[?([a-z_]+)", re.MULTILINE)
TABLE = re.compile(r"`\[([a-z_]+)(?:\.<\w+>)?\]`")
PATH = re.compile(r"(?:(?<=[\s`\"'(])|^)(/[\w.<>-]+(?:/[\w.<>-]+)*)")


class Agent:
    """One agent's runtime and what exists for it."""

    def __init__(self, groups: list[ToolGroup], bash: bool, subagent: bool, matrix: bool) -> None:
        off = {
            n: McpServer(enabled=False)
            for n, on in (("bash", bash), ("subagent", subagent))
            if not on
        }
        config = AgentConfig(
            tool_groups=groups, mcp_servers=off, matrix=AgentMatrixConfig(enabled=matrix)
        )
        self.rt = AgentSpec(
            name="alice", config=config, paths=HOST.paths, hive=HOST.hive, parent="queen"
        )
        self.servers = {"hyperhive", *config.servers_for(self.rt.groups)}
        self.offered = {
            (server, tool)
            for server in self.servers
            for tool in HOST.surfaces[server].listed_for(self.rt)
        }
        self.tools = {tool for _, tool in self.offered}
        if "subagent" in self.servers:
            self.tools |= CONTROL  # what its subagents call, named in its briefs
        self.builtins = set(builtin_tools_for(self.rt.groups))
        manages = {ToolGroup.LIFECYCLE, ToolGroup.APPROVALS} & set(self.rt.groups)
        paths = self.rt.paths
        self.layout = [
            str(self.rt.state_dir),
            str(paths.agent_home("alice")),
            str(paths.agent_work("alice")),
            str(paths.agent_config_repo("alice")),
            str(self.rt.runtime_dir),
        ]
        if manages:
            self.layout.append(str(paths.agent_config_repo("*")))

    def texts(self) -> Iterator[tuple[str, str]]:
        """(where, text) for every text this agent reads."""
        yield "system prompt", self.rt.system_prompt()
        yield "checkpoint prompt", CHECKPOINT_PROMPT.format(state_dir=self.rt.state_dir)
        yield "flush prompt", FLUSH_PROMPT.format(state_dir=self.rt.state_dir)
        rows = [
            Message.model_validate(
                {"id": 7, "from": "bob", "to": "alice", "body": "hi", "created_at": 0.0}
            )
        ]
        for messages in (rows, []):
            for todos in (True, False):
                woke = WaitResult(messages=messages, todos_changed=todos)
                yield "wake prompt", wake_prompt(woke, self.rt.groups, self.servers)
        for server, tool in sorted(self.offered):
            described = HOST.surfaces[server].describe(tool)
            fields = described.input_schema.get("properties", {})
            yield (
                f"{server}.{tool}",
                "\n".join(
                    [
                        described.description or "",
                        *(f.get("description", "") for f in fields.values()),
                    ]
                ),
            )
        for skill in self.rt.skills():
            yield f"skill {skill}", skill_text(skill, "alice", HOME, self.rt.groups, self.servers)
        for event in _events():
            yield f"event {event.model_dump()['event']}", describe(event, self.rt.groups)

    def problems(self, where: str, text: str) -> list[str]:
        out = []
        for server, tool in QUALIFIED.findall(text):
            if (server, tool) not in self.offered:
                out.append(f"{where}: names mcp__{server}__{tool}, which alice is not offered")
        prose = FENCE.sub("", text)
        named = set(CALL.findall(prose)) | set(TICKED.findall(prose)) | set(SNAKE.findall(prose))
        for name in sorted(named - {"mcp"}):
            if name.startswith("mcp__"):
                continue
            if name in BUILTINS:
                if name not in self.builtins:
                    out.append(f"{where}: names {name}, a built-in alice does not have")
            elif name in TOOLS or name in CONTROL:
                if name not in self.tools and name not in VOCABULARY:
                    out.append(f"{where}: names the tool {name}, which alice lacks")
            elif name not in VOCABULARY and name[:1].islower():
                out.append(f"{where}: names {name!r}, which is nothing the hive has")
        for language, block in FENCE.findall(text):
            out.extend(
                f"{where}: its TOML example sets {key!r}, no agent.toml key"
                for key in TOML_KEY.findall(block)
                if language == "toml" and key not in CONFIG_KEYS
            )
        out.extend(
            f"{where}: names the table [{table}], no agent.toml table"
            for table in TABLE.findall(text)
            if table not in CONFIG_KEYS
        )
        for path in PATH.findall(text):
            real = re.sub(r"<\w+>|\*", "*", path.rstrip("."))
            if not any(_under(real, root) for root in self.layout):
                out.append(f"{where}: names {path}, outside alice's sandbox")
        return out


def _under(path: str, root: str) -> bool:
    parts, base = path.split("/"), root.split("/")
    return len(parts) >= len(base) and all(
        r == p or r == "*" or p == "*" for r, p in zip(base, parts, strict=False)
    )


def _events() -> Iterator[BaseModel]:
    adapter_types = get_args(get_args(HelperEvent)[0])
    for kind in adapter_types:
        if kind is HostLost:
            yield HostLost(
                host="h1",
                cause="lease_expired",
                agents=[
                    LostAgent(agent="w1"),
                    LostAgent(agent="w2", outcome="replaced", host="h2"),
                ],
            )
            continue
        extra: dict[str, Any] = {}
        if "approval_id" in kind.model_fields:
            extra = {"approval_id": 1, "approved": True}
        yield kind(agent="w1", **extra)


groups_st = st.lists(st.sampled_from(ToolGroup.ALL), min_size=1, unique=True)


@settings(max_examples=150, deadline=None)
@given(groups=groups_st, bash=st.booleans(), subagent=st.booleans(), matrix=st.booleans())
def test_every_text_an_agent_reads_names_only_what_exists_for_it(
    groups: list[ToolGroup], bash: bool, subagent: bool, matrix: bool
) -> None:
    agent = Agent(groups, bash, subagent, matrix)
    problems = [p for where, text in agent.texts() for p in agent.problems(where, text)]
    assert problems == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("call `get_logs(agent)` first", "names the tool get_logs, which alice lacks"),
        ("see mcp__hyperhive__destroy", "names mcp__hyperhive__destroy"),
        ("set `subagent_efort` to low", "'subagent_efort', which is nothing the hive has"),
        ('```toml\nmodle = "x"\n```', "sets 'modle', no agent.toml key"),
        ("keep notes in /srv/hive/agents/bob/state", "outside alice's sandbox"),
        ("use `WebFetch`", "WebFetch, a built-in alice does not have"),
        ("rows have a `digest`", "'digest', which is nothing the hive has"),
        ("then `restart(agent)`", "names the tool restart, which alice lacks"),
    ],
)
def test_the_check_finds_what_does_not_exist(text: str, problem: str) -> None:
    """The parse catches each kind of contradiction (a default agent reading ``text``)."""
    agent = Agent(list(ToolGroup.AGENT_DEFAULT), True, True, False)
    found = agent.problems("t", text)
    assert any(problem in p for p in found), found


def test_every_skill_is_checked_for_some_agent() -> None:
    manager = Agent(list(ToolGroup.MANAGER_DEFAULT), True, True, True)
    assert set(manager.rt.skills()) == set(SKILLS)
    assert [p for where, text in manager.texts() for p in manager.problems(where, text)] == []
