"""Parsing claude's stream-json and judging a turn (lines shaped as claude 2.1.328 emits them)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.agent.stream import (
    ApiRetryEvent,
    AssistantEvent,
    InitEvent,
    OtherBlock,
    ResultEvent,
    StreamEvent,
    SystemEvent,
    TextBlock,
    ToolUseBlock,
    UnknownEvent,
    Usage,
    UserEvent,
    parse_line,
)
from hyperhive.agent.turnreport import (
    classify_outcome,
    context_tokens,
    context_usage,
    session_totals,
    summarize_turn,
)
from hyperhive.runcost import UNKNOWN_MODEL, Figures

SID = "f791aa10-e1f3-47a6-8db5-d7af8cc417f6"


def line(**data: Any) -> str:
    return json.dumps(data)


INIT = line(
    type="system",
    subtype="init",
    session_id=SID,
    cwd="/w",
    tools=["Edit", "Read", "mcp__hyperhive__send"],
    mcp_servers=[{"name": "hyperhive", "status": "connected", "source": "dynamic"}],
    model="claude-opus-5-5",
    slash_commands=["compact"],
)


def assistant(content: list[dict[str, Any]], usage: dict[str, int] | None = None) -> str:
    return line(
        type="assistant",
        session_id=SID,
        parent_tool_use_id=None,
        message={
            "id": "msg_1",
            "model": "claude-opus-5-5",
            "role": "assistant",
            "content": content,
            "usage": usage or {"input_tokens": 10, "output_tokens": 1},
        },
    )


def result(**over: Any) -> str:
    data: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "session_id": SID,
        "result": "done",
        "num_turns": 2,
        "total_cost_usd": 0.003,
        "duration_ms": 183,
        "terminal_reason": "completed",
        "api_error_status": None,
        "usage": {
            "input_tokens": 110,
            "output_tokens": 25,
            "cache_read_input_tokens": 300,
            "cache_creation_input_tokens": 400,
            "server_tool_use": {"web_search_requests": 0},
        },
        "modelUsage": {
            "claude-opus-5-5": {
                "inputTokens": 110,
                "outputTokens": 25,
                "cacheReadInputTokens": 300,
                "cacheCreationInputTokens": 400,
                "costUSD": 0.003,
                "contextWindow": 1000000,
            }
        },
    }
    data.update(over)
    return json.dumps(data)


AUTH_ASSISTANT = line(
    type="assistant",
    session_id=SID,
    message={
        "id": "x",
        "model": "<synthetic>",
        "content": [{"type": "text", "text": "Invalid API key · Fix external API key"}],
        "usage": {"input_tokens": 0, "output_tokens": 0},
    },
    error="authentication_failed",
    is_api_error_message=True,
    api_error_status=401,
    api_error_type="authentication_error",
)
AUTH_RESULT = result(
    is_error=True,
    api_error_status=401,
    api_error_type="authentication_error",
    terminal_reason="api_error",
    result="Invalid API key · Fix external API key",
    usage={"input_tokens": 0, "output_tokens": 0},
    modelUsage={},
    total_cost_usd=0,
)


def events(*lines: str) -> list[StreamEvent]:
    out = [parse_line(x) for x in lines]
    return [e for e in out if e is not None]


def test_init_event() -> None:
    event = parse_line(INIT)
    assert isinstance(event, InitEvent)
    assert event.session_id == SID
    assert event.tools == ["Edit", "Read", "mcp__hyperhive__send"]
    assert event.mcp_servers[0].name == "hyperhive"
    assert event.mcp_servers[0].status == "connected"
    assert event.model_extra is not None and event.model_extra["slash_commands"] == ["compact"]


def test_assistant_text_and_tool_use() -> None:
    text = parse_line(assistant([{"type": "text", "text": "hello"}]))
    assert isinstance(text, AssistantEvent)
    assert text.text == "hello" and not text.synthetic
    call = parse_line(
        assistant([{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"a": 1}}])
    )
    assert isinstance(call, AssistantEvent)
    assert call.tool_uses == [ToolUseBlock(id="toolu_1", name="Read", input={"a": 1})]
    thinking = parse_line(assistant([{"type": "thinking", "thinking": "hm"}]))
    assert isinstance(thinking, AssistantEvent)
    assert isinstance(thinking.message.content[0], OtherBlock)


def test_user_tool_result() -> None:
    event = parse_line(
        line(
            type="user",
            session_id=SID,
            message={
                "role": "user",
                "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "content": "42"}],
            },
            tool_use_result={"type": "text"},
        )
    )
    assert isinstance(event, UserEvent)
    [res] = event.tool_results
    assert res.tool_use_id == "toolu_1" and res.text == "42" and not res.is_error
    blocks = parse_line(
        line(
            type="user",
            message={
                "content": [
                    {
                        "tool_use_id": "t",
                        "type": "tool_result",
                        "is_error": True,
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    }
                ]
            },
        )
    )
    assert isinstance(blocks, UserEvent)
    assert blocks.tool_results[0].text == "ab" and blocks.tool_results[0].is_error
    replay = parse_line(line(type="user", message={"role": "user", "content": "a prompt"}))
    assert isinstance(replay, UserEvent) and replay.tool_results == []


def test_result_event() -> None:
    event = parse_line(result())
    assert isinstance(event, ResultEvent)
    assert event.session_id == SID
    assert event.usage.cache_read_input_tokens == 300
    assert event.total_cost_usd == pytest.approx(0.003)
    assert event.num_turns == 2
    assert event.model_usage["claude-opus-5-5"].context_window == 1_000_000


def test_system_events() -> None:
    retry = parse_line(
        line(
            type="system",
            subtype="api_retry",
            attempt=1,
            max_retries=10,
            retry_delay_ms=595,
            error_status=401,
            error="authentication_failed",
            session_id=SID,
        )
    )
    assert isinstance(retry, ApiRetryEvent) and retry.error_status == 401
    status = parse_line(line(type="system", subtype="status", status="compacting"))
    assert isinstance(status, SystemEvent) and status.subtype == "status"


@pytest.mark.parametrize(
    "raw",
    [
        '{"type":"stream_event","event":{}}',
        '{"type":"result","usage":"not an object"}',
        '{"type":"assistant"}',
        '{"no_type":1}',
        "[1, 2]",
        "not json at all",
    ],
)
def test_unknown_or_malformed_lines_do_not_crash(raw: str) -> None:
    assert isinstance(parse_line(raw), UnknownEvent)


def test_blank_lines_and_bytes() -> None:
    assert parse_line("") is None and parse_line(b"  \n") is None
    assert isinstance(parse_line(INIT.encode()), InitEvent)


@given(st.text())
def test_parse_line_never_raises(raw: str) -> None:
    parse_line(raw)


@given(st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text(max_size=5)))
def test_parse_line_never_raises_on_objects(data: dict[str, Any]) -> None:
    for kind in ("system", "assistant", "user", "result", "x"):
        parse_line(json.dumps({**data, "type": kind}))


# -- outcomes -----------------------------------------------------------------


def test_outcome_ok() -> None:
    assert classify_outcome(events(INIT, assistant([]), result()), 0) == "ok"


def test_outcome_needs_login_on_401() -> None:
    assert classify_outcome(events(INIT, AUTH_ASSISTANT, AUTH_RESULT), 1) == "needs_login"
    # claude labels a 403 an authentication failure too.
    forbidden = result(is_error=True, api_error_status=403, api_error_type="permission_error")
    auth403 = AUTH_ASSISTANT.replace("401", "403")
    assert classify_outcome(events(auth403, forbidden), 1) == "needs_login"
    assert classify_outcome(events(INIT, AUTH_ASSISTANT), 1) == "needs_login"


def test_outcome_api_error() -> None:
    overloaded = result(
        is_error=True,
        api_error_status=529,
        api_error_type="overloaded_error",
        terminal_reason="api_error",
    )
    assert classify_outcome(events(INIT, overloaded), 1) == "api_error"


def test_outcome_error() -> None:
    assert classify_outcome(events(INIT, result(is_error=True)), 1) == "error"
    assert classify_outcome(events(INIT, result(subtype="error_max_turns")), 0) == "error"
    assert classify_outcome(events(INIT), 1) == "error"
    assert classify_outcome([], 0) == "error"


@pytest.mark.parametrize("code", [-signal.SIGKILL, -signal.SIGTERM, 137, 143, 130])
def test_outcome_interrupted(code: int) -> None:
    assert classify_outcome(events(INIT, assistant([])), code) == "interrupted"


def test_a_signal_after_the_result_does_not_undo_the_turn() -> None:
    assert classify_outcome(events(INIT, result()), -signal.SIGTERM) == "ok"


# -- context usage --------------------------------------------------------------


def test_context_usage() -> None:
    usage = Usage(
        input_tokens=100,
        output_tokens=9999,
        cache_read_input_tokens=300,
        cache_creation_input_tokens=400,
    )
    assert context_tokens(usage) == 800
    assert context_usage(usage, 1000) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        context_usage(usage, 0)


def test_summary_measures_the_last_model_call() -> None:
    evs = events(
        INIT,
        assistant([{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]),
        assistant(
            [{"type": "text", "text": "done"}],
            {
                "input_tokens": 100,
                "output_tokens": 1,
                "cache_read_input_tokens": 300,
                "cache_creation_input_tokens": 400,
            },
        ),
        result(),
    )
    report = summarize_turn(evs, 0, 200_000)
    assert report.outcome == "ok"
    assert report.session_id == SID
    assert report.context_tokens == 800  # not the turn's sum (810)
    assert report.context_usage == pytest.approx(800 / 200_000)
    assert report.usage.input_tokens == 110
    # The session's totals so far, per model, as claude reported them (not the run's own).
    assert report.session_totals == {"claude-opus-5-5": Figures(0.003, 110, 25, 300, 400)}
    assert report.num_turns == 2 and report.result_text == "done"
    assert report.model_context_window == 1_000_000
    assert report.model == "claude-opus-5-5"


def test_session_totals_from_a_result() -> None:
    (with_usage,) = events(result())
    assert isinstance(with_usage, ResultEvent)
    assert session_totals(with_usage) == {"claude-opus-5-5": Figures(0.003, 110, 25, 300, 400)}
    # An auth failure's result reports no totals: nothing to count.
    (failed,) = events(AUTH_RESULT)
    assert isinstance(failed, ResultEvent) and session_totals(failed) == {}
    assert session_totals(None) == {}
    # A cost without modelUsage is kept as a USD-only total.
    (bare,) = events(result(modelUsage={}, total_cost_usd=0.25))
    assert isinstance(bare, ResultEvent)
    assert session_totals(bare) == {UNKNOWN_MODEL: Figures(0.25)}


def test_summary_without_result() -> None:
    report = summarize_turn(events(INIT), -signal.SIGKILL, 1000)
    assert report.outcome == "interrupted"
    assert report.session_id == SID
    assert report.context_tokens == 0 and report.model_context_window is None
    # A synthetic error message's zero usage is not a model call.
    assert summarize_turn(events(INIT, AUTH_ASSISTANT, AUTH_RESULT), 1, 1000).context_tokens == 0


def test_text_block_model() -> None:
    assert TextBlock(text="x").type == "text"
