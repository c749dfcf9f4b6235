"""Refusals of the Matrix side, each naming the rule that refused.

``HiveError`` subclasses: an MCP tool returns their message as a result the
model can read, and the CLI prints it.
"""

from __future__ import annotations

from hyperhive.errors import HiveError, Unavailable

__all__ = [
    "MatrixError",
    "MatrixNotConfigured",
    "MatrixTokenRejected",
    "MatrixUnreachable",
]


class MatrixError(HiveError):
    """The homeserver answered, but not with what the hive asked for."""

    code = "matrix_error"


class MatrixNotConfigured(Unavailable):
    code = "matrix_not_configured"


class MatrixUnreachable(Unavailable):
    code = "matrix_unreachable"


class MatrixTokenRejected(MatrixError):
    """The homeserver no longer knows the agent's access token (logged out, or reset)."""

    code = "matrix_token_rejected"
