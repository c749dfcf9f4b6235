"""What the config models share: the strict base and the field types used more than once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Effort", "Port", "Strict"]


class Strict(BaseModel):
    """A table of a config file: an unknown key is refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Port = Annotated[int, Field(ge=0, le=65535)]
"""A TCP port; 0: a free one."""

Effort = Literal["low", "medium", "high", "xhigh", "max"]
"""claude's ``--effort`` levels."""
