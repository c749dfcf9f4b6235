"""``hivectl``: the operator's command line."""

from __future__ import annotations

import click

from hyperhive import __version__
from hyperhive.permissions import (
    Capability,
    ToolGroup,
    allowed_tools_arg,
    builtin_tools_arg,
)

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hivectl")
def main() -> None:
    """Run and steer a hive of sandboxed Claude Code agents."""


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
