"""The span tree of a real claude turn: turn → MCP tool call → coordinator request.

Coordinator and agent host run in-process, so the SDK's in-memory exporter
sees both sides; the link between them is the ``traceparent`` the request
frames really carry over the agent's unix socket.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from hyperhive.config import AgentConfig
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, Reply, Usage, text, tool_call
from tests.support.spans import named
from tests.support.surfaces import until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(90)]


async def _finished(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = await until(lambda: named(exporter, name))
    return span


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_turn_is_one_trace_from_wake_to_turn_end(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, spans: InMemorySpanExporter
) -> None:
    model_server.set_script(
        [
            tool_call(
                "mcp__hyperhive__send",
                {"to": "operator", "body": "pong"},
                Usage(input_tokens=100, output_tokens=7),
            ),
            text("done", Usage(input_tokens=200, output_tokens=3, cache_read_input_tokens=50)),
        ]
    )
    seed_home(tmp_path, {"alice": AgentConfig(env=agent_env(model_server.url))})
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "alice" in host.agents)
        async with operator(c.paths) as op:
            sent = await op_call(op, "send", to="alice", body="ping")
        assert isinstance(sent, dict)
        turn = await _finished(spans, "turn alice")
        last_turn = host.agents["alice"].bus.last_turn
    assert last_turn is not None

    attrs = dict(turn.attributes or {})
    assert attrs["hyperhive.agent"] == "alice"
    assert attrs["hyperhive.wake"] == "messages"
    assert list(attrs["hyperhive.wake.message_ids"]) == [sent["id"]]  # type: ignore[arg-type]
    assert list(attrs["hyperhive.wake.senders"]) == ["operator"]  # type: ignore[arg-type]
    assert attrs["hyperhive.wake.reminder"] is False
    assert attrs["hyperhive.outcome"] == "ok"
    assert attrs["hyperhive.cost_usd"] == last_turn["cost_usd"]
    assert attrs["hyperhive.model_calls"] == 2
    assert attrs["gen_ai.usage.input_tokens"] == 300
    assert attrs["gen_ai.usage.output_tokens"] == 10
    assert attrs["gen_ai.usage.cache_read_input_tokens"] == 50
    assert attrs["gen_ai.response.model"]
    assert turn.status.status_code is not StatusCode.ERROR
    assert turn.parent is None, "a turn is the root of its trace"

    trace_id = turn.context.trace_id
    tool = await _finished(spans, "tool hyperhive.send")
    assert tool.context.trace_id == trace_id and _parent(tool) == turn.context.span_id
    assert dict(tool.attributes or {})["hyperhive.agent"] == "alice"

    # The coordinator's handling of the send the tool made: a child of the tool call,
    # joined through the frame's traceparent; the caller is the socket's agent.
    (send,) = named(spans, "coordinator send")
    assert send.context.trace_id == trace_id and _parent(send) == tool.context.span_id
    assert dict(send.attributes or {})["hyperhive.caller"] == "alice"
    (end,) = named(spans, "coordinator turn_end")
    assert end.context.trace_id == trace_id and _parent(end) == turn.context.span_id
    # The operator's send and the idle long-polls carried no trace context: no spans.
    assert not named(spans, "coordinator wait")
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {trace_id}
    assert turn.start_time is not None and turn.end_time is not None
    assert turn.start_time <= tool.start_time and end.end_time <= turn.end_time  # type: ignore[operator]


GOAL = "mcp__subagent_control__goal_reached"


def _wrapper(directory: Path, claude_bin: Path, record: Path) -> Path:
    """A claude that notes its argv (one per line, after a marker), then execs the real one."""
    path = directory / "claude-recording"
    path.write_text(
        f"#!/bin/sh\nprintf '%s\\n' --ARGV-- \"$@\" >> '{record}'\nexec '{claude_bin}' \"$@\"\n"
    )
    path.chmod(0o755)
    return path


def _argvs(record: Path) -> list[list[str]]:
    runs = record.read_text().split("--ARGV--\n")
    return [run.splitlines() for run in runs if run]


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


async def test_a_subagent_run_is_a_span_under_the_turn_that_started_it_at_the_hives_effort(
    tmp_path: Path, model_server: ModelServer, claude_bin: Path, spans: InMemorySpanExporter
) -> None:
    """alice keeps the hive's subagent effort (low), bob's agent.toml asks for high: the
    real claude receives each as --effort and sends it to the model; the span says it."""

    def answer(body: dict[str, Any]) -> Reply:
        tools = [t["name"] for t in body.get("tools") or []]
        if GOAL in tools:  # a subagent: one answer, its usage known in advance
            return text("found it", Usage(input_tokens=123, output_tokens=4))
        said = json.dumps(body.get("messages"))
        if "delegate" in said and "tool_result" not in said:
            return tool_call("mcp__subagent__start", {"prompt": "find it", "name": "scout"})
        return text("noted")

    model_server.set_script(answer)
    record = tmp_path / "argv"
    env = agent_env(model_server.url)
    seed_home(
        tmp_path,
        {
            "alice": AgentConfig(env=env),
            "bob": AgentConfig(env=env, subagent_effort="high"),
        },
    )
    wrapper = _wrapper(tmp_path, claude_bin, record)
    async with running_hive(tmp_path, wrapper) as (c, host):
        await until(lambda: {"alice", "bob"} <= set(host.agents))
        async with operator(c.paths) as op:
            for name in ("alice", "bob"):
                await op_call(op, "send", to=name, body="delegate the search")

        def subagent_runs() -> list[ReadableSpan] | None:
            found = [s for s in spans.get_finished_spans() if s.name.startswith("subagent ")]
            return found if len(found) == 2 else None

        runs = await until(subagent_runs, 90)
        # Each run's counted cost (its session's totals differenced), as the store has it.
        counted = {
            name: [
                e.cost_usd
                for e in await c.store.spend.entries(name, limit=10)
                if e.kind == "subagent"
            ]
            for name in ("alice", "bob")
        }
    by_agent = {dict(s.attributes or {})["hyperhive.agent"]: s for s in runs}
    effort = {"alice": "low", "bob": "high"}
    subagent_requests = [r for r in model_server.main_requests if GOAL in r.tool_names]
    assert sorted(r.body["output_config"]["effort"] for r in subagent_requests) == ["high", "low"]
    subagent_argvs = [a for a in _argvs(record) if "--disable-slash-commands" in a]
    assert sorted(_flag(a, "--effort") for a in subagent_argvs) == ["high", "low"]
    for name, span in by_agent.items():
        attrs = dict(span.attributes or {})
        assert span.name == f"subagent {name}/scout"
        assert attrs["hyperhive.subagent"] == "scout" and attrs["hyperhive.subagent.run"] == 1
        assert attrs["gen_ai.request.model"] == "haiku"
        assert attrs["hyperhive.subagent.effort"] == effort[name]
        assert attrs["hyperhive.outcome"] == "finished" and attrs["hyperhive.exit_code"] == 0
        assert attrs["hyperhive.model_calls"] == 1
        assert [attrs["hyperhive.cost_usd"]] == counted[name]
        assert attrs["gen_ai.usage.input_tokens"] == 123
        assert attrs["gen_ai.usage.output_tokens"] == 4
        assert attrs["hyperhive.session_id"]
        # Its parent is the turn that called start (the tool call's parent), same trace.
        (tool,) = [
            s
            for s in named(spans, "tool subagent.start")
            if dict(s.attributes or {})["hyperhive.agent"] == name
        ]
        turn = next(s for s in named(spans, f"turn {name}") if s.context.span_id == _parent(tool))
        assert _parent(span) == turn.context.span_id
        assert span.context.trace_id == turn.context.trace_id
