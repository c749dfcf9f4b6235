"""The scripted model server itself, over real HTTP (what claude does not exercise)."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests.support.model_server import (
    Answer,
    ApiError,
    ModelServer,
    Reply,
    Stall,
    Text,
    ToolUse,
    Usage,
    text,
)

MAIN: dict[str, Any] = {"model": "m", "max_tokens": 10, "messages": [], "tools": []}


def sse_events(body: str) -> list[dict[str, Any]]:
    return [json.loads(x[len("data: ") :]) for x in body.splitlines() if x.startswith("data: ")]


def test_streaming_reply_shape() -> None:
    reply = Reply(
        [Text("hi"), ToolUse("Read", {"file_path": "/x"}, id="toolu_1")], Usage(7, 3, 2, 1)
    )
    with ModelServer([reply]) as server:
        r = httpx.post(f"{server.url}/v1/messages?beta=true", json={**MAIN, "stream": True})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["usage"]["input_tokens"] == 7
    assert events[2]["delta"] == {"type": "text_delta", "text": "hi"}
    assert events[4]["content_block"]["name"] == "Read"
    assert events[4]["content_block"]["id"] == "toolu_1"
    assert json.loads(events[5]["delta"]["partial_json"]) == {"file_path": "/x"}
    assert events[7]["delta"]["stop_reason"] == "tool_use"
    assert events[7]["usage"]["cache_read_input_tokens"] == 2
    [rec] = server.requests
    assert rec.main and rec.query == {"beta": "true"} and rec.tool_names == []


def test_plain_json_reply_and_errors() -> None:
    script: list[Answer] = [text("plain"), ApiError(529, "overloaded_error", "busy")]
    with ModelServer(script) as server:
        ok = httpx.post(f"{server.url}/v1/messages", json=MAIN).json()
        err = httpx.post(f"{server.url}/v1/messages", json=MAIN)
        exhausted = httpx.post(f"{server.url}/v1/messages", json=MAIN).json()
    assert ok["content"] == [{"type": "text", "text": "plain"}]
    assert ok["stop_reason"] == "end_turn"
    assert err.status_code == 529
    assert err.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    assert "exhausted" in exhausted["content"][0]["text"]
    assert server.unscripted == 1


def test_side_requests_do_not_consume_the_script() -> None:
    with ModelServer([text("for the turn")]) as server:
        quota = httpx.post(
            f"{server.url}/v1/messages",
            json={
                "model": "m",
                "max_tokens": 1,
                "messages": [{"role": "user", "content": "quota"}],
            },
        )
        count = httpx.post(f"{server.url}/v1/messages/count_tokens", json=MAIN)
        hello = httpx.head(f"{server.url}/api/hello")
        unknown = httpx.get(f"{server.url}/v1/whatever")
        turn = httpx.post(f"{server.url}/v1/messages", json=MAIN).json()
    assert quota.status_code == 200 and count.json()["input_tokens"] > 0
    assert hello.status_code == 200 and unknown.status_code == 404
    assert turn["content"][0]["text"] == "for the turn"
    assert [r.main for r in server.requests] == [False, False, False, False, True]
    assert len(server.main_requests) == 1


def test_callable_script_sees_the_request() -> None:
    def script(body: dict[str, Any]) -> Reply:
        return text(f"{len(body['messages'])} messages")

    with ModelServer(script) as server:
        body = {**MAIN, "messages": [{"role": "user", "content": "a"}]}
        got = httpx.post(f"{server.url}/v1/messages", json=body).json()
    assert got["content"][0]["text"] == "1 messages"


def test_stall_holds_until_released() -> None:
    stall = Stall(then=text("released"))
    with ModelServer([stall]) as server:
        out: dict[str, Any] = {}

        def call() -> None:
            out["body"] = httpx.post(f"{server.url}/v1/messages", json=MAIN, timeout=10).json()

        caller = threading.Thread(target=call)
        caller.start()
        server.wait_for(lambda reqs: len(reqs) == 1)
        assert "body" not in out
        stall.release.set()
        caller.join(timeout=10)
    assert out["body"]["content"][0]["text"] == "released"


def test_wait_for_times_out() -> None:
    with ModelServer() as server, pytest.raises(TimeoutError):
        server.wait_for(lambda reqs: bool(reqs), timeout=0.05)


@pytest.mark.anyio
async def test_async_context_manager() -> None:
    async with ModelServer([text("async")]) as server, httpx.AsyncClient() as client:
        got = (await client.post(f"{server.url}/v1/messages", json=MAIN)).json()
    assert got["content"][0]["text"] == "async"
