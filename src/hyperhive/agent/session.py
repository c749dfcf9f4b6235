"""The claude session an agent's turns resume, kept across its restarts.

Its id is saved under ``state/harness/session.json`` (written atomically, so
a crash leaves the old id or the new one) and read back when the agent
starts: the next turn resumes the conversation where the last one left it.
"""

from __future__ import annotations

import json
from pathlib import Path

from hyperhive.agent.active import ActiveAgent
from hyperhive.agent.spec import AgentSpec
from hyperhive.agent.turnreport import TurnReport
from hyperhive.safefs import atomic_write_beneath

__all__ = ["load_session", "next_session", "save_session"]


def _session_file(spec: AgentSpec) -> Path:
    return spec.state_dir / "harness" / "session.json"


def load_session(spec: AgentSpec) -> str | None:
    try:
        data = json.loads(_session_file(spec).read_text())
    except (OSError, ValueError):
        return None
    value = data.get("session_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def save_session(spec: AgentSpec, session_id: str | None) -> None:
    data = (json.dumps({"session_id": session_id}) + "\n").encode()
    atomic_write_beneath(spec.state_dir, _session_file(spec), data, 0o600)


def next_session(agent: ActiveAgent, current: str | None, report: TurnReport) -> str | None:
    """Keep the conversation: the turn's session id; drop one claude cannot resume."""
    new = report.session_id
    if new is None and report.outcome != "error":
        new = current  # e.g. an auth failure: the conversation itself is fine
    if new != current:
        save_session(agent.spec, new)
    agent.bus.set_session(new)
    agent.bus.set_context_usage(report.context_usage)
    return new
