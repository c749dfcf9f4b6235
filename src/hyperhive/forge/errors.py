"""Refusals of the forge, each naming the rule that refused.

They are ``HiveError`` subclasses, so an MCP tool returns their message as a
result the model can read, and the CLI prints it.
"""

from __future__ import annotations

from hyperhive.errors import Conflict, HiveError, InvalidRequest, PermissionDenied, Unavailable

__all__ = [
    "ForgeError",
    "ForgeNotConfigured",
    "ForgeTokenRejected",
    "ForgeUnreachable",
    "InvalidRepoName",
    "RepoNameTaken",
]


class ForgeError(HiveError):
    """The forge answered, but not with what the hive asked for."""

    code = "forge_error"


class ForgeNotConfigured(Unavailable):
    code = "forge_not_configured"


class ForgeUnreachable(Unavailable):
    code = "forge_unreachable"


class ForgeTokenRejected(PermissionDenied):
    code = "forge_token_rejected"


class RepoNameTaken(Conflict):
    code = "repo_name_taken"


class InvalidRepoName(InvalidRequest):
    code = "invalid_repo_name"
