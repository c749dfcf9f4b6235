"""Every turn of an agent, recorded on its host as it streams: the per-agent
:class:`TurnRecorder`, built in :func:`~.activation.activated` and held by the
:class:`~.active.ActiveAgent`.

The harness opens a record at the wake (:meth:`TurnRecorder.turn`), hands it
each prompt and each of claude's stream events as they are parsed, the
reports once claude exits, and what the coordinator counted the run at (the
figure spend holds). Each step is committed as it arrives (:mod:`.turnstore`),
so a crash mid-turn keeps what came before. Before anything is stored, the
secrets the hive injected (model credentials, the agent's forge and Matrix
tokens, its hive token, secret-named ``env`` of its ``agent.toml``) are
replaced by ``[redacted:<what>]``. A recording that fails (a full disk) is
logged once per turn and never fails the turn.

Pruning (by age and total size per agent, ``hive.toml``'s ``turns_keep_days``
and ``turns_keep_mb``) runs after each turn on a worker thread of its own
task, off the turn's path.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import anyio
from pydantic import JsonValue

from hyperhive.agent.stream import AssistantEvent, InitEvent, StreamEvent, UserEvent
from hyperhive.agent.turnreport import TurnReport
from hyperhive.agent.turnstore import TurnStore, prune
from hyperhive.names import REMINDER
from hyperhive.protocol import ModelSpend, WaitResult

__all__ = ["Redactor", "TurnRecorder", "new_turn_id", "wake_of"]

log = logging.getLogger(__name__)

# Shorter values are not redacted: "1" or "true" would blank out half a transcript.
MIN_SECRET = 8
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)

Secrets = Callable[[], Iterable[tuple[str, str]]]
"""``(what, value)`` pairs of what must never be stored, read at each turn's start."""


def new_turn_id(agent: str, at: float) -> str:
    """``<agent>.<UTC time>-<random>``: names its agent, sorts by time."""
    return f"{agent}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(at))}-{secrets.token_hex(4)}"


def is_secret_name(name: str) -> bool:
    return name.startswith("ANTHROPIC_") or bool(_SECRET_NAME.search(name))


