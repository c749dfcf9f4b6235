"""hivectl: ``install-claude`` puts the pinned claude CLI into the hive's own directory."""

from __future__ import annotations

import click

from hyperhive.agentreach import agent_users, claude_problem
from hyperhive.claudebin import CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION, install_claude
from hyperhive.cli.base import _Ctx, main, pass_ctx
from hyperhive.cli.output import emit, json_mode, json_output
from hyperhive.cli.shapes import ClaudeInstalled
from hyperhive.config import load_hive_config
from hyperhive.errors import InstallProblem

__all__ = ["install_claude_cmd"]


@main.command("install-claude")
@click.option("--npm", default="npm", show_default=True, help="The npm to install with.")
@json_output(ClaudeInstalled)
@pass_ctx
def install_claude_cmd(obj: _Ctx, npm: str, as_json: bool) -> None:
    """Install the claude version hyperhive is tested with into <home>/claude.

    Runs `npm install` of the pinned @anthropic-ai/claude-code (needs npm and the
    npm registry). The hive then runs that claude, unless hive.toml sets
    claude_bin. Already installed at that version: nothing to do.
    """
    hive = load_hive_config(obj.home)
    if not json_mode():
        click.echo(
            f"installing {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION} into {obj.home / 'claude'}"
        )
    claude = install_claude(obj.home, npm)
    problem = claude_problem(claude, obj.home, agent_users=agent_users(hive.runtime))
    if problem is not None:
        raise InstallProblem(f"installed, but {problem.text}")
    installed = ClaudeInstalled(
        version=CLAUDE_CODE_VERSION, path=str(claude), overridden_by=hive.claude_bin or None
    )

    def human(i: ClaudeInstalled) -> None:
        click.echo(f"claude {i.version} is at {i.path}")
        if i.overridden_by:
            click.echo(
                f"note: hive.toml sets claude_bin = {i.overridden_by!r}, which wins; remove it "
                "to run this one"
            )
        else:
            click.echo("this hive runs it from its next start (`hivectl up`)")

    emit(installed, human)
