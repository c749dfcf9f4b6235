"""The soak's scripted model, and the ledger of what it was shown.

Each claude process is one turn; its first request carries the wake prompt
(``You were woken by these messages: [msg #N] from X: …``). The model's plan
for a turn is a pure function of the seed, the agent and the wake prompt, so
a redelivered wake gets the same plan. For every message it is woken by it:

- ``chain=C hops=H`` from an agent or the operator: with hops left, passes
  the chain on (back to the sending agent, or to a random peer when the
  operator sent it) with ``hops=H-1``; at zero, reports ``re chain=C`` to the
  operator. Sometimes it also sets a reminder (``remind``, 0.3–3 s) and
  starts a bash task: quick (ends inside ``run``'s wait), background,
  long, one that times out, or one it kills in a second step.
- ``[reminder #R] chain=C remind`` from ``reminder``: reports to the operator.

A todo-only wake (a bash task ended) just ends the turn. Some turn starts
stall 0.3–1.5 s, as a thinking model does, which leaves claude processes
alive long enough to be killed mid-turn.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperhive.agent.flush import FLUSH_PROMPT
from hyperhive.agent.midturn import midturn_text
from tests.support.model_server import Answer, Reply, Stall, Text, ToolUse, text

__all__ = ["TASK_ENDED", "Ledger", "SoakModel", "Turn", "offered_midturn", "task_wait"]

_WAKE_MARKERS = ("You were woken", "Your todos changed")
# The stop's flush turn (no mail shown) and mail offered to a running turn, as the harness
# words them.
_FLUSH_MARKER = FLUSH_PROMPT.split(";", 1)[0]
_MIDTURN_MARKER = midturn_text([]).splitlines()[0]
_MSG = re.compile(r"^\[msg #(\d+)\] from ([a-z0-9-]+)(?: \(re #\d+\))?: (.*)$", re.M)
_AGENT = re.compile(r"agents/([a-z0-9-]+)/work")
_SENT = re.compile(r"sent \[msg #(\d+)\] to ([a-z0-9-]+)")
_REMINDER_SET = re.compile(r"reminder #(\d+) set for")
_CHAIN = re.compile(r"chain=(\S+)")
_HOPS = re.compile(r"hops=(\d+)")
_WAIT = re.compile(r"# wait=([0-9.]+)")
# The head of run's (or status's) answer showing a task's end (bash/mcp.py render_report).
TASK_ENDED = re.compile(r"\btask ([A-Za-z0-9_.-]+): (done|timed_out|killed|interrupted)\b")

OPERATOR = "operator"
REMINDER = "reminder"


def task_wait(cmd: str) -> float:
    """The ``wait_seconds`` the model passed with a task (recorded in its cmd)."""
    found = _WAIT.search(cmd)
    return float(found.group(1)) if found else 0.0


@dataclass
class Turn:
    """One claude process as the model server saw it."""

    claude: str  # the wrapper's name for it (pid and start time: see chaos_wrapper)
    agent: str
    wake_ids: list[int]
    requests: int = 0
    finished: bool = False  # the model answered its last step ("done")


@dataclass
class Ledger:
    """Everything the model was shown, keyed so the checks can join it with hive.db."""

    turns: dict[str, Turn] = field(default_factory=dict)
    sent_ok: dict[int, tuple[str, str]] = field(default_factory=dict)  # id → (sender, to)
    reminders_ok: set[int] = field(default_factory=set)
    # (agent, task id) whose end a claude was shown in a tool's answer: no todo owed
    tasks_seen_ended: set[tuple[str, str]] = field(default_factory=set)
    # Mail a claude took in mid-turn: in a round of its own, or beside a step's tool results.
    midturn_own_round: set[int] = field(default_factory=set)
    midturn_beside_tool_results: set[int] = field(default_factory=set)
    woke_by: set[int] = field(default_factory=set)  # mail some turn's wake prompt showed
    stalls: int = 0
    requests: int = 0
    untagged: int = 0

    def turns_showing(self, msg_id: int) -> list[Turn]:
        return [t for t in self.turns.values() if msg_id in t.wake_ids]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        str(block.get("text", ""))
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    ]


def _tool_results(content: Any) -> list[str]:
    out = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                out.extend(_texts(inner) if not isinstance(inner, str) else [inner])
    return out


def _new_tool_results(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The tool results this request is the first to show: those of the messages after
    the last assistant one. Mail claude takes in while a step runs comes after the step's
    tool results as a message of its own (role ``system``), so not only the last."""
    out: list[str] = []
    for msg in reversed(messages):
        if msg.get("role") == "assistant":
            break
        out[:0] = _tool_results(msg.get("content"))
    return out


