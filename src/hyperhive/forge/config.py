"""The hive's forge: ``[forge]`` in ``hive.toml`` and the admin token it points at.

Forgejo and Gitea speak the same v1 REST API; the hive needs an admin token
for it (to create agents' users, their repositories and protections). The
token lives in a file of its own, never in ``hive.toml``, and that file must
be private to the hive's owner: a token anyone on the machine could read
would hand every agent the forge. Only the coordinator reads it (hosts hold
no hive-wide credentials), so an agent host's ``hive.toml`` needs
``url`` only; agents' hosts get each agent's own token from the coordinator.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hyperhive.errors import ConfigError
from hyperhive.secretfile import read_secret_file

__all__ = ["ForgeConfig", "read_admin_token"]


class ForgeConfig(BaseModel):
    """``[forge]``: where the forge is and how the hive administers it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        description="Base URL of the Forgejo/Gitea instance, e.g. https://git.example."
    )
    admin_token_file: Path | None = Field(
        default=None,
        description="File holding an admin token (mode 0600); read by the coordinator only.",
    )
    org: str = Field(
        default="agents", description="The organisation where agents' repositories live."
    )
    operator_team: str = Field(
        default="Owners",
        description="The org team whose approval a merge to a default branch needs.",
    )
    user_prefix: str = Field(
        default="",
        description="Prefix of agents' forge user names, e.g. agent- if agent names clash "
        "with people's.",
    )
    email_domain: str = Field(
        default="hyperhive.invalid", description="Domain of agents' forge users' e-mail addresses."
    )
    poll_seconds: float = Field(
        default=30.0, gt=0, description="How often an agent's notifications are polled."
    )
    poll_backoff_max: float = Field(
        default=300.0,
        gt=0,
        description="The longest wait between polls while the forge is unreachable.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"https?://[^/]", v):
            raise ValueError("url must start with http:// or https:// and name a host")
        return v.rstrip("/")

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v1"

    def username(self, agent: str) -> str:
        """The forge user an agent acts as."""
        return f"{self.user_prefix}{agent}"


def read_admin_token(config: ForgeConfig) -> str:
    """The admin token, refused unless its file is a regular file only its owner can read."""
    if config.admin_token_file is None:
        raise ConfigError(
            "[forge] admin_token_file is not set in the coordinator's hive.toml: the "
            "coordinator administers the forge (agents' users, tokens, repositories) and needs "
            "a file (mode 0600) holding an admin token of it"
        )
    return read_secret_file(
        config.admin_token_file, "[forge] admin_token_file", "an admin token of the forge"
    )
