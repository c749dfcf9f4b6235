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


async def test_stdin_stays_open_until_the_model_saw_every_line() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=True)
    await run.start("the prompt")
    run.saw("the prompt")
    run.answered("msg_1")
    assert await run.send("mail #7", [7])
    await run.result()  # the prompt's round ended; the mail is not taken in yet
    assert not stdin.closed and run.unseen_ids == [7] and run.seen_ids == []
    # The second round: claude echoes the line as its answer arrives.
    assert run.saw("mail #7")
    run.answered("msg_2")
    await run.result()
    assert stdin.closed and run.seen_ids == [7] and run.unseen_ids == []
    assert not await run.send("too late", [8])  # the caller keeps #8 for the next turn


async def test_an_echo_with_no_model_answer_after_it_is_not_delivered() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=True)
    await run.start("the prompt")
    assert not run.saw("the prompt")  # the prompt is no line that reached a running turn
    run.answered("msg_1")
    assert await run.send("mail #7", [7])
    # Echoed (taken in beside a tool's result), then more blocks of the answer the
    # model gave before it: no request has carried the line yet.
    assert run.saw("mail #7")
    run.answered("msg_1")
    assert run.seen_ids == [] and run.owed
    await run.result()  # a result with the line still owed keeps stdin open
    assert not stdin.closed
    run.answered("msg_2")  # the next request's answer: it carried the line
    assert run.seen_ids == [7] and not run.owed
    await run.result()
    assert stdin.closed


async def test_a_failed_round_closes_at_once_and_its_mail_stays_unseen() -> None:
    stdin = _Stdin()
    run = TurnInput(stdin, steerable=True)
    await run.start("the prompt")
    run.saw("the prompt")
    run.answered("msg_1")
    assert await run.send("mail #7", [7])
    run.saw("mail #7")  # echoed just before the request that then failed
    await run.result(failed=True)
    assert stdin.closed and run.unseen_ids == [7] and run.seen_ids == []


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
    await run.result(failed=True)  # the interrupted round: the tell goes in now
    assert _texts(stdin)[-1] == "do this instead" and not stdin.closed
    run.saw("do this instead")  # claude dropped the queued mail
    run.answered("msg_2")
    await run.result()  # the tell's round: closed, whatever claude left queued
    assert stdin.closed and run.unseen_ids == [7]
