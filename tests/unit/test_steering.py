"""A running turn's stdin (agent/steering.py): what goes to claude, and when it closes."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from anyio.abc import ByteSendStream

from hyperhive.agent.steering import TurnInput

pytestmark = pytest.mark.anyio


class _Stdin(ByteSendStream):
    """claude's stdin as the harness sees it: the lines written, and whether it closed."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.closed = False

    async def send(self, item: bytes) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        self.lines.append(json.loads(item))

    async def aclose(self) -> None:
        self.closed = True


def _texts(stdin: _Stdin) -> list[str]:
    return [line["message"]["content"] for line in stdin.lines if line["type"] == "user"]


async def test_a_run_that_is_not_steerable_gets_its_prompt_then_the_end_of_input() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=False)
    await run.start("/compact")
    assert _texts(stdin) == ["/compact"] and stdin.closed
    assert not await run.send("more", [7]) and not await run.interrupt("stop")


async def test_stdin_stays_open_until_every_line_was_taken_in() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=True)
    await run.start("the prompt")
    run.saw("the prompt")
    assert await run.send("mail #7", [7])
    await run.result()  # the prompt's round ended; the mail is not taken in yet
    assert not stdin.closed and run.unseen_ids == [7] and run.seen_ids == []
    run.saw("mail #7")
    await run.result()
    assert stdin.closed and run.seen_ids == [7] and run.unseen_ids == []
    assert not await run.send("too late", [8])  # the caller keeps #8 for the next turn


async def test_an_interrupt_then_the_tell_then_the_end() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=True)
    await run.start("the prompt")
    assert await run.send("mail #7", [7])
    assert await run.interrupt("do this instead")
    assert stdin.lines[-1]["type"] == "control_request"
    assert stdin.lines[-1]["request"] == {"subtype": "interrupt"}
    assert not await run.send("mail #8", [8])  # after an interrupt only the tell goes in
    assert not await run.interrupt(None)  # one interrupt per run
    run.saw("the prompt")
    await run.result()  # the interrupted round: the tell goes in now
    assert _texts(stdin)[-1] == "do this instead" and not stdin.closed
    run.saw("do this instead")  # claude dropped the queued mail
    await run.result()  # the tell's round: closed, whatever claude left queued
    assert stdin.closed and run.unseen_ids == [7]
