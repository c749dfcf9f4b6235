"""hivectl: The operator's mailbox and questions."""

from __future__ import annotations

import click

from hyperhive.cli.base import _Ctx, _emit, json_option, main, pass_ctx
from hyperhive.protocol import (
    Message,
    OpAnswerReq,
    OpInboxReq,
    OpQuestionsReq,
    OpSendReq,
    Question,
)

# ---- messages ---------------------------------------------------------------


@main.command()
@click.argument("to")
@click.argument("body")
@click.option("--reply-to", type=int, default=None, help="Message id this answers.")
@pass_ctx
def send(obj: _Ctx, to: str, body: str, reply_to: int | None) -> None:
    """Send BODY to agent TO as the operator."""
    result = obj.call(OpSendReq(cmd="send", to=to, body=body, in_reply_to=reply_to))
    click.echo(f"sent #{result.id} to {result.to}")


@main.command()
@click.argument("message_id", type=int)
@click.argument("body")
@pass_ctx
def reply(obj: _Ctx, message_id: int, body: str) -> None:
    """Reply to message MESSAGE_ID in the operator's inbox."""
    inbox = obj.call(OpInboxReq(cmd="inbox", limit=1000))
    match = [m for m in inbox if m.id == message_id]
    if not match:
        raise click.ClickException(f"no message #{message_id} in the operator's inbox")
    sender = match[0].sender
    result = obj.call(OpSendReq(cmd="send", to=sender, body=body, in_reply_to=message_id))
    click.echo(f"sent #{result.id} to {sender}")


@main.command()
@click.option("--unread", is_flag=True, help="Only messages not yet marked read.")
@click.option("--limit", default=50, show_default=True)
@json_option
@pass_ctx
def inbox(obj: _Ctx, unread: bool, limit: int, as_json: bool) -> None:
    """Messages addressed to the operator."""
    data = obj.call(OpInboxReq(cmd="inbox", limit=limit, unread_only=unread))

    def human(rows: list[Message]) -> None:
        if not rows:
            click.echo("(inbox empty)")
        for m in rows:
            reply_to = f" re #{m.in_reply_to}" if m.in_reply_to else ""
            click.echo(f"#{m.id} from {m.sender}{reply_to}: {m.body}")

    _emit(data, as_json, human)


# ---- questions ------------------------------------------------------------------


@main.group()
def questions() -> None:
    """Questions agents asked the operator."""


@questions.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include answered and cancelled ones.")
@json_option
@pass_ctx
def questions_list(obj: _Ctx, show_all: bool, as_json: bool) -> None:
    """Open questions (oldest first)."""
    data = obj.call(OpQuestionsReq(cmd="questions", open_only=not show_all))

    def human(rows: list[Question]) -> None:
        if not rows:
            click.echo("(no open questions)")
        for q in rows:
            click.echo(f"#{q.id} [{q.state}] {q.asker}: {q.question}")

    _emit(data, as_json, human)


@questions.command("answer")
@click.argument("question_id", type=int)
@click.argument("text")
@pass_ctx
def questions_answer(obj: _Ctx, question_id: int, text: str) -> None:
    """Answer question QUESTION_ID; the asker gets TEXT as a reply."""
    result = obj.call(OpAnswerReq(cmd="answer_question", question_id=question_id, answer=text))
    click.echo(f"answered #{question_id}; sent to {result.asker} as #{result.message_id}")
