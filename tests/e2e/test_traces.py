"""The span tree of a real claude turn: turn → MCP tool call → coordinator request.

Coordinator and agent host run in-process, so the SDK's in-memory exporter
sees both sides; the link between them is the ``traceparent`` the request
frames really carry over the agent's unix socket.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from hyperhive.config import AgentConfig
from tests.support.hive import agent_env, op_call, operator, running_hive, seed_home
from tests.support.model_server import ModelServer, Usage, text, tool_call
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
