"""The fast path reads a body whole or hands every message it took on to the SDK."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.types import Message

from hyperhive.agent.mcp_fastpath import _read_body

pytestmark = pytest.mark.anyio


def _receive(messages: list[Message]) -> Any:
    queue = list(messages)

    async def receive() -> Message:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive


async def _drain(receive: Any) -> list[Message]:
    out: list[Message] = []
    while True:
        message = await receive()
        out.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return out


async def test_a_body_in_chunks_is_read_whole_and_replayed_as_one() -> None:
    chunks: list[Message] = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b"1}", "more_body": False},
    ]
    body, replay = await _read_body(_receive(chunks), None, 100)
    assert body == b'{"a":1}'
    assert await _drain(replay) == [
        {"type": "http.request", "body": b'{"a":1}', "more_body": False}
    ]


async def test_a_declared_oversize_body_is_not_read_at_all() -> None:
    chunks: list[Message] = [{"type": "http.request", "body": b"x" * 10, "more_body": False}]
    receive = _receive(chunks)
    body, replay = await _read_body(receive, "101", 100)
    assert body is None and replay is receive
    assert await _drain(replay) == chunks  # untouched, for the SDK's 413


async def test_a_counted_oversize_body_stops_and_replays_what_was_taken() -> None:
    chunks: list[Message] = [
        {"type": "http.request", "body": b"x" * 60, "more_body": True},
        {"type": "http.request", "body": b"y" * 60, "more_body": True},
        {"type": "http.request", "body": b"z" * 60, "more_body": False},
    ]
    body, replay = await _read_body(_receive(chunks), None, 100)
    assert body is None
    assert await _drain(replay) == chunks  # the SDK sees every byte, in order


async def test_a_disconnect_mid_body_is_replayed() -> None:
    chunks: list[Message] = [{"type": "http.request", "body": b"{", "more_body": True}]
    body, replay = await _read_body(_receive(chunks), None, 100)
    assert body is None
    assert await _drain(replay) == [*chunks, {"type": "http.disconnect"}]
