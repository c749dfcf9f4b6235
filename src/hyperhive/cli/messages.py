"""hivectl: The operator's mailbox and questions."""

from __future__ import annotations

import sys
import time

import click

from hyperhive.cli.base import _Ctx, agent_argument, main, pass_ctx
from hyperhive.cli.follow import follow
from hyperhive.cli.output import emit, emit_line, json_mode, json_output
from hyperhive.cli.shapes import SendResult
from hyperhive.errors import NotFound, TimedOut
from hyperhive.protocol import (
    FOLLOW_WAIT_MAX,
    Answered,
    Message,
    OpAnswerReq,
    OpAwaitReplyReq,
    OpInboxReq,
    OpQuestionsReq,
    OpSendReq,
    Question,
    Sent,
)

# How long `send --wait` waits by default: a turn that works for minutes still answers.
REPLY_WITHIN_S = 600.0

# ---- messages ---------------------------------------------------------------


@main.command()
@agent_argument("to")
@click.argument("body")
@click.option("--reply-to", type=int, default=None, help="Message id this answers.")
@click.option(
    "--wait",
    "wait_reply",
    is_flag=True,
    help="Wait for the agent's reply to this message and print it (exit 6 if none comes "
    "within --timeout).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=REPLY_WITHIN_S,
    show_default=True,
    help="Seconds --wait waits for the reply.",
)
@json_output(SendResult)
@pass_ctx
def send(
    obj: _Ctx,
    to: str,
    body: str,
    reply_to: int | None,
    wait_reply: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Send BODY to agent TO as the operator; with --wait, print its reply.

    --wait is how a shell script or CI job talks to an agent: the reply's text
    alone goes to stdout. It is refused at once (exit 5) when the agent can
    take no turn to reply (over budget, stopped).
    """
    sent = obj.call(
        OpSendReq(cmd="send", to=to, body=body, in_reply_to=reply_to, expect_reply=wait_reply)
    )
    reply = _await_reply(obj, sent, timeout) if wait_reply else None

    def human(r: SendResult) -> None:
        if r.reply is None:
            click.echo(f"sent #{r.id} to {r.to}")
        else:
            click.echo(r.reply.body)

    emit(SendResult(id=sent.id, to=sent.to, reply=reply), human)


def _await_reply(obj: _Ctx, sent: Sent, timeout: float) -> Message:
    if sys.stderr.isatty() and not json_mode():
        click.echo(f"sent #{sent.id} to {sent.to}; waiting for its reply…", err=True)
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        wait = min(left, FOLLOW_WAIT_MAX)
        got = obj.call(OpAwaitReplyReq(cmd="await_reply", message_id=sent.id, wait=wait), wait + 30)
        if got.reply is not None:
            return got.reply
    raise TimedOut(
        f"no reply to #{sent.id} from {sent.to} within {timeout:g}s; it was delivered, and "
        f"a late reply lands in the inbox (`hivectl inbox`)"
    )


@main.command()
@click.argument("message_id", type=int)
@click.argument("body")
@json_output(Sent)
@pass_ctx
def reply(obj: _Ctx, message_id: int, body: str, as_json: bool) -> None:
    """Reply to message MESSAGE_ID in the operator's inbox."""
    inbox = obj.call(OpInboxReq(cmd="inbox", limit=1000))
    match = [m for m in inbox if m.id == message_id]
    if not match:
        raise NotFound(f"no message #{message_id} in the operator's inbox")
    sender = match[0].sender
    result = obj.call(OpSendReq(cmd="send", to=sender, body=body, in_reply_to=message_id))
    emit(result, lambda r: click.echo(f"sent #{r.id} to {r.to}"))


def _message_line(m: Message) -> str:
    reply_to = f" re #{m.in_reply_to}" if m.in_reply_to else ""
    return f"#{m.id} from {m.sender}{reply_to}: {m.body}"


@main.command()
@click.option("--unread", is_flag=True, help="Only messages not yet marked read.")
@click.option("--limit", default=50, show_default=True)
@click.option(
    "-f", "--follow", "keep", is_flag=True, help="Keep printing new messages (Ctrl-C ends)."
)
@json_output(list[Message])
@pass_ctx
def inbox(obj: _Ctx, unread: bool, limit: int, keep: bool, as_json: bool) -> None:
    """Messages addressed to the operator, oldest first; -f follows new ones as they come."""
    data = obj.call(OpInboxReq(cmd="inbox", limit=limit, unread_only=unread))

    def human(rows: list[Message]) -> None:
        if not rows and not keep:
            click.echo("(inbox empty)")
        for m in rows:
            click.echo(_message_line(m))

    emit(data, human)
    if not keep:
        return
    after = max((m.id for m in data), default=0)
    if not data:  # an empty or filtered first answer: go on from the newest message there is
        newest = obj.call(OpInboxReq(cmd="inbox", limit=1))
        after = newest[-1].id if newest else 0

    async def step(after: int) -> int:
        req = OpInboxReq(
            cmd="inbox", limit=limit, unread_only=unread, after=after, wait=FOLLOW_WAIT_MAX
        )
        new = await obj.acall(req, FOLLOW_WAIT_MAX + 30)
        if new:
            if json_mode():
                emit_line(new)
            else:
                for m in new:
                    click.echo(_message_line(m))
        return max((m.id for m in new), default=after)

    follow("the inbox", after, step)


# ---- questions ------------------------------------------------------------------


@main.group()
def questions() -> None:
    """Questions agents asked the operator."""


@questions.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include answered and cancelled ones.")
@json_output(list[Question])
@pass_ctx
def questions_list(obj: _Ctx, show_all: bool, as_json: bool) -> None:
    """Open questions (oldest first)."""
    data = obj.call(OpQuestionsReq(cmd="questions", open_only=not show_all))

    def human(rows: list[Question]) -> None:
        if not rows:
            click.echo("(no open questions)")
        for q in rows:
            click.echo(f"#{q.id} [{q.state}] {q.asker}: {q.question}")

    emit(data, human)


@questions.command("answer")
@click.argument("question_id", type=int)
@click.argument("text")
@json_output(Answered)
@pass_ctx
def questions_answer(obj: _Ctx, question_id: int, text: str, as_json: bool) -> None:
    """Answer question QUESTION_ID; the asker gets TEXT as a reply."""
    result = obj.call(OpAnswerReq(cmd="answer_question", question_id=question_id, answer=text))
    emit(
        result,
        lambda r: click.echo(f"answered #{question_id}; sent to {r.asker} as #{r.message_id}"),
    )
