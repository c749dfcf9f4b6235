"""``messaging``: send, recv, ack_until, ask_operator (``hyperhive`` surface)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hyperhive.tools.decl import HYPERHIVE_SERVER, Tool, ToolArgs
from hyperhive.tools.groups import ToolGroup
from hyperhive.wirebase import Acked, Message, Req, RowId, Sent, _Out

__all__ = [
    "TOOLS",
    "AckArgs",
    "AckUntilReq",
    "AskArgs",
    "AskOperatorReq",
    "Asked",
    "RecvArgs",
    "RecvReq",
    "SendArgs",
    "SendReq",
]


class SendArgs(ToolArgs):
    to: str = Field(description='A name, "operator" or "<parent>" (for a root, the operator).')
    body: str
    in_reply_to: int | None = Field(default=None, description="The N of the [msg #N] you answer.")


class SendReq(SendArgs, Req[Sent]):
    cmd: Literal["send"]
    in_reply_to: RowId | None = None


class RecvArgs(ToolArgs):
    max: int = Field(default=1, ge=1, description="1-5.")


class RecvReq(RecvArgs, Req[list[Message]]):
    cmd: Literal["recv"]
    max: int = Field(default=1, ge=1, le=2**31)


class AckArgs(ToolArgs):
    up_to: int = Field(ge=0, description="The highest N you handled.")


class AckUntilReq(AckArgs, Req[Acked]):
    cmd: Literal["ack_until"]
    up_to: RowId


class AskArgs(ToolArgs):
    question: str = Field(description="The decision, and what the operator must know.")


class Asked(_Out):
    question_id: int
    message_id: int


class AskOperatorReq(AskArgs, Req[Asked]):
    cmd: Literal["ask_operator"]


def _recv(a: RecvArgs, rows: list[Message]) -> str:
    return "\n".join(r.render() for r in rows) if rows else "inbox empty"


def _asked(a: AskArgs, r: Asked) -> str:
    return (
        f"question #{r.question_id} sent to the operator as [msg #{r.message_id}]; "
        "the answer arrives in your inbox in reply to it"
    )


_M = ToolGroup.MESSAGING

TOOLS: tuple[Tool[Any, Any], ...] = (
    Tool(
        HYPERHIVE_SERVER,
        "send",
        "Message an agent, the operator or your parent.",
        SendArgs,
        "sent [msg #N] to <recipient>",
        _M,
        wire=SendReq,
        render=lambda a, r: f"sent [msg #{r.id}] to {r.to}",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "recv",
        "Read mail that did not come with your wake (never blocks); ack what you handled "
        "with ack_until.",
        RecvArgs,
        "one line per message, [msg #N] from X (re #M): body; or: inbox empty",
        _M,
        wire=RecvReq,
        render=_recv,
    ),
    Tool(
        HYPERHIVE_SERVER,
        "ack_until",
        "Mark your mail up to #N handled, never redelivered (mail that woke you is acked "
        "with the turn).",
        AckArgs,
        "acked K message(s) up to #N",
        _M,
        wire=AckUntilReq,
        render=lambda a, r: f"acked {r.acked} message(s) up to #{a.up_to}",
    ),
    Tool(
        HYPERHIVE_SERVER,
        "ask_operator",
        "Ask the operator to decide what blocks you: an open question, answered by a "
        "reply (reports go by send).",
        AskArgs,
        "the question's id and the [msg #N] its answer will reply to",
        _M,
        wire=AskOperatorReq,
        render=_asked,
    ),
)