class Redactor:
    """Replaces each secret value in a text by ``[redacted:<what>]`` (longest first)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        found = {v: what for what, v in pairs if len(v) >= MIN_SECRET}
        self._by_value = found
        self._pattern = (
            re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True)))
            if found
            else None
        )

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: f"[redacted:{self._by_value[m.group(0)]}]", text)


def env_secrets(env: dict[str, str]) -> list[tuple[str, str]]:
    """The secret-named entries of an environment."""
    return [(name, value) for name, value in env.items() if is_secret_name(name)]


def wake_of(
    woke: WaitResult | None, redact: Callable[[str], str]
) -> tuple[dict[str, JsonValue], str]:
    """What woke a turn, as stored (ids, senders, each message's first line) and as a
    one-line reason for lists."""
    if woke is None:
        return {"compaction": True}, "compaction"
    messages: list[JsonValue] = [
        {
            "id": m.id,
            "from": m.sender,
            "in_reply_to": m.in_reply_to,
            "subject": redact(m.body.strip().splitlines()[0][:200] if m.body.strip() else ""),
        }
        for m in woke.messages
    ]
    senders = sorted({m.sender for m in woke.messages})
    parts = []
    reminders = [s for s in senders if s == REMINDER]
    others = [s for s in senders if s != REMINDER]
    if others:
        parts.append("mail from " + ", ".join(others))
    if reminders:
        parts.append("a reminder")
    if woke.todos_changed:
        parts.append("todos changed")
    if woke.stop:
        parts.append("a graceful stop (its flush turn)")
    wake: dict[str, JsonValue] = {"messages": messages, "todos_changed": woke.todos_changed}
    return wake, "; ".join(parts) or "nothing"


class _Open:
    """The record being written: its id, its next step number, its redactor."""

    __slots__ = ("calls", "failed", "id", "redact", "seq")

    def __init__(self, turn_id: str, redact: Redactor) -> None:
        self.id = turn_id
        self.redact = redact
        self.seq = 0
        self.failed = False
        self.calls = 0


class TurnRecorder:
    """One agent's turn records on this host (see module)."""

    def __init__(
        self,
        root: Path,
        agent: str,
        secrets_of: Secrets,
        keep_days: float,
        keep_mb: float,
    ) -> None:
        self.root = root
        self.agent = agent
        self._secrets_of = secrets_of
        self._keep = (keep_days * 86400.0, int(keep_mb * (1 << 20)))
        self._store: TurnStore | None = None
        self._open: _Open | None = None
        self._last: str | None = None  # the turn whose cost the coordinator is to tell
        self._prune_wanted = anyio.Event()

    def open(self) -> None:
        """Open (or make) its store; a store that cannot open leaves the agent unrecorded."""
        try:
            self._store = TurnStore(self.root, self.agent)
        except (OSError, sqlite3.Error) as exc:
            log.error("%s: turn records cannot be kept in %s: %s", self.agent, self.root, exc)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def current(self) -> str | None:
        """The id of the turn being recorded, if one is."""
        return self._open.id if self._open is not None else None

    @contextmanager
    def turn(self, woke: WaitResult | None) -> Iterator[str | None]:
        """A record for the block: a turn (``woke``) or a compaction (``None``). Left
        without :meth:`finish`, it ends ``interrupted`` (cancelled: its host killed the
        turn) or ``error``; a host that dies leaves it open, ``unfinished`` once reopened."""
        redact = Redactor(self._secrets())
        at = time.time()
        turn_id = new_turn_id(self.agent, at)
        wake, reason = wake_of(woke, redact)
        kind = "compaction" if woke is None else "turn"
        self._open = _Open(turn_id, redact)
        self._write(lambda s: s.begin(turn_id, kind, at, wake, reason, ""))
        try:
            yield turn_id
        except BaseException as exc:
            if self.current == turn_id:  # cut short: its host stopped it, or claude failed
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                self.finish([], outcome="interrupted" if cancelled else "error")
            raise
        if self.current == turn_id:
            self.finish([], outcome="error")

    def _secrets(self) -> list[tuple[str, str]]:
        try:
            return list(self._secrets_of())
        except OSError as exc:  # a token file unreadable now: redact what is known
            log.warning("%s: reading the secrets to redact: %s", self.agent, exc)
            return []

    def _write(self, fn: Callable[[TurnStore], None]) -> None:
        rec, store = self._open, self._store
        if store is None or rec is None or rec.failed:
            return
        try:
            fn(store)
        except (OSError, sqlite3.Error) as exc:
            rec.failed = True  # said once; the turn goes on unrecorded
            log.error("%s: recording turn %s failed: %s", self.agent, rec.id, exc)

    def _step(self, kind: str, text: str, **kw: str | bool | None) -> None:
        rec = self._open
        if rec is None:
            return
        seq, rec.seq = rec.seq, rec.seq + 1
        clean = rec.redact(text)
        self._write(lambda s: s.step(rec.id, seq, kind, clean, **kw))  # type: ignore[arg-type]

    def prompt(self, text: str) -> None:
        """A prompt given to claude (a compaction has two: the checkpoint, ``/compact``)."""
        rec = self._open
        if rec is not None and rec.seq == 0 and self._store is not None:
            clean = rec.redact(text)
            self._write(lambda s: s.prompt(rec.id, clean))
        self._step("prompt", text)

    def event(self, event: StreamEvent) -> None:
        """One parsed stream event, as claude sent it."""
        rec = self._open
        if rec is None:
            return
        if isinstance(event, InitEvent):
            self._write(lambda s: s.session(rec.id, event.session_id, event.model))
        elif isinstance(event, AssistantEvent):
            parent = event.parent_tool_use_id
            if event.text:
                self._step("text", event.text, parent=parent)
            for use in event.tool_uses:
                self._step(
                    "tool_use",
                    json.dumps(use.input, ensure_ascii=False),
                    call_id=use.id,
                    name=use.name,
                    parent=parent,
                )
        elif isinstance(event, UserEvent):
            for result in event.tool_results:
                self._step(
                    "tool_result",
                    result.text,
                    call_id=result.tool_use_id,
                    parent=event.parent_tool_use_id,
                    is_error=bool(result.is_error),
                )

    def finish(self, reports: Sequence[TurnReport], outcome: str | None = None) -> None:
        """claude's runs ended: the outcome (``outcome`` overrides the last report's)."""
        rec = self._open
        if rec is None:
            return
        said = outcome or (reports[-1].outcome if reports else "error")
        calls = sum(r.num_turns for r in reports)
        self._write(lambda s: s.finish(rec.id, said, time.time(), calls))
        self._open, self._last = None, rec.id
        self._prune_wanted.set()

    def counted(self, spent: ModelSpend | None) -> None:
        """What the coordinator counted the last finished turn at (spend's figure)."""
        turn, store = self._last, self._store
        if turn is None or store is None or spent is None:
            return
        try:
            store.counted(turn, spent.cost_usd, spent.input_tokens, spent.output_tokens)
        except (OSError, sqlite3.Error) as exc:
            log.error("%s: recording turn %s's cost failed: %s", self.agent, turn, exc)

    async def prune_forever(self) -> None:
        """After each turn, prune to the limits, on a worker thread (never on a turn's path)."""
        while True:
            await self._prune_wanted.wait()
            self._prune_wanted = anyio.Event()
            await self.prune_now()

    async def prune_now(self) -> None:
        keep_seconds, keep_bytes = self._keep
        try:
            done = await anyio.to_thread.run_sync(
                prune, self.root, keep_seconds, keep_bytes, time.time()
            )
        except (OSError, sqlite3.Error) as exc:
            log.warning("%s: pruning turn records: %s", self.agent, exc)
            return
        if done.turns:
            log.info("%s: pruned %d turn record(s), %d bytes", self.agent, done.turns, done.bytes)


def host_env_secrets() -> list[tuple[str, str]]:
    """The host's own ``ANTHROPIC_*`` and credential variables (what claude is given)."""
    return env_secrets(
        {k: v for k, v in os.environ.items() if k.startswith(("ANTHROPIC_", "CLAUDE_CODE_OAUTH"))}
    )
