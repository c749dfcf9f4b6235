"""``matrix``: send, read, rooms, join, leave (the ``matrix`` surface; handlers in
matrix/tools.py).

In no tool group: the whole surface is offered only to agents whose
``agent.toml`` enables ``[matrix]``, and its gate refuses the rest server-side.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import MATRIX_SERVER, NoArgs, Tool, ToolArgs

__all__ = ["MAX_TEXT_CHARS", "TOOLS", "ReadArgs", "RoomArgs", "SendArgs"]

# Matrix caps an event at 64 KiB of JSON; Markdown doubles as HTML in it, so a quarter.
MAX_TEXT_CHARS = 16_000


class SendArgs(ToolArgs):
    to: str = Field(
        description="A room ID (!…, as rooms lists it), an alias (#name:server) or a user ID "
        "(@someone:server: your direct-message room with them, made on first use)."
    )
    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT_CHARS,
        description=f"The message, at most {MAX_TEXT_CHARS} characters.",
    )
    format: Literal["markdown", "plain"] = Field(
        default="markdown", description="markdown: rendered for Matrix clients; plain: as is."
    )


class ReadArgs(ToolArgs):
    room: str = Field(description="A room ID (!…, as rooms lists it) or alias (#name:server).")
    since: str | None = Field(
        default=None,
        description="A marker from a wake or a previous read: the messages after it. Omit: "
        "the latest messages.",
    )
    limit: int = Field(default=20, ge=1, le=100, description="At most this many messages.")


class RoomArgs(ToolArgs):
    room: str = Field(description="A room ID (!…, as rooms lists it) or alias (#name:server).")


TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        MATRIX_SERVER,
        "send",
        "Send a Matrix message to a room or a person (a direct-message room is made on "
        f"first use). Markdown by default; at most {MAX_TEXT_CHARS} characters.",
        SendArgs,
        "the room and event it was sent as",
    ),
    Tool(
        MATRIX_SERVER,
        "read",
        "Read a Matrix room: the messages after a marker (from a wake or a previous "
        "read), or the latest ones; returns the next marker. Marks them read.",
        ReadArgs,
        "the messages (sender: text), oldest first, and the read call for what comes next",
    ),
    Tool(
        MATRIX_SERVER,
        "rooms",
        "Your Matrix ID, the rooms you are in with unread counts, and pending invites.",
        NoArgs,
        "your Matrix ID, each room with its unread and mention counts, pending invitations",
    ),
    Tool(
        MATRIX_SERVER,
        "join",
        "Join a Matrix room (or accept an invitation to it).",
        RoomArgs,
        "the room joined",
    ),
    Tool(
        MATRIX_SERVER,
        "leave",
        "Leave a Matrix room (or decline an invitation).",
        RoomArgs,
        "the room left",
    ),
)
