"""Subagent records and the pure rules around them.

Pure module: no I/O. What a subagent is (:class:`SubagentRecord`, as
persisted in ``subagents.json``), the checks ``start`` arguments pass before
anything is spawned, the todo keys and bodies the parent receives, and the
status text the model reads. :mod:`hyperhive.subagent.session` runs the
processes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from hyperhive.errors import InvalidRequest, LimitExceeded

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_PROMPT_BYTES",
    "Signal",
    "SubagentRecord",
    "SubagentStatus",
    "SubagentTable",
    "check_model",
    "check_prompt",
    "inside",
    "keep_output",
    "preview",
    "render_status",
    "result_todo",
    "signal_todo",
    "todo_key",
]

SubagentStatus = Literal["running", "finished", "interrupted"]
Signal = Literal["result", "goal_reached", "need_help"]

MAX_OUTPUT_CHARS = 8000  # the last output kept per subagent (status shows it)
MAX_PROMPT_BYTES = 1 << 20
TODO_PREVIEW = 1500

_MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\[\]-]{0,99}")


class SubagentRecord(BaseModel):
    """One subagent: its last run's state, and what resumes its session."""

    model_config = ConfigDict(extra="ignore")

    id: str
    task: str  # a preview of the first prompt, for listings and todos
    status: SubagentStatus = "running"
    model: str | None = None
    cwd: str
    prompt_file: str | None = None
    session_id: str | None = None
    runs: int = 0
    started_at: float  # of the current (or last) run
    waiting_since: float | None = None  # queued for one of the host's claude slots
    ended_at: float | None = None
    exit_code: int | None = None
    last_output: str = ""
    error: str | None = None
    cost_usd: float = 0.0  # its runs' own costs, as the coordinator counted them


class SubagentTable(BaseModel):
    version: Literal[1] = 1
    subagents: list[SubagentRecord] = []


def todo_key(subagent_id: str, kind: Signal) -> str:
    """One todo per subagent and kind: a later one of the same kind replaces it."""
    return subagent_id if kind == "result" else f"{subagent_id}:{kind}"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview(prompt: str) -> str:
    return _clip(" ".join(prompt.split()), 120)


def keep_output(text: str) -> str:
    """The tail of an output worth keeping (the end of a report is its conclusion)."""
    return text if len(text) <= MAX_OUTPUT_CHARS else "…" + text[-(MAX_OUTPUT_CHARS - 1) :]


def _took(rec: SubagentRecord, now: float) -> float:
    return max(0.0, (rec.ended_at if rec.ended_at is not None else now) - rec.started_at)


def result_todo(rec: SubagentRecord, now: float) -> str:
    """The todo body when a run ends (or was cut off by a host restart)."""
    head = f"subagent {rec.id} {rec.status} after {_took(rec, now):.1f}s: {rec.task}"
    lines = [head]
    if rec.error:
        lines.append(f"error: {rec.error}")
    if rec.last_output:
        lines.append("last output: " + _clip(rec.last_output, TODO_PREVIEW))
    lines.append(
        f"status({rec.id!r}) shows all of it; continue({rec.id!r}, prompt) resumes its session"
    )
    return "\n".join(lines)


def signal_todo(subagent_id: str, kind: Signal, text: str) -> str:
    if kind == "goal_reached":
        return f"subagent {subagent_id} reports its goal reached: {text}"
    return (
        f"subagent {subagent_id} needs help: {text}\n"
        f"answer with continue({subagent_id!r}, <your answer>)"
    )


def render_status(rec: SubagentRecord, now: float) -> str:
    """A subagent's status as the model reads it."""
    took = _took(rec, now)
    if rec.status == "running" and rec.waiting_since is not None:
        state = f"waiting for a free claude slot on the host for {took:.1f}s"
    elif rec.status == "running":
        state = f"running for {took:.1f}s"
    else:
        state = f"{rec.status} after {took:.1f}s"
    head = f"subagent {rec.id}: {state} (run {rec.runs})"
    if rec.exit_code not in (None, 0):
        head += f", claude exited {rec.exit_code}"
    lines = [
        head,
        f"task: {rec.task}",
        f"model: {rec.model or 'default'} · dir: {rec.cwd}",
    ]
    if rec.error:
        lines.append(f"error: {rec.error}")
    lines.append("--- last output ---")
    lines.append(rec.last_output.strip() or "(none yet)")
    return "\n".join(lines)


def check_prompt(prompt: str) -> str:
    if not prompt.strip():
        raise InvalidRequest("prompt is empty: say what the subagent should do")
    if len(prompt.encode("utf-8")) > MAX_PROMPT_BYTES:
        raise LimitExceeded(
            f"prompt is over {MAX_PROMPT_BYTES >> 20} MiB: write it to a file and pass prompt_file"
        )
    return prompt


def check_model(model: str | None) -> str | None:
    """A model name or alias; refusing anything that could read as a flag."""
    if model is None:
        return None
    if not _MODEL_RE.fullmatch(model):
        raise InvalidRequest(
            f"model {model!r} is not a model name or alias (e.g. haiku, sonnet, claude-…)"
        )
    return model


def inside(path: Path, root: Path) -> bool:
    """Whether resolved ``path`` is ``root`` or below it (both already resolved)."""
    return path == root or root in path.parents
