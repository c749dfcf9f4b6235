"""``hivectl``: the operator's command line.

Every read command takes ``--json`` (stable shapes, documented in the
README); errors are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click
from pydantic import BaseModel, JsonValue

from hyperhive import __version__
from hyperhive.client import call_once
from hyperhive.config import (
    AgentConfig,
    HivePaths,
    load_agent_config,
    load_hive_config,
    resolve_home,
)
from hyperhive.errors import HiveError
from hyperhive.permissions import (
    Capability,
    ToolGroup,
    allowed_tools_arg,
    builtin_tools_arg,
)
from hyperhive.protocol import (
    OpAgentsReq,
    OpAnswerReq,
    OpInboxReq,
    OpQuestionsReq,
    OpSendReq,
    OpSetParentReq,
    OpSpawnReq,
    OpStatusReq,
)

__all__ = ["main"]


class _Ctx:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.paths = HivePaths(home)

    def call(self, request: BaseModel) -> JsonValue:
        return anyio.run(call_once, self.paths.host_sock, request)


pass_ctx = click.make_pass_decorator(_Ctx)


class _Group(click.Group):
    """Turns a ``HiveError`` into one clear line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HiveError as exc:
            click.echo(f"hivectl: {exc.message}", err=True)
            sys.exit(1)


def _emit(data: JsonValue, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        human(data)


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hivectl")
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="The hive's home (default: $HIVE_HOME or ~/.local/share/hyperhive).",
)
@click.pass_context
def main(ctx: click.Context, home: Path | None) -> None:
    """Run and steer a hive of sandboxed Claude Code agents."""
    ctx.obj = _Ctx(resolve_home(home))


def _setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def _until_signalled(run: Callable[..., Any]) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logging.getLogger("hyperhive").info("%s: stopping", signal.Signals(signum).name)
                break
        tg.cancel_scope.cancel()


@main.command()
@pass_ctx
def serve(obj: _Ctx) -> None:
    """Run the coordinator in the foreground (logs to stderr)."""
    from hyperhive.core.coordinator import Coordinator

    _setup_logging()
    coordinator = Coordinator(obj.paths, load_hive_config(obj.home))
    anyio.run(_until_signalled, coordinator.run)


@main.command()
@pass_ctx
def host(obj: _Ctx) -> None:
    """Run the agent host in the foreground: every active agent of this machine.

    SIGTERM/SIGINT stops agents gracefully (their current turn finishes);
    a second signal kills their claude processes at once.
    """
    from hyperhive.agent.host import AgentHost

    _setup_logging()
    agent_host = AgentHost(obj.paths, load_hive_config(obj.home))

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(agent_host.run)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break

                async def second_signal_kills() -> None:
                    async for _ in signals:
                        await agent_host.stop_all(graceful=False)
                        return

                async with anyio.create_task_group() as stopping:
                    stopping.start_soon(second_signal_kills)
                    await agent_host.stop_all()
                    stopping.cancel_scope.cancel()
            tg.cancel_scope.cancel()

    anyio.run(run)


@main.command()
@json_option
@pass_ctx
def status(obj: _Ctx, as_json: bool) -> None:
    """Show the coordinator's view of the hive."""
    data = obj.call(OpStatusReq(cmd="status"))

    def human(d: dict[str, Any]) -> None:
        for key, value in d.items():
            click.echo(f"{key:15} {value}")

    _emit(data, as_json, human)


@main.command("tools")
@click.option("--groups", default="", help="Comma-separated tool groups (blank: the default).")
@click.option("--caps", default="", help="Comma-separated capabilities.")
def tools_cmd(groups: str, caps: str) -> None:
    """Show the exact --tools and --allowedTools a set of groups resolves to."""
    resolved = ToolGroup.parse_list(groups)
    capabilities = Capability.parse_list(caps)
    click.echo(f"groups:         {','.join(resolved)}")
    click.echo(f"--tools         {builtin_tools_arg(resolved)}")
    click.echo(f"--allowedTools  {allowed_tools_arg(resolved, capabilities)}")


# ---- messages ---------------------------------------------------------------


@main.command()
@click.argument("to")
@click.argument("body")
@click.option("--reply-to", type=int, default=None, help="Message id this answers.")
@pass_ctx
def send(obj: _Ctx, to: str, body: str, reply_to: int | None) -> None:
    """Send BODY to agent TO as the operator."""
    result = obj.call(OpSendReq(cmd="send", to=to, body=body, in_reply_to=reply_to))
    assert isinstance(result, dict)
    click.echo(f"sent #{result['id']} to {result['to']}")