def _prompt_index(messages: Sequence[dict[str, Any]]) -> int | None:
    """Where this turn's prompt is: the last wake prompt or stop's flush prompt (a resumed
    session carries earlier turns' prompts before it, never after)."""
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if msg.get("role") != "user":
            continue
        body = "\n".join(_texts(msg.get("content")))
        if any(marker in body for marker in (*_WAKE_MARKERS, _FLUSH_MARKER)):
            return index
    return None


def _wake(messages: Sequence[dict[str, Any]]) -> tuple[str, int] | None:
    """The turn's wake prompt and how many model steps followed it (None: no wake, e.g.
    the flush turn of a graceful stop, which shows no mail)."""
    index = _prompt_index(messages)
    if index is None:
        return None
    body = "\n".join(_texts(messages[index].get("content")))
    if not any(marker in body for marker in _WAKE_MARKERS):
        return None
    steps = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
    return body, steps


def offered_midturn(messages: Sequence[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Ids of the mail this turn's claude took in while it ran (the harness's mid-turn
    lines, after the turn's prompt): those of a round of their own (a user message), and
    those claude put beside a step's tool results (a system note that quotes the line:
    "The user sent a new message while you were working: …")."""
    index = _prompt_index(messages)
    own: list[int] = []
    beside: list[int] = []
    for msg in messages[index + 1 :] if index is not None else ():
        body = "\n".join(_texts(msg.get("content")))
        if _MIDTURN_MARKER in body:
            ids = own if msg.get("role") == "user" else beside
            ids += [int(m.group(1)) for m in _MSG.finditer(body)]
    return own, beside


class SoakModel:
    """The callable script of the soak; ``ledger`` is safe to read under ``lock``."""

    def __init__(
        self,
        agents: Sequence[str],
        seed: int,
        p_remind: float = 0.25,
        p_bash: float = 0.35,
        p_stall: float = 0.3,
    ) -> None:
        self.agents = list(agents)
        self.seed = seed
        self.p_remind = p_remind
        self.p_bash = p_bash
        self.p_stall = p_stall
        self.ledger = Ledger()
        self.lock = threading.Lock()
        self._stall_rng = random.Random(seed ^ 0x5EED)

    def __call__(self, body: dict[str, Any]) -> Answer:
        messages = body.get("messages") or []
        agent_match = _AGENT.search(json.dumps(body.get("system")))
        if agent_match is None:  # the first turn carries the environment as a message
            agent_match = _AGENT.search(json.dumps([m for m in messages if m["role"] == "system"]))
        agent = agent_match.group(1) if agent_match else "?"
        wake = _wake(messages)
        claude = body.get("chaos_claude")
        with self.lock:
            self._record(claude, agent, wake, messages)
        if wake is None:
            return text("done")
        prompt, step = wake
        steps = self.plan(agent, prompt)
        if step >= len(steps):
            with self.lock:
                if isinstance(claude, str) and claude in self.ledger.turns:
                    self.ledger.turns[claude].finished = True
            return text("done")
        reply = Reply(steps[step])
        if step == 0:
            with self.lock:
                stall = self._stall_rng.random() < self.p_stall
                delay = self._stall_rng.uniform(0.3, 1.5)
                if stall:
                    self.ledger.stalls += 1
            if stall:
                release = threading.Event()
                timer = threading.Timer(delay, release.set)
                timer.daemon = True
                timer.start()
                return Stall(release=release, then=reply)
        return reply

    def _record(
        self,
        claude: Any,
        agent: str,
        wake: tuple[str, int] | None,
        messages: Sequence[dict[str, Any]],
    ) -> None:
        ledger = self.ledger
        ledger.requests += 1
        if not isinstance(claude, str):
            ledger.untagged += 1
            return
        turn = ledger.turns.get(claude)
        if turn is None:
            ids = [int(m.group(1)) for m in _MSG.finditer(wake[0])] if wake else []
            turn = ledger.turns[claude] = Turn(claude, agent, ids)
            ledger.woke_by.update(ids)
        turn.requests += 1
        own, beside = offered_midturn(messages)
        turn.wake_ids += [i for i in [*own, *beside] if i not in turn.wake_ids]
        ledger.midturn_own_round.update(own)
        ledger.midturn_beside_tool_results.update(beside)
        for result in _new_tool_results(messages):
            for sent in _SENT.finditer(result):
                ledger.sent_ok[int(sent.group(1))] = (agent, sent.group(2))
            for rem in _REMINDER_SET.finditer(result):
                ledger.reminders_ok.add(int(rem.group(1)))
            for ended in TASK_ENDED.finditer(result):
                ledger.tasks_seen_ended.add((agent, ended.group(1)))

    def plan(self, agent: str, prompt: str) -> list[list[Text | ToolUse]]:
        """The turn's model steps (each one assistant message), from the wake prompt alone."""
        found = list(_MSG.finditer(prompt))
        rng = random.Random(f"{self.seed}|{agent}|{','.join(m.group(1) for m in found)}")
        first: list[Text | ToolUse] = []
        second: list[Text | ToolUse] = []
        peers = [a for a in self.agents if a != agent] or [agent]
        for m in found:
            msg_id, sender, body = int(m.group(1)), m.group(2), m.group(3)
            chain_match = _CHAIN.search(body)
            chain = chain_match.group(1) if chain_match else f"m{msg_id}"
            if sender == REMINDER:
                first.append(_send(OPERATOR, f"re chain={chain} reminded"))
                continue
            if sender != OPERATOR and sender not in self.agents:
                continue  # a system notice: nothing to answer
            hops_match = _HOPS.search(body)
            hops = int(hops_match.group(1)) if hops_match else 0
            if hops > 0:
                to = sender if sender != OPERATOR else rng.choice(peers)
                first.append(_send(to, f"chain={chain} hops={hops - 1}"))
            else:
                first.append(_send(OPERATOR, f"re chain={chain}"))
            if rng.random() < self.p_remind:
                first.append(
                    ToolUse(
                        "mcp__hyperhive__remind",
                        {
                            "message": f"chain={chain} remind",
                            "delay_seconds": round(rng.uniform(0.3, 3.0), 2),
                        },
                    )
                )
            if rng.random() < self.p_bash:
                first_use, kill = _bash(rng, chain, msg_id)
                first.append(first_use)
                if kill is not None:
                    second.append(kill)
        return [s for s in (first, second) if s]


def _send(to: str, body: str) -> ToolUse:
    return ToolUse("mcp__hyperhive__send", {"to": to, "body": body})


def _bash(rng: random.Random, chain: str, msg_id: int) -> tuple[ToolUse, ToolUse | None]:
    """A bash task of one of five kinds; the kill step for the kind that is killed."""
    kind = rng.choices(
        ["quick", "background", "long", "timeout", "killed"], weights=[4, 3, 1, 1, 1]
    )[0]
    if kind == "quick":
        wait, cmd, extra = 5.0, f"echo {chain}; sleep 0.1", {}
    elif kind == "background":
        wait, cmd, extra = 0.0, f"echo {chain}; sleep {rng.uniform(0.5, 3):.1f}", {}
    elif kind == "long":
        wait, cmd, extra = 0.0, f"echo {chain}; sleep 8", {}
    elif kind == "timeout":
        wait, cmd, extra = 0.0, f"echo {chain}; sleep 60", {"timeout_secs": 1}
    else:
        wait, cmd, extra = 0.0, f"echo {chain}; sleep 60", {"name": f"k{msg_id}"}
    args: dict[str, Any] = {"cmd": f"{cmd} # wait={wait}", "wait_seconds": wait, **extra}
    run = ToolUse("mcp__bash__run", args)
    kill = ToolUse("mcp__bash__kill", {"id": f"k{msg_id}"}) if kind == "killed" else None
    return run, kill
