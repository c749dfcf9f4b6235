"""Pure rules of subagents and bash results: exhaustive where the space is finite.

The subagent tool-surface property is checked over *every* combination of
tool groups (2^10): through the same path the host takes —
an agent's site resolved from an applied config (as the host builds it), the spec
:func:`subagent_spec` derives from it, the argv :func:`subagent_argv` renders
— against the harness's own argv for the same runtime. The real-claude runs
in ``tests/e2e/test_subagents.py`` cover a representative few end to end.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from hyperhive.agent.active import AgentSite
from hyperhive.agent.admission import Admission
from hyperhive.agent.enclosure import Enclosure
from hyperhive.agent.events import EventsBus
from hyperhive.agent.launch import LaunchSpec, harness_argv, subagent_argv
from hyperhive.agent.lifetime import Lifetime
from hyperhive.agent.spec import AgentSpec
from hyperhive.bash.mcp import render_report, render_started
from hyperhive.bash.records import TaskReport, TaskStarted
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.errors import InvalidRequest, LimitExceeded
from hyperhive.permissions import ToolGroup, builtin_tools_for
from hyperhive.subagent.records import (
    SubagentRecord,
    check_model,
    check_prompt,
    inside,
    keep_output,
    render_status,
    result_todo,
    signal_todo,
    todo_key,
)
from hyperhive.subagent.run import subagent_spec

ESCAPING = frozenset(
    {
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
        "Bash",
        "Agent",
    }
)

ALL_COMBINATIONS = [
    combo
    for size in range(1, len(ToolGroup.ALL) + 1)
    for combo in itertools.combinations(ToolGroup.ALL, size)
]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _record(**fields: object) -> SubagentRecord:
    base: dict[str, object] = {
        "id": "scout",
        "task": "look around",
        "cwd": "/hive/agents/alice/work",
        "started_at": 100.0,
    }
    base.update(fields)
    return SubagentRecord.model_validate(base)


def _site(config: AgentConfig, base_url: str) -> AgentSite:
    """The agent as its host builds it (unsandboxed: nothing is spawned here)."""
    paths, hive = HivePaths(Path("/hive")), HiveConfig(claude_bin="/c")
    spec = AgentSpec(name="alice", config=config, paths=paths, hive=hive)
    return AgentSite(spec, Lifetime(), Enclosure(None), EventsBus(), Admission(), base_url)


def test_every_group_combination_gives_a_subagent_no_builtin_its_parent_lacks() -> None:
    # tool_groups may not be empty (the config refuses it), so 2^10 - 1 non-empty sets.
    assert len(ALL_COMBINATIONS) == 2 ** len(ToolGroup.ALL) - 1 == 1023
    rec = _record()
    for combo in ALL_COMBINATIONS:
        rt = _site(AgentConfig(tool_groups=list(combo)), "http://127.0.0.1:1")
        child = _flag(subagent_argv(subagent_spec(rt, rec, "tok")), "--tools").split(",")
        parent = _flag(
            harness_argv(
                LaunchSpec(
                    agent=rt.name,
                    claude_bin="/c",
                    groups=rt.groups,
                    capabilities=rt.spec.capabilities,
                    config=rt.config,
                    base_url=rt.base_url,
                    token=rt.token,
                    mcp_config_file=Path("/m"),
                    system_prompt_file=Path("/s"),
                )
            ),
            "--tools",
        ).split(",")
        assert child and all(child), combo
        assert set(child) <= set(parent), combo
        assert child == builtin_tools_for(combo), combo
        assert ({"WebFetch", "WebSearch"} <= set(child)) == (ToolGroup.WEB_TOOLS in combo)
        assert not set(child) & ESCAPING, combo
        assert not [t for t in child if t.startswith("mcp__")], combo
    # The 1024th combination, no group at all, cannot come from a config: the base set.
    empty = dataclasses.replace(subagent_spec(rt, rec, "tok"), groups=())
    assert _flag(subagent_argv(empty), "--tools").split(",") == builtin_tools_for(())


def test_the_spec_takes_model_session_prompt_file_and_the_control_url_from_its_agent() -> None:
    rt = _site(AgentConfig(subagent_model="sonnet", subagent_effort="low"), "http://127.0.0.1:7/")
    spec = subagent_spec(rt, _record(session_id="s-1", prompt_file="/hive/p.md"), "tok")
    assert spec.control_url == "http://127.0.0.1:7/agents/alice/mcp/subagent_control"
    assert spec.token == "tok" and spec.token != rt.token
    argv = subagent_argv(spec)
    assert _flag(argv, "--model") == "sonnet" and _flag(argv, "--effort") == "low"
    assert _flag(argv, "--resume") == "s-1"
    assert _flag(argv, "--append-system-prompt-file") == "/hive/p.md"
    argv = subagent_argv(subagent_spec(rt, _record(model="haiku"), "tok"))
    assert _flag(argv, "--model") == "haiku" and "--resume" not in argv


@pytest.mark.parametrize("name", ["haiku", "sonnet", "claude-opus-4-1", "opus[1m]", "a.b:c"])
def test_model_names_and_aliases_are_accepted(name: str) -> None:
    assert check_model(name) == name


@pytest.mark.parametrize("name", ["", "-x", "--dangerously-skip-permissions", "a b", "a/b"])
def test_anything_that_could_read_as_a_flag_is_not_a_model(name: str) -> None:
    with pytest.raises(InvalidRequest):
        check_model(name)


def test_prompts_must_say_something_and_fit() -> None:
    assert check_prompt("go") == "go"
    with pytest.raises(InvalidRequest, match="empty"):
        check_prompt(" \n")
    with pytest.raises(LimitExceeded, match="prompt_file"):
        check_prompt("x" * ((1 << 20) + 1))


def test_inside_is_about_path_components_not_string_prefixes() -> None:
    root = Path("/hive/agents/alice")
    assert inside(root, root) and inside(root / "work" / "x", root)
    assert not inside(Path("/hive/agents/alice2/work"), root)
    assert not inside(Path("/hive/agents"), root)


def test_todo_keys_keep_one_todo_per_subagent_and_kind() -> None:
    keys = {todo_key("s", k) for k in ("result", "goal_reached", "need_help")}
    assert keys == {"s", "s:goal_reached", "s:need_help"}


def test_todo_and_status_texts_say_what_happened_and_what_to_do_next() -> None:
    rec = _record(status="finished", ended_at=112.5, last_output="all done", runs=2)
    body = result_todo(rec, now=200.0)
    assert body.startswith("subagent scout finished after 12.5s: look around")
    assert "all done" in body and "continue('scout', prompt)" in body
    status = render_status(rec, now=200.0)
    assert status.startswith("subagent scout: finished after 12.5s (run 2)")
    assert status.endswith("--- last output ---\nall done")
    running = render_status(_record(), now=103.0)
    assert "running for 3.0s" in running and "(none yet)" in running
    assert "continue('s', <your answer>)" in signal_todo("s", "need_help", "which?")
    assert signal_todo("s", "goal_reached", "42").endswith("goal reached: 42")
    assert keep_output("x" * 10_000).startswith("…") and len(keep_output("x" * 10_000)) == 8000


def test_bash_results_read_as_the_spec_describes_them() -> None:
    out, err = Path("/s/long.out"), Path("/s/long.err")
    report = TaskReport("t1", "make", "done", 2, 1.25, "built\n", "", out, err)
    text = render_report(report)
    assert text.splitlines()[0] == "task t1: done, exit_code 2, ran 1.2s"
    assert f"Read({out})" in text and "built" in text and "(empty)" in text
    running = render_report(TaskReport("t1", "make", "running", None, 0.5, "", "", out, err))
    assert "still going" in running
    started = render_started(TaskStarted("t1", out, err))
    assert started.startswith("task started: id=t1")