@main.command()
@click.argument("message_id", type=int)
@click.argument("body")
@pass_ctx
def reply(obj: _Ctx, message_id: int, body: str) -> None:
    """Reply to message MESSAGE_ID in the operator's inbox."""
    inbox = obj.call(OpInboxReq(cmd="inbox", limit=1000))
    assert isinstance(inbox, list)
    match = [m for m in inbox if isinstance(m, dict) and m.get("id") == message_id]
    if not match:
        raise click.ClickException(f"no message #{message_id} in the operator's inbox")
    sender = str(match[0]["from"])
    result = obj.call(OpSendReq(cmd="send", to=sender, body=body, in_reply_to=message_id))
    assert isinstance(result, dict)
    click.echo(f"sent #{result['id']} to {sender}")


@main.command()
@click.option("--unread", is_flag=True, help="Only messages not yet marked read.")
@click.option("--limit", default=50, show_default=True)
@json_option
@pass_ctx
def inbox(obj: _Ctx, unread: bool, limit: int, as_json: bool) -> None:
    """Messages addressed to the operator."""
    data = obj.call(OpInboxReq(cmd="inbox", limit=limit, unread_only=unread))

    def human(rows: list[dict[str, Any]]) -> None:
        if not rows:
            click.echo("(inbox empty)")
        for m in rows:
            reply_to = f" re #{m['in_reply_to']}" if m.get("in_reply_to") else ""
            click.echo(f"#{m['id']} from {m['from']}{reply_to}: {m['body']}")

    _emit(data, as_json, human)


# ---- agents -------------------------------------------------------------------


@main.group()
def agents() -> None:
    """List, spawn and arrange agents."""


@agents.command("list")
@json_option
@pass_ctx
def agents_list(obj: _Ctx, as_json: bool) -> None:
    """Every agent with parent, running state and status."""
    data = obj.call(OpAgentsReq(cmd="agents"))

    def human(rows: list[dict[str, Any]]) -> None:
        for a in rows:
            state = "running" if a["running"] else "stopped"
            click.echo(
                f"{a['name']:20} parent={a['parent'] or '-':12} {state:8} "
                f"{a['turn_state']:10} {a['status_text']}"
            )

    _emit(data, as_json, human)


@agents.command("tree")
@json_option
@pass_ctx
def agents_tree(obj: _Ctx, as_json: bool) -> None:
    """The agent tree, roots first."""
    data = obj.call(OpAgentsReq(cmd="agents"))
    assert isinstance(data, list)
    rows = {str(a["name"]): a for a in data if isinstance(a, dict)}

    def human(_: object) -> None:
        def walk(name: str, depth: int) -> None:
            a = rows[name]
            mark = "●" if a["running"] else "○"
            click.echo(f"{'  ' * depth}{mark} {name}  {a['turn_state']}  {a['status_text']}")
            for child in sorted(n for n, r in rows.items() if r["parent"] == name):
                walk(child, depth + 1)

        for root in sorted(n for n, r in rows.items() if r["parent"] not in rows):
            walk(root, 0)

    _emit(data, as_json, human)


@agents.command("spawn")
@click.argument("name")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, exists=True),
    help="An agent.toml to apply (default: the default agent config).",
)
@click.option("--parent", default=None, help="Place the new agent under this agent.")
@pass_ctx
def agents_spawn(obj: _Ctx, name: str, config_file: Path | None, parent: str | None) -> None:
    """Create agent NAME (the operator's own spawn: no approval needed)."""
    config = load_agent_config(config_file) if config_file else AgentConfig()
    result = obj.call(OpSpawnReq(cmd="spawn", name=name, config=config, parent=parent))
    assert isinstance(result, dict)
    click.echo(
        f"spawned {name}"
        + (" (running)" if result.get("running") else " (starts when an agent host connects)")
    )


@agents.command("set-parent")
@click.argument("child")
@click.option("--parent", default=None, help="The new parent.")
@click.option("--root", is_flag=True, help="Promote CHILD to a root agent.")
@pass_ctx
def agents_set_parent(obj: _Ctx, child: str, parent: str | None, root: bool) -> None:
    """Move CHILD under --parent P, or to the top with --root (exactly one)."""
    if (parent is None) == (not root):
        raise click.UsageError("give exactly one of --parent P or --root")
    result = obj.call(OpSetParentReq(cmd="set_parent", child=child, new_parent=parent))
    assert isinstance(result, dict)
    where = f"under {parent}" if parent else "at the root"
    click.echo(f"{child} is now {where}" if result["changed"] else f"{child} was already {where}")


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

    def human(rows: list[dict[str, Any]]) -> None:
        if not rows:
            click.echo("(no open questions)")
        for q in rows:
            click.echo(f"#{q['id']} [{q['state']}] {q['asker']}: {q['question']}")

    _emit(data, as_json, human)


@questions.command("answer")
@click.argument("question_id", type=int)
@click.argument("text")
@pass_ctx
def questions_answer(obj: _Ctx, question_id: int, text: str) -> None:
    """Answer question QUESTION_ID; the asker gets TEXT as a reply."""
    result = obj.call(OpAnswerReq(cmd="answer_question", question_id=question_id, answer=text))
    assert isinstance(result, dict)
    click.echo(f"answered #{question_id}; sent to {result['asker']} as #{result['message_id']}")
