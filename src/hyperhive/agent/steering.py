"""A running turn's claude, steered through its stdin (``--input-format stream-json``).

The harness starts claude with ``--input-format stream-json
--replay-user-messages``: the prompt is one ``user`` line on stdin, and stdin
stays open while the turn runs, so more can reach the same session:

- another ``user`` line (the operator's ``--tell``, mail that arrived
  mid-turn). claude 2.1.328 takes it at the next step of the turn (after the
  running tool call), or, if the model has already ended its reply, as a
  second round in the same process (a second ``result``);
- an interrupt, the control request the Agent SDK's streaming mode sends
  (``{"type": "control_request", "request": {"subtype": "interrupt"}}``):
  claude answers ``control_response``, aborts the model call or tool in
  flight, writes ``[Request interrupted by user]`` and a ``result`` with
  ``subtype: error_during_execution``, and keeps the session for ``--resume``.

``--replay-user-messages`` echoes each ``user`` line back (``isReplay``)
when claude takes it in, and a line counts as seen by the model (delivered)
only once a model answer follows its echo: the first assistant message with
a new id after it. Measured on claude 2.1.328 against the scripted model: a
line taken in while a step runs is echoed after that step's tool results,
just before the request that carries it (as a system note "The user sent a
new message while you were working", beside the tool results); one taken in
after the model ended its reply starts a second round, and is echoed as that
round's answer arrives. Neither echo comes before an answer that lacks the
line, and claude runs every line it read even after stdin closes. A line
echoed but never answered (the request failed, claude died) stays unseen, so
its mail is redelivered. stdin is closed at the first ``result`` by which
every line was seen (then claude exits), at a failed one (nothing of the turn
is acked), or at once for a run that is not steerable (the compaction's runs).

Pure state and one byte stream: no claude, no bus. Measured against the real
claude and the scripted model server (``tests/e2e/test_steer_e2e.py``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from anyio.abc import ByteSendStream

__all__ = ["INTERRUPT_GRACE_S", "TurnInput", "user_line"]

INTERRUPT_GRACE_S = 15.0
"""How long claude gets to end the turn after an interrupt before its group is killed."""


def user_line(text: str) -> bytes:
    """One stream-json ``user`` message, as claude reads it on stdin."""
    message = {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "session_id": "",
    }
    return json.dumps(message).encode() + b"\n"


def _interrupt_line() -> bytes:
    request = {
        "type": "control_request",
        "request_id": f"hyperhive-{uuid.uuid4().hex[:12]}",
        "request": {"subtype": "interrupt"},
    }
    return json.dumps(request).encode() + b"\n"


@dataclass(slots=True)
class _Line:
    text: str
    ids: tuple[int, ...]
    echoed: bool = False  # claude took it in
    seen: bool = False  # and a model answer followed: a request carried it


class TurnInput:
    """The stdin of one claude run: what was sent, what claude took in, when to close.

    ``steerable`` runs keep stdin open for :meth:`send` and :meth:`interrupt`;
    the others get their prompt and an end of input at once.
    """

    __slots__ = (
        "_answers",
        "_closed",
        "_lines",
        "_lock",
        "_stdin",
        "_tells",
        "interrupted",
        "steerable",
    )

    def __init__(self, stdin: ByteSendStream, *, steerable: bool) -> None:
        self._stdin = stdin
        self._lock = anyio.Lock()
        self._closed = False
        # Per user line sent, in order: its text, the message ids it carried (the
        # prompt's: none), whether claude echoed it back, and whether the model saw it.
        self._lines: list[_Line] = []
        self._answers: set[str] = set()  # the model's message ids so far
        self._tells: list[str] = []
        self.interrupted = anyio.Event()
        self.steerable = steerable

    @property
    def open(self) -> bool:
        """More can still reach this run."""
        return not self._closed

    @property
    def seen_ids(self) -> list[int]:
        """The ids of the messages the model has seen so far (a request carried them)."""
        return [i for line in self._lines if line.seen for i in line.ids]

    @property
    def unseen_ids(self) -> list[int]:
        """The ids of messages sent that the model never saw (they wait for a next turn)."""
        return [i for line in self._lines if not line.seen for i in line.ids]

    @property
    def owed(self) -> bool:
        """A line carrying mail was sent and the model has not seen it yet."""
        return any(line.ids and not line.seen for line in self._lines)

    async def start(self, prompt: str) -> None:
        """Send the prompt; close at once unless the run is steerable."""
        await self._write(prompt, ())
        if not self.steerable:
            await self.close()

    async def send(self, text: str, ids: Sequence[int] = ()) -> bool:
        """Offer ``text`` (carrying messages ``ids``) to the running session.

        ``False``: the run takes no more input (not steerable, ending, or
        interrupted: after an interrupt only the operator's tell goes in).
        """
        if not self.steerable or self.interrupted.is_set():
            return False
        return await self._write(text, tuple(ids))

    async def interrupt(self, tell: str | None) -> bool:
        """Ask claude to stop the turn; ``tell`` goes in once it has (same session).

        ``False``: nothing to interrupt (not steerable, or the run is ending).
        """
        async with self._lock:
            if self._closed or not self.steerable or self.interrupted.is_set():
                return False
            if tell:
                self._tells.append(tell)
            if not await self._raw(_interrupt_line()):
                return False
            self.interrupted.set()
            return True

    def saw(self, text: str) -> bool:
        """claude echoed a user line back: it took in the first one of that text not
        echoed yet (by text, not by order: after an interrupt claude may drop what it had
        queued). ``True``: a line that reached the running turn, not its prompt."""
        for index, line in enumerate(self._lines):
            if not line.echoed and line.text == text:
                line.echoed = True
                return index > 0
        return False

    def answered(self, message_id: str) -> None:
        """The model answered (an assistant message of the main thread): a new message
        id is a request made after every echo so far, so it carried those lines."""
        if message_id in self._answers:
            return  # another block of an answer already counted
        self._answers.add(message_id)
        for line in self._lines:
            line.seen = line.seen or line.echoed

    async def result(self, *, failed: bool = False) -> None:
        """A ``result`` arrived: send a pending tell, or close once the model saw all.

        After an interrupt the run closes at the first result with no tell left, and
        after a failed round (``failed``) at once: lines the model never saw stay
        unseen (their mail is redelivered).
        """
        if self._tells:
            tell = self._tells.pop(0)
            await self._write(tell, ())
            return
        async with self._lock:
            done = not self.owed and all(line.echoed for line in self._lines)
            if done or failed or self.interrupted.is_set():
                await self._close()

    async def close(self) -> None:
        """End claude's input (it runs the lines it read, then exits)."""
        async with self._lock:
            await self._close()

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass

    async def _write(self, text: str, ids: tuple[int, ...]) -> bool:
        async with self._lock:
            if self._closed:
                return False
            if not await self._raw(user_line(text)):
                return False
            self._lines.append(_Line(text, ids))
            return True

    async def _raw(self, line: bytes) -> bool:
        try:
            await self._stdin.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._closed = True  # claude has gone: whatever it did not take stays unseen
            return False
        return True
