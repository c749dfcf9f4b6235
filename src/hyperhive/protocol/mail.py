"""The operator's mail on its socket: sending, its inbox and outbox, an agent's
mailbox, and the questions agents ask it (``ask_operator``) with their answers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hyperhive.protocol.base import Acked, Message, Req, RowId, Sent, _Out
from hyperhive.protocol.follow import FOLLOW_WAIT_MAX

__all__ = [
    "Answered",
    "Mailbox",
    "OpAckReq",
    "OpAnswerReq",
    "OpInboxReq",
    "OpMessagesReq",
    "OpOutboxReq",
    "OpQuestionsReq",
    "OpSendReq",
    "Question",
]


class Question(_Out):
    id: int
    asker: str
    question: str
    message_id: int | None
    state: str
    answer: str | None
    created_at: float
    answered_at: float | None


class Answered(_Out):
    asker: str
    message_id: int


class Mailbox(_Out):
    inbox: list[Message]
    outbox: list[Message]


class OpSendReq(Req[Sent]):
    cmd: Literal["send"]
    to: str
    body: str
    in_reply_to: RowId | None = None
    # The operator will wait for the reply (``send --wait``): refused, before anything is
    # sent, when the recipient takes no turn to write one (a spend limit holds it, or the
    # operator stopped it).
    expect_reply: bool = False


class OpInboxReq(Req[list[Message]]):
    """The newest ``limit`` messages to the operator, oldest first; with ``after`` only
    those with a greater id, waiting up to ``wait`` seconds for one (``inbox --follow``)."""

    cmd: Literal["inbox"]
    limit: int = Field(default=50, ge=1, le=1000)
    unread_only: bool = False
    after: RowId | None = None
    wait: float = Field(default=0.0, ge=0.0, le=FOLLOW_WAIT_MAX)


class OpOutboxReq(Req[list[Message]]):
    """Messages the operator sent (newest ``limit``, oldest first)."""

    cmd: Literal["outbox"]
    limit: int = Field(default=50, ge=1, le=1000)


class OpAckReq(Req[Acked]):
    cmd: Literal["ack_until"]
    up_to: RowId


class OpMessagesReq(Req[Mailbox]):
    """An agent's inbox and outbox, for the operator."""

    cmd: Literal["messages"]
    agent: str
    limit: int = Field(default=50, ge=1, le=1000)


class OpQuestionsReq(Req[list[Question]]):
    cmd: Literal["questions"]
    open_only: bool = True


class OpAnswerReq(Req[Answered]):
    cmd: Literal["answer_question"]
    question_id: RowId
    answer: str
