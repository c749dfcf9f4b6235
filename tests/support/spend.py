"""A run's spend report as the harness sends it, for tests that play the harness's side.

The harness reports what claude said the run's *session* had cost so far; the
coordinator counts the difference to the session's previous report. A report
of a session of its own (the default) therefore counts its figures whole.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["MODEL", "reported"]

MODEL = "claude-sonnet-4-5-20250929"


def reported(
    usd: float = 0.0,
    tokens: int = 0,
    kind: str = "turn",
    *,
    session: str | None = None,
    run_id: str | None = None,
    output_tokens: int = 0,
) -> dict[str, Any]:
    """A ``RunSpend`` as JSON: its session (a new one unless named) has cost ``usd``
    and ``tokens`` input tokens (and ``output_tokens``) so far."""
    return {
        "run_id": run_id or uuid.uuid4().hex,
        "kind": kind,
        "session_id": session or uuid.uuid4().hex,
        "session_totals": {
            MODEL: {"cost_usd": usd, "input_tokens": tokens, "output_tokens": output_tokens}
        },
    }
