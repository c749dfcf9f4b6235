"""``[matrix]`` in ``hive.toml`` (the homeserver) and in ``agent.toml`` (an agent's identity).

The hive administers the homeserver with either its registration shared
secret or an admin access token, each in a file of its own that only the
hive's user can read (never in ``hive.toml``, which agents' users may read).
Only the coordinator reads it: an agent host's ``hive.toml`` may
name neither, and gets each agent's own access token from the coordinator.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hyperhive.errors import ConfigError
from hyperhive.matrix.ids import ROOM_FORMS, is_room_ref
from hyperhive.secretfile import read_secret_file

__all__ = [
    "USER_ID_RE",
    "AgentMatrixConfig",
    "MatrixConfig",
    "read_admin_token",
    "read_shared_secret",
]

USER_ID_RE = re.compile(r"@[a-z0-9._=/+-]+:[A-Za-z0-9.:-]+")


class MatrixConfig(BaseModel):
    """``[matrix]``: the homeserver agents get accounts on, and how the hive administers it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    homeserver: str = Field(description="Client-server API base URL, e.g. https://matrix.example.")
    server_name: str | None = Field(
        default=None,
        description="The server name in Matrix IDs (default: the homeserver URL's host).",
    )
    registration_shared_secret_file: Path | None = Field(
        default=None, description="File (mode 0600) holding Synapse's registration_shared_secret."
    )
    admin_token_file: Path | None = Field(
        default=None, description="File (mode 0600) holding a server admin's access token."
    )
    operator: str | None = Field(
        default=None, description="The operator's own Matrix ID, e.g. @me:matrix.example."
    )
    hive: str = Field(
        default="hive",
        pattern=r"^[a-z0-9][a-z0-9._-]{0,30}$",
        description="Prefix of agents' IDs: @<hive>-<agent>:<server_name>.",
    )
    sync_timeout_seconds: float = Field(
        default=30.0, gt=0, le=300, description="The /sync long-poll's timeout."
    )
    backoff_max: float = Field(
        default=60.0,
        gt=0,
        description="The longest wait between retries while the homeserver is unreachable.",
    )

    @field_validator("homeserver")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"https?://[^/]", v):
            raise ValueError("homeserver must start with http:// or https:// and name a host")
        return v.rstrip("/")

    @field_validator("operator")
    @classmethod
    def _user_id(cls, v: str | None) -> str | None:
        if v is not None and not USER_ID_RE.fullmatch(v):
            raise ValueError(f"operator {v!r} is not a Matrix user ID like @me:example.org")
        return v

    @model_validator(mode="after")
    def _one_credential(self) -> MatrixConfig:
        # Neither is an agent host's hive.toml (it holds no admin credential); the
        # coordinator refuses that when it first needs one (``require_credential``).
        if self.registration_shared_secret_file and self.admin_token_file:
            raise ValueError(
                "set only one of registration_shared_secret_file (Synapse's "
                "registration_shared_secret) or admin_token_file (a server admin's token)"
            )
        return self

    def require_credential(self) -> None:
        """Refuse, with the fix, a coordinator whose ``[matrix]`` names no admin credential."""
        if self.registration_shared_secret_file is None and self.admin_token_file is None:
            raise ConfigError(
                "[matrix] in the coordinator's hive.toml names no credential: set exactly one "
                "of registration_shared_secret_file (Synapse's registration_shared_secret) or "
                "admin_token_file (a server admin's token); the coordinator makes agents' "
                "accounts with it"
            )

    @property
    def domain(self) -> str:
        return self.server_name or (urlsplit(self.homeserver).hostname or "localhost")

    def localpart(self, agent: str) -> str:
        return f"{self.hive}-{agent}"

    def user_id(self, agent: str) -> str:
        """The Matrix ID an agent acts as."""
        return f"@{self.localpart(agent)}:{self.domain}"

    @property
    def admin_localpart(self) -> str:
        """The hive's own admin account (shared-secret mode): deactivates destroyed agents."""
        return f"{self.hive}-admin"


class AgentMatrixConfig(BaseModel):
    """``[matrix]`` in ``agent.toml``: whether the agent has a Matrix identity, and its rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(
        default=False,
        description="Give the agent an account on the hive's homeserver, its mcp__matrix__* "
        "tools and wakes.",
    )
    wake_rooms: list[str] = Field(
        default_factory=list,
        description="Rooms (IDs or aliases) where every message wakes the agent, not only "
        "mentions.",
    )
    allowed_inviters: list[str] = Field(
        default_factory=list,
        description="Matrix IDs whose invites are accepted (the operator's always are).",
    )

    @field_validator("wake_rooms")
    @classmethod
    def _rooms(cls, v: list[str]) -> list[str]:
        for room in v:
            if not is_room_ref(room):
                raise ValueError(f"wake_rooms: {room!r} is not {ROOM_FORMS}")
        return v

    @field_validator("allowed_inviters")
    @classmethod
    def _inviters(cls, v: list[str]) -> list[str]:
        for user in v:
            if not USER_ID_RE.fullmatch(user):
                raise ValueError(f"allowed_inviters: {user!r} is not a Matrix user ID")
        return v


def read_shared_secret(config: MatrixConfig) -> str | None:
    path = config.registration_shared_secret_file
    if path is None:
        return None
    return read_secret_file(
        path, "[matrix] registration_shared_secret_file", "the homeserver's shared secret"
    )


def read_admin_token(config: MatrixConfig) -> str | None:
    path = config.admin_token_file
    if path is None:
        return None
    return read_secret_file(path, "[matrix] admin_token_file", "a server admin's access token")
